"""``quarry info FILE --resolve NAME [--path P]``: what a name in a query means."""

from __future__ import annotations

import json
from typing import Any


def describe(ds: Any, name: str, path: str | None) -> dict[str, Any]:
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


def cmd_resolve(args: Any) -> int:
    """Print what ``args.resolve`` resolves to in ``args.file`` (one line, or JSON)."""
    import quarry

    with quarry.open(args.file, index=args.index) as ds:
        found = describe(ds, args.resolve, args.path)
    if args.json:
        print(json.dumps(found))
        return 0
    mark = found.get("unsupported") or ("indexed" if found["indexed"] else "not indexed")
    if found["index"].startswith("unusable"):
        mark += f" (index {found['index']})"
    where = f" under {args.path}" if args.path else ""
    print(
        f"{args.resolve}{where} -> {found['variable']}  {tuple(found['shape'])}  "
        f"{found['dtype']}  {mark}"
    )
    return 0
