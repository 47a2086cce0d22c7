"""Reading a field by MDBin groups: where the particles have a reorganised
copy (:mod:`quarry.reorg`) of their position variables, the hits are grouped
by the copy's bins, and only the part of the field each group's cells cover
is read, in runs of whole rows, never the box of all the hits.

The field is seen as rows: along axis 0 and axis 1 (the *row plane*), each
row holding every value along axis 2 (a 2-D field's rows hold one value, a
1-D field's row plane is one row wide). Each group of hits (one MDBin over
the position variables) covers the rows from its least to its greatest cell
plus one, on axes 0 and 1; the rows of every group together are read once
each, consecutive rows of the stored variable in one read. So the rows read
are a subset of those the hits' bounding box reads (:meth:`Field.read_box
<quarry.join.field.Field.read_box>`): as many for hits clustered in one
region, far fewer for hits in regions apart. Each particle's value is then
the same weighted sum of the same nodes as on the box path, so the answers
are identical.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from quarry import _core

if TYPE_CHECKING:
    import numpy.typing as npt

    from quarry.join.field import Field
    from quarry.reorg.binning import Axis as BinAxis

    IntArray = npt.NDArray[np.int64]


def group_keys(axes: Sequence[BinAxis], positions: Sequence[npt.NDArray[np.generic]]) -> IntArray:
    """The MDBin of each particle over the position variables: their 1-D
    bins (``axes``, the copy's binning of each) combined row-major.

    Examples
    --------
    >>> from quarry.reorg.binning import Axis
    >>> axes = [Axis(p, "<f8", 0.0, 4.0, 0.0, 1.0, 4, False) for p in ("/x", "/y")]
    >>> group_keys(axes, [np.array([0.5, 3.9, 1.0]), np.array([2.5, 0.0, 1.0])]).tolist()
    [2, 12, 5]
    """
    keys = np.zeros(len(positions[0]), np.int64)
    for axis, values in zip(axes, positions, strict=True):
        keys *= axis.slots
        keys += axis.assign(np.asarray(values))
    return keys


def readable_by_rows(field: Field) -> bool:
    """Whether the grouped reads serve ``field``: a whole variable, or a part
    of it that keeps every axis with step 1 (a subarray picking one index
    along an axis, or every n-th, is read as a box)."""
    return all(not isinstance(a, int) and a.step == 1 for a in field.subarray.axes)


def interpolate_grouped(
    fields: Sequence[Field],
    lower: Sequence[IntArray],
    t: Sequence[npt.NDArray[np.float64]],
    keys: IntArray,
) -> npt.NDArray[np.float64]:
    """``fields`` (of one stored shape and part, :func:`same_grid`) at
    particles in cells ``lower`` (per axis) at fractions ``t``, reading only
    the rows of each group (``keys``) of them: one row of values per field.
    The rows to read, and where each particle's nodes lie in them, are found
    once for all the fields."""
    field = fields[0]
    rank = len(lower)
    stored = (*field.info.shape, 1, 1)[:3]
    starts = [a.start for a in field.subarray.axes if not isinstance(a, int)] + [0, 0]
    zeros = np.zeros(len(keys), np.int64)
    cells = [lower[0], lower[1] if rank > 1 else zeros]
    lo, hi = _group_boxes(cells, keys, rank)
    first = [int(lo[0].min()), int(lo[1].min())]
    mask = _covered(lo, hi, first, (int(hi[0].max()), int(hi[1].max())))
    i, j = np.nonzero(mask)
    units = (starts[0] + first[0] + i) * stored[1] + (starts[1] + first[1] + j)
    width = stored[2]
    values = [f.read_units(units.astype(np.int64), width) for f in fields]
    slot = np.full(mask.size, -1, np.int64)
    slot[i * mask.shape[1] + j] = np.arange(len(i), dtype=np.int64) * width
    within = starts[2] + (lower[2] if rank > 2 else zeros)
    # The row of each particle's cell's corners in ``values``, one plane of
    # corners (along axes 0 and 1) at a time; axis 2 is the next value along it.
    planes = {}
    for plane in itertools.product((0, 1), repeat=min(rank, 2)):
        a = cells[0] + plane[0] - first[0]
        b = cells[1] + (plane[1] if rank > 1 else 0) - first[1]
        planes[plane] = slot[a * mask.shape[1] + b] + within
    order = list(planes)
    corners = [
        (order.index(corner[:2]), corner[2] if rank > 2 else 0)
        for corner in itertools.product((0, 1), repeat=rank)
    ]
    return corner_sum(values, t, list(planes.values()), corners)


def _group_boxes(
    cells: list[IntArray], keys: IntArray, rank: int
) -> tuple[list[IntArray], list[IntArray]]:
    """Per group: the first and the past-the-end row along axes 0 and 1 its
    cells' nodes cover (a cell's nodes are its lower index and the next)."""
    order = np.argsort(keys)  # any order within a group: only its least and greatest count
    sorted_keys = keys[order]
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    lo = [np.minimum.reduceat(c[order], starts) for c in cells]
    hi = [np.maximum.reduceat(c[order], starts) + 2 for c in cells]
    if rank == 1:  # one row wide
        hi[1] = lo[1] + 1
    return lo, hi


def _covered(
    lo: list[IntArray], hi: list[IntArray], first: list[int], stop: tuple[int, int]
) -> npt.NDArray[np.bool_]:
    """The rows of the row plane (from ``first`` to ``stop``) that any
    group's box covers: a 2-D difference array, summed."""
    shape = (stop[0] - first[0] + 1, stop[1] - first[1] + 1)
    marks = np.zeros(shape, np.int64)
    a0, a1 = lo[0] - first[0], lo[1] - first[1]
    b0, b1 = hi[0] - first[0], hi[1] - first[1]
    np.add.at(marks, (a0, a1), 1)
    np.add.at(marks, (a0, b1), -1)
    np.add.at(marks, (b0, a1), -1)
    np.add.at(marks, (b0, b1), 1)
    covered: npt.NDArray[np.bool_] = marks.cumsum(0).cumsum(1)[:-1, :-1] > 0
    return covered


