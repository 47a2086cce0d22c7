"""Following particles across time steps by their ids.

A query selects particles at one step; their ids (an integer variable such
as ``id``) are then looked up at every step of the series and their values
read there. A particle absent from a step is reported missing at that step,
never dropped.

Looking ids up: when the id variable is indexed and the set is small, each
id is an equality lookup in the index (FastQuery's equality-set selection),
which reads only the rows of the bins holding it; otherwise the id column is
read once; either way the candidates' ids are hashed (:func:`maybe_wanted`)
and the few that may be wanted matched exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from quarry.errors import ShapeMismatchError, TrackingError
from quarry.index.layout import decode_edges
from quarry.query.series import at_member
from quarry.records import field, record, replace

if TYPE_CHECKING:
    import numpy.typing as npt

    from quarry.dataset import Dataset
    from quarry.formats.base import VariableInfo
    from quarry.query.series import Member
    from quarry.series import Series

#: Above this many ids per bin of the index, reading the whole id column is cheaper.
INDEX_LOOKUP_SHARE = 0.25
#: Bytes of id tables a series keeps between its tracks (:class:`IdTables`).
ID_TABLES_BUDGET = 256 << 20
#: Ids span at most this many times a table's rows to be kept in a table.
DENSE_IDS = 4
#: One id through the index (its lookup, its union with the others', its
#: bin's rows gathered) costs about as much as hashing this many rows of the
#: whole column (:func:`maybe_wanted`): some 60 µs against 2-3 ns a row.
ROWS_PER_LOOKUP = 1 << 15


@record(frozen=False)
class TrackedStep:
    """Where the tracked particles are at one member of the series."""

    member: Member
    rows: npt.NDArray[np.int64]
    """Row of each tracked particle at this step, -1 where it is missing."""
    id_variable: VariableInfo
    """The id variable at this step."""
    values: dict[str, npt.NDArray[np.generic]] = field(default_factory=dict)
    """Values at those rows (in SI units where the series was opened with
    ``si=True``); entries of missing particles are 0 (integers) or NaN."""
    variables: dict[str, VariableInfo] = field(default_factory=dict)
    """The variable each name of ``values`` resolved to at this step."""

    @property
    def found(self) -> npt.NDArray[np.bool_]:
        return self.rows >= 0

    def to_dict(self) -> dict[str, Any]:
        found = self.found
        return {
            "file": self.member.file,
            "step": self.member.step,
            "found": int(found.sum()),
            "missing": int((~found).sum()),
            "values": {
                name: [v if ok else None for v, ok in zip(vals.tolist(), found, strict=True)]
                for name, vals in self.values.items()
            },
        }


@record(frozen=False)
class Tracks:
    """Particles selected at one step, followed through every step."""

    query: str
    anchor: Member
    ids: npt.NDArray[np.integer[Any]]
    """The tracked ids, in the order of their rows at the anchor step, in
    the anchor's id dtype (uint64 ids past 2**63 stay as they are)."""
    steps: list[TrackedStep]

    def write(self, path: str, sources: list[str]) -> None:
        """A file (``.h5``, ``.nc``; ``.parquet``: one table) with one group
        per step (``/Step#5``; under the file's name over several files)
        holding the id variable's values (under its name), ``quarry_found``,
        ``quarry_row`` (the particle's row at that step, -1 where missing)
        and the values, named as :mod:`quarry.outputs.columns` says; the
        query and the sources' checksums as attributes."""
        from quarry.outputs.columns import FOUND, ROW, build_table
        from quarry.outputs.writers import refuse_inputs, sources_provenance, write_groups

        refuse_inputs(path, sources)
        attrs = sources_provenance(sources, self.query)
        attrs["at_step"] = -1 if self.anchor.step is None else self.anchor.step
        attrs["at_file"] = self.anchor.file
        several = len({s.member.file for s in self.steps}) > 1
        groups = {}
        for s in self.steps:
            chosen: dict[str, tuple[str, VariableInfo, npt.NDArray[np.generic]]] = {
                s.id_variable.path: (s.id_variable.path, s.id_variable, self.ids)
            }
            for name, values in s.values.items():
                info = s.variables[name]
                chosen.setdefault(info.path, (info.path, info, values))
            table = build_table([(ROW, s.rows), (FOUND, s.found)], list(chosen.values()))
            step = -1 if s.member.step is None else s.member.step
            groups[s.member.label(several)] = (table, {"file": s.member.file, "step": step})
        write_groups(path, groups, attrs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "at": {"file": self.anchor.file, "step": self.anchor.step},
            "ids": self.ids.tolist(),
            "steps": [s.to_dict() for s in self.steps],
        }


