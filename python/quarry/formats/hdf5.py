"""HDF5 through h5py: any numeric dataset of rank 1-4, at any group depth.

Uncompressed contiguous datasets are read through a memory map at their file
offset, so scattered hits cost only the pages they touch; chunked or
compressed ones are read span by span through h5py.

In an openPMD file (see :mod:`quarry.formats.openpmd`) the iterations are the
steps, a constant record component (a group with ``value`` and ``shape``)
reads as an array filled with its value, and each component carries its
record's ``unitDimension``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from quarry.errors import SourceError
from quarry.formats import openpmd
from quarry.formats.base import (
    VariableInfo,
    gather_by_spans,
    native,
    plain_attrs,
    queryable_dtype,
    read_flat,
    variable_problem,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


SIGNATURE = b"\x89HDF\r\n\x1a\n"


def signature_offset(path: str) -> int | None:
    """Byte offset of the HDF5 signature in the file ``path``, if it has one:
    at byte 0, or after a user block at 512, 1024, 2048, ...

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "blocked.h5")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(bytes(512) + SIGNATURE)
    >>> signature_offset(path), signature_offset(__file__)
    (512, None)
    """
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        offset = 0
        while offset + len(SIGNATURE) <= size:
            f.seek(offset)
            if f.read(len(SIGNATURE)) == SIGNATURE:
                return offset
            offset = 512 if offset == 0 else offset * 2
    return None


class HDF5Driver:
    """An HDF5 file opened read-only.

    Examples
    --------
    >>> import h5py, numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "d.h5")
    >>> with h5py.File(path, "w") as f:
    ...     _ = f.create_dataset("g/x", data=np.arange(6.0).reshape(2, 3))
    >>> drv = HDF5Driver(path)
    >>> [v.path for v in drv.variables()]
    ['/g/x']
    >>> drv.read("/g/x", 2, 5)
    array([2., 3., 4.])
    >>> drv.close()
    """

    #: h5py wraps every libhdf5 call in its own global lock (docs.h5py.org,
    #: "Multi-threading"), so threads may call in at once (those calls run one
    #: at a time); a contiguous dataset is read from a memory map, in parallel.
    concurrent_reads = True

    def __init__(self, path: str) -> None:
        import h5py

        self.path = path
        try:
            self._file = h5py.File(path, "r")
        except OSError as exc:
            raise SourceError(f"cannot open {path} as HDF5: {exc}") from None
        self._datasets: dict[str, Any] = {}
        self._maps: dict[str, npt.NDArray[np.generic] | None] = {}
        self._infos: list[VariableInfo] | None = None
        self.step_context = openpmd.iterations_context(self._file.attrs)
        # openPMD constant record components: path -> the value filling them
        self._constants: dict[str, np.ndarray[Any, Any]] = {}

    def _constant(self, name: str, group: Any) -> VariableInfo | None:
        found = openpmd.constant(group.attrs)
        if found is None:
            return None
        shape, value = found
        dtype = queryable_dtype(value.dtype).newbyteorder("=")
        path = "/" + name
        self._constants[path] = value.astype(dtype)
        return VariableInfo(
            path=path,
            shape=shape,
            dtype=dtype,
            problem=variable_problem(shape, dtype),
            decoding=f"openPMD constant: every value is {value.item()!r}",
            attrs=plain_attrs(group.attrs),
        )

    def _record_attrs(self, obj: Any) -> dict[str, Any]:
        """A dataset's attributes; in openPMD, with its record's ``unitDimension``."""
        attrs = plain_attrs(obj.attrs)
        if self.step_context is not None and "unitDimension" not in attrs:
            record = plain_attrs(obj.parent.attrs)
            if "unitDimension" in record:
                attrs["unitDimension"] = record["unitDimension"]
        return attrs

    def variables(self) -> list[VariableInfo]:
        if self._infos is None:
            import h5py

            infos: list[VariableInfo] = []

            def visit(name: str, obj: Any) -> None:
                if isinstance(obj, h5py.Group) and self.step_context is not None:
                    info = self._constant(name, obj)
                    if info is not None:
                        infos.append(info)
                if isinstance(obj, h5py.Dataset):
                    path = "/" + name
                    stored = obj.dtype
                    dtype = queryable_dtype(stored)
                    shape = tuple(int(s) for s in obj.shape)
                    problem = (
                        variable_problem(shape, dtype)
                        if dtype.kind != "V"
                        else (f"dtype {dtype} (compound) is not supported")
                    )
                    infos.append(
                        VariableInfo(
                            path=path,
                            shape=shape,
                            dtype=dtype.newbyteorder("=") if problem is None else dtype,
                            chunks=obj.chunks,
                            compression=obj.compression,
                            problem=problem,
                            decoding=None if dtype is stored else f"{stored} read as {dtype}",
                            attrs=self._record_attrs(obj),
                        )
                    )

            self._file.visititems(visit)
            self._infos = infos
        return self._infos

    def _dataset(self, var: str) -> Any:
        ds = self._datasets.get(var)
        if ds is None:
            ds = self._file[var]
            self._datasets[var] = ds
        return ds

    def contiguous(self, paths: Iterable[str]) -> dict[str, tuple[int, str]]:
        """Where each dataset of ``paths`` read through a memory map lies in
        the file: its path -> (byte offset, stored dtype), for a
        :class:`~quarry.formats.listing.Listing` to read it with no HDF5
        library while the file is unchanged."""
        out = {}
        for path in paths:
            if path not in self._constants:
                ds = self._dataset(path)
                offset = self._offset(ds)
                if offset is not None:
                    out[path] = (offset, ds.dtype.str)
        return out

    @staticmethod
    def _offset(ds: Any) -> int | None:
        """The file offset of a dataset stored whole in one place; None otherwise."""
        offset = ds.id.get_offset() if ds.chunks is None and ds.size > 0 else None
        if offset is None or ds.is_virtual or ds.external is not None:
            return None
        return int(offset)

    def _memmap(self, var: str) -> npt.NDArray[np.generic] | None:
        import numpy as np

        if var in self._maps:
            return self._maps[var]
        ds = self._dataset(var)
        mm = None
        offset = self._offset(ds)
        if offset is not None:
            mapped = np.memmap(self.path, dtype=ds.dtype, mode="r", offset=offset, shape=(ds.size,))
            # A plain ndarray view of the map: np.memmap's Python-level
            # __getitem__ costs more than a small gather itself.
            mm = mapped.view(np.ndarray)
        self._maps[var] = mm
        return mm

    def maps(self, var: str) -> bool:
        """Whether ``var`` is read from a memory map (stored whole in one place)."""
        return var not in self._constants and self._memmap(var) is not None

    def read(self, var: str, start: int, stop: int) -> npt.NDArray[np.generic]:
        import numpy as np

        if var in self._constants:
            return np.full(max(stop - start, 0), self._constants[var])
        ds = self._dataset(var)
        mm = self._memmap(var)
        if mm is not None:
            return native(mm[start:stop])
        return native(read_flat(ds.shape, start, stop, lambda r0, r1: ds[r0:r1]))

    def gather(self, var: str, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.generic]:
        import numpy as np

        if var in self._constants:
            return np.full(len(positions), self._constants[var])
        mm = self._memmap(var)
        if mm is not None:
            return native(mm[positions])
        return gather_by_spans(self, var, int(self._dataset(var).size), positions)

    def close(self) -> None:
        self._maps.clear()
        self._datasets.clear()
        self._file.close()


class HDF5Backend:
    """HDF5 files (those that are not NetCDF-4: the NetCDF backend is asked first)."""

    name = "hdf5"
    recognised_by = "HDF5 (signature at byte 0, 512, 1024, ...)"
    directory = False

    def guess_can_open(self, path: str, sidecar_dirs: tuple[str, ...] = ()) -> bool:
        return not os.path.isdir(path) and signature_offset(path) is not None

    def open(self, path: str, sidecar_dirs: tuple[str, ...] = ()) -> HDF5Driver:
        return HDF5Driver(path)


BACKEND = HDF5Backend()
