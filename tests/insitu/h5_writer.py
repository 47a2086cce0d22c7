"""An HDF5 writer of one file per step, driven through its stdin for the
follower tests (each command answered on stdout once done):

- ``open <k>``: create ``run_<k>.h5``, write ``energy``, flush, keep it
  open -> ``opened <k>``
- ``close``: write ``id`` and close the open file -> ``closed <k>``
"""

import os
import sys

import h5py
import numpy as np

SIZE = 2_500


def step_values(step: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(100 + step)
    energy = rng.normal(1.0, 1.0, SIZE).astype(np.float32)
    energy[rng.random(SIZE) < 0.05] = np.nan
    return {"energy": energy, "id": rng.permutation(SIZE).astype(np.int64)}


def main() -> None:
    directory = sys.argv[1]
    file, step = None, None
    for line in sys.stdin:
        command, *rest = line.split()
        if command == "open":
            step = int(rest[0])
            file = h5py.File(os.path.join(directory, f"run_{step}.h5"), "w")
            file["energy"] = step_values(step)["energy"]
            file.flush()
            print(f"opened {step}", flush=True)
        elif command == "close":
            file["id"] = step_values(step)["id"]
            file.close()
            print(f"closed {step}", flush=True)


if __name__ == "__main__":
    main()
