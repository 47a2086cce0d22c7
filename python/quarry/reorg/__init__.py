"""Multi-dimensional binning (MDBin, after SDS-MD): clustered copies of
several variables, ordered by a multi-dimensional bin number, with offset
tables, so that a box over those variables reads a few contiguous runs.

:mod:`.binning` cuts one variable into 1-D bins; :mod:`.build` writes a copy
(in parallel parts); :mod:`.layout` is the copy's file and :mod:`.manifest`
what it says it holds; :mod:`.store` opens a copy and proves it fresh;
:mod:`.read` answers box queries from its members; :mod:`.locate` says where
it is. Names are imported when first used: a query that only looks for a
copy imports none of them, and opening one imports no NumPy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from quarry.reorg.locate import find_copy

if TYPE_CHECKING:
    from quarry.reorg.read import Answer, MemberCopy, Runs
    from quarry.reorg.store import ReorgCopy, open_copy

__all__ = ["Answer", "MemberCopy", "ReorgCopy", "Runs", "find_copy", "open_copy"]

if not TYPE_CHECKING:  # type checkers see the imports above

    def __getattr__(name: str) -> Any:
        """A public name of :mod:`.read` or :mod:`.store`, imported now and kept."""
        if name not in __all__:
            raise AttributeError(f"module 'quarry.reorg' has no attribute {name!r}")
        home = "quarry.reorg.store" if name in ("ReorgCopy", "open_copy") else "quarry.reorg.read"
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value
        return value
