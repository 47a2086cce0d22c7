"""``quarry register FILE --dtype <f4 --shape NX,NY,NZ``: describe a raw
binary file so it can be queried."""

from __future__ import annotations

import argparse

from quarry.errors import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``quarry register``."""
    parser.add_argument("file")
    parser.add_argument("--dtype", required=True, help="NumPy dtype with byte order, e.g. <f4, >i8")
    parser.add_argument("--shape", required=True, help="comma-separated, e.g. 128,128,128")
    parser.add_argument(
        "--order",
        choices=["C", "F"],
        default="C",
        help="C (row-major, default) or F (Fortran, column-major)",
    )
    parser.add_argument("--offset", type=int, default=0, help="bytes before the first element")
    parser.add_argument("--name", help="variable name (default: the file name without extension)")
    parser.add_argument(
        "--fill-value", type=float, dest="fill_value", help="a value that marks missing data"
    )
    parser.add_argument(
        "--index", metavar="DIR", help="keep the description in this directory (read-only data)"
    )


def run(args: argparse.Namespace) -> int:
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
