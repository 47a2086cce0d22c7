"""Keeping indexes up to date: whether an index can be kept as it is, and
what indexing one file did.

An index is kept when it is fresh (built from the file as it is now; see
:mod:`quarry.index.fresh`) and covers what is asked for, with the options and
derived variables asked for; anything else is rebuilt, and so is an index
``quarry index --follow`` published before the run's writer closed it (the
run may have more steps than it covers). The loop over a
series' files is :meth:`quarry.Series.build_indexes`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from quarry.errors import QuarryError
from quarry.records import record

if TYPE_CHECKING:
    from quarry.formats.base import VariableInfo
    from quarry.index.store import IndexStore


@record(frozen=False)
class IndexReport:
    """What indexing one file of a series did: ``built`` or ``up to date``."""

    file: str
    index: str
    status: str
    variables: list[str]
    bytes: int
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "index": self.index,
            "status": self.status,
            "variables": self.variables,
            "bytes": self.bytes,
            "seconds": self.seconds,
        }


def up_to_date(
    open_store: Callable[[], IndexStore],
    chosen: Iterable[VariableInfo],
    bins: int | None,
    precision: int | None,
    block_len: int | None,
    derive: list[str] | None,
) -> bool:
    """Whether the index ``open_store()`` opens is fresh and covers ``chosen``
    with these options (None: any), so a build can be skipped; an index that
    cannot be opened (stale, damaged) is not."""
    try:
        store = open_store()
        store.check()  # where the stat cannot prove the file unchanged: its CRCs
    except QuarryError:  # stale or damaged: rebuild
        return False
    follow = store.manifest.follow
    if follow is not None and not follow.closed:
        return False  # published while its run was written: it may lack later steps
    if block_len is not None and store.block_len != block_len:
        return False
    if derive is not None:
        from quarry.index.derived import Derivation

        if store.derivations != [Derivation.parse(text) for text in derive]:
            return False
    entries = store.variables
    for var in chosen:
        entry = entries.get(var.path)
        if entry is None:
            return False
        if bins is not None and entry.bins != bins:
            return False
        if precision is not None and entry.precision != precision:
            return False
    return True