def corner_sum(
    values: Sequence[npt.NDArray[Any]],
    t: Sequence[npt.NDArray[np.float64]],
    planes: Sequence[npt.NDArray[np.int64]],
    corners: Sequence[tuple[int, int]],
) -> npt.NDArray[np.float64]:
    """For each of ``values`` (fields laid out alike), the sum over the
    ``2**rank`` corners of each particle's cell (``rank = len(t)``; corner
    ``(0, 1, 0)``: the upper node along axis 1, corners in the order of
    ``itertools.product``) of the corner's weight, the product over the axes
    of ``t`` or ``1 - t``, times its value ``values[k][planes[p] + offset]``
    (``(p, offset) = corners[c]``): one row per field, in float64 (the
    core's :func:`quarry._core.corner_sum`, exactly the sum NumPy would make).

    Examples
    --------
    >>> fields = [np.array([0.0, 10.0]), np.array([1, 3], ">i2")]
    >>> corner_sum(fields, [np.array([0.25, 1.0])], [np.array([0, 0])], [(0, 0), (0, 1)]).tolist()
    [[2.5, 10.0], [1.5, 3.0]]
    """
    out = np.empty((len(values), len(t[0])))
    t = [np.ascontiguousarray(fraction, np.float64) for fraction in t]
    planes = [np.ascontiguousarray(plane, np.int64) for plane in planes]
    for row, field in zip(out, values, strict=True):
        native = np.ascontiguousarray(field, field.dtype.newbyteorder("="))  # NetCDF's may not be
        _core.corner_sum(native, t, planes, list(corners), row)
    return out
