"""Answering a query with several MPI ranks.

Every rank plans the query the same way, then answers it on its share of the
blocks: the members' (files' and step groups') blocks laid end to end and cut
into contiguous runs, so each rank reads one stretch of data. Counts are
summed to rank 0; rows travel as compact Roaring bitmaps, and values read by
each rank at its own hits, in one gather. Rank 0 then holds selections that
answer exactly as a serial run's would.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from quarry import _core
from quarry.parallel.mpi import share
from quarry.query.selection import Selection


def n_blocks(selection: Selection) -> int:
    table = selection.table
    return -(-table.n_rows // table.block_len)


def parts(comm: Any, selections: list[Selection]) -> list[Selection]:
    """This rank's share of each selection (:meth:`quarry.Selection.blocks`)."""
    runs = share([n_blocks(s) for s in selections], comm.rank, comm.size)
    return [s.blocks(first, stop) for s, (first, stop) in zip(selections, runs, strict=True)]


def answer_together(
    comm: Any, selections: list[Selection], rows: bool, names: list[str]
) -> list[Selection] | None:
    """Answer ``selections`` (every rank has the same ones) with all ranks of
    ``comm``; collective. On rank 0 returns them with their answers filled
    in: counts, and with ``rows`` the hits and the values of ``names``;
    elsewhere returns None. (tests/parallel/mpi_cases.py runs it under mpiexec.)
    """
    mine = parts(comm, selections)
    if not rows:
        counts = comm.reduce(np.array([p.count() for p in mine], dtype=np.int64), root=0)
        if comm.rank != 0:
            return None
        for sel, count in zip(selections, counts.tolist(), strict=True):
            sel.set_answer(count=int(count))
        return selections
    payload = [(p.rows.to_bytes(), {n: p.values(n) for n in names}) for p in mine]
    gathered = comm.gather(payload, root=0)
    if comm.rank != 0:
        return None
    for k, sel in enumerate(selections):
        found = [_core.RowSet.from_bytes(rank_parts[k][0]) for rank_parts in gathered]
        whole = found[0]
        for more in found[1:]:
            whole = whole | more
        # Ranks hold contiguous runs in rank order, so their values laid end
        # to end follow the hits' order.
        values = {
            n: np.concatenate([rank_parts[k][1][n] for rank_parts in gathered]) for n in names
        }
        sel.set_answer(rows=whole, values=values)
    return selections


def rank_path(path: str, rank: int) -> str:
    """The file rank ``rank`` writes its own hits to with ``--out-per-rank``.

    Examples
    --------
    >>> rank_path("hits/halo.h5", 3)
    'hits/halo.rank0003.h5'
    """
    stem, ext = os.path.splitext(path)
    return f"{stem}.rank{rank:04d}{ext}"
