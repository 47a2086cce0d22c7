"""Saved selections: the rows of a query kept on disk, to fetch more
variables later without running the query again.

A ``.qsel`` file holds a JSON header (the query and the context its bare
names resolved in, the table's shape,
dimensions and block length, the source's fingerprint, the Quarry version)
and the rows as one checksummed Roaring bitmap per block. Loading refuses a
source that changed since, as an index does.
"""

from __future__ import annotations

import json
import os
import struct
from typing import TYPE_CHECKING, Any

from quarry import _core
from quarry.errors import SelectionFileError, StaleSelectionError
from quarry.formats.base import fingerprint

if TYPE_CHECKING:
    from quarry.dataset import Dataset
    from quarry.query.selection import Selection

MAGIC = b"QUARRYSEL1\n"
_LENGTH = struct.Struct("<I")


def save(selection: Selection, path: str) -> None:
    """Write ``selection`` to ``path`` atomically."""
    from quarry.outputs.writers import refuse_inputs
    from quarry.version import VERSION

    refuse_inputs(path, [selection.dataset.path])

    table = selection._executor.table
    header = {
        "query": selection.query,
        "path": selection.path,
        "source": {
            "path": os.path.abspath(selection.dataset.path),
            **fingerprint(selection.dataset.path),
        },
        "shape": list(table.shape),
        "dims": list(table.dims) if table.dims else None,
        "block_len": table.block_len,
        "quarry_version": VERSION,
    }
    body = json.dumps(header).encode()
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(MAGIC + _LENGTH.pack(len(body)) + body + selection.rows.to_bytes())
    os.replace(tmp, path)


def load(dataset: Dataset, path: str) -> tuple[dict[str, Any], _core.RowSet]:
    """The header and rows saved in ``path``, checked against ``dataset``'s file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise SelectionFileError(f"cannot read {path}: {exc.strerror}") from None
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + _LENGTH.size:
        raise SelectionFileError(f"{path} is not a saved Quarry selection")
    start = len(MAGIC) + _LENGTH.size
    (length,) = _LENGTH.unpack(data[len(MAGIC) : start])
    try:
        header = json.loads(data[start : start + length])
        rows = _core.RowSet.from_bytes(data[start + length :])
    except (ValueError, _core.CorruptBlockError) as exc:
        raise SelectionFileError(f"{path} is damaged ({exc}); save the selection again") from None
    recorded = header.get("source", {})
    now = fingerprint(dataset.path)
    saved_from = recorded.get("path")
    if saved_from and not _same_file(saved_from, dataset.path, recorded, now):
        raise StaleSelectionError(
            f"the selection in {path} was saved from {saved_from}, not {dataset.path}; "
            f"load it with that file, or run the query here: {header.get('query')!r}"
        )
    if any(now.get(k) != recorded.get(k) for k in ("size", "mtime_ns", "files")):
        raise StaleSelectionError(
            f"{dataset.path} has changed since the selection in {path} was saved; "
            f"run the query again: {header.get('query')!r}"
        )
    n_rows = 1
    for s in header["shape"]:
        n_rows *= int(s)
    if rows.n_rows != n_rows:
        raise SelectionFileError(f"{path} holds rows of another table; save the selection again")
    return header, rows


def _same_file(saved_from: str, path: str, recorded: dict[str, Any], now: dict[str, Any]) -> bool:
    """Whether ``path`` is the file a selection was saved from: by its path,
    or (moved or reached another way) by its inode on the same device."""
    if os.path.abspath(path) == saved_from:
        return True
    return "ino" in recorded and recorded["ino"] == now.get("ino")
