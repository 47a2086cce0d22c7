"""Format drivers behind one protocol, and detection of a file's format by content.

The extension is a hint at most; what decides is what the bytes say:

- HDF5: the signature at byte 0, 512, 1024, 2048, ... (a user block may
  precede it); NetCDF-4 is HDF5 with the ``_NCProperties`` root attribute.
- NetCDF classic and 64-bit offset: the ``CDF\\x01`` / ``CDF\\x02`` /
  ``CDF\\x05`` magic.
- Zarr v2/v3: a directory with ``.zgroup``/``.zarray`` or ``zarr.json``.
- ADIOS2 BP4/BP5: a directory with ``md.idx``.
- Raw binary: any file with a description written by ``quarry register``.
"""

from __future__ import annotations

import os

from quarry.errors import SourceError
from quarry.formats.base import Driver, VariableInfo

__all__ = ["Driver", "VariableInfo", "detect", "open_source"]

_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_NETCDF_MAGIC = (b"CDF\x01", b"CDF\x02", b"CDF\x05")


def _hdf5_offset(path: str) -> int | None:
    """Byte offset of the HDF5 signature, if the file has one."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        offset = 0
        while offset + 8 <= size:
            f.seek(offset)
            if f.read(8) == _HDF5_SIGNATURE:
                return offset
            offset = 512 if offset == 0 else offset * 2
    return None


def _is_netcdf4(path: str) -> bool:
    import h5py

    try:
        with h5py.File(path, "r") as f:
            if "_NCProperties" in f.attrs:
                return True
            # Older libnetcdf writes no _NCProperties but tags its variables.
            return any(
                any(a.startswith("_Netcdf4") for a in f[name].attrs) for name in list(f)[:64]
            )
    except OSError:
        return False


def detect(path: str, sidecar_dirs: tuple[str, ...] = ()) -> str:
    """The format of ``path``: ``hdf5``, ``netcdf``, ``zarr``, ``adios2`` or ``raw``.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "mystery.h5")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(b"not really hdf5")
    >>> detect(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    quarry.errors.SourceError: cannot tell the format of ...mystery.h5: ...quarry register ...
    """
    from quarry.formats.raw import sidecar_path

    if not os.path.exists(path):
        raise SourceError(f"no such file: {path}")
    if os.path.isdir(path):
        names = set(os.listdir(path))
        if names & {".zgroup", ".zarray", "zarr.json"}:
            return "zarr"
        if "md.idx" in names:
            return "adios2"
        raise SourceError(
            f"cannot tell the format of directory {path}: it is not a Zarr store "
            "(no .zgroup, .zarray or zarr.json) nor an ADIOS2 BP directory (no md.idx)"
        )
    for folder in (*sidecar_dirs, None):
        if os.path.exists(sidecar_path(path, folder)):
            return "raw"
    try:
        with open(path, "rb") as f:
            head = f.read(4)
        offset = _hdf5_offset(path)
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror}") from None
    if offset is not None:
        return "netcdf" if _is_netcdf4(path) else "hdf5"
    if head in _NETCDF_MAGIC:
        return "netcdf"
    raise SourceError(
        f"cannot tell the format of {path}: tried HDF5 (signature at byte 0, 512, 1024, ...), "
        "NetCDF classic (CDF magic), Zarr and ADIOS2 BP (directories). If it is raw binary, "
        f"describe it first: quarry register {path} --dtype <f4 --shape NX,NY,NZ"
    )


def open_source(path: str, sidecar_dirs: tuple[str, ...] = ()) -> Driver:
    """Open a data file with the driver its content calls for.

    ``sidecar_dirs`` are other places a raw-binary description may be (the
    index directory of read-only data).

    Examples
    --------
    >>> open_source("/no/such/file.h5")
    Traceback (most recent call last):
    ...
    quarry.errors.SourceError: no such file: /no/such/file.h5
    """
    kind = detect(path, sidecar_dirs)
    if kind == "hdf5":
        from quarry.formats.hdf5 import HDF5Driver

        return HDF5Driver(path)
    if kind == "raw":
        from quarry.formats.raw import RawDriver, read_sidecar, sidecar_path

        for folder in (*sidecar_dirs, None):
            if os.path.exists(sidecar_path(path, folder)):
                return RawDriver(path, read_sidecar(sidecar_path(path, folder)))
    if kind == "netcdf":
        _require("netCDF4", "netcdf", path)
        from quarry.formats.netcdf import NetCDFDriver

        return NetCDFDriver(path)
    if kind == "adios2":
        _require("adios2", "adios2", path)
        from quarry.formats.adios2 import ADIOS2Driver

        return ADIOS2Driver(path)
    _require("zarr", "zarr", path)
    from quarry.formats.zarr import ZarrDriver

    return ZarrDriver(path)


def _require(module: str, extra: str, path: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise SourceError(
            f"{path} needs the {module} package, which is not installed: "
            f"pip install 'quarry-index[{extra}]'"
        )
