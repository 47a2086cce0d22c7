"""The interpolation join (SCJoin, after SDS-MD): mesh fields interpolated
at the positions of selected particles.

For the fields on one grid (:func:`same_grid`: three components of one
mesh, say), once: locate every particle on each axis (its cell and fraction
``t``, :meth:`~quarry.join.grid.Axis.locate`) and find what to read; then for
each field, read the box of the field the cells of the inside particles
cover (never the rest of the field:
:meth:`~quarry.join.field.Field.read_box`), and weigh the ``2**rank`` nodes
of each cell by the products of ``t`` and ``1 - t``: linear on one axis,
bilinear on two, trilinear on three, in float64 whatever the field's dtype.
A field's NaN (a missing value) reaches every particle whose cell has it as
a node, as in ``scipy.interpolate.RegularGridInterpolator``.

The answer (:class:`Interpolated`) is a table in ascending particle order:
``quarry_row`` (the particle's row, named as every output names it; see
:mod:`quarry.outputs.columns`), then the ``values`` asked for, then each
field under the name it was given.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from quarry.errors import JoinArgumentError, JoinError
from quarry.expr.names import name_list
from quarry.formats.cf import inexact_in_float64
from quarry.join.field import Field
from quarry.join.grid import GridSpec, parse_grid
from quarry.join.groups import corner_sum, group_keys, interpolate_grouped, readable_by_rows
from quarry.join.workers import spread
from quarry.outputs.columns import FILE, HIT, ROW, STEP, OutputTable, output_attrs, own_name
from quarry.pool import jobs
from quarry.records import field, record

if TYPE_CHECKING:
    import numpy.typing as npt

    from quarry.reorg.binning import Axis as BinAxis

#: The methods, by the number of coordinates (and field dimensions) each takes.
METHODS = {"linear": 1, "bilinear": 2, "trilinear": 3}
#: What happens to particles outside a field's grid.
OUTSIDE = ("nan", "clamp")


class Selected(Protocol):
    """What the join reads of a selection (a :class:`quarry.Selection`): its
    rows, and the values of its variables there."""

    @property
    def jobs(self) -> int | None:
        """Threads its work runs on (None: as the caller chose, :func:`quarry.pool.jobs`)."""
        ...

    def values(self, name: str) -> npt.NDArray[np.generic]: ...

    def output_table(self, names: list[str], indices: bool = True) -> OutputTable: ...


@record
class Interpolated:
    """The join's table: columns by name (``table["bx"]``, ``table.columns``),
    each column's attributes, and the bytes each field's reads returned.

    Examples
    --------
    >>> t = Interpolated(OutputTable({"quarry_row": np.array([3, 7]),
    ...                               "bx": np.array([0.5, np.nan])}), ("bx",), {"bx": 16})
    >>> len(t), t["bx"].tolist(), t.summary()
    (2, [0.5, nan], {'bx': {'min': 0.5, 'max': 0.5, 'mean': 0.5, 'nan': 1, 'bytes_read': 16, \
'read_by': 'box'}})
    """

    output: OutputTable
    fields: tuple[str, ...]
    bytes_read: dict[str, int]
    read_by: dict[str, str] = field(default_factory=dict)
    """How each field was read: ``"mdbin"`` (by the MDBin groups of the
    particles' reorganised copy) or ``"box"`` (the box of all the hits)."""

    @property
    def columns(self) -> dict[str, npt.NDArray[np.generic]]:
        return self.output.columns

    @property
    def row(self) -> str:
        """The name of the particle-row column (``quarry_row``)."""
        return self.output.row

    def __getitem__(self, name: str) -> npt.NDArray[np.generic]:
        return self.output.columns[name]

    def __len__(self) -> int:
        return len(self.output)

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per field: min, max and mean of its values that are not NaN
        (None where all are), the number of NaN, the bytes read and how
        (``read_by``: ``"mdbin"`` or ``"box"``)."""
        out: dict[str, dict[str, Any]] = {}
        for name in self.fields:
            column = np.asarray(self.columns[name], dtype=np.float64)
            known = column[~np.isnan(column)]
            with np.errstate(invalid="ignore", over="ignore"):  # inf and -inf: NaN, said once
                stats = (known.min(), known.max(), known.mean()) if len(known) else (None,) * 3
            out[name] = {
                **{
                    k: None if v is None else float(v)
                    for k, v in zip(("min", "max", "mean"), stats, strict=True)
                },
                "nan": int(len(column) - len(known)),
                "bytes_read": self.bytes_read[name],
                "read_by": self.read_by.get(name, "box"),
            }
        return out

    def to_pandas(self) -> Any:
        """The table as a ``pandas.DataFrame`` indexed by ``quarry_row``; a
        series' table in long format, as :meth:`SeriesSelection.to_pandas
        <quarry.query.series.SeriesSelection.to_pandas>` gives it: numbered
        rows, ``quarry_row`` a column (a row number repeats from step to step)."""
        import importlib

        try:
            pandas = importlib.import_module("pandas")
        except ImportError:
            raise ImportError(
                "this needs pandas, which is not installed: pip install pandas"
            ) from None
        frame = pandas.DataFrame(self.columns)
        if any(name.startswith((FILE, STEP)) for name in self.output.own):
            return frame  # a series' rows: their numbers repeat from member to member
        return frame.set_index(self.row)


def interpolate(
    selection: Selected,
    fields: Mapping[str, str],
    at: Sequence[str] = ("x", "y", "z"),
    *,
    grid: str | GridSpec | None = None,
    method: str | None = None,
    outside: str = "nan",
    values: Sequence[str] = (),
    clusters: Sequence[BinAxis] | None = None,
) -> Interpolated:
    """Each field interpolated at the selected particles' positions; see
    :meth:`quarry.Selection.interpolate`. ``clusters``: the bins of each
    position variable in the particles' reorganised copy, by which the
    fields are read (:mod:`quarry.join.groups`); None: a box per field."""
    at = name_list(at)
    if not 1 <= len(at) <= 3:
        raise JoinArgumentError(
            f"give 1 to 3 position variables (--at x,y,z; at= in Python), got {len(at)}: "
            f"{', '.join(at)}"
        )
    rank = len(at)
    if method is not None and METHODS.get(method) != rank:
        if method not in METHODS:
            raise JoinArgumentError(f"method {method!r}: use one of {', '.join(METHODS)}")
        raise JoinArgumentError(
            f"{method} interpolation takes {METHODS[method]} coordinate(s), but --at (at= in "
            f"Python) gives {rank} ({', '.join(at)})"
        )
    if outside not in OUTSIDE:
        raise JoinArgumentError(f"outside={outside!r}: use nan or clamp")
    if not fields:
        raise JoinArgumentError(
            "give at least one field, e.g. --field bx=field/bx.bin "
            "(fields={'bx': 'field/bx.bin'} in Python)"
        )
    chosen = list(dict.fromkeys(name_list(values)))
    base = selection.output_table(chosen, indices=False)
    names = [n for n in base.columns if n not in base.own]
    for name in fields:
        # A group of a column (`g` beside `g/x`) cannot also be a column in HDF5 and NetCDF.
        if not name or "/" in name or any(n == name or n.startswith(f"{name}/") for n in names):
            raise JoinArgumentError(
                f"field name {name!r}: a field's name must be a plain name, other than the "
                "--values columns (values= in Python) and their groups"
            )
    if not isinstance(grid, str | GridSpec | None):
        raise JoinArgumentError(
            f"grid is text as 'origin=0,0,0 spacing=2.6,2.6,1.04' (or a GridSpec), not a "
            f"{type(grid).__name__}"
        )
    spec = parse_grid(grid) if isinstance(grid, str) else grid
    opened: list[Field] = []
    try:
        for name, text in fields.items():
            field = Field.open(name, text, spec, at)
            opened.append(field)
            if len(field.shape) != rank:
                raise JoinArgumentError(
                    f"field {field.where} has {len(field.shape)} dimension(s), shape "
                    f"{field.shape}, but --at (at= in Python) gives {rank} coordinate(s) "
                    f"({', '.join(at)}); "
                    "give one position variable per axis, axis 0 first"
                )
        stored = [selection.values(a) for a in at]
        for name, column in zip(at, stored, strict=True):
            inexact = inexact_in_float64(np.asarray(column))
            if inexact is not None:
                raise JoinError(
                    f"position variable {name} holds {inexact}, beyond 2**53: positions are "
                    "interpolated in float64, which cannot hold that integer exactly, so the "
                    "particle could be placed in another cell"
                )
        positions = [np.asarray(p, dtype=np.float64) for p in stored]
        groups = None if clusters is None else group_keys(clusters, stored)
        workers = selection.jobs or jobs()
        columns = {}
        for alike in same_grid(opened):
            found = interpolate_fields(alike, positions, outside == "clamp", groups, workers)
            columns.update({f.name: values for f, values in zip(alike, found, strict=True)})
        columns = {name: columns[name] for name in fields}
    finally:
        for field in opened:
            field.close()
    taken = [*names, *fields]
    row = own_name(ROW, taken)
    out: dict[str, npt.NDArray[np.generic]] = {row: base.columns[base.row]}
    out.update({n: base.columns[n] for n in names})
    out.update(columns)
    attrs = {n: base.attrs.get(n, {}) for n in names}
    for field in opened:
        attrs[field.name] = {
            **output_attrs(field.info, np.dtype(np.float64)),
            "interpolated_from": field.source.text,
        }
    table = OutputTable(out, attrs, own_name(HIT, [*taken, row]), row, (row,))
    read = {f.name: f.bytes_read for f in opened}
    by = {f.name: "mdbin" if groups is not None and readable_by_rows(f) else "box" for f in opened}
    return Interpolated(table, tuple(fields), read, by)


def same_grid(fields: Sequence[Field]) -> list[list[Field]]:
    """``fields`` in groups on one grid: the same coordinates along each
    axis, and the same part of variables of the same stored shape, so the
    particles' cells, fractions, MDBin groups and the rows to read are the
    same for each. In the order of their first field.

    Examples
    --------
    >>> import tempfile, os
    >>> from quarry.formats.raw import RawLayout, register
    >>> from quarry.join.grid import GridSpec
    >>> folder = tempfile.mkdtemp()
    >>> for name in ("bx", "by", "bz"):
    ...     path = os.path.join(folder, name + ".bin")
    ...     np.zeros(8, "<f4").tofile(path)
    ...     _ = register(path, RawLayout(name, "<f4", (2, 4)))
    >>> unit, half = GridSpec((0, 0), (1, 1)), GridSpec((0, 0), (0.5, 1))
    >>> opened = [Field.open(n, os.path.join(folder, n + ".bin"), g)
    ...           for n, g in (("bx", unit), ("by", half), ("bz", unit))]
    >>> [[f.name for f in alike] for alike in same_grid(opened)]
    [['bx', 'bz'], ['by']]
    >>> for f in opened:
    ...     f.close()
    """
    groups: dict[Any, list[Field]] = {}
    for f in fields:
        grid = tuple((a.coords.tobytes(), a.descending) for a in f.axes)
        groups.setdefault((f.info.shape, f.subarray, grid), []).append(f)
    return list(groups.values())


def interpolate_fields(
    fields: Sequence[Field],
    positions: Sequence[npt.NDArray[np.float64]],
    clamp: bool,
    groups: npt.NDArray[np.int64] | None = None,
    workers: int = 1,
) -> npt.NDArray[np.float64]:
    """``fields`` (on one grid, :func:`same_grid`) interpolated at
    ``positions`` (one array per axis, axis 0 first), one row per field:
    NaN outside the grid, unless ``clamp``. The particles are located once
    for all the fields. With ``groups`` (each particle's MDBin,
    :func:`~quarry.join.groups.group_keys`) only the rows each group's cells
    cover are read; else the box of all of them. On up to ``workers``
    threads, each reading its own band's region (:mod:`quarry.join.workers`),
    with the same answer as on one."""
    field = fields[0]
    out = np.full((len(fields), len(positions[0])), np.nan)
    # Axis 0 is located for all (the bands are cut along it), the others
    # band by band, on the band's thread.
    first_cells, first_t, near = field.axes[0].locate(positions[0], clamp)
    along = np.flatnonzero(near)
    if not len(along):
        return out
    keys = groups if groups is not None and readable_by_rows(field) else None

    def band(part: npt.NDArray[np.int64] | None) -> npt.NDArray[np.float64]:
        rows = along if part is None else along[part]
        values = np.full((len(fields), len(rows)), np.nan)
        located = [(first_cells[rows], first_t[rows])]
        inside = np.ones(len(rows), dtype=bool)
        for axis, p in zip(field.axes[1:], positions[1:], strict=True):
            cells, fraction, within = axis.locate(p[rows], clamp)
            located.append((cells, fraction))
            inside &= within
        if not inside.any():
            return values
        lower = [cells[inside] for cells, _ in located]
        t = [fraction[inside] for _, fraction in located]
        if keys is not None:
            values[:, inside] = interpolate_grouped(fields, lower, t, keys[rows][inside])
        else:
            values[:, inside] = interpolate_boxed(fields, lower, t)
        return values

    out[:, along] = spread(first_cells[along], workers, band)
    return out


def interpolate_boxed(
    fields: Sequence[Field],
    lower: Sequence[npt.NDArray[np.int64]],
    t: Sequence[npt.NDArray[np.float64]],
) -> npt.NDArray[np.float64]:
    """``fields`` (on one grid) at particles in cells ``lower`` (per axis)
    at fractions ``t``, reading the box their cells cover: one row per field."""
    lo = tuple(int(cell.min()) for cell in lower)
    hi = tuple(int(cell.max()) + 2 for cell in lower)
    boxes = [f.read_box(lo, hi) for f in fields]
    return multilinear(boxes, [cell - first for cell, first in zip(lower, lo, strict=True)], t)


def multilinear(
    boxes: Sequence[npt.NDArray[np.generic]],
    lower: Sequence[npt.NDArray[np.int64]],
    t: Sequence[npt.NDArray[np.float64]],
) -> npt.NDArray[np.float64]:
    """For each of ``boxes`` (of one shape), the weighted sum over the
    ``2**rank`` corners of each cell: the value at lower corner ``lower``
    (indices into the box, per axis) plus fraction ``t`` of the way along
    each axis; one row per box.

    Examples
    --------
    >>> box = np.array([[0.0, 1.0], [10.0, 11.0]])
    >>> multilinear([box, -box], [np.array([0, 0]), np.array([0, 0])],
    ...             [np.array([0.5, 1.0]), np.array([0.5, 0.0])]).tolist()
    [[5.5, 10.0], [-5.5, -10.0]]
    """
    box = boxes[0]
    flat = [np.ascontiguousarray(b).reshape(-1) for b in boxes]
    strides = [int(np.prod(box.shape[k + 1 :], dtype=np.int64)) for k in range(box.ndim)]
    first = sum((cell * stride for cell, stride in zip(lower, strides, strict=True)), np.int64(0))
    corners = [
        (0, sum(bit * stride for bit, stride in zip(corner, strides, strict=True)))
        for corner in itertools.product((0, 1), repeat=box.ndim)
    ]
    return corner_sum(flat, t, [np.asarray(first, dtype=np.int64)], corners)
