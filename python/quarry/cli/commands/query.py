"""``quarry query``: a query over one file, over many files and steps, or a
batch of queries.

    quarry query FILE QUERY [--count | --ids | --coords | --values a,b] [--out F] [--json]
    quarry query FILE... QUERY [--per-step] [--plot F.png] [--path GLOB]   (files, steps)
    quarry query FILE... --batch QUERIES.txt [--per-step] [--path P]
    quarry query FILE --load SEL.qsel --values a,b

The positional inputs are split once (:func:`split_inputs`); a plain file
and query take :func:`_query_file`, everything else :func:`_query_series`
(whose output, shared with a file's steps, is in
:mod:`quarry.cli.commands.query_series`).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any, NamedTuple

from quarry.cli import options, render
from quarry.errors import UsageError

if TYPE_CHECKING:
    from quarry.query.selection import Selection
    from quarry.series import Series


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``quarry query``."""
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="FILE... QUERY",
        help="data file(s) (a glob pattern or a directory too), then the query, e.g. "
        '"energy > 1.3 && x < 100"',
    )
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--count", action="store_true", help="number of hits (the default)")
    out.add_argument("--ids", action="store_true", help="flat row-major ids of the hits")
    out.add_argument("--coords", action="store_true", help="N-d indices of the hits")
    out.add_argument(
        "--coords-of",
        metavar="VAR",
        help="N-d indices of the hits in VAR's own array (for a query over subarrays of VAR)",
    )
    out.add_argument("--values", metavar="A,B", help="values of these variables at the hits")
    parser.add_argument(
        "--out",
        metavar="FILE",
        type=options.output_file,
        help="write the hits to FILE, by extension: --ids and --coords to .npy; --values "
        "to .h5, .nc, .parquet, .csv or .npy (over many files or steps: .h5, .nc or "
        ".parquet, one group per step)",
    )
    options.add_json(parser, "print a JSON object")
    parser.add_argument(
        "--save",
        metavar="FILE",
        help="also keep the selection (.qsel) to fetch more variables later",
    )
    options.add_quiet(parser)
    parser.add_argument(
        "--explain",
        action="store_true",
        help="also say what answering took, like EXPLAIN ANALYZE: rows checked, bitmaps "
        'decoded, bytes read (with --json: a "stats" object; else one line on stderr)',
    )
    parser.add_argument(
        "--load",
        metavar="FILE",
        help="the hits of a selection saved with --save, instead of running a QUERY: "
        "fetch --values, --ids or --coords of a file without querying it again",
    )
    parser.add_argument(
        "--per-step",
        action="store_true",
        help='counts per file and step group as JSON: {"count": N, "per_step": [...]}',
    )
    parser.add_argument(
        "--plot",
        metavar="PNG",
        type=options.picture_file,
        help="draw the counts per step to a PNG (or SVG)",
    )
    parser.add_argument(
        "--batch",
        metavar="FILE",
        help="queries, one per line (# comments; - for stdin), instead of QUERY: one JSON "
        'line {"query": ..., "count": ...} each, the index opened once',
    )
    parser.add_argument(
        "--out-per-rank",
        action="store_true",
        help="under mpiexec: each rank writes its own hits to --out with .rankNNNN before "
        "the extension, instead of gathering them to rank 0",
    )
    parser.add_argument(
        "--server",
        metavar="URL",
        help="ask the Quarry server at URL (quarry serve) instead of reading the file here; "
        "FILE is then the path its catalog gives",
    )
    options.add_index(parser)
    options.add_jobs(parser)
    options.add_path(parser)
    options.add_si(parser)


class Inputs(NamedTuple):
    """``quarry query``'s positional inputs: the sources, the query (None
    with ``--batch`` or ``--load``, or when only sources were given), and
    whether they make a series (several files, a series option, or
    arguments only the series path can explain). A named tuple, not a
    dataclass: the class is created on every start of ``quarry query``,
    and a dataclass's creation takes half a millisecond of it."""

    files: list[str]
    query: str | None
    series: bool


def split_inputs(args: argparse.Namespace) -> Inputs:
    """Split ``quarry query``'s positional inputs into sources and query.

    Examples
    --------
    >>> from argparse import Namespace
    >>> split_inputs(Namespace(inputs=["run.h5", "x > 1"], per_step=False, plot=None,
    ...                        batch=None, load=None))
    Inputs(files=['run.h5'], query='x > 1', series=False)
    """
    inputs = list(args.inputs)
    if args.batch or args.load or len(inputs) < 2:
        files, query = inputs, None
    else:
        files, query = inputs[:-1], inputs[-1]
    if args.load and len(files) == 1 and not options.many(files):
        return Inputs(files, query, False)  # a saved selection of one file
    series = (
        query is None
        or bool(args.batch)
        or bool(args.per_step)
        or bool(args.plot)
        or options.many(files)
    )
    return Inputs(files, query, series)


