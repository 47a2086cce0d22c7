"""Zarr v2 and v3 stores (local directories) through zarr-python.

CF attributes (``_FillValue``, ``missing_value``, ``valid_*``,
``scale_factor``, ``add_offset``) are decoded as for NetCDF. Zarr's own
``fill_value`` is the value of unwritten chunks, and a missing marker only
where xarray reads it as one: a v2 array of xarray's layout (its
``_ARRAY_DIMENSIONS``), where xarray writes a variable's ``_FillValue`` there
and reads it back as ``_FillValue``.
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


def _dimension_names(arr: Any, attrs: dict[str, Any]) -> tuple[str, ...] | None:
    """Zarr v3 ``dimension_names``, or xarray's ``_ARRAY_DIMENSIONS`` in v2."""
    names = getattr(arr.metadata, "dimension_names", None) or attrs.get("_ARRAY_DIMENSIONS")
    if names and all(isinstance(n, str) for n in names):
        return tuple(names)
    return None


#: Zarr's JSON spellings of the floats JSON cannot hold.
_JSON_FLOATS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def _with_v2_fill(arr: Any, attrs: dict[str, Any]) -> dict[str, Any]:
    """``attrs`` with the ``_FillValue`` xarray reads from a v2 array of its
    layout: the array's ``fill_value``, where it has one (xarray writes a
    variable's ``_FillValue`` there, not among the attributes)."""
    fill = arr.fill_value
    v2 = getattr(arr.metadata, "zarr_format", 3) == 2
    if not v2 or "_ARRAY_DIMENSIONS" not in attrs or fill is None:
        return attrs
    return {**attrs, "_FillValue": fill.item() if hasattr(fill, "item") else fill}


def _xarray_attrs(attrs: dict[str, Any], storage: np.dtype[Any]) -> dict[str, Any]:
    """``attrs`` with a float variable's text ``_FillValue`` as its number:
    xarray writes it to Zarr v3 as the base64 of the little-endian float64
    (its ``FillValueCoder``), and ``NaN``/``Infinity`` are Zarr's own spellings.

    Examples
    --------
    >>> import numpy as np
    >>> _xarray_attrs({"_FillValue": "AAAAAAAA+H8="}, np.dtype("f4"))
    {'_FillValue': nan}
    >>> _xarray_attrs({"_FillValue": "6oygOVk+KcY="}, np.dtype("f8"))
    {'_FillValue': -1e+30}
    >>> _xarray_attrs({"_FillValue": "-Infinity", "units": "K"}, np.dtype("f8"))
    {'_FillValue': -inf, 'units': 'K'}
    """
    import base64
    import binascii
    import struct

    text = attrs.get("_FillValue")
    if storage.kind != "f" or not isinstance(text, str):
        return attrs
    if text in _JSON_FLOATS:
        value = _JSON_FLOATS[text]
    else:
        try:
            (value,) = struct.unpack("<d", base64.b64decode(text, validate=True))
        except (binascii.Error, struct.error):
            return attrs  # left as it is: cf refuses it, naming the variable
    return {**attrs, "_FillValue": value}


def root_array_name(path: str) -> str:
    """The name of the array a store holds at its root (it has none of its
    own): the store's folder name, less ``.zarr``.

    Examples
    --------
    >>> root_array_name("/data/bx.zarr/"), root_array_name("run/field")
    ('bx', 'field')
    """
    name = os.path.basename(os.path.normpath(path))
    stem = name[: -len(".zarr")] if name.lower().endswith(".zarr") else name
    return stem or name


