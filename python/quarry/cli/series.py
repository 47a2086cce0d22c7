"""The CLI over many files and step groups: ``quarry query`` with several files,
a glob, a directory or ``--per-step``/``--plot``, and ``quarry index`` with
several files.

A single file without these options takes the single-file path of
:mod:`quarry.cli.main`, which comes back here (:func:`answer_series`) when
the query runs over the file's step groups.
"""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, Any

from quarry.errors import UsageError

if TYPE_CHECKING:
    from quarry.series import SeriesSelection

#: Options of ``quarry query`` that print rows, unknown to ``--batch``.
_ROW_OPTIONS = ("ids", "coords", "coords_of", "values", "out", "save")


def many(files: list[str]) -> bool:
    """Whether command-line sources stand for more than one plain file.

    Examples
    --------
    >>> many(["run.h5"]), many(["a.h5", "b.h5"]), many(["run_*.h5"])
    (False, True, True)
    """
    from quarry.series import is_many

    return len(files) > 1 or any(is_many(f) for f in files)


def split_query_inputs(args: Any) -> bool:
    """Split ``quarry query``'s positional inputs into ``args.files`` and
    ``args.query`` (and ``args.file``, the first file); True when the command
    is for :func:`cmd_query_many` (several files, a series option, or
    arguments only it can explain), False for the plain single-file query.

    Examples
    --------
    >>> from argparse import Namespace
    >>> a = Namespace(inputs=["run.h5", "x > 1"], per_step=False, plot=None)
    >>> split_query_inputs(a), a.file, a.query
    (False, 'run.h5', 'x > 1')
    """
    inputs = list(args.inputs)
    batch = getattr(args, "batch", None)
    if batch or getattr(args, "load", None) or len(inputs) < 2:
        args.files, args.query = inputs, None
    else:
        args.files, args.query = inputs[:-1], inputs[-1]
    args.file = args.files[0] if args.files else None
    if getattr(args, "load", None) and len(args.files) == 1 and not many(args.files):
        return False  # a saved selection of one file: the single-file path
    return (
        args.query is None
        or bool(batch)
        or bool(args.per_step)
        or bool(args.plot)
        or many(args.files)
    )


def cmd_query_many(args: Any) -> int:
    """``quarry query`` over a series of files and steps; see :func:`answer_series`."""
    import quarry

    rows = [f"--{o.replace('_', '-')}" for o in _ROW_OPTIONS if getattr(args, o, None)]
    if getattr(args, "load", None):
        raise UsageError(
            f"--load takes one file, the one the selection was saved from: {args.load}"
        )
    if args.batch:
        return cmd_batch(args, rows)
    if args.query is None:
        raise UsageError("give the data file(s) and then a query, e.g. quarry query run.h5 'x > 1'")
    start = time.perf_counter()
    with quarry.open_series(args.files, index=args.index, path=args.path, si=args.si) as series:
        return answer_series(args, series.query(args.query), start)