def run(args: argparse.Namespace) -> int:
    if args.server:
        from quarry.cli.commands.query_server import run as on_server

        return on_server(args)
    swapped = _swapped_query(args.inputs)
    if swapped:
        raise UsageError(swapped)
    if args.out and not (args.batch or args.ids or args.coords or args.coords_of or args.values):
        raise UsageError(
            "--out writes the hits' ids, coordinates or values: give it with --ids, --coords or "
            "--values (a count is printed, not written)"
        )
    inputs = split_inputs(args)
    if inputs.series:
        if args.explain:
            raise UsageError(_explain_refused(args, inputs))
        return _query_series(args, inputs)
    if args.explain and (args.comm is not None or args.out_per_rank):
        raise UsageError("--explain runs in one process, without mpiexec")
    return _query_file(args, inputs.files[0], inputs.query)


def _explain_refused(args: argparse.Namespace, inputs: Inputs) -> str:
    """Why ``--explain`` is refused: many files or queries, or an option
    (``--per-step``) that makes one file's answer a series."""
    options_on = [
        flag
        for flag, on in (
            ("--per-step", args.per_step),
            ("--batch", args.batch),
            ("--plot", args.plot),
        )
        if on
    ]
    if len(inputs.files) == 1 and inputs.query is not None and options_on:
        return (
            f"--explain explains one query on one file, not with {options_on[0]}; "
            "run it without (a file of steps gets each step's plan)"
        )
    return "--explain takes one file and one query"


def _swapped_query(inputs: list[str]) -> str | None:
    """What is wrong when the query came before the file (``quarry query
    "px > 1" sim.h5``): the last input is a file that exists while the first
    is none and reads as a query. None when the order is right.

    Examples
    --------
    >>> import os
    >>> _swapped_query(["px > 1", os.devnull])
    "the query comes after the file(s): quarry query /dev/null 'px > 1'"
    >>> _swapped_query([os.devnull, "px > 1"]) is None
    True
    """
    import os

    if len(inputs) < 2 or not os.path.exists(inputs[-1]) or os.path.exists(inputs[0]):
        return None
    from quarry.errors import QuerySyntaxError
    from quarry.expr import parse

    try:
        parse(inputs[0])
    except QuerySyntaxError:
        return None
    import shlex

    order = [*inputs[1:], inputs[0]]
    return f"the query comes after the file(s): quarry query {shlex.join(order)}"


def _query_file(args: argparse.Namespace, file: str, query: str | None) -> int:
    """One file: the query's count, or its hits (``--ids``, ``--coords``,
    ``--values``) printed or written; a file of step groups goes on as a series."""
    import quarry

    start = time.perf_counter()
    with quarry.open(file, index=args.index, si=args.si) as ds:
        if args.load:
            sel = ds.load_selection(args.load)
            query = sel.query
            saved, given = ((p or "").strip("/") or None for p in (sel.path, args.path))
            if given is not None and given != saved:
                under = f"under --path {saved}" if saved else "without --path"
                raise UsageError(
                    f"the selection in {args.load} was made {under}, and its rows and names are "
                    f"that table's; leave --path off to use it (not --path {args.path})"
                )
        else:
            assert query is not None  # split_inputs sends a missing query to the series path
            answer = ds.query(query, args.path)
            if not isinstance(answer, quarry.Selection):  # the file's steps, as a series
                from quarry.cli.commands.query_series import report_series

                return report_series(args, query, answer, start)
            sel = answer
        sel.check_columns(options.names(args.values, "--values"))
        if args.out and (args.ids or args.coords or args.coords_of or args.values):
            from quarry.outputs.writers import check_writable

            check_writable(args.out)  # before the work: under MPI, said once
        if not _answer(args, sel, query):
            return 0  # under MPI: done (or this rank is not rank 0)
        if args.save:
            sel.save(args.save)
        if args.ids or args.coords or args.coords_of or args.values:
            status = _report_hits(args, sel, query, file, start)
        else:
            result = render.query_result(
                sel,
                query,
                file,
                sel.count(),
                time.perf_counter() - start,
                saved=args.save,
                explain=args.explain,
            )
            print(_json(result) if args.json else result["count"])
            status = 0
        if args.explain and not args.json:
            print(render.explain_lines(sel), file=sys.stderr)
    return status


def _answer(args: argparse.Namespace, sel: Selection, query: str) -> bool:
    """Answer ``sel``: behind a progress bar, or under MPI with every rank.
    False where nothing is left to report on this rank."""
    if args.comm is not None or args.out_per_rank:
        from quarry.cli.parallel import shared_answers

        return shared_answers(args, sel, query) is not None
    from quarry.cli.progress import answer_with_progress

    answer_with_progress(args, [sel])
    return True


