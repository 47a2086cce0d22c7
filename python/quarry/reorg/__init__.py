"""Multi-dimensional binning (MDBin, after SDS-MD): clustered copies of
several variables, ordered by a multi-dimensional bin number, with offset
tables, so that a box over those variables reads a few contiguous runs.

:mod:`.binning` cuts one variable into 1-D bins; :mod:`.build` writes a copy
(in parallel parts); :mod:`.layout` is the copy's file; :mod:`.read` opens
one and answers box queries from it. The builder is imported only when a
copy is built.
"""

from quarry.reorg.layout import find_copy
from quarry.reorg.read import Answer, MemberCopy, ReorgCopy, Runs, open_copy

__all__ = ["Answer", "MemberCopy", "ReorgCopy", "Runs", "find_copy", "open_copy"]
