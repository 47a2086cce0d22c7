"""Reading a reorganised copy: the runs a box query reads, and its exact answer.

A *box* gives some of the copy's variables an :class:`~quarry.expr.plan.Interval`
(in the variable's key domain, as the planner makes them). For each axis,
each 1-D bin is *inside* the box (every value it can hold lies in the
interval: both ends of :meth:`~quarry.reorg.binning.Axis.bounds` do, and the
interval is convex), *outside* (none can) or a *boundary* bin; an axis the
box does not name is inside everywhere, and a NaN bin is outside any
interval (NaN compares unknown). An MDBin is inside when all its axes are,
outside when any is, and a boundary bin otherwise. Consecutive inside bins
of one part are one run of whole rows; consecutive boundary bins are one run
whose rows are filtered by their values. The core finds the runs
(:func:`quarry._core.box_runs`), descending through each part's sorted table
axis by axis, so the work follows what the box touches, not the table's
length. Ids come from the copy's ``rows`` column, so answers are the
source's row numbers, in ascending order.
"""

from __future__ import annotations

import mmap
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from quarry._core import box_runs
from quarry.errors import CorruptCopyError, ReorgError, StaleCopyError
from quarry.records import record
from quarry.reorg.binning import mdbin_strides
from quarry.reorg.layout import (
    ROWS,
    MemberLayout,
    column_dtype,
    crc32,
    rows_dtype,
)
from quarry.reorg.locate import find_copy
from quarry.reorg.manifest import MemberEntry
from quarry.reorg.store import CopyFile, check_fresh, mend_for, read_copy

if TYPE_CHECKING:
    import numpy.typing as npt

    from quarry.expr.plan import Interval
    from quarry.formats.base import Driver

#: Which end of equal values a binary search stops at.
Side = Literal["left", "right"]

#: A 1-D bin's state, as the core's box_runs reads it.
INSIDE, BOUNDARY, OUTSIDE = 2, 1, 0


@record
class Runs:
    """What a box reads: ``whole`` runs (every row a hit) and ``boundary``
    runs (rows to filter), each an ``(n, 3)`` array of ``(part, offset,
    length)``, offset counted from the part's first row."""

    whole: npt.NDArray[np.int64]
    boundary: npt.NDArray[np.int64]

    @property
    def whole_rows(self) -> int:
        return int(self.whole[:, 2].sum())

    @property
    def boundary_rows(self) -> int:
        return int(self.boundary[:, 2].sum())


@record
class Answer:
    """The rows a box selects (source row numbers, ascending) and the values
    of the variables asked for at those rows, in the same order. Where the
    hits lie in the copy: its ``whole`` runs and the boundary rows that
    passed (``passed``, the copy's rows), read in that order, then put in
    ascending source row order by ``order``."""

    ids: npt.NDArray[np.int64]
    values: dict[str, npt.NDArray[Any]]
    whole: npt.NDArray[np.int64]
    passed: npt.NDArray[np.int64]
    order: npt.NDArray[np.intp]
    blocks: npt.NDArray[np.int64]
    """The copy's blocks (of ``check_rows`` rows) that ``whole`` and ``passed`` touch."""


#: No runs of whole bins.
_NO_RUNS = np.zeros((0, 3), np.int64)


