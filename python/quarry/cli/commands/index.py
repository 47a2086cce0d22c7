"""``quarry index FILE... [--vars a,b] [--bins N] [--force] ...``: build the
index of a file, or one per file of many (also under mpiexec)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Any

from quarry.cli import options, render

if TYPE_CHECKING:
    from quarry.series import IndexReport


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


def run(args: argparse.Namespace) -> int:
    if options.many(args.files) or args.comm is not None:
        return _index_many(args)
    return _index_one(args, args.files[0])


def _index_one(args: argparse.Namespace, file: str) -> int:
    """One file's index, or a line saying it is up to date."""
    import quarry
    from quarry.cli.progress import progress_bar
    from quarry.index.layout import index_size
    from quarry.series import up_to_date

    start = time.perf_counter()
    with quarry.open(file, index=args.index) as ds:
        names = options.names(args.vars) if args.vars else None
        chosen = ds.index_variables(names, args.derive)
        if not args.force and up_to_date(
            ds, chosen, args.bins, args.precision, args.block_len, args.derive
        ):
            return _say_up_to_date(args, file, ds.index_path, [v.path for v in chosen])
        with progress_bar(sum(v.size for v in chosen), "indexing", args.quiet) as bar:
            manifest = ds.build_index(
                names,
                bins=args.bins,
                precision=args.precision,
                block_len=args.block_len,
                progress=bar,
                derive=args.derive,
            )
        index_path = ds.index_path
    elapsed = time.perf_counter() - start
    size = index_size(index_path)
    variables = list(manifest["variables"])
    if args.json:
        print(json.dumps(render.index_result(index_path, variables, size, elapsed)))
    else:
        print(render.built_line(file, len(variables), elapsed, index_path, size))
    return 0


def _say_up_to_date(args: argparse.Namespace, file: str, index: str, variables: list[str]) -> int:
    from quarry.index.layout import index_size, remove_debris

    remove_debris(index)  # what killed builds left, even when no build is needed
    if args.json:
        print(
            json.dumps(render.index_result(index, variables, index_size(index), 0.0, "up to date"))
        )
    else:
        print(f"skipped {file}: its index {index} is up to date (--force rebuilds it)")
    return 0


def _index_many(args: argparse.Namespace) -> int:
    """Several files: one index per file, skipping those whose index is up
    to date. Under MPI (``args.comm``) the ranks share the files out."""
    import contextlib

    import quarry
    from quarry.cli.parallel import start_work
    from quarry.cli.progress import progress_bar
    from quarry.errors import QuarryError
    from quarry.series import build_indexes

    start = time.perf_counter()
    reports: list[IndexReport] = []
    comm = args.comm
    # Under MPI, rank 0 speaks for all: its progress bars, and every rank's
    # reports gathered at the end (a rank prints nothing while others work).
    speaks = comm is None or comm.rank == 0
    failure: str | None = None
    with contextlib.ExitStack() as bars, quarry.open_series(args.files, index=args.index) as series:

        def progress(file: str, rows: int) -> Any:
            quiet = args.quiet or not speaks
            return bars.enter_context(progress_bar(rows, f"indexing {file}", quiet))

        start_work(args)  # under MPI: every rank found its files
        try:
            for report in build_indexes(
                series,
                options.names(args.vars) if args.vars else None,
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
                if comm is None and not args.json:
                    print(render.index_report_line(report))
        except QuarryError as exc:
            if comm is None:
                raise
            failure = str(exc)
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
        print(json.dumps(render.indexes_result(reports, elapsed)))
    else:
        built = sum(r.status == "built" for r in reports)
        print(f"{len(reports)} file(s): {built} indexed, {len(reports) - built} up to date")
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