def answer_series(args: Any, sel: SeriesSelection, start: float) -> int:
    """Report ``quarry query``'s answer over a series (many files, or one
    file's steps): the total, ``--per-step`` counts as JSON, ``--plot`` of
    the counts per step; the hits' ``--ids``, ``--coords``, ``--coords-of``
    and ``--values`` as CSV lines led by ``quarry_file,quarry_step`` (or per member with
    ``--json``), or with ``--out`` one group per member holding the ids,
    coordinates and values (:meth:`quarry.series.SeriesSelection.extract`)."""
    if args.save:
        raise UsageError(
            "--save keeps the rows of one table; over several steps choose one with "
            "--path Step#N (or save per step from Python)"
        )
    rows = bool(args.ids or args.coords or args.coords_of or args.values)
    names = [n.strip() for n in args.values.split(",") if n.strip()] if args.values else []
    if args.out and args.coords_of:
        raise UsageError(
            "over several steps --out writes one group per step with the ids and the "
            "table's coordinates (--ids or --coords --out F.h5|.nc|.parquet); "
            "--coords-of prints"
        )
    if args.comm is not None or args.out_per_rank:
        from quarry.cli.parallel import shared_answers

        if shared_answers(args, sel) is None:
            return 0  # the command is done (or this rank is not rank 0)
    else:
        from quarry.cli.progress import answer_with_progress

        answer_with_progress(args, sel.selections)
    per_step = sel.per_step()
    if rows and args.out:
        sel.extract(args.out, names)
    total = sum(r["count"] for r in per_step)
    if args.plot:
        from quarry.outputs.plots import draw_counts

        draw_counts(per_step, args.plot, args.query)
    if rows and not args.out:
        _print_rows(args, sel, names, per_step, total)
    elif args.per_step:
        print(json.dumps({"count": total, "per_step": per_step}))
    elif args.json:
        result = {
            "query": args.query,
            "files": list(dict.fromkeys(r["file"] for r in per_step)),
            "members": len(per_step),
            "resolved": _resolved(sel),
            "count": total,
            "elapsed_ms": round((time.perf_counter() - start) * 1e3, 3),
        }
        if args.out:
            result["out"] = args.out
        print(json.dumps(result))
    elif args.plot or (rows and args.out):
        written = [f for f in (args.plot, args.out if rows else None) if f]
        print(f"{total} hit(s) in {len(per_step)} step(s) -> {', '.join(written)}")
    else:
        print(total)
    return 0


def _print_rows(
    args: Any, sel: SeriesSelection, names: list[str], per_step: list[dict[str, Any]], total: int
) -> None:
    """Each member's hits: with --json one object, the members' ids,
    coordinates or values under ``per_step``; else CSV led by
    ``quarry_file,quarry_step``, then each member's columns named as in every
    output (:mod:`quarry.outputs.columns`)."""
    from quarry.outputs.columns import FILE, INDEX, ROW, STEP, own_name

    if args.json:
        for entry, part in zip(per_step, sel.selections, strict=True):
            if args.values:
                entry["values"] = {n: part.values(n).tolist() for n in names}
            elif args.coords or args.coords_of:
                coords = part.coords_of(args.coords_of) if args.coords_of else part.coords()
                entry["coords"] = coords.tolist()
            else:
                entry["ids"] = part.ids().tolist()
        print(json.dumps({"query": args.query, "count": total, "per_step": per_step}))
        return
    tables: list[dict[str, Any]] = []
    for part in sel.selections:
        if args.coords_of:
            coords = part.coords_of(args.coords_of)
            tables.append({f"{INDEX}{k}": coords[:, k] for k in range(coords.shape[1])})
        else:
            table = part.columns(names if args.values else [], indices=bool(args.coords))
            if args.coords:
                table.pop(ROW, None)
            tables.append(table)
    own = [*(tables[0] if tables else [ROW])]
    print(",".join([own_name(FILE, own), own_name(STEP, own), *own]))
    for (member, _), table in zip(sel, tables, strict=True):
        lead = f"{member.file},{'' if member.step is None else member.step}"
        for row in zip(*(c.tolist() for c in table.values()), strict=True):
            cells = (repr(x) if isinstance(x, float) else str(x) for x in row)
            print(",".join([lead, *cells]))


def _resolved(sel: SeriesSelection) -> dict[str, list[str]]:
    """Each name as written -> the full path it resolved to in every member."""
    out: dict[str, list[str]] = {}
    for _, part in sel:
        for name, path in part.resolved.items():
            out.setdefault(name, []).append(path)
    return out


