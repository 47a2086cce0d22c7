"""Evaluating a plan over a logical table with SQL's three-valued logic.

Every node evaluates to a pair of row sets ``(T, U)``: rows where it is true
and rows where it is unknown (a missing value was read); the rest are false.
``NOT`` swaps true and false and keeps unknown; ``AND``/``OR`` follow the SQL
truth tables. Each node is evaluated only on a *domain*: the rows whose answer
can still change the result. After an AND's first child, only its true or
unknown rows remain; after an OR's, only its not-true rows. Indexed leaves use
the domain to skip blocks, scanned leaves read values only at domain rows, so
arithmetic runs on the surviving rows only.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Collection
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

from quarry import _core
from quarry.errors import ShapeMismatchError
from quarry.expr.ast import to_text
from quarry.expr.keys import key_kind
from quarry.expr.plan import (
    AndNode,
    Const,
    Interval,
    NotNode,
    OrNode,
    PlanNode,
    RangeLeaf,
    ScanLeaf,
    everything,
)
from quarry.expr.postfix import postfix
from quarry.formats.base import Driver, VariableInfo
from quarry.index.store import IndexStore
from quarry.query.stats import Access, CountingDriver, Estimate, QueryStats, Work
from quarry.records import field, record, replace

if TYPE_CHECKING:
    from types import TracebackType

    import numpy as np
    import numpy.typing as npt

    from quarry.reorg.read import Answer, MemberCopy
    from quarry.reorg.store import ReorgCopy

Pair = tuple[_core.RowSet, _core.RowSet]
#: A box as the core scans it: the columns, and each one's interval's
#: ``lo``, ``lo_incl``, ``hi``, ``hi_incl`` (:func:`quarry._core.count_boxes`).
BoxSpec = tuple[list["npt.NDArray[np.generic]"], list[Any], list[bool], list[Any], list[bool]]


@record
class SmallBox:
    """An AND of ranges over a small table's own columns, scanned in one pass
    (:meth:`Executor.small_box`)."""

    columns: list[npt.NDArray[np.generic]]
    intervals: list[Interval]

    @property
    def empty(self) -> bool:
        """Whether a range holds no value, and so the box no row."""
        return any(iv.empty for iv in self.intervals)

    @cached_property
    def spec(self) -> BoxSpec:
        """The box as :func:`quarry._core.scan_box` and ``count_boxes`` take it:
        made once, whether it is counted, kept for the query asked again, or both."""
        ivs = self.intervals
        return (
            self.columns,
            [iv.lo for iv in ivs],
            [iv.lo_incl for iv in ivs],
            [iv.hi for iv in ivs],
            [iv.hi_incl for iv in ivs],
        )


def counted(answer: int | SmallBox) -> int:
    """A count, or the count of a :class:`SmallBox` (:meth:`Executor.count_or_box`)."""
    if isinstance(answer, int):
        return answer
    return 0 if answer.empty else _core.count_boxes([answer.spec])[0]


class Intervals(NamedTuple):
    """Intervals as arrays: ``lo (<|<=) x (<|<=) hi``, and which are empty."""

    lo: npt.NDArray[Any]
    lo_incl: npt.NDArray[np.bool_]
    hi: npt.NDArray[Any]
    hi_incl: npt.NDArray[np.bool_]
    empty: npt.NDArray[np.bool_]


#: The cost model of the choice between an index and a scan, in rows of a
#: scan (one value read in sequence and compared). Checking a candidate
#: gathers its value from a scattered place; a lookup walks the index's bins
#: and makes row sets; a scan reads the column (one call, however short).
CHECK_COST = 16
LOOKUP_COST = 2048
SCAN_COST = 8192
#: Making a range's row set through the index decodes and ORs every row of
#: its bins wholly inside the range (about 4 ns a row, against 0.6 ns a row
#: scanned); a count reads their bins' counts instead.
INSIDE_COST = 4
#: Importing NumPy (about 90 ms), which reading values needs (a scan, or
#: checking candidates) and an index's counts and row sets do not: counted
#: while it is not yet imported, as in a command that the index may answer alone.
IMPORT_COST = 90_000_000

#: An AND of ranges over at most this many values (rows times ranges) is
#: scanned in one pass over its columns (:meth:`Executor.small_box`): the
#: Python work of weighing, looking up and combining each range through the
#: index (some 60 microseconds) costs more than scanning 40,000 values.
SMALL_BOX_VALUES = 1 << 16
#: Reading a reorganised copy's member's offset tables, the first time a
#: query could use them (a fixed part; and one per table entry).
TABLES_COST = 65536


@record
class Table:
    """Rows of same-shaped variables, position by position, cut into blocks.
    Coordinate variables (1-D, over one of the table's dimensions) join it
    along their ``axes`` entry: their value at a row is the one at that row's
    index along the axis."""

    shape: tuple[int, ...]
    block_len: int
    dims: tuple[str, ...] | None = None

    @property
    def n_rows(self) -> int:
        return math.prod(self.shape)

    def axis_of(self, var: VariableInfo) -> int | None:
        """The axis a coordinate variable runs along; None for the table's own
        variables and for anything that does not fit."""
        if var.shape == self.shape or len(var.shape) != 1 or not var.dims or not self.dims:
            return None
        dim = var.dims[0]
        if dim not in self.dims or var.shape[0] != self.shape[self.dims.index(dim)]:
            return None
        return self.dims.index(dim)


def table_of(variables: list[VariableInfo], block_len: int) -> Table:
    """The table a query's variables form: all of one shape, or coordinates
    broadcast along the dimensions of the others.

    Examples
    --------
    >>> import numpy as np
    >>> tas = VariableInfo("/tas", (2, 3, 4), np.dtype("f4"), dims=("time", "lat", "lon"))
    >>> lat = VariableInfo("/lat", (3,), np.dtype("f4"), dims=("lat",))
    >>> table_of([tas, lat], 1024).axis_of(lat)
    1
    """
    top = max(variables, key=lambda v: len(v.shape))
    table = Table(top.shape, block_len, top.dims)
    for v in variables:
        if v.shape == top.shape:
            if v.dims and top.dims and v.dims != top.dims:
                raise ShapeMismatchError(
                    f"{v.key} has dimensions {v.dims} but {top.key} has {top.dims}"
                )
        elif table.axis_of(v) is None:
            listing = ", ".join(f"{u.key} {u.shape}" for u in variables)
            raise ShapeMismatchError(
                f"variables in one query must have one shape, or be coordinates along its "
                f"dimensions: {listing}"
            )
    return table


@record(frozen=False)
class _Shared:
    """What every executor answering part of one table shares: whole-column
    caches (missing rows, scanned values) and the work done, so the parts
    read each column once and report as one query."""

    missing: dict[str, _core.RowSet] = field(default_factory=dict)
    # Scanned values by (variable, blocks): whole columns, or a share's rows.
    columns: dict[tuple[str, tuple[int, int] | None], npt.NDArray[np.generic]] = field(
        default_factory=dict
    )
    work: Work = field(default_factory=Work)


class Executor:
    """Evaluates plans against one file and (optionally) its index."""

    def __init__(
        self,
        driver: Driver,
        store: IndexStore | None,
        table: Table,
        factor: Callable[[VariableInfo], float | None] | None = None,
        *,
        blocks: tuple[int, int] | None = None,
        shared: _Shared | None = None,
        copies: Callable[[Collection[str]], ReorgCopy | None] | None = None,
    ) -> None:
        self.driver = driver
        self._copies = copies
        """The file's reorganised copy (see :mod:`quarry.reorg`) where it holds
        the variables given, opened when a plan could read it; None or giving
        None: there is none."""
        self._from_copy: tuple[MemberCopy, Answer] | None = None
        """The last rows the copy answered, and where in it they lie: values
        of its variables at those rows are read from its runs."""
        self._copy_rows: _core.RowSet | None = None
        """Those rows as the row set :meth:`rows` returned (see :meth:`ids_of`)."""
        self._whole_estimates: dict[tuple[str, Interval], Estimate | None] = {}
        self.store = store
        self.table = table
        self.factor = factor
        """What a variable's values read are multiplied by (openPMD's ``unitSI``
        with ``si=True``; see :meth:`physical`); plans carry it themselves."""
        self.blocks = blocks
        """The blocks ``[first, stop)`` this executor answers for (a share of
        the work); None: all."""
        self.part: _core.RowSet | None = None
        """The rows of those blocks, the domain every evaluation starts from."""
        if blocks is not None:
            n_blocks = -(-table.n_rows // table.block_len)
            keep = [blocks[0] <= b < blocks[1] for b in range(n_blocks)]
            self.part = _core.RowSet.full_blocks(table.n_rows, table.block_len, keep)
        self._shared = shared if shared is not None else _Shared()
        self._missing = self._shared.missing
        self._columns = self._shared.columns
        self._work = self._shared.work
        # Every read of values goes through this, so bytes_read sees them all.
        self._source = CountingDriver(driver, self._work)

    def share(self, first: int, stop: int) -> Executor:
        """An executor for blocks ``[first, stop)`` of this one's (a share of
        the work), sharing its caches and adding its work to this one's."""
        if self.blocks is not None:
            first, stop = max(first, self.blocks[0]), min(stop, self.blocks[1])
        return Executor(
            self.driver,
            self.store,
            self.table,
            self.factor,
            blocks=(first, max(first, stop)),
            shared=self._shared,
        )

    def stats(self) -> QueryStats:
        """What the evaluations so far did (rows checked, bitmaps decoded, bytes read)."""
        return self._work.snapshot()

    # -- helpers ---------------------------------------------------------
    def _empty(self) -> _core.RowSet:
        return _core.RowSet.empty(self.table.n_rows, self.table.block_len)

    def _full(self) -> _core.RowSet:
        return _core.RowSet.full(self.table.n_rows, self.table.block_len)

    def ids_of(self, rows: _core.RowSet) -> npt.NDArray[np.int64]:
        """The ids of ``rows``, ascending: those the copy read where it
        answered them (no conversion), else converted from the row set."""
        if self._from_copy is not None and rows is self._copy_rows:
            return self._from_copy[1].ids
        return rows.to_ids()

    def _from_ids(self, ids: npt.NDArray[np.int64]) -> _core.RowSet:
        return _core.RowSet.from_ids(ids, self.table.n_rows, self.table.block_len)

    def _column(self, var: VariableInfo) -> _core.Column | None:
        """The index of a variable whose rows are the table's; None otherwise."""
        # A coordinate's or a subarray's index is over other rows than the table's.
        if self.table.axis_of(var) is not None or var.subarray is not None:
            return None
        return self._base_column(var)

    def _base_column(self, var: VariableInfo) -> _core.Column | None:
        if self.store is None or var.path not in self.store.variables:
            return None
        return self.store.column(var.path)

    def _values(self, var: VariableInfo) -> npt.NDArray[np.generic]:
        """The column for scans: the whole of it, or only the rows of the
        blocks this executor answers for (an MPI rank reads its share alone)."""
        if self.blocks is None:
            return self._whole(var)
        values = self._columns.get((var.key, self.blocks))
        if values is None:
            start, stop = self._part_rows()
            if self.table.axis_of(var) is None and var.subarray is None:
                values = self._source.read(var.path, start, stop)
            else:  # coordinates and subarrays are laid out over the table first
                values = self._whole(var)[start:stop]
            self._columns[(var.key, self.blocks)] = values
        return values

    def _part_rows(self) -> tuple[int, int]:
        assert self.blocks is not None
        first, stop = self.blocks
        block_len = self.table.block_len
        return first * block_len, min(stop * block_len, self.table.n_rows)

    def _scanned(
        self, scan: Callable[[int, _core.RowSet | None], Pair], domain: _core.RowSet | None
    ) -> Pair:
        """``scan(n_rows, domain)`` over the table, or over this executor's
        share of it (rows renumbered from its first block, the answer placed
        back)."""
        if self.blocks is None:
            self._work.scanned(domain, self.table.n_rows, self.table.block_len)
            return scan(self.table.n_rows, domain)
        first, stop = self.blocks
        within = domain if domain is not None else self.part
        assert within is not None  # set with the blocks
        share = within.slice_blocks(first, stop)
        # Every row of the share: no domain, so the core scans densely
        # rather than row by row through a bitmap.
        everything = len(share) == share.n_rows
        self._work.scanned(None if everything else share, share.n_rows, self.table.block_len)
        t, u = scan(share.n_rows, None if everything else share)
        return t.place_blocks(first, self.table.n_rows), u.place_blocks(first, self.table.n_rows)

    def _whole(self, var: VariableInfo) -> npt.NDArray[np.generic]:
        """The whole column. For memory-mapped storage this is a view: the
        core then touches only the pages of the rows it evaluates."""
        import numpy as np

        values = self._columns.get((var.key, None))
        if values is None:
            from quarry.formats.subarray import read_view

            values = read_view(self._source, var)
            axis = self.table.axis_of(var)
            if axis is not None:  # a coordinate, repeated over the table's other axes
                along = [1] * len(self.table.shape)
                along[axis] = self.table.shape[axis]
                coord = values.reshape(along)
                values = np.ascontiguousarray(np.broadcast_to(coord, self.table.shape)).reshape(-1)
            self._columns[(var.key, None)] = values
        return values

    def scales(self, var: VariableInfo) -> float | None:
        """The factor ``var``'s values are multiplied by, if any."""
        return self.factor(var) if self.factor is not None else None

    def physical(self, var: VariableInfo, values: npt.NDArray[np.generic]) -> npt.NDArray[Any]:
        """Stored values of ``var`` as the user asked for them: multiplied by
        its factor in float64 (as CF's ``scale_factor`` is applied), or as
        they are."""
        import numpy as np

        by = self.scales(var)
        if by is None:
            return values
        with np.errstate(over="ignore", invalid="ignore"):  # inf, NaN: as the product says
            return values.astype(np.float64) * by

    def values_at(self, var: VariableInfo, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.generic]:
        """Values of ``var`` at table rows ``ids`` (a coordinate: at their index
        along its axis), as :meth:`physical` gives them."""
        import numpy as np

        axis = self.table.axis_of(var)
        copied = self._copied(var, ids)
        if copied is not None:
            return self.physical(var, copied)
        if axis is None:
            if var.subarray is not None:
                ids = var.subarray.base_ids(ids)
            return self.physical(var, self._source.gather(var.path, ids))
        along = np.unravel_index(ids, self.table.shape)[axis].astype(np.int64)
        from quarry.formats.subarray import read_view

        return self.physical(var, read_view(self._source, var)[along])

    def _copied(
        self, var: VariableInfo, ids: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.generic] | None:
        """Values of ``var`` at ``ids`` read from the copy's runs, where the
        copy answered exactly those rows and holds ``var``; else None."""
        import numpy as np

        if self._from_copy is None or var.subarray is not None:
            return None
        member, answer = self._from_copy
        if var.path not in member.variables or self.table.axis_of(var) is not None:
            return None
        if ids is not answer.ids and not np.array_equal(ids, answer.ids):
            return None
        values = member.values(var.path, answer)
        return values.astype(var.dtype, copy=False)  # as the file gives them

    def _missing_rows(self, var: VariableInfo, col: _core.Column) -> _core.RowSet:
        rows = self._missing.get(var.key)
        if rows is None:
            with self._reading(var):
                rows = col.missing(self._work.tally)
            self._missing[var.key] = rows
        return rows

    def _reading(self, var: VariableInfo) -> _Reading:
        """Turn the core's report of bad index bytes into an error naming the
        index file, the variable and how to rebuild."""
        return _Reading(self.store, var.path)

    # -- entry points ----------------------------------------------------
    def rows(self, plan: PlanNode) -> _core.RowSet:
        """Rows where the plan is true."""
        through = self._through_copy(plan, rows=True)
        if isinstance(through, _core.RowSet):
            return through
        small = self.small_box(plan)
        if small is not None:
            if small.empty:
                return self._empty()
            return _core.scan_box(*small.spec, self.table.block_len)
        return self.eval(plan, self.part, want_unknown=False)[0]

    def count(self, plan: PlanNode) -> int:
        """Number of rows where the plan is true (:meth:`count_or_box`, its
        box counted)."""
        return counted(self.count_or_box(plan))

    def count_or_box(self, plan: PlanNode) -> int | SmallBox:
        """Number of rows where the plan is true, or the :meth:`small_box`
        that gives it, left to the caller to count (with others: a series'
        small steps, in one call of :func:`quarry._core.count_boxes`) and to
        keep for the query asked again (:mod:`quarry.query.boxes`). A single
        indexed range is counted from per-bin counts plus its checked
        candidates, or in one pass over the column where that is cheaper
        (:meth:`estimate`)."""
        through = self._through_copy(plan, rows=False)
        if isinstance(through, int):
            return through
        small = self.small_box(plan)
        if small is not None:
            return small
        if isinstance(plan, RangeLeaf) and not plan.interval.empty:
            col = self._column(plan.var)
            if col is not None:
                return self._count_by_index(plan, col, choose=True)
            # No index: counted in one pass, no row set made.
            self._note(Access((plan.var.key, plan.interval), "scan"))
            return int(self._scan_counts(plan.var, _single(plan.interval))[0])
        # The copy was weighed above: its rows would cost it more still.
        return len(self.eval(plan, self.part, want_unknown=False)[0])

    def small_box(self, plan: PlanNode) -> SmallBox | None:
        """An AND of ranges of the table's own variables (that no reorganised
        copy answers for less; :meth:`rows` and :meth:`count` weigh it first)
        as the columns and intervals to scan in one pass, where they hold at
        most :data:`SMALL_BOX_VALUES` values in one block (the small steps of
        a long series); None for any other plan, a share of the table, more
        values, several blocks (whose zone maps the index path prunes by), a
        process without NumPy, or an index not yet checked against its source."""
        if (
            not isinstance(plan, AndNode)
            or self.blocks is not None
            or self.table.n_rows > self.table.block_len
            # A scan takes NumPy's arrays: a process that has not imported it (a
            # count at the command line) would pay more for that (~100 ms) than
            # for the index's lookups.
            or not numpy_imported()
        ):
            return None
        leaves = [x for x in plan.items if isinstance(x, RangeLeaf)]
        if (
            len(leaves) < len(plan.items)
            or self.table.n_rows * len(leaves) > SMALL_BOX_VALUES
            or any(
                x.var.subarray is not None or self.table.axis_of(x.var) is not None for x in leaves
            )
            # An index still to be checked against the source is read through
            # the index path, which checks it once and records that for later
            # opens; a scan would leave each of them to check it again.
            or (self.store is not None and not self.store.proven(x.var.path for x in leaves))
        ):
            return None
        self.box_counted(plan)
        intervals = [leaf.interval for leaf in leaves]
        if any(iv.empty for iv in intervals):
            return SmallBox([], intervals)
        return SmallBox([self._values(leaf.var) for leaf in leaves], intervals)

    def box_counted(self, plan: PlanNode) -> None:
        """Note the work of :meth:`small_box`'s ``plan`` (an AND of ranges):
        each range scanned, for :meth:`access` and :meth:`stats`; also where
        a box kept from before counted it (:mod:`quarry.query.boxes`)."""
        assert isinstance(plan, AndNode)
        leaves = [x for x in plan.items if isinstance(x, RangeLeaf)]
        for leaf in leaves:
            self._note(Access((leaf.var.key, leaf.interval), "scan"))
        if not any(leaf.interval.empty for leaf in leaves):  # nothing read, else
            for _ in leaves:
                self._work.scanned(None, self.table.n_rows, self.table.block_len)

    def _count_by_index(self, leaf: RangeLeaf, col: _core.Column, choose: bool = False) -> int:
        """A range's count from its bins' counts and its checked candidates;
        with ``choose``, the candidates found (their bitmaps are all the
        lookup decodes) are weighed against a scan, which counts instead
        where it costs less (noted for :meth:`access`)."""
        iv = leaf.interval
        with self._reading(leaf.var):
            sure, cand = col.count(
                iv.lo, iv.lo_incl, iv.hi, iv.hi_incl, self.blocks, self._work.tally
            )
        if choose:
            estimate = _weighed(len(cand), LOOKUP_COST, self.part_rows())
            path = estimate.choice
            self._note(Access((leaf.var.key, iv), path, estimate))
            if path == "scan":
                return int(self._scan_counts(leaf.var, _single(iv))[0])
        if cand.is_empty():  # the index alone answers: no value read
            return int(sure)
        return int(sure) + len(self._passing(leaf, cand))

    def _scan_counts(self, var: VariableInfo, intervals: Intervals) -> npt.NDArray[np.int64]:
        """Counts of the (non-empty) ``intervals`` in one pass over the column."""
        import numpy as np

        values = self._values(var)
        self._work.scanned(None, len(values), self.table.block_len)
        counts = _core.count_ranges(
            values, intervals.lo, intervals.lo_incl, intervals.hi, intervals.hi_incl
        )
        return counts.astype(np.int64)

    def _cheaper(self, leaf: RangeLeaf, domain: _core.RowSet | None) -> str:
        """``"index"`` or ``"scan"`` for the row set of ``leaf`` within
        ``domain``, as :meth:`estimate` finds it with the rows of the index's
        inside bins to decode; noted in the work done (:meth:`access`)."""
        iv = leaf.interval
        if domain is None:
            estimate = self._whole_estimate(leaf)
        else:
            estimate = self._estimate(leaf.var, 1, _bounds_of(iv), domain)
        if estimate is not None:
            estimate = replace(estimate, index=estimate.index + INSIDE_COST * estimate.inside)
        path = estimate.choice if estimate is not None else "scan"
        self._note(Access((leaf.var.key, iv), path, estimate))
        return path

    def _whole_estimate(self, leaf: RangeLeaf) -> Estimate | None:
        """:meth:`estimate` of one range over every row, made once per
        executor: weighing a copy and then the range itself ask for it."""
        key = (leaf.var.key, leaf.interval)
        if key not in self._whole_estimates:
            bounds = _bounds_of(leaf.interval)
            self._whole_estimates[key] = self._estimate(leaf.var, 1, bounds, None)
        return self._whole_estimates[key]

    def _note(self, access: Access) -> None:
        """Keep how a condition was answered (the last word, per condition)."""
        self._work.access[access.what] = access

    def _through_copy(self, plan: PlanNode, rows: bool) -> int | _core.RowSet | None:
        """The count (or with ``rows`` the rows) of a box, ranges of several
        variables under one AND, from a reorganised copy holding them all,
        where its cost (its boundary bins' rows checked, and with ``rows``
        its whole bins' row numbers read; the first time, its tables read)
        is below the index's and a scan's; None where no copy serves or it
        would cost more."""
        if self._copies is None or self.blocks is not None:
            return None
        leaves = [plan] if isinstance(plan, RangeLeaf) else []
        if isinstance(plan, AndNode) and all(isinstance(x, RangeLeaf) for x in plan.items):
            leaves = [x for x in plan.items if isinstance(x, RangeLeaf)]
        if not leaves or any(
            x.var.subarray is not None or self.table.axis_of(x.var) is not None for x in leaves
        ):
            return None
        box = {leaf.var.path: leaf.interval for leaf in leaves}
        # Opened (and proven fresh) only for a box over its variables: a stale
        # copy refuses the queries it would answer, not those it never could.
        copy = self._copies(box)
        if copy is None:
            return None
        k = copy.holding(box, self.table.n_rows)
        if k is None or len(box) != len(leaves):
            return None
        n_rows = self.table.n_rows
        # A scan and the copy read values, and so NumPy (once per query).
        importing = _importing()
        scan = len(leaves) * (SCAN_COST + n_rows) + importing
        # Weighed before the member's tables are read, so a box the index or
        # a scan answers better never reads them (a small file opened afresh);
        # first against a scan alone, which asks the index nothing (a small step).
        entries = sum(p.table[1] for p in copy.manifest.members[k].parts)
        reading = LOOKUP_COST + importing + (0 if copy.tables_read(k) else TABLES_COST + entries)
        if Estimate(None, scan, scan, reading).choice != "mdbin":
            return None
        index, indexed, reads = 0, False, False
        for leaf in leaves:
            iv = leaf.interval
            if iv.empty:  # no value of its dtype lies in it: nothing to look up
                continue
            one = self._whole_estimate(leaf)
            if one is None:
                index, reads = index + SCAN_COST + n_rows, True
                continue
            indexed = True
            # The index counts one range from its bins' counts, but makes the
            # row set of each range of a box (or of one whose rows are
            # wanted): every row of its inside bins decoded. Each range's
            # costs carry NumPy's import where they read values; the box
            # pays it once, below.
            made = INSIDE_COST * one.inside if rows or len(leaves) > 1 else 0
            by_index = one.index + made - (importing if one.candidates else 0)
            by_scan = one.scan - importing
            reads = reads or bool(one.candidates) or by_scan < by_index
            index += min(by_index, by_scan)
        if reads:
            index += importing
        if Estimate(None, index, scan, reading).choice != "mdbin":
            return None
        member = copy.member_at(k)
        runs = member.runs(box)
        mdbin = reading + runs.boundary_rows * len(box) + (runs.whole_rows if rows else 0)
        estimate = Estimate(runs.boundary_rows, index, scan, mdbin, indexed=indexed)
        if estimate.choice != "mdbin":
            return None
        self._note(
            Access(" && ".join(iv.text(path) for path, iv in box.items()), "mdbin", estimate)
        )
        self._work.rows_checked += runs.boundary_rows
        if not rows:
            return member.count(box, runs)
        answer = member.select(box, runs=runs)
        self._from_copy = (member, answer)
        self._copy_rows = self._from_ids(answer.ids)
        return self._copy_rows

    def access(self) -> list[Access]:
        """How each condition evaluated so far was answered, and why."""
        return list(self._work.access.values())

    def estimate(
        self, var: VariableInfo, intervals: Intervals, domain: _core.RowSet | None = None
    ) -> Estimate | None:
        """The cost of answering ``intervals`` of ``var`` (within ``domain``)
        through its index (each lookup, and every candidate checked) against
        one scan of the column (or of the domain's rows); None where ``var``
        has no index over the table's rows."""
        live = [j for j, empty in enumerate(intervals.empty.tolist()) if not empty]
        parts = (intervals.lo, intervals.lo_incl, intervals.hi, intervals.hi_incl)
        return self._estimate(
            var, len(live), lambda: [[part[j].item() for part in parts] for j in live], domain
        )

    def _estimate(
        self,
        var: VariableInfo,
        n_ranges: int,
        bounds: Callable[[], list[list[Any]]],
        domain: _core.RowSet | None,
    ) -> Estimate | None:
        """:meth:`estimate` of ``n_ranges`` intervals, ``bounds()`` giving them
        as ``[lo, lo_incl, hi, hi_incl]`` where their candidates are counted."""
        col = self._column(var)
        if col is None:
            return None
        rows = len(domain) if domain is not None else self.part_rows()
        lookups = LOOKUP_COST * n_ranges
        alone = _weighed(None, lookups, rows)
        if alone.index > alone.scan:  # the lookups alone cost more than the scan
            return alone
        inside = candidates = 0
        for b in bounds():
            sure, edge = col.range_rows(*b)
            inside, candidates = inside + sure, candidates + edge
        # They lie anywhere in the column: a share or a domain holds its part.
        whole = max(self.table.n_rows, 1)
        candidates, inside = candidates * rows // whole, inside * rows // whole
        return _weighed(candidates, lookups, rows, inside)

    def part_rows(self) -> int:
        """Rows this executor answers for: its share, or the whole table."""
        if self.blocks is None:
            return self.table.n_rows
        start, stop = self._part_rows()
        return max(stop - start, 0)

    def count_ranges(self, var: VariableInfo, intervals: Intervals) -> npt.NDArray[np.int64]:
        """How many rows of ``var`` lie in each of ``intervals`` (of its key
        domain): through the index one interval at a time, or in one pass
        over the column, whichever :meth:`estimate` finds cheaper."""
        import numpy as np

        counts = np.zeros(len(intervals.lo), dtype=np.int64)
        live = ~intervals.empty
        estimate = self.estimate(var, intervals, self.part)
        path = estimate.choice if estimate is not None else "scan"
        self._note(Access(f"{int(np.count_nonzero(live)):,} ranges of {var.key}", path, estimate))
        col = self._column(var)
        if path == "index" and col is not None:
            kind = key_kind(var.dtype)
            for j in np.flatnonzero(live).tolist():
                lo, hi = intervals.lo[j].item(), intervals.hi[j].item()
                iv = Interval(kind, lo, bool(intervals.lo_incl[j]), hi, bool(intervals.hi_incl[j]))
                counts[j] = self._count_by_index(RangeLeaf(var, iv), col)
            return counts
        counts[live] = self._scan_counts(var, Intervals(*(part[live] for part in intervals)))
        return counts

    # -- evaluation ------------------------------------------------------
    def eval(self, node: PlanNode, domain: _core.RowSet | None, want_unknown: bool = True) -> Pair:
        """(true, unknown) rows of ``node`` within ``domain``. Without
        ``want_unknown`` the unknown set may be left empty: a caller that only
        needs true rows (the top of a query, or an AND/OR under one) skips
        decoding NaN bitmaps."""
        match node:
            case RangeLeaf():
                return self._range(node, domain, want_unknown)
            case ScanLeaf():
                return self._scan(node, domain)
            case Const(value=value):
                everything = domain if domain is not None else self._full()
                if value is True:
                    return everything, self._empty()
                if value is None:
                    return self._empty(), everything
                return self._empty(), self._empty()
            case NotNode(operand=x):
                t, u = self.eval(x, domain, want_unknown=True)
                everything = domain if domain is not None else self._full()
                return everything - t - u, u
            case AndNode(items=items):
                ordered, domain = self._prune(items, domain)
                if domain is not None and domain.is_empty():
                    return domain, domain
                return self._and(ordered, domain, want_unknown)
            case OrNode(items=items):
                return self._or(_cheapest_first(items), domain, want_unknown)
        raise TypeError(node)

    def _prune(
        self, items: tuple[PlanNode, ...], domain: _core.RowSet | None
    ) -> tuple[list[PlanNode], _core.RowSet | None]:
        """Zone-map pruning for an AND: blocks where an indexed range is false on
        every row (from its bins' in-block ranges and NaN counts, no bitmap
        read) drop out of the domain; the most selective range goes first."""
        bounds: dict[int, list[int]] = {}
        for i, item in enumerate(items):
            if isinstance(item, RangeLeaf) and not item.interval.empty:
                col = self._column(item.var)
                if col is not None:
                    iv = item.interval
                    bounds[i] = col.block_bounds(iv.lo, iv.lo_incl, iv.hi, iv.hi_incl)
        if not bounds:
            return _cheapest_first(items), domain
        live = [
            all(b[k] > 0 for b in bounds.values()) for k in range(len(next(iter(bounds.values()))))
        ]
        if not all(live):
            self._work.blocks_skipped += live.count(False)
            kept = _core.RowSet.full_blocks(self.table.n_rows, self.table.block_len, live)
            domain = kept if domain is None else domain & kept

        def cost(i: int) -> tuple[int, int]:
            if i in bounds:
                return 0, sum(b for b, keep in zip(bounds[i], live, strict=True) if keep)
            return (1 if isinstance(items[i], RangeLeaf) else 2), 0

        return [items[i] for i in sorted(range(len(items)), key=cost)], domain

    def _and(self, items: list[PlanNode], domain: _core.RowSet | None, want_unknown: bool) -> Pair:
        t, u = self.eval(items[0], domain, want_unknown)
        for item in items[1:]:
            live = t | u
            if live.is_empty():
                break
            t2, u2 = self.eval(item, live, want_unknown)
            t, u = t & t2, (u & (t2 | u2)) | (t & u2)
        return t, u

    def _or(self, items: list[PlanNode], domain: _core.RowSet | None, want_unknown: bool) -> Pair:
        t, u = self.eval(items[0], domain, want_unknown)
        for item in items[1:]:
            rest = (domain if domain is not None else self._full()) - t
            if rest.is_empty():
                break
            t2, u2 = self.eval(item, rest, want_unknown)
            t, u = t | t2, (u - t2) | u2
        return t, u

    def _passing(self, leaf: RangeLeaf, cand: _core.RowSet) -> npt.NDArray[np.int64]:
        """Ids of the candidates whose stored value really is inside the interval."""
        import numpy as np

        if cand.is_empty():
            return np.empty(0, dtype=np.int64)
        ids = cand.to_ids()
        self._work.rows_checked += len(ids)
        values = self._source.gather(leaf.var.path, ids)
        return ids[leaf.interval.mask(values)]

    def _range(self, leaf: RangeLeaf, domain: _core.RowSet | None, want_unknown: bool) -> Pair:
        iv = leaf.interval
        # A subarray of the table's own shape is answered by its variable's
        # index; a coordinate (`lat[0:10]` along a table's axis) is laid over
        # the table's rows and scanned, as a whole coordinate is.
        if (
            leaf.var.subarray is not None
            and self.table.axis_of(leaf.var) is None
            and self._base_column(leaf.var) is not None
        ):
            return self._range_of_part(leaf, domain, want_unknown)
        col = self._column(leaf.var)
        if col is not None and not iv.empty and self._cheaper(leaf, domain) == "scan":
            col = None
        elif col is None:
            self._note(Access((leaf.var.key, iv), "scan"))
        if col is None:
            probe = iv if not iv.empty else everything(iv.kind)
            values = self._values(leaf.var)
            t, u = self._scanned(
                lambda _, dom: _core.scan_range(
                    values,
                    probe.lo,
                    probe.lo_incl,
                    probe.hi,
                    probe.hi_incl,
                    self.table.block_len,
                    dom,
                ),
                domain,
            )
            return (t if not iv.empty else self._empty()), u
        u = self._empty()
        if want_unknown:
            missing = self._missing_rows(leaf.var, col)
            u = missing if domain is None else missing & domain
        if iv.empty:
            return self._empty(), u
        with self._reading(leaf.var):
            sure, cand = col.leaf(iv.lo, iv.lo_incl, iv.hi, iv.hi_incl, domain, self._work.tally)
        if cand.is_empty():  # the index alone answers: no value read
            return sure, u
        passing = self._passing(leaf, cand)
        return (sure | self._from_ids(passing) if len(passing) else sure), u

    def _range_of_part(
        self, leaf: RangeLeaf, domain: _core.RowSet | None, want_unknown: bool
    ) -> Pair:
        """A range on a subarray, answered by the whole variable's index: the
        domain's rows map to the variable's rows (or, with no domain, the blocks
        the subarray spans are the domain), hits map back."""
        import numpy as np

        var, iv = leaf.var, leaf.interval
        sub, col = var.subarray, self._base_column(var)
        assert sub is not None and col is not None and self.store is not None
        n_base, block_len = math.prod(sub.base_shape), self.store.block_len
        if domain is None:
            first, stop = sub.base_span()
            live = [
                first // block_len <= b < -(-stop // block_len)
                for b in range(-(-n_base // block_len))
            ]
            base_domain = _core.RowSet.full_blocks(n_base, block_len, live)
        else:
            base_domain = _core.RowSet.from_ids(sub.base_ids(domain.to_ids()), n_base, block_len)

        def back(base: npt.NDArray[np.int64]) -> _core.RowSet:
            return self._from_ids(sub.view_ids(base)[1])

        u = self._empty()
        if want_unknown:
            with self._reading(var):
                u = back((col.missing(self._work.tally) & base_domain).to_ids())
        if iv.empty:
            return self._empty(), u
        with self._reading(var):
            sure, cand = col.leaf(
                iv.lo, iv.lo_incl, iv.hi, iv.hi_incl, base_domain, self._work.tally
            )
        ids = cand.to_ids()
        self._work.rows_checked += len(ids)
        passing = ids[iv.mask(self._source.gather(var.path, ids))] if len(ids) else ids
        hits = np.union1d(sure.to_ids(), passing).astype(np.int64)
        return back(hits), u

    def _scan(self, leaf: ScanLeaf, domain: _core.RowSet | None) -> Pair:
        self._note(Access(f"{to_text(leaf.left)} {leaf.op} {to_text(leaf.right)}", "scan"))
        columns = [self._values(v) for v in leaf.variables]
        slot = {v.key: i for i, v in enumerate(leaf.variables)}
        return self._scanned(
            lambda n_rows, dom: _core.scan_compare(
                columns,
                postfix(leaf.left, slot),
                leaf.op,
                postfix(leaf.right, slot),
                n_rows,
                self.table.block_len,
                dom,
            ),
            domain,
        )


class _Reading:
    """:meth:`Executor._reading`: a class, not a generator, as it wraps every
    index call (a context manager made of a generator costs several times
    more, once per member of a series)."""

    __slots__ = ("path", "store")

    def __init__(self, store: IndexStore | None, path: str) -> None:
        self.store = store
        self.path = path

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if isinstance(exc, _core.CorruptBlockError):
            assert self.store is not None
            raise self.store.damaged(self.path, exc) from None


def numpy_imported() -> bool:
    """Whether this process has imported NumPy (see :func:`_importing`)."""
    return "numpy" in sys.modules


def _importing() -> int:
    """What reading values costs first: :data:`IMPORT_COST` while NumPy is
    not yet imported, else nothing."""
    return 0 if numpy_imported() else IMPORT_COST


def _weighed(candidates: int | None, lookups: int, rows: int, inside: int = 0) -> Estimate:
    """The :class:`Estimate` of ``lookups`` and ``candidates`` checked
    against a scan of ``rows``, each with NumPy's import where it reads
    values (:func:`_importing`)."""
    importing = _importing()
    checking = CHECK_COST * candidates + importing if candidates else 0
    return Estimate(candidates, lookups + checking, SCAN_COST + rows + importing, inside=inside)


def _bounds_of(iv: Interval) -> Callable[[], list[list[Any]]]:
    """One interval's bounds as :meth:`Executor._estimate` asks for them."""
    return lambda: [[iv.lo, iv.lo_incl, iv.hi, iv.hi_incl]]


def _single(iv: Interval) -> Intervals:
    """One interval as the arrays :meth:`Executor.count_ranges` takes."""
    import numpy as np

    from quarry.expr.keys import KEY_DTYPES

    bounds = np.array([iv.lo, iv.hi], dtype=KEY_DTYPES[iv.kind])
    flags = np.array([iv.lo_incl, iv.hi_incl, iv.empty])
    return Intervals(bounds[:1], flags[:1], bounds[1:], flags[1:2], flags[2:])


def _cheapest_first(items: tuple[PlanNode, ...]) -> list[PlanNode]:
    """Index lookups before scans, so scans see the smallest domain."""
    return sorted(items, key=lambda n: 0 if isinstance(n, RangeLeaf) else 1)
