"""Format drivers behind one protocol, and detection of a file's format by content.

Each format module declares a :class:`~quarry.formats.base.Backend` (in the
style of xarray's backend entrypoints): a name, ``guess_can_open(path)``
from cheap evidence, and ``open(path)`` giving a driver. :data:`BACKENDS`
lists them in the order detection asks them; the first that recognises a
source reads it. The extension is a hint at most; what decides is what the
bytes say:

- Raw binary: any file with a description written by ``quarry register``
  (asked first: the description overrides the bytes).
- NetCDF classic and 64-bit offset: the ``CDF\\x01`` / ``CDF\\x02`` /
  ``CDF\\x05`` magic; NetCDF-4: HDF5 with the attributes libnetcdf writes
  (``_NCProperties``). Asked before HDF5, since NetCDF-4 is HDF5 inside.
- HDF5: the signature at byte 0, 512, 1024, 2048, ... (a user block may
  precede it).
- Zarr v2/v3: a directory with ``.zgroup``/``.zarray`` or ``zarr.json``.
- ADIOS2 BP4/BP5: a directory with ``md.idx``.

A backend's module is imported when the registry first asks it more than
its name (an index's listing names the format of a file, so opening it
imports that format's module alone), and a module imports its library
(h5py, netCDF4, zarr, adios2) only when it opens a file.
"""

from __future__ import annotations

import importlib
import os

from quarry.errors import SourceError
from quarry.formats.base import Backend, Driver, VariableInfo

__all__ = [
    "BACKENDS",
    "Backend",
    "Driver",
    "VariableInfo",
    "backend_for",
    "detect",
    "is_store",
    "open_source",
]


class _Registered:
    """A backend of the registry, by the name of its module
    (``quarry.formats.<name>``, whose ``BACKEND`` it is) and whether its
    sources are directories; the module is imported when first needed."""

    def __init__(self, name: str, directory: bool) -> None:
        self.name = name
        self.directory = directory
        self._backend: Backend | None = None

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            backend: Backend = importlib.import_module(f"quarry.formats.{self.name}").BACKEND
            assert (backend.name, backend.directory) == (self.name, self.directory)
            self._backend = backend
        return self._backend

    @property
    def recognised_by(self) -> str:
        return self.backend.recognised_by

    def guess_can_open(self, path: str, sidecar_dirs: tuple[str, ...] = ()) -> bool:
        return self.backend.guess_can_open(path, sidecar_dirs)

    def open(self, path: str, sidecar_dirs: tuple[str, ...] = ()) -> Driver:
        return self.backend.open(path, sidecar_dirs)

    def __repr__(self) -> str:
        return f"<backend {self.name}>"


#: Every format Quarry reads, in the order detection asks them.
BACKENDS: tuple[Backend, ...] = (
    _Registered("raw", directory=False),
    _Registered("netcdf", directory=False),
    _Registered("hdf5", directory=False),
    _Registered("zarr", directory=True),
    _Registered("adios2", directory=True),
)


def backend_for(path: str, sidecar_dirs: tuple[str, ...] = ()) -> Backend:
    """The first backend of :data:`BACKENDS` that recognises ``path``;
    raises :class:`SourceError` naming what was tried when none does.

    ``sidecar_dirs`` are other places a raw-binary description may be (the
    index directory of read-only data).

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "mystery.h5")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(b"not really hdf5")
    >>> backend_for(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    quarry.errors.SourceError: cannot tell the format of ...mystery.h5: tried ...quarry register ...
    """
    if not os.path.exists(path):
        raise SourceError(f"no such file: {path}")
    directory = os.path.isdir(path)
    candidates = [b for b in BACKENDS if b.directory == directory]
    try:
        for backend in candidates:
            if backend.guess_can_open(path, sidecar_dirs):
                return backend
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror}") from None
    tried = [b.recognised_by for b in BACKENDS if b.name != "raw"]
    tried_text = f"{', '.join(tried[:-1])} and {tried[-1]}"
    if directory:
        raise SourceError(f"cannot tell the format of directory {path}: tried {tried_text}")
    raise SourceError(
        f"cannot tell the format of {path}: tried {tried_text}. If it is raw binary, "
        f"describe it first: quarry register {path} --dtype <f4 --shape NX,NY,NZ"
    )


def detect(path: str, sidecar_dirs: tuple[str, ...] = ()) -> str:
    """The format of ``path``: ``hdf5``, ``netcdf``, ``zarr``, ``adios2`` or ``raw``.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "c.nc")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(b"CDF\\x01" + bytes(28))
    >>> detect(path)
    'netcdf'
    """
    return backend_for(path, sidecar_dirs).name


def is_store(path: str) -> bool:
    """Whether ``path`` is a directory that is one data source (a Zarr store,
    an ADIOS2 BP directory) rather than a folder of files.

    Examples
    --------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> is_store(d)
    False
    >>> open(os.path.join(d, "zarr.json"), "w").close()
    >>> is_store(d), is_store(os.path.join(d, "zarr.json"))
    (True, False)
    """
    return os.path.isdir(path) and any(b.directory and b.guess_can_open(path) for b in BACKENDS)


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
    return backend_for(path, sidecar_dirs).open(path, sidecar_dirs)
