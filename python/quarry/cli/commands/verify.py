"""``quarry verify FILE...``: check every indexed value against the CRCs its
index recorded, and the reorganised copy whole; exit 1 if any changed or could
not be checked."""

from __future__ import annotations

import argparse
from typing import Any

from quarry.cli import options, render
from quarry.outputs.json_text import json_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``quarry verify``."""
    options.add_files(parser)
    options.add_json(parser, "print one JSON object")
    options.add_index(parser)
    options.add_jobs(parser)


def run(args: argparse.Namespace) -> int:
    """Every file's index checked against the file; one line (or JSON entry)
    per file."""
    import quarry
    from quarry.errors import QuarryError

    reports: list[dict[str, Any]] = []
    with quarry.open_series(args.files, index=args.index) as series:
        for file in series.files:
            try:
                report = series.dataset(file).verify()
            except QuarryError as exc:
                reports.append({"file": file, "ok": False, "error": str(exc)})
                line = f"error {file}: {exc}"
            else:
                reports.append(report.to_json())
                line = report.summary()
            if not args.json:
                print(line)
    result = render.verify_result(reports)
    if args.json:
        print(json_text(result))
    return 0 if result["ok"] else 1
