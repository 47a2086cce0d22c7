"""An index opened for querying: the manifest, staleness, and per-variable columns."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from quarry import _core
from quarry.errors import CorruptIndexError, StaleIndexError
from quarry.formats.base import fingerprint
from quarry.index import fresh, layout
from quarry.index.locate import rebuild_command
from quarry.index.manifest import VariableEntry

if TYPE_CHECKING:
    from quarry.index.derived import Derivation
    from quarry.index.verify import Reader


class IndexStore:
    """A verified, memory-mapped index of one data file.

    Opening stats the data file and refuses an index built from another
    state of it; where the stat cannot prove the file unchanged (see
    :mod:`quarry.index.fresh`), each column is checked against its recorded
    CRCs, reading the values through ``read``, before its first use.
    """

    def __init__(self, index_path: str, source_path: str, read: Reader | None = None) -> None:
        self.path = index_path
        self.source_path = source_path
        rebuild = f"rebuild it with: {rebuild_command(source_path, index_path)}"
        self._files, self.manifest = layout.read(index_path, rebuild)
        self._columns: dict[str, _core.Column] = {}
        self._read = read
        self._freshness = fresh.assess(index_path, source_path, self.manifest)
        self._unchecked = set(self._freshness.unchecked)

    @property
    def rebuild(self) -> str:
        """The command that rebuilds this index."""
        return rebuild_command(self.source_path, self.path)

    @property
    def trusted(self) -> bool:
        """Whether every column may answer without reading the source first."""
        return not self._unchecked

    def proven(self, paths: Iterable[str]) -> bool:
        """Whether the columns of ``paths`` may answer without reading the
        source first (checked against their CRCs, or proven by the stat)."""
        return self._unchecked.isdisjoint(paths)

    @property
    def listing_trusted(self) -> bool:
        """Whether the manifest's listing of the file's variables is the
        file's own: the stat proves the file unchanged, or an open at this
        stat walked the file and found it so (:meth:`confirm_listing`); not
        merely because every column matched its CRCs at this stat (the file
        may have gained a step since)."""
        return self._freshness.proven or self._freshness.listed

    def confirm_listing(self, same: Callable[[], bool]) -> None:
        """Record beside the index, where ``same()`` (walking the file, now)
        finds its listing as the manifest's, that the next open at this stat
        may answer from the listing."""
        read_ns = time.time_ns()  # the stat was taken before this walk began
        if same():
            fresh.record_checked(
                self.path, self._freshness.now, read_ns, frozenset({fresh.LISTING})
            )

    @property
    def source_stat(self) -> dict[str, int]:
        """The source's :func:`~quarry.formats.base.fingerprint` when the
        index was opened (what its freshness was decided on)."""
        return self._freshness.now

    def check(self, paths: Iterable[str] | None = None) -> None:
        """Check the columns ``paths`` (default: all) that the stat could not
        prove unchanged against their recorded CRCs, reading them in full;
        raises :class:`StaleIndexError` naming the blocks that differ. A check
        that passes is recorded beside the index, so later opens are cheap."""
        todo = sorted(self._unchecked if paths is None else self._unchecked.intersection(paths))
        if not todo:
            return
        if self._read is None:
            raise StaleIndexError(
                f"{self.source_path} may have changed since it was indexed (its "
                f"times or inode moved) and cannot be read here to check; "
                f"check it with: {rebuild_command(self.source_path, self.path, 'verify')}"
            )
        from quarry.index.verify import changed_blocks, source_crcs

        read_ns = time.time_ns()
        entries = self.variables
        now = source_crcs(self._read, [(p, entries[p].n_rows) for p in todo], self.block_len)
        changed = {p: changed_blocks(entries[p].crcs, now[p]) for p in todo}
        changed = {p: blocks for p, blocks in changed.items() if blocks}
        if changed:
            where = "; ".join(
                f"{p} {fresh.describe_blocks(b, len(entries[p].crcs))}" for p, b in changed.items()
            )
            raise StaleIndexError(
                f"{self.source_path} has changed since it was indexed: {where} changed "
                f"(though its size and modification time did not); "
                f"rebuild the index with: {self.rebuild}"
            )
        self._unchecked.difference_update(todo)
        stat = self._freshness.now
        if fingerprint(self.source_path) == stat:
            checked = frozenset(entries) - self._unchecked
            fresh.record_checked(self.path, stat, read_ns, checked)

    @property
    def block_len(self) -> int:
        return self.manifest.block_len

    @property
    def derivations(self) -> list[Derivation]:
        """The derived variables this index defines (``r = sqrt(x**2 + y**2)``)."""
        return list(self.manifest.derived)

    @property
    def variables(self) -> Mapping[str, VariableEntry]:
        return self.manifest.variables

    def column(self, path: str) -> _core.Column:
        """The indexed column of variable ``path`` (its block headers verified)."""
        col = self._columns.get(path)
        if col is None:
            self.check([path])
            entry = self.variables[path]
            try:
                col = _core.Column.open(
                    self._files, entry.key, entry.spans, entry.n_rows, self.block_len
                )
            except (_core.CorruptBlockError, CorruptIndexError) as exc:
                raise self.damaged(path, exc) from None
            self._columns[path] = col
        return col

    def damaged(self, var: str, exc: Exception) -> CorruptIndexError:
        return CorruptIndexError(
            f"index {self.path} is damaged at variable {var} ({exc}); "
            f"rebuild it with: {rebuild_command(self.source_path, self.path)} --force"
        )