def track(
    series: Series, query: str, at_step: int, id_var: str, names: Sequence[str] = ()
) -> Tracks:
    """Select with ``query`` at step ``at_step`` (a step number; the member's
    position for files without step groups) and follow the selected ids
    through every member, reading ``names`` there.

    Examples
    --------
    >>> import quarry, h5py, numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "p.h5")
    >>> with h5py.File(path, "w") as f:
    ...     f["Step#0/id"], f["Step#0/e"] = np.array([5, 6, 7]), np.array([1.0, 3.0, 4.0])
    ...     f["Step#1/id"], f["Step#1/e"] = np.array([7, 5]), np.array([4.5, 1.5])
    >>> with quarry.open_series(path) as series:
    ...     tracks = track(series, "e > 2", 0, "id", ["e"])
    >>> tracks.ids.tolist(), [s.to_dict()["values"]["e"] for s in tracks.steps]
    ([6, 7], [[3.0, 4.0], [None, 4.5]])
    """
    members = series.members
    anchor = _anchor(members, at_step)
    ds = series.dataset(anchor.file)
    sel = ds.query_table(query, anchor.group)
    id_info = _id_variable(ds, id_var, anchor)
    at_member(anchor, partial(_same_shape, id_info, sel.shape, "the query ran over"))
    # As stored (not in SI units, which would make them float64): exact.
    ids = np.asarray(ds.driver.gather(id_info.path, sel.ids()))
    _no_repeats(ids, id_info, anchor)
    steps = []
    wanted: dict[np.dtype[Any], WantedIds] = {}  # the ids as each id dtype holds them
    for member in members:
        mds = series.dataset(member.file)
        info = _id_variable(mds, id_var, member)
        if info.dtype not in wanted:
            wanted[info.dtype] = WantedIds.of(ids, info.dtype)
        rows = find_rows(mds, info, wanted[info.dtype], series.id_tables)
        values, variables = {}, {}
        for name in names:
            var = mds.variable(name, member.group)
            at_member(member, partial(_same_shape, var, info.shape, f"the ids ({info.key}) have"))
            # With si=True values are stored * unitSI in float64, as in every output.
            by = mds.si_factor(var) if mds.si else None
            variables[name] = (
                var if by is None else replace(var, attrs={**var.attrs, "unitSI": 1.0})
            )
            found = rows >= 0
            exact_ints = var.dtype.kind in "iu" and by is None
            out = np.zeros(len(rows), dtype=var.dtype if exact_ints else np.float64)
            if not exact_ints:
                out[:] = np.nan
            if found.any():
                order = np.argsort(rows[found])
                gathered = mds.driver.gather(var.path, rows[found][order])
                placed = np.empty_like(gathered)
                placed[order] = gathered
                out[found] = placed if by is None else placed.astype(np.float64) * by
            values[name] = out
        steps.append(TrackedStep(member, rows, info, values, variables))
    return Tracks(query, anchor, ids, steps)


def _same_shape(var: VariableInfo, shape: tuple[int, ...], what: str) -> None:
    """:class:`~quarry.errors.ShapeMismatchError` unless ``var`` has ``shape``:
    an id's row of one variable is no row of another of a different length."""
    if var.shape != shape:
        raise ShapeMismatchError(f"{var.key} has shape {var.shape} but {what} shape {shape}")


def _anchor(members: list[Member], at_step: int) -> Member:
    if all(m.step is None for m in members):
        if not 0 <= at_step < len(members):
            raise TrackingError(f"--at-step {at_step}: the series has {len(members)} files")
        return members[at_step]
    matches = [m for m in members if m.step == at_step]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        steps = sorted({m.step for m in members if m.step is not None})
        raise TrackingError(
            f"no step {at_step} in the series (steps {steps[0]}..{steps[-1]}, {len(steps)} of them)"
        )
    files = ", ".join(m.file for m in matches)
    raise TrackingError(f"step {at_step} is in several files ({files}); track within one file")


def _id_variable(ds: Dataset, name: str, member: Member) -> VariableInfo:
    info = ds.variable(name, member.group)
    if info.dtype.kind not in "iu":
        raise TrackingError(f"the id variable {info.path} holds {info.dtype}; ids must be integers")
    return info


def _no_repeats(ids: npt.NDArray[np.integer[Any]], info: VariableInfo, member: Member) -> None:
    uniq, counts = np.unique(ids, return_counts=True)
    if len(uniq) < len(ids):
        bad = int(uniq[counts > 1][0])
        raise TrackingError(
            f"id {bad} appears {int(counts[counts > 1][0])} times in {info.path} of "
            f"{member.file}; ids must identify one particle each"
        )


