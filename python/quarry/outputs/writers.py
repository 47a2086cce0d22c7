"""Writing query results to files: ``.npy``, ``.csv`` and ``.h5``, chosen by extension."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from quarry.errors import QuarryError

if TYPE_CHECKING:
    import numpy.typing as npt

FORMATS = (".npy", ".csv", ".h5")


class OutputError(QuarryError, ValueError):
    """An output file Quarry cannot write (unknown extension, bad location)."""


def _extension(path: str) -> str:
    ext = os.path.splitext(path)[1].lower()
    if ext == ".hdf5":
        ext = ".h5"
    if ext not in FORMATS:
        raise OutputError(f"cannot write {path}: use one of {', '.join(FORMATS)}")
    return ext


def write_positions(path: str, positions: npt.NDArray[np.int64]) -> None:
    """Write hit ids (1-D) or coordinates (``(count, ndim)``) as an int64 ``.npy`` file.

    Examples
    --------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "hits.npy")
    >>> write_positions(p, np.array([3, 9]))
    >>> np.load(p)
    array([3, 9])
    """
    if _extension(path) != ".npy":
        raise OutputError(f"ids and coordinates are written as .npy; got {path}")
    np.save(path, np.asarray(positions, dtype=np.int64))


def write_values(
    path: str,
    ids: npt.NDArray[np.int64],
    columns: dict[str, npt.NDArray[np.generic]],
    provenance: dict[str, Any],
) -> None:
    """Write the hits' ids and variable values.

    ``.npy``: a structured array with an ``id`` field and one field per
    variable; ``.csv``: a header line and one row per hit; ``.h5``: one dataset
    per variable plus ``id``, with the query and source recorded as attributes.
    """
    ext = _extension(path)
    if ext == ".h5":
        import h5py

        with h5py.File(path, "w") as f:
            f.create_dataset("id", data=ids)
            for name, values in columns.items():
                f.create_dataset(name.strip("/"), data=values)
            for key, value in provenance.items():
                f.attrs[key] = value
        return
    fields = [("id", np.dtype(np.int64))] + [(n, v.dtype) for n, v in columns.items()]
    table = np.empty(len(ids), dtype=fields)
    table["id"] = ids
    for name, values in columns.items():
        table[name] = values
    if ext == ".npy":
        np.save(path, table)
        return
    formats = ["%d"] + ["%d" if v.dtype.kind in "iu" else "%.17g" for v in columns.values()]
    header = ",".join(["id", *columns])
    np.savetxt(path, table, delimiter=",", header=header, comments="", fmt=formats)
