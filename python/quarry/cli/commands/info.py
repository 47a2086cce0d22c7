"""``quarry info FILE [--json] [--resolve NAME [--path P]]``: variables,
shapes, dtypes and what is indexed; or what one name in a query means."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from quarry.cli import options, render
from quarry.outputs.json_text import json_text

if TYPE_CHECKING:
    from quarry.dataset import Dataset


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``quarry info``."""
    parser.add_argument("file")
    options.add_json(parser, None)
    parser.add_argument(
        "--resolve", metavar="NAME", help="only say what NAME resolves to (with --path)"
    )
    options.add_index(parser)
    options.add_path(parser)


def run(args: argparse.Namespace) -> int:
    import quarry

    with quarry.open(args.file, index=args.index) as ds:
        if args.resolve:
            return _resolve(args, ds)
        info = render.info_result(ds.info(), args.path)
        from quarry.reorg.read import describe_copy

        copy = describe_copy(ds.path, ds.index_path if args.index is not None else None)
        if copy is not None:
            info["reorganised"] = copy
    if args.json:
        print(json_text(info, indent=2))
        return 0
    for line in render.info_lines(info):
        print(line)
    copy = info.get("reorganised")
    if copy is not None:
        names = sorted({v["path"] for t in copy.get("tables", []) for v in t["variables"]})
        held = f": {', '.join(names)}" if names else ""
        print(f"reorganised copy: {copy['path']} ({copy['state']}){held}")
        if "error" in copy:
            print(f"  copy {copy['state']}: {copy['error']}")
    return 0


def _resolve(args: argparse.Namespace, ds: Dataset) -> int:
    """``--resolve NAME``: what the name resolves to (one line, or JSON)."""
    found = describe(ds, args.resolve, args.path)
    print(json_text(found) if args.json else render.resolution_line(found))
    return 0


def describe(ds: Dataset, name: str, path: str | None) -> dict[str, Any]:
    """What ``name`` resolves to in the open dataset ``ds`` under context ``path``:
    the variable's full path, shape, dtype and whether the index covers it
    (JSON-ready). Raises the ambiguity or unknown-name error otherwise.

    Examples
    --------
    >>> import quarry, h5py, numpy as np, tempfile, os
    >>> file = os.path.join(tempfile.mkdtemp(), "r.h5")
    >>> with h5py.File(file, "w") as f:
    ...     f["Step#0/x"] = np.arange(4.0)
    ...     f["Step#1/x"] = np.arange(5.0)
    >>> with quarry.open(file) as ds:
    ...     d = describe(ds, "x", "Step#1")
    >>> d["variable"], d["shape"], d["dtype"], d["indexed"]
    ('/Step#1/x', [5], 'float64', False)
    """
    from quarry.errors import QuarryError

    info = ds.variable(name, path)
    indexed = False
    index_state = "none"
    if ds.has_index:
        try:
            indexed = info.path in ds.index.variables
            index_state = "ok"
        except QuarryError as exc:
            index_state = f"unusable: {exc}"
    out: dict[str, Any] = {
        "name": name,
        "path": path,
        "variable": info.path,
        "shape": list(info.shape),
        "dtype": str(info.dtype),
        "indexed": indexed,
        "index": index_state,
    }
    if info.problem:
        out["unsupported"] = info.problem
    return out
