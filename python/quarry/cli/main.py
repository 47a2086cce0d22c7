"""The ``quarry`` command.

    quarry index FILE... [--vars a,b] [--bins N] [--precision P] [--block-size B] [--force]
    quarry query FILE QUERY [--count | --ids | --coords | --values a,b] [--out F] [--json]
                            [--path P]
    quarry query FILE... QUERY [--per-step] [--plot F.png] [--path GLOB]   (files, steps)
    quarry query FILE... --batch QUERIES.txt [--per-step] [--path P]
    quarry track FILE... QUERY --at-step S [--id-var id] [--values a,b] [--json] [--out F.h5]
    quarry info FILE [--json] [--resolve NAME [--path P]]
    quarry verify FILE... [--json]
    quarry hist FILE VAR[,VAR2[,VAR3]] [--where Q] [--bins N | --edges E] [--json] [--png F]
    quarry plot FILE X Y --where Q --png F
    quarry register FILE --dtype <f4 --shape NX,NY,NZ [--order C|F] [--offset B]
    quarry demo [--dir DIR]

Errors print one line (a query error also prints the query with a caret) and
exit non-zero: 2 for a malformed query or bad arguments, 1 for anything else.
``--debug`` shows the traceback. Heavy modules are imported only by the
commands that need them, so a count starts fast.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from quarry.errors import UsageError


def _count(text: str) -> int:
    """An argparse type: a whole number, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return value


