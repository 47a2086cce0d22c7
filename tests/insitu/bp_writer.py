"""A BP5 writer driven through its stdin, for the follower tests: each line
is a command, each answered on stdout once done, so the tests synchronise
on the pipe and never on time.

- ``step``: write the next step whole (begin, write, end) -> ``ended <k>``
- ``half``: begin the next step and write its first variable, without
  ending it -> ``half <k>``; the next ``end`` ends it -> ``ended <k>``
- ``close``: close the run -> ``closed``

With a second argument ``varying``, step ``k`` holds ``SIZE + 17 k``
particles and a variable ``x`` written at even steps only.
"""

import sys

import adios2
import numpy as np

SIZE = 2_500


def step_values(step: int, varying: bool = False) -> dict[str, np.ndarray]:
    """The values of step ``step``: the same in the writer and the tests."""
    rng = np.random.default_rng(step)
    size = SIZE + 17 * step if varying else SIZE
    energy = rng.normal(step * 0.5, 1.5, size)
    energy[rng.random(size) < 0.05] = np.nan
    values = {"energy": energy, "id": rng.permutation(size).astype(np.int32)}
    if varying and step % 2 == 0:
        values["x"] = rng.normal(0.0, 1.0, size + 5).astype(np.float32)
    return values


def main() -> None:
    stream = adios2.Stream(sys.argv[1], "w")
    varying = sys.argv[2:] == ["varying"]
    step = 0
    for line in sys.stdin:
        command = line.strip()
        if command in ("step", "half"):
            stream.begin_step()
            values = step_values(step, varying)
            for name, array in values.items():
                stream.write(name, array, [array.size], [0], [array.size])
                if command == "half":
                    break
            if command == "half":
                print(f"half {step}", flush=True)
                continue
        if command in ("step", "end"):
            if command == "end":  # the variables "half" left out
                for name, array in list(step_values(step, varying).items())[1:]:
                    stream.write(name, array, [array.size], [0], [array.size])
            stream.end_step()
            print(f"ended {step}", flush=True)
            step += 1
        elif command == "close":
            stream.close()
            print("closed", flush=True)
            return


if __name__ == "__main__":
    main()
