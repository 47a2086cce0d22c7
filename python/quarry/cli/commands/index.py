"""``quarry index FILE... [--vars a,b] [--bins N] [--force] ...``: build the
index of a file, or one per file of many (also under mpiexec)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from quarry.cli import options, render
from quarry.outputs.json_text import json_text

if TYPE_CHECKING:
    from quarry.index.maintain import IndexReport


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``quarry index``."""
    options.add_files(parser)
    parser.add_argument("--vars", help="comma-separated variables (default: every numeric one)")
    parser.add_argument("--bins", type=int, help="equal-weight bins per variable (default 1024)")
    parser.add_argument(
        "--precision",
        type=int,
        help="also put bin edges at every decimal with this many significant digits, so "
        "ranges on typed literals need no check (default 2; 0: off)",
    )
    parser.add_argument(
        "--block-size",
        type=int,
        dest="block_len",
        help="rows per block, the unit of parallel work (default 1048576)",
    )
    parser.add_argument(
        "--derive",
        action="append",
        metavar="NAME=EXPR",
        help='index a computed variable too, e.g. --derive "r=sqrt(x**2 + y**2)" '
        "(repeatable; made in every group holding its inputs)",
    )
    options.add_json(parser, "print a JSON summary")
    options.add_quiet(parser)
    parser.add_argument(
        "--force",
        action="store_true",
        help="rebuild indexes that are up to date too (otherwise they are skipped)",
    )
    parser.add_argument(
        "--ranks-per-file",
        type=options.count,
        metavar="G",
        help="under mpiexec: ranks that build each file's index together "
        "(default: the ranks shared evenly over the files)",
    )
    options.add_index(parser)
    options.add_jobs(parser)
    from quarry.cli.commands import index_follow

    index_follow.add_arguments(parser)


def _check_derivations(texts: list[str]) -> None:
    """Each ``--derive`` read now: one of the wrong form (``1z=x``, an
    aggregate) is a usage error, before any file is opened (and, under
    mpiexec, said once)."""
    from quarry.errors import DerivationError, UsageError
    from quarry.index.derived import Derivation

    for text in texts:
        try:
            Derivation.parse(text)
        except DerivationError as exc:
            raise UsageError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    """One code path for one file and many: the files as a series, each
    file's index built (or kept) by :meth:`quarry.Series.build_indexes`;
    under MPI (``args.comm``) the ranks share the files out. One plain file
    is reported as itself, several with a line per file and the totals."""
    import contextlib

    import quarry
    from quarry.cli.parallel import start_work
    from quarry.cli.progress import progress_bar
    from quarry.errors import QuarryError

    if args.follow:
        from quarry.cli.commands.index_follow import run_follow

        return run_follow(args)
    _check_derivations(args.derive or [])
    start = time.perf_counter()
    reports: list[IndexReport] = []
    comm = args.comm
    one_file = not options.many(args.files) and comm is None
    # Under MPI, rank 0 speaks for all: its progress bars, and every rank's
    # reports gathered at the end (a rank prints nothing while others work).
    speaks = comm is None or comm.rank == 0
    failure: str | None = None
    with contextlib.ExitStack() as bars, quarry.open_series(args.files, index=args.index) as series:

        def progress(file: str, rows: int) -> Any:
            quiet = args.quiet or not speaks
            what = "indexing" if one_file else f"indexing {file}"
            return bars.enter_context(progress_bar(rows, what, quiet))

        start_work(args)  # under MPI: every rank found its files
        try:
            for report in series.build_indexes(
                options.names(args.vars, "--vars") if args.vars else None,
                bins=args.bins,
                precision=args.precision,
                block_len=args.block_len,
                force=args.force,
                progress=progress,
                derive=args.derive,
                comm=comm,
                ranks_per_file=args.ranks_per_file,
            ):
                bars.close()  # this file's progress bar
                reports.append(report)
                if comm is None and not args.json and not one_file:
                    print(render.index_report_line(report))
        except QuarryError as exc:
            if comm is None:
                raise
            failure = str(exc)
    if one_file:
        return _report_one(args, reports[0], time.perf_counter() - start)
    if comm is not None:
        reports, failures = _gather_reports(comm, reports, failure, series.files)
        if not speaks:
            return 1 if failures else 0
        if not args.json:
            for report in reports:
                print(render.index_report_line(report))
        for why in failures:
            print(f"quarry: error: {why}", file=sys.stderr)
        if failures:
            return 1
    elapsed = time.perf_counter() - start
    if args.json:
        print(json_text(render.indexes_result(reports, elapsed)))
    else:
        built = sum(r.status == "built" for r in reports)
        print(f"{len(reports)} file(s): {built} indexed, {len(reports) - built} up to date")
    return 0


def _report_one(args: argparse.Namespace, report: IndexReport, elapsed: float) -> int:
    """One file's build, or that its index was up to date, as ``quarry index FILE`` says it."""
    if report.status == "built":
        if args.json:
            result = render.index_result(report.index, report.variables, report.bytes, elapsed)
            print(json_text(result))
        else:
            print(
                render.built_line(
                    report.file, len(report.variables), elapsed, report.index, report.bytes
                )
            )
        return 0
    if args.json:
        result = render.index_result(
            report.index, report.variables, report.bytes, 0.0, report.status
        )
        print(json_text(result))
    else:
        print(
            f"skipped {report.file}: its index {report.index} is up to date (--force rebuilds it)"
        )
    return 0


def _gather_reports(
    comm: Any, reports: list[IndexReport], failure: str | None, files: list[str]
) -> tuple[list[IndexReport], list[str]]:
    """Rank 0: every file's report once, in the series' order, and the
    distinct failures (every rank of a failed group reports the same one)."""
    gathered = comm.gather((reports, failure), root=0)
    if comm.rank != 0:
        return [], [failure] if failure else []
    by_file = {r.file: r for rank_reports, _ in gathered for r in rank_reports}
    failures = list(dict.fromkeys(f for _, f in gathered if f is not None))
    return [by_file[f] for f in files if f in by_file], failures