class _Version(argparse.Action):
    """``--version``: the version compiled into the Rust core (the Cargo
    workspace's), printed without parsing the rest of the command line."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        import quarry

        print(f"quarry {quarry.__version__}")
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="quarry",
        description="Exact, fast range queries over scientific array files.",
    )
    p.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def index_option(sp: argparse.ArgumentParser) -> None:
        sp.add_argument(
            "--index",
            metavar="PATH",
            help="index file location (default: FILE.qidx beside the data)",
        )

    def jobs_option(sp: argparse.ArgumentParser) -> None:
        sp.add_argument(
            "--jobs",
            "-j",
            type=_count,
            default=0,
            metavar="N",
            help="threads to use (default 0: one per core)",
        )

    def path_option(sp: argparse.ArgumentParser) -> None:
        sp.add_argument(
            "--path",
            metavar="P",
            help="context in which bare names resolve, e.g. Step#3 (names under */P/*; "
            "globs allowed; a name matching in separate groups is an error listing them)",
        )

    def si_option(sp: argparse.ArgumentParser) -> None:
        sp.add_argument(
            "--si",
            action="store_true",
            help="openPMD: values in SI units (stored value * unitSI, in float64), in the "
            "query and every output (default: the stored values)",
        )

    ix = sub.add_parser("index", help="build the index of a file (or one per file of many)")
    ix.add_argument(
        "files", nargs="+", metavar="FILE", help="data file(s), a glob pattern or a directory"
    )
    ix.add_argument("--vars", help="comma-separated variables (default: every numeric one)")
    ix.add_argument("--bins", type=int, help="equal-weight bins per variable (default 1024)")
    ix.add_argument(
        "--precision",
        type=int,
        help="also put bin edges at every decimal with this many significant digits, so "
        "ranges on typed literals need no check (default 2; 0: off)",
    )
    ix.add_argument(
        "--block-size",
        type=int,
        dest="block_len",
        help="rows per block, the unit of parallel work (default 1048576)",
    )
    ix.add_argument(
        "--derive",
        action="append",
        metavar="NAME=EXPR",
        help='index a computed variable too, e.g. --derive "r=sqrt(x**2 + y**2)" '
        "(repeatable; made in every group holding its inputs)",
    )
    ix.add_argument("--json", action="store_true", help="print a JSON summary")
    ix.add_argument("--quiet", action="store_true", help="no progress bar")
    ix.add_argument(
        "--force",
        action="store_true",
        help="rebuild indexes that are up to date too (otherwise they are skipped)",
    )
    ix.add_argument(
        "--ranks-per-file",
        type=_count,
        metavar="G",
        help="under mpiexec: ranks that build each file's index together "
        "(default: the ranks shared evenly over the files)",
    )
    index_option(ix)
    jobs_option(ix)

    q = sub.add_parser("query", help="evaluate a query")
    q.add_argument(
        "inputs",
        nargs="+",
        metavar="FILE... QUERY",
        help="data file(s) (a glob pattern or a directory too), then the query, e.g. "
        '"energy > 1.3 && x < 100"',
    )
    out = q.add_mutually_exclusive_group()
    out.add_argument("--count", action="store_true", help="number of hits (the default)")
    out.add_argument("--ids", action="store_true", help="flat row-major ids of the hits")
    out.add_argument("--coords", action="store_true", help="N-d indices of the hits")
    out.add_argument(
        "--coords-of",
        metavar="VAR",
        help="N-d indices of the hits in VAR's own array (for a query over subarrays of VAR)",
    )
    out.add_argument("--values", metavar="A,B", help="values of these variables at the hits")
    q.add_argument(
        "--out",
        metavar="FILE",
        help="write the hits to FILE, by extension: --ids and --coords to .npy; --values "
        "to .h5, .nc, .parquet, .csv or .npy (over many files or steps: .h5, .nc or "
        ".parquet, one group per step)",
    )
    q.add_argument("--json", action="store_true", help="print a JSON object")
    q.add_argument(
        "--save",
        metavar="FILE",
        help="also keep the selection (.qsel) to fetch more variables later",
    )
    q.add_argument("--quiet", action="store_true", help="no progress bar")
    q.add_argument(
        "--explain",
        action="store_true",
        help="also say what answering took, like EXPLAIN ANALYZE: rows checked, bitmaps "
        'decoded, bytes read (with --json: a "stats" object; else one line on stderr)',
    )
    q.add_argument(
        "--load",
        metavar="FILE",
        help="the hits of a selection saved with --save, instead of running a QUERY: "
        "fetch --values, --ids or --coords of a file without querying it again",
    )
    q.add_argument(
        "--per-step",
        action="store_true",
        help='counts per file and step group as JSON: {"count": N, "per_step": [...]}',
    )
    q.add_argument("--plot", metavar="PNG", help="draw the counts per step to a PNG (or SVG)")
    q.add_argument(
        "--batch",
        metavar="FILE",
        help="queries, one per line (# comments; - for stdin), instead of QUERY: one JSON "
        'line {"query": ..., "count": ...} each, the index opened once',
    )
    q.add_argument(
        "--out-per-rank",
        action="store_true",
        help="under mpiexec: each rank writes its own hits to --out with .rankNNNN before "
        "the extension, instead of gathering them to rank 0",
    )
    index_option(q)
    jobs_option(q)
    path_option(q)
    si_option(q)

    hist = sub.add_parser("hist", help="histogram of 1-3 variables, optionally of a selection")
    hist.add_argument("file")
    hist.add_argument("vars", help="one to three comma-separated variables, e.g. energy or x,y")
    hist.add_argument(
        "--where", metavar="QUERY", help="histogram only the rows where QUERY is true"
    )
    hist.add_argument("--bins", type=int, default=10, help="bins per axis (default 10, as NumPy)")
    hist.add_argument("--edges", help="explicit bin edges for a 1-D histogram, e.g. 0,0.5,1,2")
    hist.add_argument(
        "--range",
        dest="value_range",
        metavar="LO,HI",
        help="lower and upper edge (1-D; per axis LO,HI;LO,HI for 2-D/3-D)",
    )
    hist.add_argument("--weight", help="weight each row by this variable")
    hist.add_argument("--log", action="store_true", help="log-scaled counts in the picture")
    hist.add_argument("--json", action="store_true", help='print {"counts": ..., "edges": ...}')
    hist.add_argument("--png", metavar="FILE", help="draw the histogram to a PNG file")
    hist.add_argument("--svg", metavar="FILE", help="draw the histogram to an SVG file")
    index_option(hist)
    jobs_option(hist)
    path_option(hist)
    si_option(hist)

    plot = sub.add_parser("plot", help="all rows as a grey density, a selection in colour")
    plot.add_argument("file")
    plot.add_argument("x")
    plot.add_argument("y")
    plot.add_argument("--where", metavar="QUERY", required=True, help="the rows to highlight")
    plot.add_argument("--png", metavar="FILE", help="PNG to write")
    plot.add_argument("--svg", metavar="FILE", help="SVG to write")
    plot.add_argument("--bins", type=int, default=200, help="density bins per axis (default 200)")
    index_option(plot)
    jobs_option(plot)
    path_option(plot)
    si_option(plot)

    tr = sub.add_parser(
        "track", help="select particles at one step and follow their ids through every step"
    )
    tr.add_argument(
        "inputs", nargs="+", metavar="FILE... QUERY", help="data file(s), then the query"
    )
    tr.add_argument("--at-step", type=int, required=True, help="the step where QUERY selects")
    tr.add_argument("--id-var", default="id", help="integer variable of particle ids (default id)")
    tr.add_argument("--values", metavar="A,B", help="variables to read at every step")
    tr.add_argument("--json", action="store_true", help="print everything as one JSON object")
    tr.add_argument(
        "--out",
        metavar="F.h5",
        help="write one group per step to .h5 or .nc (.parquet: one table with a step column)",
    )
    index_option(tr)
    jobs_option(tr)
    path_option(tr)

    info = sub.add_parser("info", help="variables, shapes, dtypes, and what is indexed")
    info.add_argument("file")
    info.add_argument("--json", action="store_true")
    info.add_argument(
        "--resolve", metavar="NAME", help="only say what NAME resolves to (with --path)"
    )
    index_option(info)
    path_option(info)

    reg = sub.add_parser(
        "register", help="describe a raw binary file (dtype, shape, ...) so it can be queried"
    )
    reg.add_argument("file")
    reg.add_argument("--dtype", required=True, help="NumPy dtype with byte order, e.g. <f4, >i8")
    reg.add_argument("--shape", required=True, help="comma-separated, e.g. 128,128,128")
    reg.add_argument(
        "--order",
        choices=["C", "F"],
        default="C",
        help="C (row-major, default) or F (Fortran, column-major)",
    )
    reg.add_argument("--offset", type=int, default=0, help="bytes before the first element")
    reg.add_argument("--name", help="variable name (default: the file name without extension)")
    reg.add_argument(
        "--fill-value", type=float, dest="fill_value", help="a value that marks missing data"
    )
    reg.add_argument(
        "--index", metavar="DIR", help="keep the description in this directory (read-only data)"
    )

    ver = sub.add_parser(
        "verify",
        help="check every indexed value against the CRCs its index recorded "
        "(exit 1 if any changed)",
    )
    ver.add_argument(
        "files", nargs="+", metavar="FILE", help="data file(s), a glob pattern or a directory"
    )
    ver.add_argument("--json", action="store_true", help="print one JSON object")
    index_option(ver)
    jobs_option(ver)

    demo = sub.add_parser("demo", help="generate a sample, index it, query it, draw a histogram")
    demo.add_argument("--dir", default="quarry-demo", help="where to put the sample and pictures")
    demo.add_argument("--rows", type=int, default=1 << 21, help="particles in the sample")
    return p


def _cmd_index(args: argparse.Namespace) -> int:
    import quarry
    from quarry.cli.progress import progress_bar
    from quarry.cli.series import cmd_index_many, many
    from quarry.series import up_to_date

    if many(args.files) or args.comm is not None:
        return cmd_index_many(args)
    args.file = args.files[0]
    start = time.perf_counter()
    with quarry.open(args.file, index=args.index) as ds:
        names = [n.strip() for n in args.vars.split(",") if n.strip()] if args.vars else None
        chosen = ds.index_variables(names, args.derive)
        if not args.force and up_to_date(
            ds, chosen, args.bins, args.precision, args.block_len, args.derive
        ):
            return _say_up_to_date(args, ds, chosen)
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

    from quarry.index.layout import index_size

    size = index_size(index_path)
    variables = list(manifest["variables"])
    if args.json:
        print(
            json.dumps(
                {
                    "index": index_path,
                    "variables": variables,
                    "bytes": size,
                    "seconds": round(elapsed, 3),
                }
            )
        )
    else:
        print(
            f"indexed {len(variables)} variable(s) of {args.file} in {elapsed:.2f} s "
            f"-> {index_path} ({size / 2**20:.1f} MiB)"
        )
    return 0


def _say_up_to_date(args: argparse.Namespace, ds: Any, chosen: list[Any]) -> int:
    from quarry.index.layout import index_size, remove_debris

    remove_debris(ds.index_path)  # what killed builds left, even when no build is needed

    if args.json:
        report = {
            "index": ds.index_path,
            "variables": [v.path for v in chosen],
            "bytes": index_size(ds.index_path),
            "seconds": 0.0,
            "status": "up to date",
        }
        print(json.dumps(report))
    else:
        print(f"skipped {args.file}: its index {ds.index_path} is up to date (--force rebuilds it)")
    return 0


def _cmd_query(args: argparse.Namespace) -> int:
    import quarry
    from quarry.cli.progress import answer_with_progress
    from quarry.cli.series import cmd_query_many, split_query_inputs

    swapped = _swapped_query(args.inputs)
    if swapped:
        raise UsageError(swapped)
    if split_query_inputs(args):
        if args.explain:
            raise UsageError("--explain takes one file and one query")
        return cmd_query_many(args)
    if args.explain and (args.comm is not None or args.out_per_rank):
        raise UsageError("--explain runs in one process, without mpiexec")
    start = time.perf_counter()
    with quarry.open(args.file, index=args.index, si=args.si) as ds:
        if args.load:
            sel = ds.load_selection(args.load)
            args.query = sel.query
        else:
            answer = ds.query(args.query, args.path)
            if not isinstance(answer, quarry.Selection):  # the file's steps, as a series
                from quarry.cli.series import answer_series

                return answer_series(args, answer, start)
            sel = answer
        if args.comm is not None or args.out_per_rank:
            from quarry.cli.parallel import shared_answers

            answered = shared_answers(args, sel)
            if answered is None:  # the command is done (or this rank is not rank 0)
                return 0
        else:
            answer_with_progress(args, [sel])
        result: dict[str, Any] = {"query": args.query, "file": args.file}
        if sel.resolved:
            result["resolved"] = sel.resolved
        if sel.aggregates:
            result["aggregates"] = [a.to_dict() for a in sel.aggregates]
        if args.save:
            sel.save(args.save)
            result["saved"] = args.save
        if args.ids or args.coords or args.coords_of or args.values:
            status = _emit_rows(args, ds, sel, result, start)
        else:
            result["count"] = sel.count()
            result["elapsed_ms"] = round((time.perf_counter() - start) * 1e3, 3)
            _explain(args, sel, result)
            print(json.dumps(result) if args.json else result["count"])
            status = 0
        if args.explain and not args.json:
            stats = sel.stats().to_dict()
            print("explain: " + " ".join(f"{k}={v}" for k, v in stats.items()), file=sys.stderr)
    return status


def _explain(args: argparse.Namespace, sel: Any, result: dict[str, Any]) -> None:
    """Add the selection's work so far to a JSON answer under --explain."""
    if args.explain:
        result["stats"] = sel.stats().to_dict()


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
    import shlex

    if len(inputs) < 2 or not os.path.exists(inputs[-1]) or os.path.exists(inputs[0]):
        return None
    from quarry.errors import QuerySyntaxError
    from quarry.expr import parse

    try:
        parse(inputs[0])
    except QuerySyntaxError:
        return None
    order = [*inputs[1:], inputs[0]]
    return f"the query comes after the file(s): quarry query {shlex.join(order)}"


