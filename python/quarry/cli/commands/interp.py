"""``quarry interp FILE... --field NAME=SPEC... --at x,y,z``: mesh fields
interpolated at the positions of the selected particles (the SCJoin of
SDS-MD; see :mod:`quarry.join`), in one file or over a series (several
files, or a file's step groups: the table then leads with ``quarry_step``,
and over several files with ``quarry_file`` before it).

    quarry interp particles.h5 --field bx=field/bx.bin --field by=field/by.bin --at x,y,z
        [--grid "origin=0,0,0 spacing=2.6,2.6,1.04"] [--method trilinear]
        [--where "1.2 < energy < 1.3"] [--values energy] [--outside nan|clamp]
        [--out hits.h5 | --json]
"""

from __future__ import annotations

import argparse
import contextlib
import time
from typing import TYPE_CHECKING, Any

from quarry.cli import options, render
from quarry.errors import UsageError
from quarry.outputs.json_text import json_text

if TYPE_CHECKING:
    from quarry.dataset import Dataset
    from quarry.join import Interpolated
    from quarry.query.selection import Selection
    from quarry.query.series import SeriesSelection
    from quarry.series import Series


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``quarry interp``."""
    parser.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="the particles' data file, or a series: several files, a glob (run_*.h5), a "
        "directory; a file with step groups is interpolated step by step",
    )
    parser.add_argument(
        "--field",
        action="append",
        required=True,
        metavar="NAME=FILE[:VAR][SUB]",
        help="a field to interpolate, as the column NAME: a file (raw binary described with "
        "quarry register, HDF5, NetCDF, Zarr, ADIOS2), :VAR to pick its variable (default: "
        "its only one, else NAME), subscripts for a part, e.g. bx=field/bx.bin[:, 64, 64]; "
        "over a series, {step} in it is the step number and a * in its file name takes one "
        "file per step; repeat for more fields",
    )
    parser.add_argument(
        "--at",
        required=True,
        metavar="X[,Y[,Z]]",
        help="the particles' position variables, one per field axis, axis 0 first",
    )
    parser.add_argument(
        "--grid",
        metavar="TEXT",
        help='the fields\' grid, axis 0 first: "origin=0,0,0 spacing=2.6,2.6,1.04" (element '
        "[i,j,k] at origin + (i,j,k)*spacing); default: the file's coordinate variables",
    )
    parser.add_argument(
        "--method",
        choices=("linear", "bilinear", "trilinear"),
        help="default: the one --at calls for (1, 2 or 3 coordinates)",
    )
    parser.add_argument("--where", metavar="QUERY", help="only the particles where QUERY is true")
    parser.add_argument("--values", metavar="A,B", help="also the values of these variables")
    parser.add_argument(
        "--outside",
        choices=("nan", "clamp"),
        default="nan",
        help="particles outside a field's grid: NaN (the default) or the nearest edge's value",
    )
    parser.add_argument(
        "--out",
        metavar="FILE",
        type=options.output_file,
        help="write the table to FILE, by extension: .h5, .nc, .parquet, .csv or .npy "
        "(default: CSV lines on stdout)",
    )
    options.add_json(parser, "print the count and each field's min, max, mean as JSON")
    options.add_index(parser)
    options.add_jobs(parser)
    options.add_path(parser)
    options.add_si(parser)


def _fields(specs: list[str]) -> dict[str, str]:
    """``--field NAME=SPEC`` options as names -> specs.

    Examples
    --------
    >>> _fields(["bx=field/bx.bin", "by=f.nc:by[:, 3]"])
    {'bx': 'field/bx.bin', 'by': 'f.nc:by[:, 3]'}
    >>> _fields(["field/bx.bin"])
    Traceback (most recent call last):
    ...
    quarry.errors.UsageError: --field 'field/bx.bin': write NAME=FILE, e.g. --field bx=field/bx.bin
    """
    out: dict[str, str] = {}
    for spec in specs:
        name, equals, where = spec.partition("=")
        name = name.strip()
        if not equals or not name or not where.strip():
            raise UsageError(f"--field {spec!r}: write NAME=FILE, e.g. --field bx=field/bx.bin")
        if name in out:
            raise UsageError(f"--field {name} is given twice; give each field its own name")
        out[name] = where.strip()
    return out


def run(args: argparse.Namespace) -> int:
    import quarry
    from quarry.errors import JoinArgumentError

    start = time.perf_counter()
    fields = _fields(args.field)
    at = options.names(args.at, "--at")
    if not at:
        raise UsageError(f"--at {args.at!r} names no variable: give 1 to 3, e.g. --at x,y,z")
    values = options.names(args.values, "--values")
    # Without --where, every particle of the table all these variables form
    # (1-D coordinates --at broadcast along a 2-D --values variable's axes).
    named = list(dict.fromkeys([*at, *values]))
    files = args.files
    joins = dict(grid=args.grid, method=args.method, outside=args.outside, values=values)
    try:
        with contextlib.ExitStack() as opened:
            if options.many(files):
                series = opened.enter_context(
                    quarry.open_series(files, index=args.index, path=args.path, si=args.si)
                )
                sel: Selection | SeriesSelection = _selected(series, args, named)
                sources = list(series.files)
            else:
                ds = opened.enter_context(quarry.open(files[0], index=args.index, si=args.si))
                sel = _selected(ds, args, named)
                sources = [ds.path]
            table = sel.interpolate(fields, at, **joins)
    except JoinArgumentError as exc:
        raise UsageError(str(exc)) from None
    if args.out:
        _write(args, table, fields, sources)
    if args.json:
        print(json_text(_result(args, table, time.perf_counter() - start)))
    elif args.out:
        print(f"{len(table)} particle(s) written to {args.out}")
    else:
        print(render.csv_header(table.columns))
        for line in render.csv_lines(table.columns):
            print(line)
    return 0


def _selected(
    source: Dataset | Series, args: argparse.Namespace, named: list[str]
) -> Selection | SeriesSelection:
    """The particles ``--where`` selects in one file or a series (without it,
    every one of the table the ``named`` variables form; a file's step
    groups spread over as a query spreads over them)."""
    from quarry.series import Series

    if isinstance(source, Series):
        return source.query(args.where) if args.where else source.select_all(named)
    if args.where:
        return source.query(args.where, args.path)
    return source.select_all(named, args.path)


def _write(
    args: argparse.Namespace, table: Interpolated, fields: dict[str, str], sources: list[str]
) -> None:
    """The table to ``--out``, with the provenance of the particles' files
    (``sources``) and the join's arguments."""
    from quarry.outputs.writers import sources_provenance, write_values

    attrs = sources_provenance(sources, args.where or "")
    attrs.update(
        fields=" ".join(f"{name}={spec}" for name, spec in fields.items()),
        at=args.at,
        grid=args.grid,
        outside=args.outside,
        path=args.path,
    )
    write_values(args.out, table.output, attrs)


def _result(args: argparse.Namespace, table: Interpolated, seconds: float) -> dict[str, Any]:
    """What ``--json`` prints."""
    return {
        "file": args.files[0] if len(args.files) == 1 else args.files,
        "where": args.where,
        "count": len(table),
        "fields": table.summary(),
        "out": args.out,
        "seconds": round(seconds, 6),
    }
