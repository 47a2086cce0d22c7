"""``quarry plot FILE X Y --where Q --png F``: every row as a grey density,
a selection over it in colour."""

from __future__ import annotations

import argparse

from quarry.cli import options
from quarry.errors import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``quarry plot``."""
    parser.add_argument("file")
    parser.add_argument("x")
    parser.add_argument("y")
    parser.add_argument("--where", metavar="QUERY", required=True, help="the rows to highlight")
    parser.add_argument("--png", metavar="FILE", type=options.picture_file, help="PNG to write")
    parser.add_argument("--svg", metavar="FILE", type=options.picture_file, help="SVG to write")
    parser.add_argument("--bins", type=int, default=200, help="density bins per axis (default 200)")
    options.add_index(parser)
    options.add_jobs(parser)
    options.add_path(parser)
    options.add_si(parser)


def run(args: argparse.Namespace) -> int:
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
