"""``quarry reorg FILE... --vars a,b [--bin-size S,.. | --bins N] [--path P]``:
write a clustered copy of variables ordered by their multi-dimensional bin
number (MDBin), one per file, each step group reorganised on its own (also
under mpiexec, every rank taking its share of each file's parts)."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any

from quarry.cli import options
from quarry.outputs.json_text import json_text

if TYPE_CHECKING:
    from quarry.reorg.manifest import CopyManifest


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``quarry reorg``."""
    options.add_files(parser)
    parser.add_argument(
        "--vars", required=True, help="comma-separated variables, in MDBin order (energy,x,y,z)"
    )
    cut = parser.add_mutually_exclusive_group()
    cut.add_argument(
        "--bin-size",
        type=_numbers(float),
        metavar="S[,S...]",
        help="bin width per variable (one for all, or one each; integers round up to whole widths)",
    )
    cut.add_argument(
        "--bins",
        type=_numbers(int),
        metavar="N[,N...]",
        help="equal bins over each variable's range (one for all, or one each; default 16)",
    )
    options.add_path(parser)
    parser.add_argument(
        "--part-rows",
        type=options.positive,
        metavar="R",
        help="rows per part, the unit of parallel work and of the offset tables (default 4194304)",
    )
    options.add_json(parser, "print a JSON summary")
    parser.add_argument(
        "--index",
        metavar="PATH",
        help="where the copy goes: a directory (holding FILE.qmd), or an index file "
        "the copy sits beside (default: FILE.qmd beside the data)",
    )
    options.add_jobs(parser)


def _numbers(kind: type) -> Any:
    """An argparse type: comma-separated numbers of ``kind``.

    Examples
    --------
    >>> _numbers(float)("0.1,10")
    [0.1, 10.0]
    """

    def parse(text: str) -> list[Any]:
        try:
            return [kind(t) for t in text.split(",") if t.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected comma-separated {kind.__name__} numbers, got {text!r}"
            ) from None

    return parse


def run(args: argparse.Namespace) -> int:
    """Reorganise each file; one line per file (or JSON)."""
    import quarry
    from quarry.errors import ReorgError, UsageError
    from quarry.reorg.binning import Binning
    from quarry.reorg.build import check_member

    names = options.names(args.vars, "--vars")
    for option, given in (("--bin-size", args.bin_size), ("--bins", args.bins)):
        if given is not None and len(given) not in (1, len(names)):
            if len(names) == 1:
                raise UsageError(f"{option} gives {len(given)} values for 1 variable: give one")
            raise UsageError(
                f"{option} gives {len(given)} values for {len(names)} variables: give one "
                "for all of them or one for each"
            )
    try:
        Binning.of(len(names), args.bin_size, args.bins)
    except ReorgError as exc:  # the options' own values, whatever the data: a usage error
        raise UsageError(f"{exc}") from None
    from quarry.cli.parallel import start_work

    results = []
    # Under mpiexec every rank reorganises each file with the others; rank 0 speaks.
    speaks = args.comm is None or args.comm.rank == 0
    with quarry.open_series(args.files, index=args.index, path=args.path) as series:
        for file in series.files:  # a mistake shows here, on every rank, before any work
            for member in series.dataset(file).reorganize_plan(names, args.path):
                try:
                    check_member(member)
                except ReorgError as exc:  # --vars naming nothing, or a variable twice
                    raise UsageError(f"--vars: {exc}") from None
        start_work(args)  # under MPI: every rank found the files and their variables
        for file in series.files:
            start = time.perf_counter()
            ds = series.dataset(file)
            manifest = ds.reorganize(
                names,
                args.bin_size,
                args.bins,
                args.path,
                part_rows=args.part_rows,
                comm=args.comm,
            )
            if not speaks:
                continue
            given = ds.index_path if args.index is not None else None
            result = describe(file, given, manifest, time.perf_counter() - start)
            results.append(result)
            if not args.json:
                print(
                    f"reorganised {file}: {len(names)} variable(s) in "
                    f"{len(result['tables'])} table(s), {result['rows']} rows in "
                    f"{result['seconds']:.2f} s -> {result['copy']} ({result['bytes']} bytes)"
                )
    if args.json and speaks:
        print(json_text(results[0] if len(results) == 1 else {"files": results}))
    return 0


def describe(
    file: str, index: str | None, manifest: CopyManifest, seconds: float
) -> dict[str, Any]:
    """What ``quarry reorg --json`` says of one file's copy: what ``quarry
    info`` says of it (:func:`quarry.reorg.read.describe_copy`), with the
    variables, the rows and the time taken."""
    from quarry.errors import CorruptCopyError
    from quarry.reorg.read import describe_copy

    copy = describe_copy(file, index)
    assert copy is not None  # just written
    if copy["state"] == "damaged":  # a copy failing its own checks must not pass for written
        raise CorruptCopyError(copy["error"])
    return {
        "file": file,
        "copy": copy["path"],
        "variables": list(dict.fromkeys(a.path for m in manifest.members for a in m.axes)),
        "tables": copy["tables"],
        "rows": sum(m.rows for m in manifest.members),
        "bytes": copy["bytes"],
        "seconds": round(seconds, 3),
    }
