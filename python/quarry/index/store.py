"""An index opened for querying: the manifest, staleness, and per-variable columns."""

from __future__ import annotations

from typing import Any

from quarry import _core
from quarry.errors import CorruptIndexError, StaleIndexError
from quarry.formats.base import fingerprint
from quarry.index import layout
from quarry.index.derived import Derivation
from quarry.index.locate import rebuild_command


class IndexStore:
    """A verified, memory-mapped index of one data file.

    Opening checks that the data file is the one the index was built from
    (size and modification time) and refuses to answer otherwise.
    """

    def __init__(self, index_path: str, source_path: str) -> None:
        self.path = index_path
        self.source_path = source_path
        self._files, self.manifest = layout.read(index_path)
        self._columns: dict[str, _core.Column] = {}
        self._check_fresh()

    def _check_fresh(self) -> None:
        recorded = self.manifest.get("source", {})
        now = fingerprint(self.source_path)
        changes = []
        if now["size"] != recorded.get("size"):
            changes.append(f"size {recorded.get('size')} -> {now['size']} bytes")
        if now["mtime_ns"] != recorded.get("mtime_ns"):
            changes.append("modification time differs")
        if now.get("files") != recorded.get("files"):
            changes.append(f"{recorded.get('files')} -> {now.get('files')} files")
        if changes:
            raise StaleIndexError(
                f"{self.source_path} has changed since it was indexed ({'; '.join(changes)}); "
                f"rebuild the index with: {rebuild_command(self.source_path, self.path)}"
            )

    @property
    def block_len(self) -> int:
        return int(self.manifest["block_len"])

    @property
    def derivations(self) -> list[Derivation]:
        """The derived variables this index defines (``r = sqrt(x**2 + y**2)``)."""
        return [Derivation(d["name"], d["expr"]) for d in self.manifest.get("derived", [])]

    @property
    def variables(self) -> dict[str, Any]:
        entries: dict[str, Any] = self.manifest["variables"]
        return entries

    def column(self, path: str) -> _core.Column:
        """The indexed column of variable ``path`` (its block headers verified)."""
        col = self._columns.get(path)
        if col is None:
            entry = self.variables[path]
            n_rows = 1
            for s in entry["shape"]:
                n_rows *= int(s)
            spans = [(int(f), int(o), int(n)) for f, o, n in entry["blocks"]]
            try:
                col = _core.Column.open(self._files, entry["key"], spans, n_rows, self.block_len)
            except _core.CorruptBlockError as exc:
                raise self.damaged(path, exc) from None
            self._columns[path] = col
        return col

    def damaged(self, var: str, exc: Exception) -> CorruptIndexError:
        return CorruptIndexError(
            f"index {self.path} is damaged at variable {var} ({exc}); "
            f"rebuild it with: {rebuild_command(self.source_path, self.path)}"
        )
