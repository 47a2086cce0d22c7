"""Runners: who answers a query's selections, chosen by the caller.

A query's answer is one :class:`~quarry.query.Selection` per table it runs
over (one per member of a series). A runner answers them now, so that what
is read afterwards (counts, rows, values) is already there:

- :class:`Local` answers in this process, on ``jobs`` threads, optionally
  reporting progress as each run of blocks is done (a progress bar's
  ``update``);
- :class:`Mpi` answers with every rank of an MPI communicator, each on its
  *share*: the selections' blocks laid end to end and cut into contiguous
  runs (:func:`quarry.parallel.mpi.share`), so each rank reads one stretch of
  data. Counts are summed on every rank; rows travel to the root as compact
  Roaring bitmaps, with the values each rank read at its own hits.

Both leave the selections answering exactly as a serial run's would; each
is a :class:`quarry.query.selection.Runner`. The library and the command
line call the same runners
(:meth:`quarry.Series.query`, :meth:`quarry.SeriesSelection.answer`,
:meth:`quarry.Selection.answer`).

Examples
--------
>>> import quarry, h5py, numpy as np, tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "r.h5")
>>> with h5py.File(path, "w") as f:
...     for s in range(2):
...         f[f"Step#{s}/e"] = np.arange(100.0) + s
>>> done = []
>>> with quarry.open_series(path) as series:
...     sel = series.query("e >= 90", runner=Local(jobs=1, progress=done.append))
...     sel.counts(), sum(done)
([10, 11], 200)
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from quarry import _core
from quarry.errors import ParallelError
from quarry.parallel.mpi import share
from quarry.pool import threads
from quarry.records import record

T = TypeVar("T")

if TYPE_CHECKING:
    from quarry.query.selection import Selection


@record
class Local:
    """Answer in this process on ``jobs`` threads (None: as each dataset
    asks, see :func:`quarry.open`), calling ``progress`` with the rows
    answered after each run of blocks."""

    jobs: int | None = None
    progress: Callable[[int], object] | None = None

    def answer(
        self, selections: Sequence[Selection], rows: bool = False, names: Sequence[str] = ()
    ) -> bool:
        pending = [s for s in selections if s.plan is not None]
        if self.jobs is None:
            _answer_here(pending, rows, names, self.progress)
        else:
            with threads(self.jobs):
                _answer_here(pending, rows, names, self.progress)
        return True

    def count_members(
        self, count: Callable[[int], list[int]], n_members: int, width: int
    ) -> list[list[int]]:
        """Every member's counts, one member after another (``progress``
        is told each member's counts as done)."""
        with threads(self.jobs) if self.jobs is not None else contextlib.nullcontext():
            rows = []
            for i in range(n_members):
                rows.append(count(i))
                if self.progress is not None:
                    self.progress(width)
        return rows


def _answer_here(
    selections: Sequence[Selection],
    rows: bool,
    names: Sequence[str],
    progress: Callable[[int], object] | None,
) -> None:
    for sel in selections:
        if progress is not None:
            sel.evaluate(rows, progress)
        elif rows:
            _ = sel.rows
        else:
            sel.count()
        for name in names:
            sel.values(name)


@record
class Mpi:
    """Answer with every rank of the mpi4py communicator ``comm``, all of
    them calling with the same selections (collective). Counts end up on
    every rank; rows and values on ``root`` only (elsewhere the selections
    are left as they were: read, they answer in that process alone)."""

    comm: Any
    root: int = 0

    def shares(self, selections: Sequence[Selection]) -> list[Selection]:
        """This rank's share of each selection (:meth:`quarry.Selection.share`)."""
        runs = share([n_blocks(s) for s in selections], self.comm.rank, self.comm.size)
        return [s.share(first, stop) for s, (first, stop) in zip(selections, runs, strict=True)]

    def count_members(
        self, count: Callable[[int], list[int]], n_members: int, width: int
    ) -> list[list[int]]:
        """Every member's counts on every rank: each rank counts a contiguous
        run of members, then one ``Allreduce`` sums them. A failure on any
        rank (a read error too) is raised on all of them (the first by
        member; a rank that did not hit it raises
        :class:`~quarry.errors.ParallelError` with the same message, so a
        query's mistake keeps its type and exit code where it was found),
        after they all agree, so none waits on another."""
        import numpy as np

        comm = self.comm
        runs = share([1] * n_members, comm.rank, comm.size)
        local = np.zeros((n_members, width), dtype=np.int64)
        failure: tuple[int, Exception] | None = None
        for i, (first, stop) in enumerate(runs):
            if stop > first:
                try:
                    local[i] = count(i)
                except Exception as exc:  # a read error (OSError) too: none may wait
                    failure = i, exc
                    break
        said = comm.allgather(None if failure is None else (failure[0], str(failure[1])))
        failed = [f for f in said if f is not None]
        if failed:
            member, message = min(failed)
            if failure is not None and failure[0] == member:
                raise failure[1]
            raise ParallelError(message)
        total = np.empty_like(local)
        comm.Allreduce(local, total)
        counts: list[list[int]] = total.tolist()
        return counts

    def answer(
        self, selections: Sequence[Selection], rows: bool = False, names: Sequence[str] = ()
    ) -> bool:
        import numpy as np

        comm = self.comm
        mine = self.shares(selections)
        if not rows:
            counts = together(comm, lambda: np.array([p.count() for p in mine], dtype=np.int64))
            total = np.empty_like(counts)
            comm.Allreduce(counts, total)
            for sel, count in zip(selections, total.tolist(), strict=True):
                sel.set_answer(count=int(count))
            return True
        payload = together(
            comm, lambda: [(p.rows.to_bytes(), {n: p.values(n) for n in names}) for p in mine]
        )
        gathered = comm.gather(payload, root=self.root)
        if comm.rank != self.root:
            return False  # the selections here answer when read, on their own
        for k, sel in enumerate(selections):
            found = [_core.RowSet.from_bytes(rank_parts[k][0]) for rank_parts in gathered]
            whole = found[0]
            for more in found[1:]:
                whole = whole | more
            # Ranks hold contiguous runs in rank order, so their values laid
            # end to end follow the hits' order.
            values = {
                n: np.concatenate([rank_parts[k][1][n] for rank_parts in gathered]) for n in names
            }
            sel.set_answer(rows=whole, values=values)
        return True


def together(comm: Any, work: Callable[[], T]) -> T:
    """``work()`` on this rank, then a word from every rank before any goes
    on to a collective call: where one failed, every rank raises the same
    :class:`~quarry.errors.ParallelError` naming it (from the error itself on
    that rank), so none waits forever on a rank that stopped, and the
    command line says it once, from rank 0."""
    failure: Exception | None = None
    try:
        result = work()
    except Exception as exc:  # a read error (OSError) as much as Quarry's own
        failure = exc
    said = comm.allgather(None if failure is None else str(failure))
    failed = [(rank, message) for rank, message in enumerate(said) if message is not None]
    if failed:
        rank, message = failed[0]
        cause = failure if rank == comm.rank else None
        raise ParallelError(f"rank {rank}: {message}") from cause
    return result


def n_blocks(selection: Selection) -> int:
    """Blocks of the table ``selection`` runs over."""
    table = selection.table
    return -(-table.n_rows // table.block_len)


def rank_path(path: str, rank: int) -> str:
    """The file rank ``rank`` writes its own hits to with ``--out-per-rank``.

    Examples
    --------
    >>> rank_path("hits/halo.h5", 3)
    'hits/halo.rank0003.h5'
    """
    stem, ext = os.path.splitext(path)
    return f"{stem}.rank{rank:04d}{ext}"
