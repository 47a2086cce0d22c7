"""What a reorganised copy holds, array by array, for tests that compare two
copies: every dataset but the manifest (whose times and versions differ
between builds of the same data)."""

from __future__ import annotations

import h5py
import numpy as np

from quarry.reorg.manifest import MANIFEST


def copy_arrays(copy: str) -> dict[str, np.ndarray]:
    """Each dataset of the copy at ``copy`` by name, its manifest left out."""
    out: dict[str, np.ndarray] = {}

    def keep(name: str, obj: object) -> None:
        if isinstance(obj, h5py.Dataset) and name != MANIFEST:
            out[name] = obj[()]

    with h5py.File(copy) as f:
        f.visititems(keep)
    return out
