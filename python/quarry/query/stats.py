"""What a query did, as DuckDB's ``EXPLAIN ANALYZE`` shows it: counted where
the work happens (the executor, the core's bitmap decoding, the driver's
reads), so a test can tell an index lookup from a scan and a check of one
bin's rows from a check of a whole block."""

from __future__ import annotations

from typing import TYPE_CHECKING

from quarry import _core
from quarry.records import as_dict, record

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from quarry.expr.plan import Interval
    from quarry.formats.base import Driver, VariableInfo


@record
class QueryStats:
    """The work behind one selection's answers so far.

    Examples
    --------
    >>> import quarry, h5py, numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "s.h5")
    >>> with h5py.File(path, "w") as f:
    ...     _ = f.create_dataset("energy", data=np.linspace(0, 2, 1000))
    >>> with quarry.open(path) as ds:
    ...     _ = ds.build_index()
    ...     sel = ds.query("1.5 < energy < 1.6")   # edges at every 2-digit decimal
    ...     n = sel.count()
    ...     sel.stats()
    QueryStats(rows_checked=0, bitmaps_decoded=0, bytes_read=0, rows_scanned=0, \
blocks_scanned=0, blocks_skipped=0)
    """

    rows_checked: int
    """Candidate rows (of bins straddling a range's end) whose stored values
    were read to check them."""
    bitmaps_decoded: int
    """Roaring bitmaps decoded from the index (bins' rows, missing rows)."""
    bytes_read: int
    """Bytes of values asked of the data file: candidates, scanned columns,
    values at the hits. A memory-mapped column a scan reads counts whole,
    although only the pages of the rows it evaluates are touched."""
    rows_scanned: int
    """Rows a scan evaluated (unindexed variables, arithmetic), summed over
    the comparisons that scanned."""
    blocks_scanned: int
    """Blocks in which a scan evaluated at least one row, summed likewise."""
    blocks_skipped: int
    """Blocks an AND ruled out from its ranges' zone maps (each bin's in-block
    minimum and maximum) before reading any bitmap."""

    def to_dict(self) -> dict[str, int]:
        """The numbers by name, for ``--explain --json``."""
        return as_dict(self)


@record
class Estimate:
    """What answering some ranges of one variable would cost either way, in
    rows of a scan (see :mod:`quarry.query.execute`'s cost constants), and
    the cheaper way: ``"index"`` or ``"scan"``."""

    candidates: int | None
    """Rows in the index's boundary bins, to be checked against values (None:
    not counted, the lookups alone costing more than the scan); for a
    reorganised copy, the rows of its boundary bins."""
    index: int
    scan: int
    mdbin: int | None = None
    """The cost through a reorganised copy, where one holds the variables."""
    inside: int = 0
    """Rows in the index's bins wholly inside the ranges: what making their
    row set decodes (a count of one range reads their bins' counts instead)."""
    indexed: bool = True
    """Whether an index was weighed; where none holds the variables, ``index``
    is a scan's cost and ``--explain`` shows no index."""

    @property
    def choice(self) -> str:
        """The cheapest path; on a tie the index, then a scan."""
        if self.mdbin is not None and self.mdbin < min(self.index, self.scan):
            return "mdbin"
        return "index" if self.index <= self.scan else "scan"


@record
class Access:
    """How one condition of a query was answered: ``"index"``, ``"scan"`` or
    ``"mdbin"``, and the estimate the choice was made on (None: there was no
    index of the variable to weigh, or the condition is arithmetic).

    ``what`` is the condition: its text, or a variable and an interval of
    it, written out only when read (a count over 720 steps notes 720).
    """

    what: str | tuple[str, Interval]
    path: str
    estimate: Estimate | None = None

    @property
    def condition(self) -> str:
        """The condition as ``--explain`` writes it."""
        if isinstance(self.what, str):
            return self.what
        name, interval = self.what
        return interval.text(name)

    def to_dict(self) -> dict[str, object]:
        """For ``--explain --json``'s ``"plan"``."""
        out: dict[str, object] = {"condition": self.condition, "access": self.path}
        if self.estimate is not None:
            out["candidates"] = self.estimate.candidates
            out["index_cost"] = self.estimate.index if self.estimate.indexed else None
            out["scan_cost"] = self.estimate.scan
            if self.estimate.mdbin is not None:
                out["mdbin_cost"] = self.estimate.mdbin
        return out

    def __str__(self) -> str:
        """One line for ``--explain``."""
        why = ""
        e = self.estimate
        if e is not None and e.mdbin is not None:
            index = f"index: cost {e.index:,}" if e.indexed else "no index"
            why = (
                f" (mdbin: {e.candidates:,} boundary rows, cost {e.mdbin:,}; "
                f"{index}; scan: cost {e.scan:,})"
            )
        elif e is not None:
            checks = f"{e.candidates:,} candidate rows" if e.candidates is not None else "lookups"
            why = f" (index: {checks}, cost {e.index:,}; scan: cost {e.scan:,})"
        return f"{self.condition}: {self.path}{why}"


class Work:
    """Running totals of one query's work, shared by the executors answering
    parts of it. Not thread-safe across queries: each query has its own."""

    def __init__(self) -> None:
        self.tally = _core.Tally()
        self.rows_checked = 0
        self.bytes_read = 0
        self.rows_scanned = 0
        self.blocks_scanned = 0
        self.blocks_skipped = 0
        self.access: dict[str | tuple[str, Interval], Access] = {}
        """How each condition was answered, by condition (the last word: a
        condition evaluated by several shares chose once per share)."""

    def scanned(self, domain: _core.RowSet | None, n_rows: int, block_len: int) -> None:
        """Count a scan over ``domain`` (None: every one of ``n_rows`` rows)."""
        if domain is None:
            self.rows_scanned += n_rows
            self.blocks_scanned += -(-n_rows // block_len)
        else:
            self.rows_scanned += len(domain)
            self.blocks_scanned += sum(1 for c in domain.block_counts() if c)

    def snapshot(self) -> QueryStats:
        return QueryStats(
            rows_checked=self.rows_checked,
            bitmaps_decoded=self.tally.bitmaps_decoded,
            bytes_read=self.bytes_read,
            rows_scanned=self.rows_scanned,
            blocks_scanned=self.blocks_scanned,
            blocks_skipped=self.blocks_skipped,
        )


class CountingDriver:
    """A driver that adds the bytes of every read through it to ``work``."""

    def __init__(self, driver: Driver, work: Work) -> None:
        self.driver = driver
        self.work = work
        self.path = driver.path
        self.step_context = driver.step_context

    def variables(self) -> list[VariableInfo]:
        return self.driver.variables()

    def read(self, var: str, start: int, stop: int) -> npt.NDArray[np.generic]:
        values = self.driver.read(var, start, stop)
        self.work.bytes_read += values.nbytes
        return values

    def gather(self, var: str, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.generic]:
        values = self.driver.gather(var, positions)
        self.work.bytes_read += values.nbytes
        return values

    def close(self) -> None:
        self.driver.close()
