"""Reorganising one file with several MPI ranks (``mpiexec -n N quarry reorg``).

The ranks share each table's parts out (contiguous runs of parts,
:func:`quarry.parallel.mpi.share`) and no values move between them: one
allgather of every rank's extents (a few numbers per variable) gives all
ranks the same bins; rank 0 makes the copy's temporary file with every
column allocated and broadcasts where the columns lie; each rank bins,
orders and writes its own parts into their rows of the file (on its
threads) and makes its writes durable; one gather brings the parts' offset
tables to rank 0, which publishes the copy (or, if any rank failed, removes
the temporary), and one broadcast tells every rank how it went. The old copy
stays in place until then.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from quarry.errors import ParallelError, QuarryError, SourceError
from quarry.formats.base import Driver, fingerprint
from quarry.formats.raw import description_stamp
from quarry.index.layout import remove_debris
from quarry.parallel.build import _describe
from quarry.parallel.mpi import raise_failures, share, world_rank
from quarry.pool import jobs as core_jobs
from quarry.reorg.binning import Binning
from quarry.reorg.build import (
    Clustered,
    MemberPlan,
    assemble,
    cluster_parts,
    cut_parts,
    indexed_extents,
    make_axes,
    measure,
    merge_extents,
    serial_reader,
)
from quarry.reorg.layout import CopyWriter
from quarry.reorg.manifest import CopyManifest

if TYPE_CHECKING:
    from quarry.index.store import IndexStore


def reorganize_shared(
    comm: Any,
    driver: Driver,
    members: list[MemberPlan],
    path: str,
    binning: Binning,
    part_rows: int,
    jobs: int | None = None,
    progress: Callable[[int], object] | None = None,
    index: IndexStore | None = None,
    context: str | None = None,
) -> CopyManifest:
    """Write the reorganised copy of ``members`` with every rank of ``comm``
    (collective: all ranks call it with the same arguments); returns its
    manifest on every rank, or raises :class:`ParallelError` on every rank,
    naming the ranks that failed and why. Each rank's ``index`` (its own
    opening of the file's index, if any) spares it reading the ranges it knows;
    ``context`` is recorded as :func:`~quarry.reorg.build.reorganize` does."""
    sizes, cuts = cut_parts(members, part_rows)
    before = fingerprint(driver.path)
    read_ns = time.time_ns()  # the stat above is trusted only if safely older
    shares = share([len(c) for c in cuts], comm.rank, comm.size)
    mine = [parts[a:b] for parts, (a, b) in zip(cuts, shares, strict=True)]
    read = serial_reader(driver)
    writer: CopyWriter | None = None
    clustered: list[list[Clustered]] = []
    failure: str | None = None
    with ThreadPoolExecutor(jobs or core_jobs()) as workers:
        extents: list[Any] = []
        try:
            known = indexed_extents(index, members, before)
            extents = [
                measure(read, p, parts, workers, known)
                for p, parts in zip(members, mine, strict=True)
            ]
        except Exception as exc:
            failure = _describe(exc)
        everyone = comm.allgather((world_rank(), failure, extents))
        raise_failures([(rank, why) for rank, why, _ in everyone], "the reorganisation")
        try:
            all_axes = [
                make_axes(
                    plan,
                    binning,
                    merge_extents([e[k] for _, _, e in everyone], len(plan.variables)),
                )
                for k, plan in enumerate(members)
            ]
        except QuarryError as exc:
            # Every rank made the same axes from the same extents: all refuse
            # them alike, together, and the refusal is said once.
            raise ParallelError(str(exc)) from exc
        made: tuple[str, Any, Any] = ("ok", None, None)
        if comm.rank == 0:
            try:
                remove_debris(path)
                shapes = [(m.name, n, a) for m, n, a in zip(members, sizes, all_axes, strict=True)]
                writer = CopyWriter.create(path, shapes)
                made = ("ok", writer.temporary, writer.offsets)
            except Exception as exc:
                made = ("error", _describe(exc), None)
        made = comm.bcast(made, root=0)
        if made[0] != "ok":
            raise ParallelError(f"reorganising {driver.path}: {made[1]}")
        try:
            if writer is None:
                writer = CopyWriter.attach(path, made[1], made[2])
            clustered = [
                cluster_parts(read, writer, plan, axes, parts, workers, progress)
                for plan, axes, parts in zip(members, all_axes, mine, strict=True)
            ]
            if comm.rank != 0:
                writer.close()  # durable before rank 0 publishes
        except Exception as exc:
            failure = _describe(exc)
    gathered = comm.gather((world_rank(), failure, clustered, fingerprint(driver.path)), root=0)
    outcome: tuple[str, Any] = ("ok", None)
    if comm.rank == 0:
        assert writer is not None
        try:
            raise_failures([(rank, why) for rank, why, _, _ in gathered], "the reorganisation")
            if any(stamp != before for *_, stamp in gathered):
                raise SourceError(
                    f"{driver.path} changed while it was being reorganised; run again"
                )
            # Each rank's parts are a contiguous run, ranks in order.
            parts = [
                [c for _, _, done, _ in gathered for c in done[k]] for k in range(len(members))
            ]
            stamp = {**before, **description_stamp(driver.path, path)}
            manifest, tables = assemble(
                driver.path, stamp, read_ns, part_rows, members, all_axes, parts, binning, context
            )
            writer.publish(manifest, tables)
            outcome = ("ok", manifest)
        except Exception as exc:
            writer.abort()
            outcome = ("error", _describe(exc))
    elif writer is not None:
        writer.abort()  # closes it, if a failure left it open
    outcome = comm.bcast(outcome, root=0)
    if outcome[0] != "ok":
        raise ParallelError(f"reorganising {driver.path}: {outcome[1]}")
    result: CopyManifest = outcome[1]
    return result
