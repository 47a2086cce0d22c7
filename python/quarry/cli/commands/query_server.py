"""``quarry query --server URL PATH QUERY [--count | --ids | --values a,b]
[--per-step] [--json] [--path P]``: a query answered by a Quarry server
(:mod:`quarry.service`), ``PATH`` as its catalog names the file.

The output is the local command's: the count (``--json``: an object with
the query, file, count and time taken), ``--per-step`` counts, ids one per
line, or values as CSV under their names (``--json``: lists).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from quarry.cli import options, render
from quarry.errors import UsageError
from quarry.outputs.json_text import json_text

#: Options of ``quarry query`` a server does not take, as the command line spells them.
_LOCAL_ONLY = (
    "coords", "coords_of", "out", "save", "explain", "load", "plot", "batch", "out_per_rank",
    "index", "si",
)  # fmt: skip


def run(args: argparse.Namespace) -> int:
    """Answer ``quarry query --server``."""
    from quarry.service.client import connect

    given = [f"--{o.replace('_', '-')}" for o in _LOCAL_ONLY if getattr(args, o, None)]
    if given:
        raise UsageError(f"{', '.join(given)} cannot be used with --server")
    if len(args.inputs) != 2:
        raise UsageError("with --server give one file (as the server names it) and a query")
    path, query = args.inputs
    start = time.perf_counter()
    sel = connect(args.server, comm=args.comm).open(path).query(query, args.path)
    if args.ids or args.values:
        return _rows(args, sel, path, start)
    if args.per_step:
        print(json_text(render.per_step_result(sel.per_step())))
        return 0
    count = sel.count()
    if args.json:
        elapsed = render.milliseconds(time.perf_counter() - start)
        result = {"query": query, "file": path, "server": args.server, "count": count}
        print(json_text({**result, "elapsed_ms": elapsed}))
    else:
        print(count)
    return 0


def _rows(args: argparse.Namespace, sel: Any, path: str, start: float) -> int:
    """``--ids`` or ``--values`` of one table (a series asks for --per-step counts)."""
    if sel.series:
        raise UsageError(
            "over step groups, --server gives counts (--per-step); choose one step with --path"
        )
    names = options.names(args.values, "--values")
    ids = sel.ids()
    columns = {name: sel.values(name) for name in names}
    if args.json:
        hits: dict[str, Any] = {"ids": ids.tolist()}
        if names:
            hits = {"values": {n: v.tolist() for n, v in columns.items()}}
        elapsed = render.milliseconds(time.perf_counter() - start)
        print(json_text({"query": sel.query, "file": path, "count": len(ids), **hits,
                          "elapsed_ms": elapsed}))  # fmt: skip
    elif names:
        from quarry.outputs.columns import ROW, own_name

        table = {own_name(ROW, names): ids, **columns}  # as the local command's columns
        print(render.csv_header(table))
        for line in render.csv_lines(table):
            print(line)
    else:
        for row in ids.tolist():
            print(row)
    return 0
