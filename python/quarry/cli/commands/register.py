"""``quarry register FILE --dtype <f4 --shape NX,NY,NZ``: describe a raw
binary file so it can be queried."""

from __future__ import annotations

import argparse
import math
from typing import Any

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
        "--fill-value", dest="fill_value", help="a value that marks missing data (of the dtype)"
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
        dtype = np.dtype(args.dtype)
    except TypeError:
        raise UsageError(f"unknown dtype {args.dtype!r} (e.g. <f4, >f8, <i4)") from None
    fill = None if args.fill_value is None else _fill_value(args.fill_value, dtype)
    layout = RawLayout(name, args.dtype, shape, args.order, args.offset, fill)
    where = register(args.file, layout, args.index)
    print(f"registered {args.file} as /{name} {args.dtype} {shape} -> {where}")
    return 0


def _fill_value(text: str, dtype: Any) -> float | int:
    """``--fill-value`` as a value of ``dtype``: an integer dtype's exactly
    (a float would round 2**53 + 1 to 2**53, marking that value missing).

    Examples
    --------
    >>> import numpy as np
    >>> _fill_value("9007199254740993", np.dtype("<i8")), _fill_value("-1e20", np.dtype("<f4"))
    (9007199254740993, -1e+20)
    >>> _fill_value("-9999.0", np.dtype("<i2")), _fill_value("-inf", np.dtype("<f8"))
    (-9999, -inf)
    >>> _fill_value("0.5", np.dtype("<i2"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    quarry.errors.UsageError: --fill-value 0.5 is not a value of <i2: give an integer from ...
    """
    import numpy as np

    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        whole = _integer(text)
        if whole is None or not info.min <= whole <= info.max:
            raise UsageError(
                f"--fill-value {text} is not a value of {dtype.str}: give an integer from "
                f"{info.min} to {info.max}"
            )
        return whole
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"--fill-value takes a number, got {text!r}") from None
    finite = float(np.finfo(dtype).max) if dtype.kind == "f" else math.inf
    if math.isfinite(value) and abs(value) > finite:
        raise UsageError(
            f"--fill-value {text} is not a value of {dtype.str}: past its largest, "
            f"{finite:g}, it would be infinity and mark every infinity missing"
        )
    return value


def _integer(text: str) -> int | None:
    """``text`` as an exact integer: written as one (``-9999``, any size), or
    as a float that is one and that float64 holds exactly (``-9999.0``,
    ``1e4``); None otherwise."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return None
    if number.is_integer() and abs(number) <= 2**53:
        return int(number)
    return None
