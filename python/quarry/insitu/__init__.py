"""Indexing while a run writes: from the producer's memory
(:class:`InSituIndexer`, and :class:`~quarry.insitu.adios.Writer` for codes on
ADIOS2), or by following the files it writes (:mod:`quarry.insitu.follow`).

Every index made here is made by the builder ``quarry index`` uses
(:mod:`quarry.index.build`), so it is the index ``quarry index`` would build.
"""

from __future__ import annotations

from quarry.insitu.adios import Writer
from quarry.insitu.producer import H5PART_TEMPLATE, InSituIndexer

__all__ = ["H5PART_TEMPLATE", "InSituIndexer", "Writer"]
