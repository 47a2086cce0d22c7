"""NetCDF (classic, 64-bit offset, NetCDF-4) through the netCDF4 library.

The library's own CF decoding is used: values equal to ``_FillValue`` or
``missing_value``, outside ``valid_min``/``valid_max``/``valid_range``, or
masked, read as NaN; packed variables (``scale_factor``/``add_offset``) read
in physical units, so ``tas > 300`` means kelvin.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from quarry.errors import SourceError
from quarry.formats import cf
from quarry.formats.base import (
    VariableInfo,
    gather_by_spans,
    plain_attrs,
    read_flat,
    require,
    variable_problem,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


class NetCDFDriver:
    """A NetCDF file opened read-only.

    Examples
    --------
    >>> import netCDF4, numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "t.nc")
    >>> with netCDF4.Dataset(path, "w") as ds:
    ...     _ = ds.createDimension("n", 3)
    ...     v = ds.createVariable("t", "i2", ("n",), fill_value=-1)
    ...     v.scale_factor = 0.5
    ...     v[:] = np.ma.masked_array([1.0, 2.0, 3.0], mask=[0, 1, 0])
    >>> drv = NetCDFDriver(path)
    >>> drv.read("/t", 0, 3)
    array([ 1., nan,  3.])
    >>> drv.close()
    """

    #: The netCDF-C library is not thread-safe (its FAQ), whichever files two
    #: threads read, and netCDF4-python releases the GIL around its calls
    #: since 1.6.1 (Unidata/netcdf4-python#1181): one call at a time.
    concurrent_reads = False

    def __init__(self, path: str) -> None:
        import netCDF4

        self.path = path
        self.step_context: str | None = None
        try:
            self._ds = netCDF4.Dataset(path, "r")
        except OSError as exc:
            raise SourceError(f"cannot open {path} as NetCDF: {exc}") from None
        # As xarray reads: only a variable's own attributes mark values
        # missing (netCDF4's masking also hides the library's default fill).
        self._ds.set_auto_mask(False)
        self._vars: dict[str, Any] = {}
        # The attributes of the variables decoded here (cf.decode).
        self._decoded: dict[str, dict[str, Any]] = {}
        self._infos: list[VariableInfo] | None = None
        self._by_path: dict[str, VariableInfo] = {}

    def variables(self) -> list[VariableInfo]:
        if self._infos is None:
            infos: list[VariableInfo] = []
            self._walk(self._ds, "", infos)
            self._infos = infos
            self._by_path = {v.path: v for v in infos}
        return self._infos

    def _walk(self, group: Any, prefix: str, out: list[VariableInfo]) -> None:
        import numpy as np

        for name, var in group.variables.items():
            path = f"{prefix}/{name}"
            self._vars[path] = var
            shape = tuple(int(s) for s in var.shape)
            storage = np.dtype(var.dtype) if not isinstance(var.dtype, str) else np.dtype("O")
            problem = variable_problem(shape, storage)
            attrs = {a: var.getncattr(a) for a in var.ncattrs()}
            if str(attrs.get("_Unsigned", "")).lower() == "true" and storage.kind == "i":
                # netCDF4 reads these bytes as unsigned (the NetCDF-3 convention).
                storage = np.dtype(storage.str.replace("i", "u"))
            if cf.is_decoded(attrs):
                # Decoded here (cf.decode) from the values as stored: missing
                # ones by the variable's own attributes alone, and unpacked in
                # float64 as CF defines it, where netCDF4 computes in the
                # attribute's dtype (float32 for most writers').
                var.set_auto_maskandscale(False)
                self._decoded[path] = attrs
            dtype = cf.logical_dtype(storage, attrs) if problem is None else storage
            chunking = var.chunking()
            out.append(
                VariableInfo(
                    path=path,
                    shape=shape,
                    dtype=dtype,
                    chunks=None if chunking in (None, "contiguous") else tuple(chunking),
                    compression="zlib" if (var.filters() or {}).get("zlib") else None,
                    problem=problem,
                    decoding=cf.describe(attrs),
                    dims=tuple(var.dimensions),
                    attrs=plain_attrs(attrs),
                )
            )
        for name, child in group.groups.items():
            self._walk(child, f"{prefix}/{name}", out)

    def _info(self, var: str) -> VariableInfo:
        self.variables()
        return self._by_path[var]

    def read(self, var: str, start: int, stop: int) -> npt.NDArray[np.generic]:
        import numpy as np

        info = self._info(var)
        v = self._vars[var]
        try:
            values = np.asarray(read_flat(info.shape, start, stop, lambda r0, r1: v[r0:r1]))
        except (TypeError, ValueError) as exc:  # netCDF4 refused the variable
            raise SourceError(f"cannot read {var} of {self.path}: {exc}") from None
        attrs = self._decoded.get(var)
        if attrs is None:
            return np.require(values, info.dtype, requirements=["C", "A"])
        flat = cf.decode(values, attrs, var)
        out: npt.NDArray[np.generic] = np.require(flat, requirements=["C", "A"])
        return out

    def gather(self, var: str, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.generic]:
        return gather_by_spans(self, var, self._info(var).size, positions)

    def close(self) -> None:
        self._vars.clear()
        self._ds.close()


#: The magic numbers of NetCDF classic, 64-bit offset and 64-bit data files.
CLASSIC_MAGIC = (b"CDF\x01", b"CDF\x02", b"CDF\x05")
#: Attribute names only libnetcdf writes: ``_NCProperties`` on the root
#: group, ``_Netcdf4Dimid``/``_Netcdf4Coordinates`` on variables (older
#: libraries wrote only these).
_NETCDF4_MARKS = (b"_NCProperties", b"_Netcdf4")
_VARIABLE_TAGS = (b"_Netcdf4Dimid", b"_Netcdf4Coordinates")
#: Bytes from the HDF5 signature searched for those names: the root group's
#: attributes, and the first variables', are near the start of the file.
_HEAD = 1 << 16
_SIGNATURE_AT = (0, *(512 << k for k in range(7)))


def is_netcdf4(path: str, head: bytes) -> bool:
    """Whether the HDF5 file ``path``, whose first bytes from its signature
    on are ``head``, was written by libnetcdf. The names libnetcdf gives its
    attributes are looked for in ``head`` (the root group's attributes, and
    the first variables', are near the start); where they are not (many
    attributes move them to a heap further on), the file is opened with HDF5
    and its root and first 64 variables are asked for them.

    Examples
    --------
    >>> import h5py, netCDF4, tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> with netCDF4.Dataset(os.path.join(d, "a.nc"), "w") as f:
    ...     _ = f.createDimension("x", 3)
    >>> h5py.File(os.path.join(d, "b.h5"), "w").close()
    >>> [is_netcdf4(os.path.join(d, n), b"") for n in ("a.nc", "b.h5")]
    [True, False]
    """
    if any(mark in head for mark in _NETCDF4_MARKS):
        return True
    import h5py

    # HDF5's own calls, asking for the names: a fifth of the time of opening
    # each variable through h5py's objects and listing its attributes.
    try:
        fid = h5py.h5f.open(os.fsencode(path), h5py.h5f.ACC_RDONLY)
    except OSError:
        return False
    try:
        root = h5py.h5g.open(fid, b"/")
        if h5py.h5a.exists(root, b"_NCProperties"):
            return True
        names: list[bytes] = []
        root.links.iterate(lambda name: names.append(name) if len(names) < 64 else True)

        def tagged(name: bytes) -> bool:
            try:
                return any(h5py.h5a.exists(root, tag, obj_name=name) for tag in _VARIABLE_TAGS)
            except (OSError, KeyError, ValueError, RuntimeError):  # a dangling link
                return False

        return any(tagged(name) for name in names)
    except OSError:
        return False
    finally:
        fid.close()


class NetCDFBackend:
    """NetCDF classic and 64-bit files by their magic, NetCDF-4 files (HDF5
    inside) by the attributes libnetcdf writes."""

    name = "netcdf"
    recognised_by = "NetCDF (CDF magic, or HDF5 written by libnetcdf)"
    directory = False

    def guess_can_open(self, path: str, sidecar_dirs: tuple[str, ...] = ()) -> bool:
        from quarry.formats.hdf5 import SIGNATURE, signature_offset

        if os.path.isdir(path):
            return False
        with open(path, "rb") as f:
            head = f.read(_HEAD)
        if head[:4] in CLASSIC_MAGIC:
            return True
        # The signature is at 0 or a power of two from 512: in the head, or
        # (after a user block of 64 KiB or more) found by reading on.
        offset = next((k for k in _SIGNATURE_AT if head[k : k + 8] == SIGNATURE), None)
        if offset is None and len(head) == _HEAD:
            offset = signature_offset(path)
        return offset is not None and is_netcdf4(path, head[offset:])

    def open(self, path: str, sidecar_dirs: tuple[str, ...] = ()) -> NetCDFDriver:
        require("netCDF4", "netcdf", path)
        return NetCDFDriver(path)


BACKEND = NetCDFBackend()
