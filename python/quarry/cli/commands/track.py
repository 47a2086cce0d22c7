"""``quarry track FILE... QUERY --at-step S``: select particles at one step
and follow their ids through every step."""

from __future__ import annotations

import argparse

from quarry.cli import options, render
from quarry.errors import UsageError
from quarry.outputs.json_text import json_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``quarry track``."""
    parser.add_argument(
        "inputs", nargs="+", metavar="FILE... QUERY", help="data file(s), then the query"
    )
    parser.add_argument("--at-step", type=int, required=True, help="the step where QUERY selects")
    parser.add_argument(
        "--id-var", default="id", help="integer variable of particle ids (default id)"
    )
    parser.add_argument("--values", metavar="A,B", help="variables to read at every step")
    options.add_json(parser, "print everything as one JSON object")
    parser.add_argument(
        "--out",
        metavar="F.h5",
        type=options.groups_file,
        help="write one group per step to .h5 or .nc (.parquet: one table with a step column)",
    )
    options.add_index(parser)
    options.add_jobs(parser)
    options.add_path(parser)
    options.add_si(parser)


def run(args: argparse.Namespace) -> int:
    import quarry
    from quarry.formats.sources import expand_sources
    from quarry.query.track import track

    *sources, query = args.inputs
    if not sources:
        raise UsageError("give the data file(s), then the query")
    files = expand_sources(sources)
    with quarry.open_series(files, index=args.index, path=args.path, si=args.si) as series:
        tracks = track(
            series, query, args.at_step, args.id_var, options.names(args.values, "--values")
        )
    if args.out:
        tracks.write(args.out, files)
    if args.json:
        print(json_text(tracks.to_dict()))
        return 0
    for line in render.track_lines(tracks, args.at_step):
        print(line)
    if args.out:
        print(f"written to {args.out}")
    return 0