def _emit_rows(
    args: argparse.Namespace, ds: Any, sel: Any, result: dict[str, Any], start: float
) -> int:
    from quarry.outputs import write_positions

    ids = sel.ids()
    result["count"] = len(ids)
    if args.values:
        names = [n.strip() for n in args.values.split(",") if n.strip()]
        if args.out:
            sel.extract(args.out, names)
        elif args.json:
            columns = {n: sel.values(n) for n in names}
            result["values"] = {n: v.tolist() for n, v in columns.items()}
        else:  # CSV, named as in every output (quarry.outputs.columns)
            columns = sel.columns(names, indices=False)
            print(",".join(columns))
            for row in zip(*(c.tolist() for c in columns.values()), strict=True):
                print(",".join(repr(x) if isinstance(x, float) else str(x) for x in row))
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
            result[key] = data.tolist()
        else:
            for row in data.tolist():
                print(" ".join(map(str, row)) if as_coords else row)
            return 0
    if args.out:
        result["out"] = args.out
    result["elapsed_ms"] = round((time.perf_counter() - start) * 1e3, 3)
    _explain(args, sel, result)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{result['count']} hit(s) written to {args.out}")
    return 0


def _cmd_hist(args: argparse.Namespace) -> int:
    import quarry

    names = [n.strip() for n in args.vars.split(",") if n.strip()]
    if not 1 <= len(names) <= 3:
        raise UsageError("give one to three variables")
    bins: Any = args.bins
    value_range: Any = None
    try:
        if args.edges:
            bins = [float(e) for e in args.edges.split(",")]
        if args.value_range:
            pairs = [
                tuple(float(x) for x in part.split(",")) for part in args.value_range.split(";")
            ]
            if any(len(p) != 2 for p in pairs):
                raise ValueError(args.value_range)
            value_range = pairs[0] if len(names) == 1 else pairs
    except ValueError:
        raise UsageError("--edges and --range take numbers separated by commas") from None
    with quarry.open(args.file, index=args.index, si=args.si) as ds:
        target: Any = names if len(names) > 1 else names[0]
        hist = ds.histogram(
            target,
            where=args.where,
            bins=bins,
            range=value_range,
            weights=args.weight,
            path=args.path,
        )
        # With --path, the title names what the names resolved to (/Step#3/energy).
        shown = [ds.variable(n, args.path).path for n in names] if args.path else names
    title = f"{', '.join(shown)}" + (f" where {args.where}" if args.where else "")
    for picture in (args.png, args.svg):
        if picture:
            from quarry.outputs.plots import draw_histogram

            draw_histogram(hist, picture, names, args.log, title)
    if args.json:
        print(json.dumps({"variables": names, "where": args.where, **hist.to_json()}))
    elif not (args.png or args.svg):
        _print_histogram(hist, names)
    else:
        written = ", ".join(p for p in (args.png, args.svg) if p)
        print(f"histogram of {title} ({int(hist.counts.sum())} rows) -> {written}")
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    import numpy as np

    import quarry
    from quarry.outputs.plots import draw_overlay

    if not (args.png or args.svg):
        raise UsageError("give --png FILE or --svg FILE")
    with quarry.open(args.file, index=args.index, si=args.si) as ds:
        everything = ds.histogram([args.x, args.y], bins=args.bins, path=args.path)
        hits = ds.query(args.where, args.path)
        parts = [hits] if isinstance(hits, quarry.Selection) else hits.selections  # steps
        selected = (
            np.concatenate([p.values(args.x) for p in parts]),
            np.concatenate([p.values(args.y) for p in parts]),
        )
    title = f"{args.where}: {len(selected[0]):,} of {int(everything.counts.sum()):,}"
    for picture in (args.png, args.svg):
        if picture:
            draw_overlay(everything, selected, picture, [args.x, args.y], title)
    print(
        f"{len(selected[0]):,} selected rows drawn over all -> "
        f"{', '.join(p for p in (args.png, args.svg) if p)}"
    )
    return 0


