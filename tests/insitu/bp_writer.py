"""A BP5 writer driven through its stdin, for the follower tests: each line
is a command, each answered on stdout once done, so the tests synchronise
on the pipe and never on time.

- ``step``: write the next step whole (begin, write, end) -> ``ended <k>``
- ``half``: begin the next step and write its first variable, without
  ending it -> ``half <k>``; the next ``end`` ends it -> ``ended <k>``
- ``close``: close the run -> ``closed``
"""

import sys

import adios2
import numpy as np

SIZE = 2_500


def step_values(step: int) -> dict[str, np.ndarray]:
    """The values of step ``step``: the same in the writer and the tests."""
    rng = np.random.default_rng(step)
    energy = rng.normal(step * 0.5, 1.5, SIZE)
    energy[rng.random(SIZE) < 0.05] = np.nan
    return {"energy": energy, "id": rng.permutation(SIZE).astype(np.int32)}


def main() -> None:
    stream = adios2.Stream(sys.argv[1], "w")
    step = 0
    for line in sys.stdin:
        command = line.strip()
        if command in ("step", "half"):
            stream.begin_step()
            values = step_values(step)
            for name, array in values.items():
                stream.write(name, array, [SIZE], [0], [SIZE])
                if command == "half":
                    break
            if command == "half":
                print(f"half {step}", flush=True)
                continue
        if command in ("step", "end"):
            if command == "end":
                values = step_values(step)
                stream.write("id", values["id"], [SIZE], [0], [SIZE])
            stream.end_step()
            print(f"ended {step}", flush=True)
            step += 1
        elif command == "close":
            stream.close()
            print("closed", flush=True)
            return


if __name__ == "__main__":
    main()