class ZarrDriver:
    """A Zarr store (a directory) opened read-only.

    Examples
    --------
    >>> import zarr, numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "s.zarr")
    >>> root = zarr.open_group(path, mode="w", zarr_format=3)
    >>> root.create_array("g/x", data=np.arange(4.0), chunks=(3,))[:] = np.arange(4.0)
    >>> drv = ZarrDriver(path)
    >>> [v.path for v in drv.variables()], drv.read("/g/x", 1, 4)
    (['/g/x'], array([1., 2., 3.]))
    """

    #: Reading a store opened read-only needs no synchronisation (zarr-python
    #: #770); zarr 3's synchronous calls hand their work to its own event loop,
    #: which any thread may do.
    concurrent_reads = True

    def __init__(self, path: str) -> None:
        import zarr

        self.path = path
        self.step_context: str | None = None
        self._root: Any = None
        try:
            self._root = zarr.open_group(path, mode="r")
        except Exception as exc:  # zarr raises several types for a bad store
            try:  # a store that is one array (zarr.save, dask's to_zarr)
                self._root = zarr.open_array(path, mode="r")
            except Exception:
                raise SourceError(f"cannot open {path} as a Zarr store: {exc}") from None
        self._arrays: dict[str, Any] = {}
        self._attrs: dict[str, dict[str, Any]] = {}
        self._infos: list[VariableInfo] | None = None

    def variables(self) -> list[VariableInfo]:
        import numpy as np

        if self._infos is None:
            infos = []
            import zarr

            if isinstance(self._root, zarr.Array):
                arrays = [(root_array_name(self.path), self._root)]
            else:
                members = self._root.members(max_depth=None)
                arrays = sorted((n, m) for n, m in members if isinstance(m, zarr.Array))
            for name, arr in arrays:
                path = "/" + name.strip("/")
                self._arrays[path] = arr
                shape = tuple(int(s) for s in arr.shape)
                storage = np.dtype(arr.dtype)
                attrs = _xarray_attrs(_with_v2_fill(arr, dict(arr.attrs)), storage)
                self._attrs[path] = attrs
                problem = variable_problem(shape, storage)
                infos.append(
                    VariableInfo(
                        path=path,
                        shape=shape,
                        dtype=cf.logical_dtype(storage, attrs) if problem is None else storage,
                        chunks=tuple(int(c) for c in arr.chunks),
                        compression=", ".join(type(c).__name__ for c in arr.compressors) or None,
                        problem=problem,
                        decoding=cf.describe(attrs),
                        dims=_dimension_names(arr, attrs),
                        attrs=plain_attrs(attrs),
                    )
                )
            self._infos = infos
        return self._infos

    def read(self, var: str, start: int, stop: int) -> npt.NDArray[np.generic]:
        import numpy as np

        self.variables()
        arr = self._arrays[var]
        flat = np.asarray(read_flat(tuple(arr.shape), start, stop, lambda r0, r1: arr[r0:r1]))
        attrs = self._attrs[var]
        values = cf.decode(flat, attrs, var) if cf.is_decoded(attrs) else flat
        out: npt.NDArray[np.generic] = np.require(
            values.astype(values.dtype.newbyteorder("="), copy=False), requirements=["C", "A"]
        )
        return out

    def gather(self, var: str, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.generic]:
        import numpy as np

        self.variables()
        size = int(np.prod(self._arrays[var].shape, dtype=np.int64))
        return gather_by_spans(self, var, size, positions)

    def close(self) -> None:
        self._arrays.clear()


#: Files at the top of a Zarr store: a v2 group or array, or v3's metadata.
MARKERS = frozenset({".zgroup", ".zarray", "zarr.json"})


class ZarrBackend:
    """Zarr v2/v3 stores: directories with a metadata file at the top."""

    name = "zarr"
    recognised_by = "Zarr (a directory with .zgroup, .zarray or zarr.json)"
    directory = True

    def guess_can_open(self, path: str, sidecar_dirs: tuple[str, ...] = ()) -> bool:
        return os.path.isdir(path) and not MARKERS.isdisjoint(os.listdir(path))

    def open(self, path: str, sidecar_dirs: tuple[str, ...] = ()) -> ZarrDriver:
        require("zarr", "zarr", path)
        return ZarrDriver(path)


BACKEND = ZarrBackend()