def _print_histogram(hist: Any, names: list[str]) -> None:
    if isinstance(hist.edges, list):
        print(
            f"{'x'.join(str(len(e) - 1) for e in hist.edges)} bins over {', '.join(names)}; "
            f"{int(hist.counts.sum())} rows (use --json for the counts)"
        )
        return
    edges = hist.edges
    for i, count in enumerate(hist.counts.tolist()):
        close = "]" if i == len(hist.counts) - 1 else ")"
        print(f"[{edges[i]:.6g}, {edges[i + 1]:.6g}{close}  {count}")


def _cmd_register(args: argparse.Namespace) -> int:
    import os

    import numpy as np

    from quarry.formats.raw import RawLayout, register

    try:
        shape = tuple(int(s) for s in args.shape.split(","))
    except ValueError:
        raise UsageError(
            f"--shape must be integers separated by commas, got {args.shape!r}"
        ) from None
    name = args.name or os.path.splitext(os.path.basename(args.file))[0]
    try:
        np.dtype(args.dtype)
    except TypeError:
        raise UsageError(f"unknown dtype {args.dtype!r} (e.g. <f4, >f8, <i4)") from None
    layout = RawLayout(name, args.dtype, shape, args.order, args.offset, args.fill_value)
    where = register(args.file, layout, args.index)
    print(f"registered {args.file} as /{name} {args.dtype} {shape} -> {where}")
    return 0


