"""Building one file's index with several MPI ranks.

The ranks share the file's blocks out (variables laid end to end, cut into
contiguous runs, :func:`quarry.parallel.mpi.share`); each indexes its run
into its own shard file, with no communication while it works. At the end
one gather brings every rank's outcome and block spans to rank 0, which
publishes the manifest atomically (or, if any rank failed, publishes nothing
and every rank removes its shard), and one broadcast tells all ranks how it
went. The file's old index, if any, stays in place until then.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from quarry.errors import ParallelError, QuarryError, SourceError
from quarry.formats.base import Driver, VariableInfo, fingerprint
from quarry.formats.raw import description_stamp
from quarry.index import layout
from quarry.index.build import (
    VariablePart,
    assemble,
    block_count,
    check_indexable,
    check_unchanged,
    index_blocks,
)
from quarry.index.manifest import Manifest, Shard
from quarry.index.options import BuildOptions
from quarry.parallel.mpi import raise_failures, share, world_rank

if TYPE_CHECKING:
    from quarry.formats.listing import Listing
    from quarry.index.derived import Derivation


def build_shared(
    comm: Any,
    driver: Driver,
    variables: list[VariableInfo],
    index_path: str,
    opts: BuildOptions,
    progress: Callable[[int], object] | None = None,
    derived: list[Derivation] | None = None,
    listing: Listing | None = None,
) -> Manifest:
    """Index ``variables`` of an open file with every rank of ``comm``
    (collective: all ranks call it with the same arguments); returns the
    manifest (on ranks other than 0 without its per-block lists, which would
    make the broadcast as large as the manifest), or raises
    :class:`ParallelError` on every rank, naming the ranks that failed and why."""
    check_indexable(variables)
    # Before any rank reads (they start once the build's name arrives): the
    # time the sources' stats must be safely older than (quarry.index.fresh).
    read_ns = time.time_ns()
    if comm.rank == 0:
        layout.remove_debris(index_path)
    build = comm.bcast(secrets.token_hex(4) if comm.rank == 0 else None, root=0)
    counts = [block_count(v, opts) for v in variables]
    runs: dict[str, tuple[int, int]] = {}
    for var, n, (first, stop) in zip(
        variables, counts, share(counts, comm.rank, comm.size), strict=True
    ):
        if stop > first or (n == 0 and comm.rank == 0):  # rank 0 records empty variables
            runs[var.path] = (first, stop)
    parts: dict[str, VariablePart] = {}
    failure: str | None = None
    before = fingerprint(driver.path)
    writer: layout.ShardWriter | None = None
    try:
        writer = layout.ShardWriter(index_path, build, comm.rank, comm.rank + 1)
        parts = index_blocks(driver, variables, runs, opts, writer, progress)
        writer.finish()  # its lock is kept until the manifest naming it is out
        for part in parts.values():
            # Every rank computed the same edges; one copy is enough to send
            # (1,000 ranks each sending a variable's edges would be megabytes).
            if part.first_block != 0:
                part.edges = None
        check_unchanged(driver.path, before)
    except Exception as exc:  # reported by rank below, never left to hang the others
        failure = _describe(exc)
    shard_size = writer.size if writer is not None else 0
    gathered = comm.gather((world_rank(), failure, parts, shard_size, before), root=0)
    manifest: Manifest | None = None
    outcome: tuple[str, Any] = ("ok", None)
    if comm.rank == 0:
        try:
            manifest = _publish(
                driver, variables, index_path, opts, build, gathered, derived, read_ns, listing
            )
            outcome = ("ok", manifest.without_blocks())
        except Exception as exc:
            outcome = ("error", _describe(exc))
    outcome = comm.bcast(outcome, root=0)
    if outcome[0] == "ok" and writer is not None:
        writer.release()
    if outcome[0] != "ok":
        if writer is not None:
            writer.abort()
        raise ParallelError(f"indexing {driver.path}: {outcome[1]}")
    shared: Manifest = outcome[1]
    return manifest if manifest is not None else shared


def _publish(
    driver: Driver,
    variables: list[VariableInfo],
    index_path: str,
    opts: BuildOptions,
    build: str,
    gathered: list[tuple[int, str | None, dict[str, VariablePart], int, dict[str, Any]]],
    derived: list[Derivation] | None,
    read_ns: int,
    listing: Listing | None,
) -> Manifest:
    """Rank 0: check every rank's outcome and publish the manifest."""
    raise_failures([(rank, failure) for rank, failure, *_ in gathered], "the build")
    fingerprints = {repr(g[4]) for g in gathered}
    if len(fingerprints) > 1:
        raise SourceError(f"{driver.path} changed while it was being indexed; run again")
    # Ranks that indexed no block wrote an empty shard: leave it out, and
    # number the others' files 1, 2, ... in rank order.
    shards: list[Shard] = []
    renumber: dict[int, int] = {}
    for group_rank, (_, _, parts, size, _) in enumerate(gathered):
        if any(p.spans for p in parts.values()):
            renumber[group_rank + 1] = len(shards) + 1
            path = layout.shard_path(index_path, build, group_rank)
            shards.append(Shard(os.path.basename(path), size))
        else:
            with contextlib.suppress(OSError):
                os.unlink(layout.shard_path(index_path, build, group_rank))
    for _, _, parts, _, _ in gathered:
        for part in parts.values():
            part.spans = [[renumber[f], offset, length] for f, offset, length in part.spans]
    manifest = assemble(
        driver.path,
        {**gathered[0][4], **description_stamp(driver.path, index_path)},
        read_ns,
        variables,
        opts,
        [g[2] for g in gathered],
        shards,
        derived or [],
        listing,
    )
    with layout.writing(index_path) as writer:
        writer.commit(manifest)
    return manifest


def _describe(exc: Exception) -> str:
    """A failure as a scientist reads it: Quarry's own message, or the
    exception's kind and message."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror + (f": {exc.filename}" if exc.filename else "")
    if isinstance(exc, QuarryError) and str(exc):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"
