"""Multi-dimensional binning (MDBin, after SDS-MD): clustered copies of
several variables, ordered by a multi-dimensional bin number, with offset
tables, so that a box over those variables reads a few contiguous runs.

:mod:`.binning` cuts one variable into 1-D bins; :mod:`.build` writes a copy
(in parallel parts); :mod:`.layout` is the copy's file; :mod:`.read` opens
one and answers box queries from it; :mod:`.locate` says where it is. The
reader and the builder are imported when first used: a query that only
looks for a copy imports neither.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from quarry.reorg.locate import find_copy

if TYPE_CHECKING:
    from quarry.reorg.read import Answer, MemberCopy, ReorgCopy, Runs, open_copy

__all__ = ["Answer", "MemberCopy", "ReorgCopy", "Runs", "find_copy", "open_copy"]

if not TYPE_CHECKING:  # type checkers see the imports above

    def __getattr__(name: str) -> Any:
        """A public name of :mod:`.read`, imported now and kept."""
        if name not in __all__:
            raise AttributeError(f"module 'quarry.reorg' has no attribute {name!r}")
        value = getattr(importlib.import_module("quarry.reorg.read"), name)
        globals()[name] = value
        return value
