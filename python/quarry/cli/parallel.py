"""``quarry query`` under mpiexec: every rank answers its share, rank 0
reports (or each rank writes its own file with ``--out-per-rank``).

A command runs in two parts under MPI. First every rank opens the files and
plans on its own, where a user's mistake shows up on every rank at once;
then :func:`start_work` agrees, in one collective call, that all ranks are
ready. A rank that failed before that point joins the same call from the
error handler (:func:`stop_before_work`), so every rank ends normally with
the serial exit code and rank 0 alone reports. Only an error during the
work itself, which may strike one rank while the others wait for it in a
gather, still aborts the job.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from quarry.cli.options import names as names_of
from quarry.errors import UsageError
from quarry.outputs.json_text import json_text

if TYPE_CHECKING:
    from quarry.query.selection import Selection
    from quarry.query.series import SeriesSelection


class StoppedBeforeWorkError(Exception):
    """Raised on a rank that was ready when another rank failed before the
    work began: it carries the exit code and the line rank 0 prints."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def start_work(args: Any) -> None:
    """Collective under MPI (``args.comm``): every rank is ready to work.
    Raises :class:`StoppedBeforeWorkError` when some rank failed before this;
    afterwards an error is one of the work's own. Does nothing when serial."""
    from quarry.parallel.mpi import agree_to_start

    if args.comm is None or args.work_started:
        return
    args.work_started = True
    failure = agree_to_start(args.comm, None)
    if failure is not None:
        raise StoppedBeforeWorkError(*failure)


def stop_before_work(args: Any, code: int, message: str) -> int | None:
    """From the error handler of a rank that failed with ``message`` (what
    follows ``quarry: ``) and exit ``code``: when the work has not started,
    agree with the other ranks, have rank 0 print the first failure once,
    and return the exit code every rank uses. None when the work had
    started (or the run is serial): the caller reports the error itself."""
    from quarry.parallel.mpi import agree_to_start

    comm = args.comm
    if comm is None or args.work_started:
        return None
    args.work_started = True
    agreed = agree_to_start(comm, (code, message))
    assert agreed is not None  # this rank's own failure is among them
    return report_stop(comm, *agreed)


def report_stop(comm: Any, code: int, message: str) -> int:
    """Rank 0 prints the failure that stopped every rank; all return ``code``."""
    if comm.rank == 0:
        print(f"quarry: {message}", file=sys.stderr, flush=True)
    return code


def shared_answers(
    args: Any, answer: Selection | SeriesSelection, query: str
) -> Sequence[Selection] | None:
    """Answer ``query`` with every rank of ``args.comm`` (collective). Returns the
    selections, answered, on rank 0 for the usual output code to report;
    None where nothing is left to do: on other ranks, and once every rank
    has written its own file with ``--out-per-rank``."""
    from quarry.parallel.runners import Mpi
    from quarry.query.series import SeriesSelection

    comm = args.comm
    names = names_of(args.values, "--values")
    selections = answer.selections if isinstance(answer, SeriesSelection) else [answer]
    if args.out_per_rank:
        if comm is None:
            raise UsageError("--out-per-rank is for runs under mpiexec with several ranks")
        if not args.out or not (args.ids or args.coords or args.values):
            raise UsageError("--out-per-rank needs --out FILE and --ids, --coords or --values")
        start_work(args)
        _write_per_rank(args, comm, answer, query, names)
        return None
    rows = bool(args.ids or args.coords or args.coords_of or args.values or args.save)
    start_work(args)
    if comm.rank == 0:
        from quarry.cli.progress import say_when_unindexed

        say_when_unindexed(args, selections)
    held = Mpi(comm).answer(selections, rows, names)
    return selections if held and comm.rank == 0 else None  # rank 0 reports


def _write_per_rank(
    args: Any, comm: Any, answer: Selection | SeriesSelection, query: str, names: list[str]
) -> None:
    import contextlib
    import os

    from quarry.errors import ParallelError
    from quarry.outputs import write_positions
    from quarry.parallel.runners import Mpi, rank_path, together
    from quarry.query.series import SeriesSelection

    out = rank_path(args.out, comm.rank)

    def write() -> list[Selection]:
        if isinstance(answer, SeriesSelection):
            mine = Mpi(comm).shares(answer.selections)
            SeriesSelection(answer.query, answer.members, mine).extract(out, names)
            return mine
        (part,) = Mpi(comm).shares([answer])
        if names:
            part.extract(out, names)
        else:
            write_positions(out, part.coords() if args.coords else part.ids())
        return [part]

    try:
        mine = together(comm, write)  # a rank that failed stops them all, none waiting
    except ParallelError:
        with contextlib.suppress(OSError):
            os.remove(out)  # no rank's file is left of a run that failed
        raise
    total = comm.reduce(sum(p.count() for p in mine), root=0)
    if comm.rank != 0:
        return
    files = [rank_path(args.out, r) for r in range(comm.size)]
    # Files of an earlier run on more ranks would read back as part of this answer.
    stale = comm.size
    while os.path.exists(rank_path(args.out, stale)):
        os.remove(rank_path(args.out, stale))
        stale += 1
    if args.json:
        print(json_text({"query": query, "count": total, "out": files}))
    else:
        print(f"{total} hit(s) written to {len(files)} files: {files[0]} ... {files[-1]}")
