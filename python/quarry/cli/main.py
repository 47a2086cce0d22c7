"""The ``quarry`` command.

    quarry index FILE [--vars a,b] [--bins N] [--precision P] [--block-size B]
    quarry query FILE QUERY [--count | --ids | --coords | --values a,b] [--out F] [--json]
    quarry info FILE [--json]
    quarry register FILE --dtype <f4 --shape NX,NY,NZ [--order C|F] [--offset B]
    quarry demo [--dir DIR]

Errors print one line (a query error also prints the query with a caret) and
exit non-zero: 2 for a malformed query or bad arguments, 1 for anything else.
``--debug`` shows the traceback. Heavy modules are imported only by the
commands that need them, so a count starts fast.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="quarry",
        description="Exact, fast range queries over scientific array files.",
    )
    p.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def index_option(sp: argparse.ArgumentParser) -> None:
        sp.add_argument(
            "--index",
            metavar="PATH",
            help="index file location (default: FILE.qidx beside the data)",
        )

    ix = sub.add_parser("index", help="build the index of a file")
    ix.add_argument("file")
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
    ix.add_argument("--json", action="store_true", help="print a JSON summary")
    index_option(ix)

    q = sub.add_parser("query", help="evaluate a query")
    q.add_argument("file")
    q.add_argument("query", help='e.g. "energy > 1.3 && x < 100"')
    out = q.add_mutually_exclusive_group()
    out.add_argument("--count", action="store_true", help="number of hits (the default)")
    out.add_argument("--ids", action="store_true", help="flat row-major ids of the hits")
    out.add_argument("--coords", action="store_true", help="N-d indices of the hits")
    out.add_argument("--values", metavar="A,B", help="values of these variables at the hits")
    q.add_argument("--out", metavar="FILE", help="write ids/coords/values to .npy, .csv or .h5")
    q.add_argument("--json", action="store_true", help="print a JSON object")
    index_option(q)

    info = sub.add_parser("info", help="variables, shapes, dtypes, and what is indexed")
    info.add_argument("file")
    info.add_argument("--json", action="store_true")
    index_option(info)

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

    demo = sub.add_parser("demo", help="generate a sample, index it, query it, draw a histogram")
    demo.add_argument("--dir", default="quarry-demo", help="where to put the sample and pictures")
    demo.add_argument("--rows", type=int, default=1 << 21, help="particles in the sample")
    return p


def _cmd_index(args: argparse.Namespace) -> int:
    import quarry

    start = time.perf_counter()
    with quarry.open(args.file, index=args.index) as ds:
        names = [n.strip() for n in args.vars.split(",") if n.strip()] if args.vars else None
        manifest = ds.build_index(
            names, bins=args.bins, precision=args.precision, block_len=args.block_len
        )
        index_path = ds.index_path
    elapsed = time.perf_counter() - start
    import os

    size = os.path.getsize(index_path)
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


def _cmd_query(args: argparse.Namespace) -> int:
    import quarry

    start = time.perf_counter()
    with quarry.open(args.file, index=args.index) as ds:
        sel = ds.query(args.query)
        result: dict[str, Any] = {"query": args.query, "file": args.file}
        if args.ids or args.coords or args.values:
            return _emit_rows(args, ds, sel, result, start)
        result["count"] = sel.count()
        result["elapsed_ms"] = round((time.perf_counter() - start) * 1e3, 3)
        print(json.dumps(result) if args.json else result["count"])
    return 0


def _emit_rows(
    args: argparse.Namespace, ds: Any, sel: Any, result: dict[str, Any], start: float
) -> int:
    from quarry.outputs import write_positions, write_values

    ids = sel.ids()
    result["count"] = len(ids)
    if args.values:
        names = [n.strip() for n in args.values.split(",") if n.strip()]
        columns = {n: sel.values(n) for n in names}
        if args.out:
            import quarry

            write_values(
                args.out,
                ids,
                columns,
                {
                    "query": args.query,
                    "source": args.file,
                    "quarry_version": quarry.__version__,
                },
            )
        elif args.json:
            result["values"] = {n: v.tolist() for n, v in columns.items()}
        else:
            print(",".join(["id", *names]))
            for row in zip(ids.tolist(), *(c.tolist() for c in columns.values()), strict=True):
                print(",".join(repr(x) if isinstance(x, float) else str(x) for x in row))
            return 0
    else:
        data = sel.coords() if args.coords else ids
        key = "coords" if args.coords else "ids"
        if args.out:
            write_positions(args.out, data)
        elif args.json:
            result[key] = data.tolist()
        else:
            for row in data.tolist():
                print(" ".join(map(str, row)) if args.coords else row)
            return 0
    if args.out:
        result["out"] = args.out
    result["elapsed_ms"] = round((time.perf_counter() - start) * 1e3, 3)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{result['count']} hit(s) written to {args.out}")
    return 0


def _cmd_register(args: argparse.Namespace) -> int:
    import os

    import numpy as np

    from quarry.formats.raw import RawLayout, register

    try:
        shape = tuple(int(s) for s in args.shape.split(","))
    except ValueError:
        print(
            f"quarry: error: --shape must be integers separated by commas, got {args.shape!r}",
            file=sys.stderr,
        )
        return 2
    name = args.name or os.path.splitext(os.path.basename(args.file))[0]
    try:
        np.dtype(args.dtype)
    except TypeError:
        print(f"quarry: error: unknown dtype {args.dtype!r} (e.g. <f4, >f8, <i4)", file=sys.stderr)
        return 2
    layout = RawLayout(name, args.dtype, shape, args.order, args.offset, args.fill_value)
    where = register(args.file, layout, args.index)
    print(f"registered {args.file} as /{name} {args.dtype} {shape} -> {where}")
    return 0


def _cmd_info(args: argparse.Namespace) -> int:
    import quarry

    with quarry.open(args.file, index=args.index) as ds:
        info = ds.info()
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
        stats = v.get("stats")
        if stats and stats["count"]:
            mark += (
                f"  min {stats['min']:.6g}  max {stats['max']:.6g}  mean {stats['mean']:.6g}"
                f"  std {stats['std']:.6g}  missing {stats['missing']}"
            )
        print(f"  {v['path']:<40} {tuple(v['shape'])!s:<16} {v['dtype']:<8} {mark}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    args = _parser().parse_args(argv)
    from quarry.errors import QuarryError, QuerySyntaxError

    commands = {
        "index": _cmd_index,
        "query": _cmd_query,
        "info": _cmd_info,
        "register": _cmd_register,
    }
    try:
        if args.command == "demo":
            from quarry.cli.demo import run_demo

            return run_demo(args.dir, args.rows)
        return commands[args.command](args)
    except QuerySyntaxError as exc:
        if args.debug:
            raise
        print(f"quarry: error in query: {exc}", file=sys.stderr)
        return 2
    except (QuarryError, OSError) as exc:
        if args.debug:
            raise
        print(f"quarry: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("quarry: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