def _cmd_info(args: argparse.Namespace) -> int:
    import quarry

    if args.resolve:
        from quarry.cli.resolve import cmd_resolve

        return cmd_resolve(args)
    with quarry.open(args.file, index=args.index) as ds:
        info = ds.info()
    if args.path:
        from quarry.expr.names import in_context

        info["variables"] = [v for v in info["variables"] if in_context(v["path"], args.path)]
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    idx = info["index"]
    state = idx.get("state", "none") if idx["exists"] else "none"
    print(f"{info['file']}  (index: {idx['path']}, {state})")
    if idx.get("error"):
        print(f"  index unusable: {idx['error']}")
    for v in info["variables"]:
        mark = "indexed" if v["indexed"] else (v.get("unsupported") or "not indexed")
        if v.get("decoding"):
            mark += f"  [{v['decoding']}]"
        if v.get("units"):
            mark += f"  units {v['units']}"
        if "unitSI" in v:
            mark += f"  unitSI {v['unitSI']:g}"
        if "si_units" in v:
            mark += f"  ({v['si_units']})"
        stats = v.get("stats")
        if stats and stats["count"]:
            mark += (
                f"  min {_exact(stats['min'])}  max {_exact(stats['max'])}"
                f"  mean {stats['mean']:.6g}  std {stats['std']:.6g}  missing {stats['missing']}"
            )
        print(f"  {v['path']:<40} {tuple(v['shape'])!s:<16} {v['dtype']:<8} {mark}")
    return 0