def _range(dtype: np.dtype[Any]) -> tuple[int, int]:
    """The least and greatest integer ``dtype`` holds."""
    bits = 8 * dtype.itemsize
    return (0, 2**bits - 1) if dtype.kind == "u" else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def held_by(ids: npt.NDArray[np.integer[Any]], dtype: np.dtype[Any]) -> npt.NDArray[np.bool_]:
    """Which ``ids`` the integer ``dtype`` can hold: only those can be in a
    variable of it, and cast to it they keep their value (a uint64 past
    2**63 cast to int64 would wrap onto a negative id).

    Examples
    --------
    >>> held_by(np.array([2**63 + 5, 7], "u8"), np.dtype("i8")).tolist()
    [False, True]
    >>> held_by(np.array([-3, 7], "i8"), np.dtype("u2")).tolist()
    [False, True]
    """
    (least, most), (own_least, own_most) = _range(dtype), _range(ids.dtype)
    held = np.ones(len(ids), dtype=bool)
    # Each bound compared only where it lies inside the ids' own range: exact.
    if least > own_least:
        held &= ids >= least
    if most < own_most:
        held &= ids <= most
    return held


#: Fibonacci hashing's multiplier (2**64 over the golden ratio, odd): its
#: product's top bits depend on every bit of an id, so ids alike in their low
#: bits (``rank << 32 | n``, multiples of a stride) still spread.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def maybe_wanted(
    values: npt.NDArray[Any], wanted: npt.NDArray[np.integer[Any]]
) -> npt.NDArray[np.int64]:
    """The positions of ``values`` that may be among ``wanted`` (of the same
    dtype): every one that is, and about one in 256 of the others. A table of
    the hashes of ``wanted`` is looked up once per value, so ids are matched
    in a few passes over the column, where sorting it took ``n log n`` steps;
    the few candidates are then matched exactly.

    Examples
    --------
    >>> values = np.array([7, -3, 2**40, 9, 7], "i8")
    >>> {0, 2, 4} <= set(maybe_wanted(values, np.array([7, 2**40], "i8")).tolist())
    True
    """
    bits = min(26, max(12, len(wanted).bit_length() + 8))
    table = np.zeros(1 << bits, dtype=bool)
    table[_id_hash(wanted, bits)] = True
    return np.flatnonzero(table.take(_id_hash(values, bits)))


def _id_hash(values: npt.NDArray[Any], bits: int) -> npt.NDArray[np.int64]:
    """Each value's ``bits``-bit hash (negative ones wrap to uint64 alike)."""
    wide = values.dtype.itemsize == 8 and values.dtype.isnative
    hashed = (values.view(np.uint64) if wide else values.astype(np.uint64)) * _GOLDEN
    hashed >>= np.uint64(64 - bits)
    return hashed.view(np.int64)  # below 2**bits: the index type take wants, without a cast


class IdTables:
    """Where each id lies, ``rows[id - low]`` (-1: no particle has it), per
    id variable (by file and path) that a series has read whole to track
    through more than once, so later tracks look ids up instead of hashing
    the column again. Kept only for ids that are unique and dense (spanning
    at most :data:`DENSE_IDS` times the rows), within
    :data:`ID_TABLES_BUDGET` bytes, the least recently used dropped first;
    as of when they were read, as an open dataset's index is.

    Examples
    --------
    >>> tables, key = IdTables(), ("run.h5", "/Step#0/id")
    >>> for _ in range(2):  # the second read of the column keeps its table
    ...     tables.offer(key, np.array([12, 10, 11, 15]))
    >>> tables.rows(key, np.array([10, 13, 15, 99])).tolist()
    [1, -1, 3, -1]
    """

    def __init__(self, budget: int = ID_TABLES_BUDGET) -> None:
        self.budget = budget
        self._read: set[tuple[str, str]] = set()
        self._refused: set[tuple[str, str]] = set()  # sparse, repeated or too large: not again
        self._tables: dict[tuple[str, str], tuple[int, npt.NDArray[Any]]] = {}

    def rows(
        self, key: tuple[str, str], wanted: npt.NDArray[np.integer[Any]]
    ) -> npt.NDArray[np.int64] | None:
        """The row of each of ``wanted`` (in the variable's dtype), or None
        where no table is kept for ``key``."""
        kept = self._tables.pop(key, None)
        if kept is None:
            return None
        self._tables[key] = kept  # the most recently used, last
        low, table = kept
        above = np.flatnonzero(wanted >= wanted.dtype.type(low))
        offsets = _offsets(wanted[above], low)
        inside = offsets < len(table)
        out = np.full(len(wanted), -1, dtype=np.int64)
        out[above[inside]] = table[offsets[inside]]
        return out

    def offer(self, key: tuple[str, str], values: npt.NDArray[Any]) -> None:
        """``values``, the whole id variable ``key``, just read: its table is
        made the second time, if the ids are unique and dense."""
        if key not in self._read:
            self._read.add(key)
            return
        if key in self._tables or key in self._refused or not len(values):
            return
        self._refused.add(key)  # until the table is made
        low, high = values.min(), values.max()
        span = int(high) - int(low) + 1
        kind = np.int32 if len(values) < 2**31 else np.int64
        size = span * np.dtype(kind).itemsize
        if span > DENSE_IDS * len(values) or size > self.budget:
            return
        table: npt.NDArray[Any] = np.full(span, -1, dtype=kind)
        table[_offsets(values, int(low))] = np.arange(len(values), dtype=kind)
        if np.count_nonzero(table >= 0) != len(values):
            return  # an id held twice: each lookup finds it, and says so
        self._refused.discard(key)
        self._tables[key] = (int(low), table)
        while sum(t.nbytes for _, t in self._tables.values()) > self.budget:
            del self._tables[next(iter(self._tables))]


