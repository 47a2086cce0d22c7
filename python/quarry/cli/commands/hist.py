"""``quarry hist FILE... VAR[,VAR2[,VAR3]] [--where Q] [--bins N | --edges E]``:
a histogram of one to three variables, optionally of a selection, over one
file (its steps too) or many (a glob, a list, a directory) with shared edges."""

from __future__ import annotations

import argparse
import itertools
import math
from typing import Any

from quarry.cli import options, render
from quarry.errors import UsageError
from quarry.outputs.json_text import json_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``quarry hist``."""
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="data file(s), a glob pattern or a directory"
    )
    parser.add_argument("vars", help="one to three comma-separated variables, e.g. energy or x,y")
    parser.add_argument(
        "--where", metavar="QUERY", help="histogram only the rows where QUERY is true"
    )
    parser.add_argument(
        "--bins", type=options.positive, default=10, help="bins per axis (default 10, as NumPy)"
    )
    parser.add_argument("--edges", help="explicit bin edges for a 1-D histogram, e.g. 0,0.5,1,2")
    parser.add_argument(
        "--range",
        dest="value_range",
        metavar="LO,HI",
        help="lower and upper edge (1-D; per axis LO,HI;LO,HI for 2-D/3-D)",
    )
    parser.add_argument("--weight", help="weight each row by this variable")
    parser.add_argument("--log", action="store_true", help="log-scaled counts in the picture")
    options.add_json(parser, 'print {"counts": ..., "edges": ...}')
    parser.add_argument(
        "--png", metavar="FILE", type=options.picture_file, help="draw the histogram to a PNG file"
    )
    parser.add_argument(
        "--svg", metavar="FILE", type=options.picture_file, help="draw the histogram to an SVG file"
    )
    options.add_index(parser)
    options.add_jobs(parser)
    options.add_path(parser)
    options.add_si(parser)


def _bins_and_range(args: argparse.Namespace, axes: int) -> tuple[Any, Any]:
    """``--bins``/``--edges`` and ``--range`` as :meth:`quarry.Dataset.histogram` takes them."""
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
            value_range = pairs[0] if axes == 1 else pairs
    except ValueError:
        raise UsageError("--edges and --range take numbers separated by commas") from None
    # Of the wrong form (exit 2), said in the options' words, not NumPy's.
    if args.edges and axes > 1:
        raise UsageError("--edges is for a 1-D histogram; give --bins and --range per axis")
    if args.edges and (len(bins) < 2 or any(b <= a for a, b in itertools.pairwise(bins))):
        raise UsageError(
            f"--edges takes two or more numbers in increasing order, none repeated: {args.edges}"
        )
    for lo, hi in [value_range] if axes == 1 and value_range else value_range or []:
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise UsageError(f"--range takes two finite numbers, the lower first: {lo},{hi}")
        if not math.isfinite(hi - lo):
            raise UsageError(f"--range {lo},{hi} is wider than a float64 holds; narrow it")
    return bins, value_range


def _shown(ds: Any, name: str, path: str) -> str:
    """``name`` under ``path`` as the title writes it: the one variable it
    resolves to, or ``name`` in ``path`` where that spans steps."""
    from quarry.errors import AmbiguousNameError

    try:
        return str(ds.variable(name, path).path)
    except AmbiguousNameError:
        return f"{name} in {path}"


def run(args: argparse.Namespace) -> int:
    import quarry

    names = options.names(args.vars, "--vars")
    if not 1 <= len(names) <= 3:
        raise UsageError("give one to three variables")
    bins, value_range = _bins_and_range(args, len(names))
    target: Any = names if len(names) > 1 else names[0]
    if options.many(args.files):
        # Many files: one series, the members' edges shared and counts summed.
        with quarry.open_series(args.files, index=args.index, path=args.path, si=args.si) as s:
            hist = s.histogram(target, args.where, bins, value_range, args.weight)
        shown = names
    else:
        with quarry.open(args.files[0], index=args.index, si=args.si) as ds:
            hist = ds.histogram(
                target,
                where=args.where,
                bins=bins,
                range=value_range,
                weights=args.weight,
                path=args.path,
            )
            # With --path, the title names what the names resolved to (/Step#3/energy),
            # or, where the path holds one per step (electrons in every step), the path.
            shown = [_shown(ds, n, args.path) for n in names] if args.path else names
    title = f"{', '.join(shown)}" + (f" where {args.where}" if args.where else "")
    for picture in (args.png, args.svg):
        if picture:
            from quarry.outputs.plots import draw_histogram

            draw_histogram(hist, picture, names, args.log, title)
    if args.json:
        print(json_text(render.histogram_result(names, args.where, hist)))
    elif not (args.png or args.svg):
        for line in render.histogram_lines(hist, names):
            print(line)
    else:
        written = ", ".join(p for p in (args.png, args.svg) if p)
        print(f"histogram of {title} ({int(hist.counts.sum())} rows) -> {written}")
    return 0
