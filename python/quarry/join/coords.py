"""A field's coordinate variables, in every format that has them.

Each kept axis ``k`` of the field (the stored variable's axes that a
subarray does not pick one index of) needs a 1-D variable as long as the
axis. The first of these rules that gives every kept axis one wins:

1. **Dimension names** (NetCDF, and Zarr's ``dimension_names`` or xarray's
   ``_ARRAY_DIMENSIONS``): the variable named like the axis's dimension, in
   the field's group or the nearest group above it (CF coordinate variables).
2. **HDF5 dimension scales** attached to the axis (h5py's
   ``dset.dims[k].attach_scale``): the first scale attached.
3. **A ``coordinates`` attribute** on the field naming one variable per
   stored axis (text separated by spaces, or a list), each relative to the
   field's group or absolute: any format with attributes (HDF5, NetCDF,
   Zarr, ADIOS2). Where the format names dimensions, each named variable
   goes to the axis of its own dimension, as CF lists them in no order
   (``lon lat`` on ``t(lat, lon)``); else they are axis 0 first.
4. **Beside the field, named like the positions**: with ``--at x,y,z``, 1-D
   variables ``x``, ``y``, ``z`` in the field's group, the ``k``-th paired
   with the ``k``-th kept axis (any format, ADIOS2 included).

The coordinates found are read in full (they are small) and checked by
:meth:`quarry.join.grid.Axis.of`: strictly increasing or decreasing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from quarry.formats.base import Driver, VariableInfo

#: Per kept axis, the 1-D variable holding its coordinates.
Found = dict[int, "VariableInfo"]


def coordinate_variables(
    driver: Driver, info: VariableInfo, kept: Sequence[int], at: Sequence[str] = ()
) -> Found | None:
    """The coordinate variable of each kept axis of ``info`` by the first
    rule of the module notes that gives all of them; None where none does.
    Raises :class:`~quarry.errors.JoinArgumentError` where none does but a
    rule named a 1-D variable of another length than its axis (a grid the
    file means, written wrong).

    Examples
    --------
    >>> import h5py, numpy as np, tempfile, os
    >>> from quarry.formats.hdf5 import HDF5Driver
    >>> path = os.path.join(tempfile.mkdtemp(), "f.h5")
    >>> with h5py.File(path, "w") as f:
    ...     f["mesh/bx"] = np.zeros((3, 4))
    ...     f["mesh/bx"].attrs["coordinates"] = "r /theta"
    ...     f["mesh/r"], f["theta"] = np.arange(3.0), np.linspace(0, 1, 4)
    ...     f["mesh/by"] = np.zeros((4, 3))  # no coordinates attribute
    >>> drv = HDF5Driver(path)
    >>> bx = next(v for v in drv.variables() if v.path == "/mesh/bx")
    >>> {k: v.path for k, v in coordinate_variables(drv, bx, [0, 1]).items()}
    {0: '/mesh/r', 1: '/theta'}
    >>> {k: v.path for k, v in coordinate_variables(drv, bx, [0], ["r"]).items()}
    {0: '/mesh/r'}
    >>> by = next(v for v in drv.variables() if v.path == "/mesh/by")
    >>> coordinate_variables(drv, by, [0, 1], ["r", "q"])  # r: 3 points, not 4
    Traceback (most recent call last):
    quarry.errors.JoinArgumentError: /mesh/by has no coordinate variable of the length of \
each axis: the file's /mesh/r has 3 points where axis 0 has 4
    >>> coordinate_variables(drv, by, [0, 1], ["q", "r"])  # no /mesh/q
    Traceback (most recent call last):
    quarry.errors.JoinArgumentError: /mesh/by has coordinate variables for axis 1 \