class MemberCopy:
    """One reorganised table of a copy; see the module notes."""

    def __init__(self, path: str, layout: MemberLayout, file: CopyFile) -> None:
        self.path = path
        # The copy as opened: a copy rebuilt since (renamed over it) leaves
        # this one readable, whole and consistent with its manifest.
        self._file = file
        self.entry: MemberEntry = layout.entry
        self._layout = layout
        self._firsts = np.array([p.first for p in self.entry.parts], np.int64)
        # Each part's (first, count) table entries, and where each entry's bin ends in its part.
        counts = np.array([p.table[1] for p in self.entry.parts], np.int64)
        self._tables = [p.table for p in self.entry.parts]
        self._ends = np.empty_like(layout.starts)
        self._ends[:-1] = layout.starts[1:]
        lasts = np.cumsum(counts)[counts > 0] - 1
        self._ends[lasts] = np.array([p.rows for p in self.entry.parts if p.table[1]], np.int64)
        self._strides = mdbin_strides(list(self.entry.axes))
        self._mapped: dict[str, npt.NDArray[Any]] = {}
        # Blocks of check_rows rows counted from each part's first: each
        # part's first block, each block's part, and which were checked.
        per_part = [-(-p.rows // layout.check_rows) for p in self.entry.parts]
        self._block_first = np.cumsum([0, *per_part])[:-1].astype(np.int64)
        self._block_part = np.repeat(np.arange(len(per_part), dtype=np.int64), per_part)
        self._checked: dict[str, npt.NDArray[np.bool_]] = {}
        # Each axis' bins' (low, high), made at the first query: every box asks for them.
        self._bounds: list[tuple[npt.NDArray[Any], npt.NDArray[Any]]] | None = None

    @property
    def variables(self) -> list[str]:
        """The reorganised variables (full paths), in MDBin order."""
        return self.entry.variables

    def column(self, name: str) -> npt.NDArray[Any]:
        """The clustered values of variable ``name`` (or ``"rows"``, the
        source row of each), memory-mapped (once: a query reads several)."""
        mapped = self._mapped.get(name)
        if mapped is None:
            mapped = self._mapped[name] = self._map(name)
        return mapped

    def _map(self, name: str) -> npt.NDArray[Any]:
        if name == ROWS:
            k, dtype = len(self.entry.axes), rows_dtype(self.entry.rows)
        else:
            k = self._axis(name)
            dtype = column_dtype(self.entry.axes[k])
        offset = self._layout.columns[k]
        if offset is None or not self.entry.rows:
            return np.zeros(0, dtype)
        # A plain array over the mapping: slicing it makes no memmap objects.
        start = offset - offset % mmap.ALLOCATIONGRANULARITY
        length = offset - start + self.entry.rows * dtype.itemsize
        mapped = mmap.mmap(self._file.fileno(), length, access=mmap.ACCESS_READ, offset=start)
        return np.frombuffer(mapped, dtype, self.entry.rows, offset - start)

    def _axis(self, name: str) -> int:
        for k, axis in enumerate(self.entry.axes):
            if axis.path == name:
                return k
        raise ReorgError(
            f"the reorganised copy {self.path} holds {', '.join(self.variables)}, not {name}"
        )

    def _states(self, box: Mapping[str, Interval]) -> list[npt.NDArray[np.uint8]]:
        """Per axis, whether each of its 1-D bins is inside, outside or on the
        box. Bins are ordered, so each state is one range of them, found by
        binary search in the bins' bounds: those outside below, those inside,
        those outside above."""
        for name in box:
            self._axis(name)  # every named variable must be in the copy
        if self._bounds is None:
            self._bounds = [_ordered(*axis.bounds()) for axis in self.entry.axes]
        states = []
        for axis, (low, high) in zip(self.entry.axes, self._bounds, strict=True):
            interval = box.get(axis.path)
            state = np.full(axis.slots, INSIDE if interval is None else OUTSIDE, np.uint8)
            if interval is None or interval.empty:
                states.append(state)
                continue
            if interval.kind != axis.kind:
                raise ReorgError(
                    f"{axis.path} is compared as {axis.kind}, not {interval.kind} as given"
                )
            lo_side: Side = "left" if interval.lo_incl else "right"
            hi_side: Side = "right" if interval.hi_incl else "left"
            # Bins [below, above) are not outside; bins [first, last) lie inside.
            below = int(np.searchsorted(high, interval.lo, lo_side))
            above = int(np.searchsorted(low, interval.hi, hi_side))
            first = int(np.searchsorted(low, interval.lo, lo_side))
            last = int(np.searchsorted(high, interval.hi, hi_side))
            state[below:above] = BOUNDARY
            state[first:last] = INSIDE
            states.append(state)
        return states

    def runs(self, box: Mapping[str, Interval]) -> Runs:
        """The runs of whole bins inside ``box`` and of boundary bins to filter.

        Examples
        --------
        >>> import h5py, numpy as np, tempfile, os
        >>> from quarry.formats.hdf5 import HDF5Driver
        >>> from quarry.expr.plan import Interval
        >>> from quarry.reorg.binning import Binning
        >>> from quarry.reorg.build import MemberPlan, reorganize
        >>> from quarry.reorg import open_copy
        >>> file = os.path.join(tempfile.mkdtemp(), "r.h5")
        >>> with h5py.File(file, "w") as f:
        ...     f["x"] = np.arange(8.0)
        >>> drv = HDF5Driver(file)
        >>> plan = MemberPlan("m0", None, None, tuple(drv.variables()))
        >>> _ = reorganize(drv, [plan], file + ".qmd", Binning.of(1, 2.0, None))
        >>> member = open_copy(file).members[0]
        >>> runs = member.runs({"/x": Interval("f64", 2.0, True, 5.5, False)})
        >>> runs.whole.tolist(), runs.boundary.tolist()
        ([[0, 2, 2]], [[0, 4, 2]])
        >>> member.select({"/x": Interval("f64", 2.0, True, 5.5, False)}).ids.tolist()
        [2, 3, 4, 5]
        >>> drv.close()
        """
        layout = self._layout
        whole, boundary = box_runs(
            layout.bins, layout.starts, self._ends, self._tables, self._strides, self._states(box)
        )
        return Runs(whole, boundary)

    def positions(self, runs: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The copy's rows that ``(part, offset, length)`` runs cover, in order."""
        if not len(runs):
            return np.zeros(0, np.int64)
        begins = self._firsts[runs[:, 0]] + runs[:, 1]
        lengths = runs[:, 2]
        before = np.cumsum(lengths) - lengths
        return np.repeat(begins - before, lengths) + np.arange(int(lengths.sum()), dtype=np.int64)

    def _passing(
        self, box: Mapping[str, Interval], runs: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.int64]:
        """The copy's rows of boundary ``runs`` whose values lie in the box."""
        candidates = self.positions(runs)
        if len(candidates):
            keep = np.ones(len(candidates), bool)
            blocks = self._blocks(_NO_RUNS, candidates)
            for name, interval in box.items():
                column = self._checked_column(name, blocks)
                keep &= interval.mask(np.asarray(column[candidates]))
            candidates = candidates[keep]
        return candidates

    def count(self, box: Mapping[str, Interval], runs: Runs | None = None) -> int:
        """How many rows lie in ``box``: every row of its whole runs, and the
        boundary runs' rows that pass (``runs``: :meth:`runs` of the box)."""
        runs = runs if runs is not None else self.runs(box)
        return runs.whole_rows + len(self._passing(box, runs.boundary))

    def select(
        self, box: Mapping[str, Interval], names: Sequence[str] = (), runs: Runs | None = None
    ) -> Answer:
        """The exact answer of ``box`` from the copy: the source rows where every
        named variable lies in its interval, ascending, and the values of
        ``names`` (variables of the copy) there (see :meth:`values`)."""
        runs = runs if runs is not None else self.runs(box)
        passed = self._passing(box, runs.boundary)
        blocks = self._blocks(runs.whole, passed)
        ids = self._in_copy_order(ROWS, runs.whole, passed, blocks).astype(np.int64, copy=False)
        order = np.argsort(ids, kind="stable")
        answer = Answer(self._checked_rows(ids[order]), {}, runs.whole, passed, order, blocks)
        for name in names:
            answer.values[name] = self.values(name, answer)
        return answer

    def _checked_rows(self, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """``ids``, sorted source rows read from the copy, refused where they
        cannot be a table's rows (one row twice, or past the table): the
        copy's ``rows`` column is damaged. O(hits), unlike its CRCs."""
        if len(ids) and (
            ids[0] < 0 or ids[-1] >= self.entry.rows or not bool(np.all(ids[1:] > ids[:-1]))
        ):
            raise CorruptCopyError(
                f"the reorganised copy {self.path} is damaged: the row numbers of "
                f"{self.entry.group or 'its table'} are not those of a table of "
                f"{self.entry.rows} rows; {self._layout.mend}"
            )
        return ids

    def values(self, name: str, answer: Answer) -> npt.NDArray[Any]:
        """The values of variable ``name`` of the copy at ``answer``'s hits, in
        its order (ascending source row): its whole runs read as contiguous
        slices of the copy, not gathered from the source row by row.

        Examples
        --------
        >>> import h5py, numpy as np, tempfile, os
        >>> from quarry.formats.hdf5 import HDF5Driver
        >>> from quarry.expr.plan import Interval
        >>> from quarry.reorg.binning import Binning
        >>> from quarry.reorg.build import MemberPlan, reorganize
        >>> from quarry.reorg import open_copy
        >>> file = os.path.join(tempfile.mkdtemp(), "v.h5")
        >>> with h5py.File(file, "w") as f:
        ...     f["x"], f["y"] = np.array([5.0, 1.0, 4.0, 2.0]), np.array([1, 2, 3, 4], "i2")
        >>> drv = HDF5Driver(file)
        >>> plan = MemberPlan("m0", None, None, tuple(drv.variables()))
        >>> _ = reorganize(drv, [plan], file + ".qmd", Binning.of(2, 2.0, None))
        >>> member = open_copy(file).members[0]
        >>> answer = member.select({"/x": Interval("f64", 1.5, True, 5.0, True)})
        >>> answer.ids.tolist(), member.values("/y", answer).tolist()
        ([0, 2, 3], [1, 3, 4])
        >>> drv.close()
        """
        return self._in_copy_order(name, answer.whole, answer.passed, answer.blocks)[answer.order]

    def _in_copy_order(
        self,
        name: str,
        whole: npt.NDArray[np.int64],
        passed: npt.NDArray[np.int64],
        blocks: npt.NDArray[np.int64],
    ) -> npt.NDArray[Any]:
        """Column ``name`` over the ``whole`` runs (each one slice of the
        copy), then at the copy's rows ``passed`` (``blocks``: those they touch)."""
        column = self._checked_column(name, blocks)
        begins = (self._firsts[whole[:, 0]] + whole[:, 1]).tolist()
        pieces = [column[a : a + n] for a, n in zip(begins, whole[:, 2].tolist(), strict=True)]
        pieces.append(column[passed])
        return np.concatenate(pieces)

    def _blocks(
        self, whole: npt.NDArray[np.int64], rows: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.int64]:
        """The blocks (of ``check_rows`` rows, counted from each part's first)
        that the ``(part, offset, length)`` runs ``whole`` and the copy's
        ``rows`` touch, ascending."""
        size = self._layout.check_rows
        parts = np.searchsorted(self._firsts, rows, side="right") - 1
        touched = [self._block_first[parts] + (rows - self._firsts[parts]) // size]
        if len(whole):
            part, offset, length = whole[:, 0], whole[:, 1], whole[:, 2]
            low = self._block_first[part] + offset // size
            count = (offset + length - 1) // size - offset // size + 1
            before = np.cumsum(count) - count
            touched.append(np.repeat(low - before, count) + np.arange(int(count.sum())))
        return np.unique(np.concatenate(touched))

    def blocks_match(self, k: int, part: int, column: npt.NDArray[Any]) -> bool:
        """Whether every block of part ``part`` of ``column`` (column ``k``;
        the rows: ``len(axes)``) has the CRC-32 recorded for it."""
        first = int(self._block_first[part])
        count = -(-self.entry.parts[part].rows // self._layout.check_rows)
        return all(self._block_intact(k, b, column) for b in range(first, first + count))

    def _block_intact(self, k: int, block: int, column: npt.NDArray[Any]) -> bool:
        """Whether ``block`` of ``column`` (column ``k``) has its recorded CRC-32."""
        start, stop = self._block_rows(block)
        return bool(
            crc32(np.ascontiguousarray(column[start:stop])) == self._layout.blocks[k, block]
        )

    def _block_rows(self, block: int) -> tuple[int, int]:
        """The copy's rows ``[start, stop)`` that ``block`` covers."""
        owner = int(self._block_part[block])
        first = int(self._firsts[owner])
        start = first + (block - int(self._block_first[owner])) * self._layout.check_rows
        return start, min(start + self._layout.check_rows, first + self.entry.parts[owner].rows)

    def _checked_column(self, name: str, blocks: npt.NDArray[np.int64]) -> npt.NDArray[Any]:
        """:meth:`column` ``name``, its ``blocks`` checked against their
        CRC-32s first (each block once while the copy is open), so damaged
        bytes are an error, never a wrong answer."""
        checked = self._checked.get(name)
        if checked is None:
            checked = self._checked[name] = np.zeros(len(self._block_part), bool)
        column = self.column(name)
        todo = blocks[~checked[blocks]]
        if len(todo):
            k = len(self.entry.axes) if name == ROWS else self._axis(name)
            for block in todo.tolist():
                if not self._block_intact(k, block, column):
                    start, stop = self._block_rows(block)
                    raise CorruptCopyError(
                        f"the reorganised copy {self.path} is damaged: {name} of "
                        f"{self.entry.group or 'its table'}, rows {start} to {stop - 1}; "
                        f"{self._layout.mend}"
                    )
            checked[todo] = True
        return column


def _ordered(
    low: npt.NDArray[Any], high: npt.NDArray[Any]
) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """An axis' bin bounds made ascending, for binary search: a first bin
    left empty by rounding has the least value as its low above the next
    bin's, and a last bin its high below the one before. Every value lies
    in ``[low[0], high[-1]]``, so each bin's bounds narrow to the greatest
    low and the least high at or beside it, and still hold its values.

    Examples
    --------
    >>> import numpy as np
    >>> [b.tolist() for b in _ordered(np.array([5.0, 4.0, 6.0]), np.array([3.9, 5.9, 5.5]))]
    [[5.0, 5.0, 6.0], [3.9, 5.5, 5.5]]
    """
    import numpy as np

    return np.maximum.accumulate(low), np.minimum.accumulate(high[::-1])[::-1]


def describe_copy(source: str, index: str | None = None) -> dict[str, Any] | None:
    """What ``quarry info`` says of the reorganised copy of ``source``: where
    it is, whether it is ``fresh``, ``stale`` (the file was written since;
    ``error`` says what changed and the command that builds it again) or
    ``damaged`` (``error`` says where), and per table its variables and bins;
    None where there is none. The source is read only where its stat cannot
    prove the copy fresh (its times moved, not its size or mtime): then the
    CRC-32s of the variables as reorganised tell, as a query's check does,
    and a match is recorded so the next open trusts the stat.

    Examples
    --------
    >>> import quarry, h5py, numpy as np, tempfile, os
    >>> file = os.path.join(tempfile.mkdtemp(), "d.h5")
    >>> with h5py.File(file, "w") as f:
    ...     f["x"] = np.arange(10.0)
    >>> describe_copy(file) is None
    True
    >>> with quarry.open(file) as ds:
    ...     _ = ds.reorganize(["x"], bin_size=5.0)
    >>> info = describe_copy(file)
    >>> info["tables"][0]["variables"], info["state"]
    ([{'path': '/x', 'bin_size': 5.0, 'bins': 2, 'nan_bin': False}], 'fresh')
    """
    import os

    from quarry.errors import CorruptIndexError

    path = find_copy(source, index)
    if not os.path.exists(path):
        return None
    out: dict[str, Any] = {"path": path, "bytes": os.path.getsize(path)}
    try:
        copy = read_copy(path, mend_for(source, path))
        manifest = copy.manifest
        copy.mend = mend_for(source, path, manifest)
        _ = copy.members  # every member's tables read and checked
    except (CorruptIndexError, OSError) as exc:
        return {**out, "state": "damaged", "error": str(exc)}
    try:
        check_fresh(source, path, manifest, None)
        state: dict[str, Any] = {"state": "fresh"}
    except StaleCopyError as exc:
        state = {"state": "stale", "error": str(exc)}
    tables = [
        {
            "step": m.step,
            "group": m.group,
            "rows": m.rows,
            "parts": len(m.parts),
            "variables": [
                {"path": a.path, "bin_size": a.size, "bins": a.count, "nan_bin": a.nan_bin}
                for a in m.axes
            ],
        }
        for m in manifest.members
    ]
    return {**out, **state, "tables": tables}


@record(frozen=False)
class CopyCheck:
    """What :func:`check_copy` found of the reorganised copy at ``path``:
    each source variable whose values changed since it was reorganised
    (``changed``: the parts that differ), each damaged piece of the copy
    itself (``damaged``: a column's part, or the checksums of its blocks),
    the error that kept its manifest or offset tables from being read
    (``unreadable``), and the command that builds it again (``rebuild``)."""

    path: str
    changed: list[str]
    damaged: list[str]
    rebuild: str
    unreadable: str | None = None

    @property
    def ok(self) -> bool:
        return not self.changed and not self.damaged and self.unreadable is None

    def summary(self) -> str:
        """The copy's part of ``quarry verify``'s line for its file."""
        if self.ok:
            return f"its reorganised copy {self.path} matches"
        said = [f"stale, the file changed since: {'; '.join(self.changed)}"] * bool(self.changed)
        said += [f"damaged at {'; '.join(self.damaged)}"] * bool(self.damaged)
        if self.unreadable is not None:  # it names the copy and the command itself
            return self.unreadable if not said else f"{self.unreadable}; it is also {said[0]}"
        return (
            f"its reorganised copy {self.path} is {' and '.join(said)}; "
            f"build it again with: {self.rebuild}"
        )


def check_copy(source: str, path: str, driver: Driver | None = None) -> CopyCheck:
    """Check the copy at ``path`` of ``source`` whole, as ``quarry verify``
    does: every part of every variable read from the source (through
    ``driver``, default the file opened by its format's) against the CRC-32 the
    build recorded, and every part of every column of the copy against its
    own. When all match, the source's stat is recorded as checked, so a copy
    refused only because its file's times moved answers again.

    Examples
    --------
    >>> import quarry, h5py, numpy as np, tempfile, os
    >>> file = os.path.join(tempfile.mkdtemp(), "c.h5")
    >>> with h5py.File(file, "w") as f:
    ...     f["x"] = np.arange(10.0)
    >>> with quarry.open(file) as ds:
    ...     _ = ds.reorganize(["x"], bin_size=5.0)
    >>> check_copy(file, file + ".qmd").ok
    True
    >>> with h5py.File(file + ".qmd", "r+") as f:
    ...     f["m0/columns/0"][3] = -1.0
    >>> check_copy(file, file + ".qmd").damaged
    ['/x, part 0 (rows 0 to 9)']
    """
    import time

    from quarry.errors import CorruptIndexError
    from quarry.formats.base import fingerprint
    from quarry.index.fresh import record_checked
    from quarry.reorg.store import changed_parts, described_again, fresh, rebuild_command

    before = fingerprint(source)
    read_ns = time.time_ns()
    try:
        copy = read_copy(path, mend_for(source, path))
    except (CorruptIndexError, OSError) as exc:
        return CopyCheck(path, [], [], rebuild_command(source, path, None), str(exc))
    manifest = copy.manifest
    copy.mend = mend_for(source, path, manifest)
    check = CopyCheck(path, [], [], rebuild_command(source, path, manifest))
    if described_again(source, path, manifest):
        check.changed.append(f"the description of {source} (quarry register)")
    else:
        check.changed.extend(changed_parts(source, manifest, driver))
    try:
        check.damaged.extend(_damaged_parts(copy.members))
    except CorruptIndexError as exc:  # its offset tables
        check.unreadable = str(exc)
    if check.ok and not fresh(source, path, manifest) and fingerprint(source) == before:
        record_checked(path, before, read_ns, frozenset({"copy"}))
    return check


def _damaged_parts(members: Sequence[MemberCopy]) -> list[str]:
    """Each part of each column (and of ``rows``) whose CRC-32 is not the
    one its build recorded, with the rows of its table it holds; or, the
    part being whole, whose blocks' checksums (those a query checks) are not
    its blocks'."""
    damaged = []
    for member in members:
        names = [*member.variables, ROWS]
        for k, name in enumerate(names):
            column = member.column(name)
            group = member.entry.group or "the table"
            what = f"the row numbers of {group}" if name == ROWS else name
            for i, part in enumerate(member.entry.parts):
                values = np.ascontiguousarray(column[part.first : part.first + part.rows])
                rows = f"part {i} (rows {part.first} to {part.first + part.rows - 1})"
                if crc32(values) != part.copy_crc32[k]:
                    damaged.append(f"{what}, {rows}")
                elif not member.blocks_match(k, i, column):
                    damaged.append(f"the block checksums of {what}, {rows}")
    return damaged
