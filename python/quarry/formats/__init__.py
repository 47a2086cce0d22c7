"""Format drivers behind one protocol, and detection of a file's format by content."""

from __future__ import annotations

import os

from quarry.errors import SourceError
from quarry.formats.base import Driver, VariableInfo

__all__ = ["Driver", "VariableInfo", "open_source"]

_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def _is_hdf5(path: str) -> bool:
    """HDF5's signature sits at byte 0, 512, 1024, 2048, ... (a user block may precede it)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        offset = 0
        while offset + 8 <= size:
            f.seek(offset)
            if f.read(8) == _HDF5_SIGNATURE:
                return True
            offset = 512 if offset == 0 else offset * 2
    return False


def open_source(path: str) -> Driver:
    """Open a data file with the driver its content calls for.

    Examples
    --------
    >>> open_source("/no/such/file.h5")
    Traceback (most recent call last):
    ...
    quarry.errors.SourceError: no such file: /no/such/file.h5
    """
    if not os.path.exists(path):
        raise SourceError(f"no such file: {path}")
    if os.path.isdir(path):
        raise SourceError(f"{path} is a directory; Quarry reads HDF5 files")
    try:
        hdf5 = _is_hdf5(path)
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror}") from None
    if hdf5:
        from quarry.formats.hdf5 import HDF5Driver

        return HDF5Driver(path)
    raise SourceError(
        f"{path} is not an HDF5 file (no HDF5 signature at byte 0, 512, 1024, ...); "
        "Quarry reads HDF5 files"
    )
