"""The options several ``quarry`` commands share, each defined once here so
that its spelling, type and help read the same in every command."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable


def _file_of(check: Callable[[str], object], text: str) -> str:
    """``text``, a file path that ``check`` accepts, or the argparse error
    that refuses it before any work is done (exit 2)."""
    from quarry.errors import UsageError

    try:
        check(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


# The output files' argparse types. Their checks are imported when an
# option is given: a command without one starts without NumPy.


def output_file(text: str) -> str:
    """An argparse type: a table's file (.h5, .nc, .parquet, .csv, .npy)."""
    from quarry.outputs.writers import output_format

    return _file_of(output_format, text)


def groups_file(text: str) -> str:
    """An argparse type: a file of one group per step (.h5, .nc, .parquet)."""
    from quarry.outputs.writers import check_groups_path

    return _file_of(check_groups_path, text)


def picture_file(text: str) -> str:
    """An argparse type: a picture (.png, .svg)."""
    from quarry.outputs.plots import picture_format

    return _file_of(picture_format, text)


#: The options naming a file a command writes.
OUTPUT_OPTIONS = ("out", "png", "svg", "plot")


def refuse_writing_over_inputs(args: argparse.Namespace) -> None:
    """Refuse, before any work (exit 2), an output option naming a file the
    command reads: a data file, a field's file, a file of a series'
    directory or the index (see :func:`quarry.outputs.writers.refuse_inputs`)."""
    outputs = [getattr(args, name) for name in OUTPUT_OPTIONS if getattr(args, name, None)]
    if not outputs:
        return
    from quarry.outputs.writers import refuse_inputs

    if getattr(args, "out_per_rank", False) and getattr(args, "out", None):
        from quarry.parallel.mpi import launched_ranks
        from quarry.parallel.runners import rank_path

        # What each rank will write (hits.rank0001.npy), named as read too.
        outputs += [rank_path(args.out, rank) for rank in range(launched_ranks())]

    inputs = files_read(args)
    for out in outputs:
        refuse_inputs(out, inputs)


def files_read(args: argparse.Namespace) -> list[str]:
    """The files (and directories) a command's arguments name to read: its
    positional files (globs expanded; a query's text names none), each
    ``--field``'s file (``{step}`` and ``*`` matching every step's) and ``--index``.

    Examples
    --------
    >>> ns = argparse.Namespace(inputs=["run.h5", "x > 1"], field=["bx=f.nc:bx[:, 3]"])
    >>> files_read(ns)
    ['run.h5', 'x > 1', 'f.nc:bx', 'f.nc']
    """
    import glob

    named: list[str] = []
    for attr in ("file", "files", "inputs", "index"):
        value = getattr(args, attr, None)
        named += [value] if isinstance(value, str) else list(value or [])
    for spec in getattr(args, "field", None) or []:
        # FILE[:VAR][SUBSCRIPTS]: each way of cutting it that may name the file.
        where = spec.partition("=")[2].strip()
        whole = where.partition("[")[0] if where.endswith("]") else where
        for name in dict.fromkeys((where, whole, whole.rpartition(":")[0])):
            if name:
                named.append(name.replace("{step}", "*"))
    files: list[str] = []
    for name in named:
        is_pattern = glob.has_magic(name) and not os.path.exists(name)
        files += sorted(glob.glob(name)) if is_pattern else [name]
    return files


def count(text: str) -> int:
    """An argparse type: a whole number, 0 or more.

    Examples
    --------
    >>> count("8")
    8
    >>> count("-1")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: expected 0 or more, got -1
    """
    return _at_least(text, 0)


def positive(text: str) -> int:
    """An argparse type: a whole number, 1 or more.

    Examples
    --------
    >>> positive("8")
    8
    >>> positive("0")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: expected 1 or more, got 0
    >>> positive("-5")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: expected 1 or more, got -5
    """
    return _at_least(text, 1)


def _at_least(text: str, least: int) -> int:
    """``text`` as a whole number of ``least`` or more, or argparse's error saying which."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"expected {least} or more, got {value}")
    return value


def names(text: str | None, option: str) -> list[str]:
    """A comma-separated list of variables given to ``option`` (``--vars``,
    ``--values``, ``--at``) as names; empty for no option. Commas inside
    subscripts stay with their name (``pos[:, 0]``). A trailing comma is
    let be, and only commas are no names; an empty name between names is
    refused, since a name's place can matter (``--at x,,z`` would give z to
    the second axis).

    Examples
    --------
    >>> names("x, y,energy,", "--vars"), names(None, "--vars"), names(" , ", "--vars")
    (['x', 'y', 'energy'], [], [])
    >>> names("pos[:, 0],pos[:, 1], e", "--at")
    ['pos[:, 0]', 'pos[:, 1]', 'e']
    >>> from quarry.errors import UsageError
    >>> try:
    ...     names("x,,z", "--at")
    ... except UsageError as exc:
    ...     print(exc)
    --at 'x,,z': name 2 is empty; give a variable between each two commas
    """
    from quarry.errors import UsageError

    if not text:
        return []
    out, depth, start = [], 0, 0
    for at, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth <= 0:
            out.append(text[start:at].strip())
            start = at + 1
    last = text[start:].strip()
    if last or not out:
        out.append(last)
    if not any(out):
        return []  # no name at all: the caller says what it needs
    if "" in out:
        raise UsageError(
            f"{option} {text!r}: name {out.index('') + 1} is empty; "
            "give a variable between each two commas"
        )
    return out


def many(files: list[str]) -> bool:
    """Whether command-line sources stand for more than one plain file.

    Examples
    --------
    >>> many(["run.h5"]), many(["a.h5", "b.h5"]), many(["run_*.h5"])
    (False, True, True)
    """
    from quarry.formats.sources import is_many

    return len(files) > 1 or any(is_many(f) for f in files)


def add_files(parser: argparse.ArgumentParser) -> None:
    """``FILE...``: the data files of ``quarry index`` and ``quarry verify``."""
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="data file(s), a glob pattern or a directory"
    )


def add_json(parser: argparse.ArgumentParser, help: str | None) -> None:
    """``--json``, saying what the command prints as JSON."""
    parser.add_argument("--json", action="store_true", help=help)


def add_quiet(parser: argparse.ArgumentParser) -> None:
    """``--quiet``: no progress bar."""
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def add_index(parser: argparse.ArgumentParser) -> None:
    """``--index PATH``: where the index is, when not beside the data."""
    parser.add_argument(
        "--index",
        metavar="PATH",
        help="index file location (default: FILE.qidx beside the data)",
    )


def add_jobs(parser: argparse.ArgumentParser) -> None:
    """``--jobs N``: threads (:func:`quarry.parallel.threads`)."""
    parser.add_argument(
        "--jobs",
        "-j",
        type=count,
        default=0,
        metavar="N",
        help="threads to use (default 0: one per core)",
    )


def add_path(parser: argparse.ArgumentParser) -> None:
    """``--path P``: the context in which bare names resolve."""
    parser.add_argument(
        "--path",
        metavar="P",
        help="context in which bare names resolve, e.g. Step#3 (names under */P/*; "
        "globs allowed; a name matching in separate groups is an error listing them)",
    )


def add_si(parser: argparse.ArgumentParser) -> None:
    """``--si``: openPMD values in SI units."""
    parser.add_argument(
        "--si",
        action="store_true",
        help="openPMD: values in SI units (stored value * unitSI, in float64), in the "
        "query and every output (default: the stored values)",
    )