(/mesh/r) but none for axis 0; a grid from the file needs one for every axis
    >>> drv.close()
    """
    listed = {v.path: v for v in driver.variables() if v.problem is None and len(v.shape) == 1}
    group = info.path.rsplit("/", 1)[0]
    misfits: list[str] = []

    def fits(k: int, path: str | None) -> VariableInfo | None:
        found = listed.get(path) if path else None
        if found is not None and found.shape != (info.shape[k],):
            misfits.append(
                f"{found.path} has {found.shape[0]} points where axis {k} has {info.shape[k]}"
            )
            return None
        return found

    rules: list[Callable[[int], VariableInfo | None]] = []
    if info.dims:
        dims = info.dims
        rules.append(lambda k: _nearest(dims[k], group, lambda p: fits(k, p)))
    scales = _dimension_scales(driver, info)
    if scales is not None:
        rules.append(lambda k: fits(k, scales[k]))
    named = _named_in_attribute(info)
    if named is not None and info.dims:
        paired = _paired_by_dimension(named, info.dims, group, listed)
        rules.append(lambda k: fits(k, paired.get(k)))
    elif named is not None and len(named) == len(info.shape):
        rules.append(lambda k: fits(k, _absolute(named[k], group)))
    if len(at) == len(kept):
        by_axis = dict(zip(kept, at, strict=True))
        rules.append(lambda k: fits(k, f"{group}/{by_axis[k]}"))
    most: dict[int, VariableInfo] = {}
    for rule in rules:
        found = {k: v for k, v in ((k, rule(k)) for k in kept) if v is not None}
        if len(found) == len(kept):
            return found
        most = max(most, found, key=len)
    if misfits or most:
        from quarry.errors import JoinArgumentError

        if misfits:
            raise JoinArgumentError(
                f"{info.path} has no coordinate variable of the length of each axis: the "
                f"file's {misfits[0]}"
            )
        having = ", ".join(f"axis {k} ({v.path})" for k, v in most.items())
        lacking = ", ".join(str(k) for k in kept if k not in most)
        raise JoinArgumentError(
            f"{info.path} has coordinate variables for {having} but none for axis "
            f"{lacking}; a grid from the file needs one for every axis"
        )
    return None


def _nearest(
    name: str, group: str, fits: Callable[[str], VariableInfo | None]
) -> VariableInfo | None:
    """The variable ``name`` in ``group`` or the nearest group above it that fits."""
    scope = group
    while True:
        match = fits(f"{scope}/{name}")
        if match is not None or not scope:
            return match
        scope = scope.rsplit("/", 1)[0]


def _absolute(name: str, group: str) -> str:
    return name if name.startswith("/") else f"{group}/{name}"


def _paired_by_dimension(
    named: Sequence[str], dims: Sequence[str], group: str, listed: dict[str, VariableInfo]
) -> dict[int, str]:
    """Per axis of a field of dimensions ``dims``, the first variable of
    ``named`` (a ``coordinates`` attribute's, relative to ``group``) that is
    1-D along that axis's dimension; names of other variables (2-D or scalar
    coordinates, CF lists them too) are passed over.

    Examples
    --------
    >>> from quarry.formats.base import VariableInfo
    >>> lat = VariableInfo("/lat", (3,), "<f8", dims=("y",))
    >>> lon = VariableInfo("/lon", (4,), "<f8", dims=("x",))
    >>> _paired_by_dimension(["lon", "lat", "time"], ("y", "x"), "", {"/lat": lat, "/lon": lon})
    {1: '/lon', 0: '/lat'}
    """
    paired: dict[int, str] = {}
    for name in named:
        var = listed.get(_absolute(name, group))
        if var is not None and var.dims and var.dims[0] in dims:
            paired.setdefault(list(dims).index(var.dims[0]), var.path)
    return paired


def _named_in_attribute(info: VariableInfo) -> list[str] | None:
    """The names a ``coordinates`` attribute lists, in order."""
    value = info.attrs.get("coordinates")
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _dimension_scales(driver: Driver, info: VariableInfo) -> list[str | None] | None:
    """Per axis, the path of the first HDF5 dimension scale attached to it
    (None where none is); None for a file that is not HDF5."""
    from quarry.formats.hdf5 import HDF5Driver

    if not isinstance(driver, HDF5Driver):
        return None
    import h5py

    with h5py.File(driver.path, "r") as f:
        dataset = f.get(info.path)
        if not isinstance(dataset, h5py.Dataset):
            return None
        return [str(dim[0].name) if len(dim) else None for dim in dataset.dims]