def cmd_index_many(args: Any) -> int:
    """``quarry index`` over several files: one index per file, skipping those
    whose index is up to date."""
    import contextlib

    import quarry
    from quarry.cli.progress import progress_bar
    from quarry.errors import QuarryError
    from quarry.series import build_indexes

    names = [n.strip() for n in args.vars.split(",") if n.strip()] if args.vars else None
    start = time.perf_counter()
    reports: list[Any] = []
    comm = args.comm
    # Under MPI, rank 0 speaks for all: its progress bars, and every rank's
    # reports gathered at the end (a rank prints nothing while others work).
    speaks = comm is None or comm.rank == 0
    failure: str | None = None
    with contextlib.ExitStack() as bars, quarry.open_series(args.files, index=args.index) as series:

        def progress(file: str, rows: int) -> Any:
            quiet = args.quiet or not speaks
            return bars.enter_context(progress_bar(rows, f"indexing {file}", quiet))

        from quarry.cli.parallel import start_work

        start_work(args)  # under MPI: every rank found its files
        try:
            for report in build_indexes(
                series,
                names,
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
                    _print_report(report)
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
                _print_report(report)
        for why in failures:
            print(f"quarry: error: {why}", file=sys.stderr)
        if failures:
            return 1
    built = sum(r.status == "built" for r in reports)
    elapsed = time.perf_counter() - start
    if args.json:
        print(
            json.dumps(
                {
                    "indexes": [r.to_json() for r in reports],
                    "built": built,
                    "up_to_date": len(reports) - built,
                    "seconds": round(elapsed, 3),
                }
            )
        )
    else:
        print(f"{len(reports)} file(s): {built} indexed, {len(reports) - built} up to date")
    return 0


def _print_report(report: Any) -> None:
    if report.status == "built":
        print(
            f"indexed {len(report.variables)} variable(s) of {report.file} in "
            f"{report.seconds:.2f} s -> {report.index} ({report.bytes / 2**20:.1f} MiB)"
        )
    else:
        print(f"skipped {report.file}: its index {report.index} is up to date")


def _gather_reports(
    comm: Any, reports: list[Any], failure: str | None, files: list[str]
) -> tuple[list[Any], list[str]]:
    """Rank 0: every file's report once, in the series' order, and the
    distinct failures (every rank of a failed group reports the same one)."""
    gathered = comm.gather((reports, failure), root=0)
    if comm.rank != 0:
        return [], [failure] if failure else []
    by_file = {r.file: r for rank_reports, _ in gathered for r in rank_reports}
    failures = list(dict.fromkeys(f for _, f in gathered if f is not None))
    return [by_file[f] for f in files if f in by_file], failures


def cmd_batch(args: Any, rows: list[str]) -> int:
    """``quarry query FILE... --batch QUERIES``: one JSON line per query,
    ``{"query": ..., "count": ...}`` (and ``"per_step"`` with --per-step),
    every file and index opened once for all queries."""
    import os

    import quarry
    from quarry.batch import evaluate, parse_batch, read_batch

    if rows or args.plot:
        raise UsageError(f"{', '.join(rows) or '--plot'} cannot be used with --batch (counts only)")
    if len(args.files) > 1 and not os.path.exists(args.files[-1]) and not many(args.files[-1:]):
        raise UsageError("give either a query or --batch FILE, not both")
    items = read_batch(args.batch) if args.batch != "-" else parse_batch(sys.stdin.read())
    labelled = [(f"line {n}", q) for n, q in items]
    if not args.per_step and not many(args.files):
        with quarry.open(args.files[0], index=args.index, si=args.si) as ds:
            for _, query, count in evaluate(labelled, lambda q: ds.query(q, args.path).count()):
                print(json.dumps({"query": query, "count": count}), flush=True)
        return 0
    with quarry.open_series(args.files, index=args.index, path=args.path, si=args.si) as series:

        def answer(query: str) -> Any:
            sel = series.query(query)
            sel.counts()  # evaluated here, so a failure names the line
            return sel

        for _, query, sel in evaluate(labelled, answer):
            line: dict[str, Any] = {"query": query, "count": sel.count()}
            if args.per_step:
                line["per_step"] = sel.per_step()
            print(json.dumps(line), flush=True)
    return 0