def _exact(value: float) -> str:
    """A minimum or maximum as written: integers in full (``2000003``, not
    ``2e+06``), floats to 6 significant digits.

    Examples
    --------
    >>> _exact(2000003), _exact(2**63 - 1), _exact(0.1234567)
    ('2000003', '9223372036854775807', '0.123457')
    """
    return str(value) if isinstance(value, int) else f"{value:.6g}"


def _cmd_track(args: argparse.Namespace) -> int:
    import quarry
    from quarry.query.track import track
    from quarry.series import expand_sources

    *sources, query = args.inputs
    if not sources:
        raise UsageError("give the data file(s), then the query")
    names = [n.strip() for n in args.values.split(",") if n.strip()] if args.values else []
    files = expand_sources(sources)
    with quarry.open_series(files, index=args.index, path=args.path) as series:
        tracks = track(series, query, args.at_step, args.id_var, names)
    if args.out:
        tracks.write(args.out, files)
    if args.json:
        print(json.dumps(tracks.to_dict()))
        return 0
    print(f"{len(tracks.ids)} particle(s) selected at step {args.at_step}")
    print("file,step,found,missing")
    for step in tracks.steps:
        d = step.to_dict()
        print(f"{d['file']},{'' if d['step'] is None else d['step']},{d['found']},{d['missing']}")
    if args.out:
        print(f"written to {args.out}")
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    """Every file's index checked against the file; one line (or JSON entry)
    per file, exit 1 if any changed or could not be checked."""
    import quarry
    from quarry.errors import QuarryError

    reports: list[dict[str, Any]] = []
    with quarry.open_series(args.files, index=args.index) as series:
        for file in series.files:
            try:
                report = series.dataset(file).verify()
            except QuarryError as exc:
                reports.append({"file": file, "ok": False, "error": str(exc)})
                line = f"error {file}: {exc}"
            else:
                reports.append(report.to_json())
                line = report.summary()
            if not args.json:
                print(line)
    ok = all(r["ok"] for r in reports)
    if args.json:
        print(json.dumps({"ok": ok, "files": reports}))
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    args = _parser().parse_args(argv)
    from quarry.errors import QuarryError, QuerySyntaxError

    previous_sigterm = _handle_sigterm()

    commands = {
        "index": _cmd_index,
        "query": _cmd_query,
        "info": _cmd_info,
        "register": _cmd_register,
        "hist": _cmd_hist,
        "plot": _cmd_plot,
        "track": _cmd_track,
        "verify": _cmd_verify,
    }
    args.comm = None
    args.work_started = False
    try:
        from quarry.parallel.mpi import launched_ranks, world

        if launched_ranks() > 1:
            args.comm = world()
            if args.command not in ("index", "query"):
                raise QuarryError(
                    f"quarry {args.command} runs in one process; start it without mpiexec "
                    "(index and query share work over ranks)"
                )
        if args.command == "demo":
            from quarry.cli.demo import run_demo

            return run_demo(args.dir, args.rows)
        from quarry.parallel import threads

        with threads(getattr(args, "jobs", None)):
            code = commands[args.command](args)
            # A command with no collective work (a batch) still meets the
            # others, so a rank that failed alone is not left waiting.
            from quarry.cli.parallel import start_work

            start_work(args)
            sys.stdout.flush()  # a closed pipe shows here, not at exit
            return code
    except BrokenPipeError:
        return _reader_went_away()
    except UsageError as exc:  # no traceback with --debug: the command line was wrong
        return _fail(args, exc, 2, f"error: {exc}")
    except QuerySyntaxError as exc:
        if args.debug:
            raise
        return _fail(args, exc, 2, f"error in query: {exc}")
    except (QuarryError, OSError) as exc:
        if args.debug:
            raise
        return _fail(args, exc, 1, f"error: {exc}")
    except KeyboardInterrupt:
        print("quarry: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        from quarry.cli.parallel import StoppedBeforeWorkError, report_stop

        if isinstance(exc, StoppedBeforeWorkError):  # another rank failed before the work
            return report_stop(args.comm, exc.code, exc.message)
        _abort_other_ranks(args, exc)
        raise
    finally:
        _restore_sigterm(previous_sigterm)


def _handle_sigterm() -> Any:
    """On SIGTERM (what batch schedulers send before killing a job), remove
    the temporary files this process's builds are writing, say so, and exit
    with 128 + 15; the old index stays. Returns the handler it replaced
    (None where handlers cannot be set: outside the main thread).

    The handler ends the process itself rather than raising, as Ctrl-C's
    KeyboardInterrupt does: an exception raised wherever the signal lands
    (inside a weakref callback, under a call from the Rust core back into
    Python) can be swallowed or abort the process, leaving the files behind."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def terminate(signum: int, frame: object) -> None:
        import os

        from quarry.index.layout import remove_own_temporaries

        remove_own_temporaries()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        print("quarry: terminated", file=sys.stderr, flush=True)
        os._exit(128 + signum)

    return signal.signal(signal.SIGTERM, terminate)


def _restore_sigterm(previous: Any) -> None:
    import signal

    if previous is not None:
        signal.signal(signal.SIGTERM, previous)


def _reader_went_away() -> int:
    """The reader of our output left (``quarry query ... | head``): end
    quietly, as Python's documentation advises for SIGPIPE. Output still
    buffered goes to /dev/null so the exit does not fail again on flushing,
    and the status is 1, the one Python itself exits with on EPIPE."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 1


def _fail(args: argparse.Namespace, exc: BaseException, code: int, message: str) -> int:
    """Report a user's error (``message``, what follows ``quarry: ``) and
    return the exit ``code``. Under MPI, one found before the work began is
    agreed on by every rank and reported once by rank 0 (see
    :mod:`quarry.cli.parallel`); one during the work stops every rank."""
    from quarry.cli.parallel import stop_before_work

    agreed = stop_before_work(args, code, message)
    if agreed is not None:
        return agreed
    print(f"quarry: {message}", file=sys.stderr)
    _abort_other_ranks(args, exc)
    return code


def _abort_other_ranks(args: argparse.Namespace, exc: BaseException) -> None:
    """Under MPI, an error that reached here may have struck this rank alone
    (a read of its blocks failed) while the others wait for it in a gather:
    end them all rather than hang. Errors every rank raises together (a build
    that failed somewhere is reported by all) return normally."""
    from quarry.errors import ParallelError

    comm = getattr(args, "comm", None)
    if comm is None or isinstance(exc, ParallelError):
        return
    print(f"quarry: rank {comm.rank} failed; stopping every rank", file=sys.stderr, flush=True)
    comm.Abort(1)


if __name__ == "__main__":
    sys.exit(main())
