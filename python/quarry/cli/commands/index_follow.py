"""``quarry index --follow run.bp`` and ``quarry index --follow 'run_*.h5'``:
index a run while it is written (:mod:`quarry.insitu`), one line (or JSON
line) per step or file as its index is published."""

from __future__ import annotations

import argparse
import os
from typing import Any

from quarry.errors import IndexMissingError, StaleIndexError, UsageError
from quarry.outputs.json_text import json_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options ``--follow`` brings to ``quarry index``."""
    parser.add_argument(
        "--follow",
        action="store_true",
        help="index a run while it is written: an ADIOS2 BP5 run step by step, or the "
        "files of a pattern ('run_*.h5') each once complete; stops when the writer closes "
        "the run or after --idle-timeout",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="with --follow: stop when nothing new comes for this long (default 60)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="with --follow over files: a file is complete once it opens and its size and "
        "modification time stay unchanged this long (default 2)",
    )


def run_follow(args: argparse.Namespace) -> int:
    """Follow the one source given; print each step (or file) published."""
    from quarry.formats import is_store
    from quarry.index.options import BuildOptions

    if len(args.files) != 1:
        raise UsageError("--follow takes one run: a BP5 directory or a quoted pattern")
    if getattr(args, "comm", None) is not None or args.derive or args.vars or args.force:
        raise UsageError(
            "--follow indexes every variable by itself: no --vars, --derive, --force or mpiexec"
        )
    if args.idle_timeout <= 0 or args.settle < 0:
        raise UsageError("--idle-timeout must be positive and --settle not negative")
    defaults = BuildOptions()
    opts = BuildOptions(
        bins=args.bins or defaults.bins,
        precision=defaults.precision if args.precision is None else args.precision,
        block_len=args.block_len or defaults.block_len,
    )
    source = args.files[0]

    def say(line: dict[str, Any], text: str) -> None:
        print(json_text(line) if args.json else text, flush=True)

    if source.rstrip("/").endswith(".bp") or (os.path.isdir(source) and is_store(source)):
        from quarry.insitu.follow_bp import follow_bp

        def published(step: int) -> None:
            say(
                {"file": source, "step": step, "steps_indexed": step + 1},
                f"indexed step {step} of {source}",
            )

        report = follow_bp(
            source,
            index=args.index,
            idle_timeout=args.idle_timeout,
            options=opts,
            published=published,
        )
        why = (
            "the writer closed it"
            if report.closed
            else (f"no step came for {args.idle_timeout:g} s; run again to go on")
        )
        say(
            {**report.to_json(), "done": True},
            f"{source}: {report.steps_indexed} step(s) indexed, "
            f"{len(report.indexed_now)} now; stopped: {why}",
        )
        return 0
    from quarry.insitu.follow_files import follow_files

    if args.index is not None and not os.path.isdir(args.index):
        raise UsageError("--follow over files puts each file's index in --index DIR: a directory")
    files = follow_files(
        source,
        index=args.index,
        idle_timeout=args.idle_timeout,
        settle=args.settle,
        options=opts,
        published=lambda file, index: say(
            {"file": file, "index": index}, f"indexed {file} -> {index}"
        ),
        waiting=lambda file, why: say({"file": file, "waiting": why}, f"waiting for {file}: {why}"),
    )
    say(
        {**files.to_json(), "done": True},
        f"{source}: {len(files.indexed)} file(s) indexed, {len(files.up_to_date)} up to date; "
        f"stopped: no file completed for {args.idle_timeout:g} s",
    )
    if files.stale:
        raise StaleIndexError(
            f"{len(files.stale)} file(s) changed after their index was built and were not "
            f"complete again when the follower stopped ({', '.join(files.stale)}): their "
            f"index is stale; run 'quarry index --follow' again once the writer is done"
        )
    if files.incomplete:
        raise IndexMissingError(
            f"{len(files.incomplete)} file(s) matched but never became complete (still for "
            f"--settle {args.settle:g} s, and open) while the follower ran "
            f"({', '.join(files.incomplete)}): they have no index; run 'quarry index --follow' "
            "again once the writer is done"
        )
    return 0