def _report_hits(
    args: argparse.Namespace, sel: Selection, query: str, file: str, start: float
) -> int:
    """The hits' ids, coordinates or values: to ``--out``, as JSON, or as
    lines (CSV for values, named as in every output)."""
    from quarry.outputs import write_positions

    ids = sel.ids()
    hits: dict[str, Any] = {}
    if args.values:
        names = options.names(args.values, "--values")
        if args.out:
            sel.extract(args.out, names)
        elif args.json:
            hits["values"] = {n: sel.values(n).tolist() for n in names}
        else:
            columns = sel.columns(names, indices=False)
            print(render.csv_header(columns))
            for line in render.csv_lines(columns):
                print(line)
            return 0
    else:
        as_coords = args.coords or args.coords_of
        data = (
            sel.coords_of(args.coords_of)
            if args.coords_of
            else sel.coords()
            if args.coords
            else ids
        )
        key = "coords" if as_coords else "ids"
        if args.out:
            write_positions(args.out, data)
        elif args.json:
            hits[key] = data.tolist()
        else:
            for row in data.tolist():
                print(" ".join(map(str, row)) if as_coords else row)
            return 0
    result = render.query_result(
        sel,
        query,
        file,
        len(ids),
        time.perf_counter() - start,
        saved=args.save,
        hits=hits,
        out=args.out,
        explain=args.explain,
    )
    if args.json:
        print(_json(result))
    else:
        print(f"{result['count']} hit(s) written to {args.out}")
    return 0


def _query_series(args: argparse.Namespace, inputs: Inputs) -> int:
    """Several files (or a series option): the query over every member, or
    a batch of queries."""
    import quarry
    from quarry.cli.commands.query_series import report_series

    if args.load:
        raise UsageError(
            f"--load takes one file, the one the selection was saved from: {args.load}"
        )
    if args.batch:
        return _batch(args, inputs.files)
    if inputs.query is None:
        raise UsageError("give the data file(s) and then a query, e.g. quarry query run.h5 'x > 1'")
    start = time.perf_counter()
    with quarry.open_series(inputs.files, index=args.index, path=args.path, si=args.si) as series:
        return report_series(args, inputs.query, series.query(inputs.query), start)


#: Options of ``quarry query`` that print rows, unknown to ``--batch``.
_ROW_OPTIONS = ("ids", "coords", "coords_of", "values", "out", "save")


def _batch(args: argparse.Namespace, files: list[str]) -> int:
    """``quarry query FILE... --batch QUERIES``: one JSON line per query,
    ``{"query": ..., "count": ...}`` (and ``"per_step"`` with --per-step),
    every file and index opened once for all queries."""
    import os

    import quarry
    from quarry.query.batch import parse_batch, read_batch

    rows = [f"--{o.replace('_', '-')}" for o in _ROW_OPTIONS if getattr(args, o)]
    if rows or args.plot:
        raise UsageError(f"{', '.join(rows) or '--plot'} cannot be used with --batch (counts only)")
    if len(files) > 1 and not os.path.exists(files[-1]) and not options.many(files[-1:]):
        raise UsageError("give either a query or --batch FILE, not both")
    items = read_batch(args.batch) if args.batch != "-" else parse_batch(sys.stdin.read())
    labelled = [(f"line {n}", q) for n, q in items]
    # One file without --per-step answers as `quarry query FILE Q` does (a
    # series only where its names spread over step groups); else per member.
    one_table = not args.per_step and not options.many(files)
    series_path = None if one_table else args.path
    labels = [where for where, _ in labelled]
    queries = [query for _, query in labelled]
    with quarry.open_series(files, index=args.index, path=series_path, si=args.si) as series:
        if args.comm is not None and not one_table:
            return _batch_shared(args, series, labelled)
        if one_table:
            # Under mpiexec every rank answers the one table (each finds any
            # error the others do, and says so as they do); rank 0 prints.
            ds = series.dataset(series.files[0])
            counts = ds.query_many(queries, args.path, labels=labels)
            if args.comm is None or args.comm.rank == 0:
                for query, count in zip(queries, counts, strict=True):
                    print(_json(render.batch_line(query, count, None)), flush=True)
            return 0
        for query, sel in zip(queries, series.query_many(queries, labels=labels), strict=True):
            per_step = sel.per_step() if args.per_step else None
            print(_json(render.batch_line(query, sel.count(), per_step)), flush=True)
    return 0


def _json(value: object) -> str:
    """``value`` as one JSON line (:func:`~quarry.outputs.json_text.json_text`)."""
    from quarry.outputs.json_text import json_text

    return json_text(value)


def _batch_shared(args: argparse.Namespace, series: Series, labelled: list[tuple[str, str]]) -> int:
    """``--batch`` under mpiexec: each rank answers a contiguous run of the
    members, one collective call sums the counts, and rank 0 prints the
    lines. A mistake in a query (found by the ranks whose members it
    reaches) is agreed on by every rank and reported once."""
    from quarry.parallel.runners import Mpi

    labels = [where for where, _ in labelled]
    queries = [query for _, query in labelled]
    answers = series.query_many(queries, runner=Mpi(args.comm), labels=labels)
    if args.comm.rank == 0:
        for query, sel in zip(queries, answers, strict=True):
            per_step = sel.per_step() if args.per_step else None
            print(_json(render.batch_line(query, sel.count(), per_step)), flush=True)
    return 0