def _offsets(values: npt.NDArray[np.integer[Any]], low: int) -> npt.NDArray[np.intp]:
    """``values - low`` exactly (each value at least ``low``), in 64 bits,
    where an 8-bit ``127 - (-128)`` would wrap."""
    wide = values if values.dtype.itemsize == 8 else values.astype(np.int64)
    return (wide - wide.dtype.type(low)).astype(np.intp)


@record
class WantedIds:
    """Tracked ids as a variable of one integer dtype holds them (see
    :func:`held_by`), made once per track and dtype, not once per step."""

    held: npt.NDArray[np.bool_]
    """Which of the ids the dtype can hold."""
    wanted: npt.NDArray[np.integer[Any]]
    """Those ids, in the dtype, ascending and each once."""
    back: npt.NDArray[np.intp]
    """Where each held id lies in ``wanted``."""

    @classmethod
    def of(cls, ids: npt.NDArray[np.integer[Any]], dtype: np.dtype[Any]) -> WantedIds:
        """
        Examples
        --------
        >>> w = WantedIds.of(np.array([300, 7, -1, 7]), np.dtype("u1"))
        >>> w.held.tolist(), w.wanted.tolist(), w.back.tolist()
        ([False, True, False, True], [7], [0, 0])
        """
        held = held_by(ids, dtype)
        own = ids[held].astype(dtype)
        wanted = np.unique(own)
        return cls(held, wanted, np.searchsorted(wanted, own))


def find_rows(
    ds: Dataset,
    info: VariableInfo,
    ids: WantedIds,
    tables: IdTables | None = None,
) -> npt.NDArray[np.int64]:
    """The row holding each of the tracked ``ids`` in the id variable
    ``info``, -1 where none does (ids compared exactly whatever the two
    dtypes: in the variable's own, those it can hold); the index answers
    when it has the variable and the set is small, one read of the column
    otherwise (or ``tables``, where they hold the variable's)."""
    held, wanted = ids.held, ids.wanted
    out = np.full(len(held), -1, dtype=np.int64)
    if not len(wanted):
        return out
    key = (ds.path, info.path)
    kept = tables.rows(key, wanted) if tables is not None else None
    if kept is not None:
        out[held] = kept[ids.back]
        return out
    store = ds.index if ds.has_index else None
    candidates: npt.NDArray[np.int64] | None = None
    if store is not None and info.path in store.variables:
        bins = len(decode_edges(store.variables[info.path])) + 1
        few = len(wanted) * ROWS_PER_LOOKUP <= info.size
        if few and len(wanted) <= INDEX_LOOKUP_SHARE * bins:
            column = store.column(info.path)
            found = []
            for key in wanted.tolist():
                sure, cand = column.leaf(key, True, key, True)
                found.append(sure | cand)
            while len(found) > 1:  # pairwise: each union about as large as its inputs
                pairs = range(0, len(found), 2)
                found = [found[i] | found[i + 1] if i + 1 < len(found) else found[i] for i in pairs]
            candidates = found[0].to_ids()
    if candidates is None:
        values = ds.driver.read(info.path, 0, info.size)
        if tables is not None:
            tables.offer(key, values)
        maybe = maybe_wanted(values, wanted)
        positions = maybe
    else:
        values = ds.driver.gather(info.path, candidates)
        maybe = maybe_wanted(values, wanted)
        positions = candidates[maybe]
    values = values[maybe]
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    left = np.searchsorted(sorted_values, wanted, side="left")
    right = np.searchsorted(sorted_values, wanted, side="right")
    if np.any(right - left > 1):
        bad = int(wanted[np.argmax(right - left > 1)])
        raise TrackingError(
            f"id {bad} appears {int(np.max(right - left))} times in {info.path} of {ds.path}; "
            "ids must identify one particle each"
        )
    rows_of_wanted = np.full(len(wanted), -1, dtype=np.int64)
    hit = right > left
    rows_of_wanted[hit] = positions[order[left[hit]]]
    out[held] = rows_of_wanted[ids.back]
    return out
