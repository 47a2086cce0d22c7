"""MPI: finding the communicator, and sharing work out over ranks.

Quarry runs under MPI when started by ``mpiexec`` (or ``srun``) with more than
one rank; mpi4py is imported only then, so serial runs never pay for it. The
work is split without any per-block communication: every rank computes the
same split from the same inputs, and the only collective calls are one
gather (and one broadcast) per file at the end.
"""

from __future__ import annotations

import os
from typing import Any

from quarry.errors import ParallelError

#: Environment variables MPI launchers set: MPICH/Hydra and Slurm's PMI,
#: PMIx, Open MPI.
_SIZE_VARIABLES = ("PMI_SIZE", "PMIX_SIZE", "OMPI_COMM_WORLD_SIZE")


def launched_ranks() -> int:
    """How many ranks the launcher started (1 when not under mpiexec)."""
    for name in _SIZE_VARIABLES:
        value = os.environ.get(name)
        if value and value.isdigit():
            return int(value)
    return 1


#: Where those launchers give the rank of this process.
_RANK_VARIABLES = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK")


def launched_rank() -> int:
    """This process's rank as the launcher numbered it (0 when not under
    mpiexec), known before MPI starts: a mistake found that early (the
    command line's) is then said by rank 0 alone.

    Examples
    --------
    >>> launched_rank()  # not started by mpiexec
    0
    """
    for name in _RANK_VARIABLES:
        value = os.environ.get(name)
        if value and value.isdigit():
            return int(value)
    return 0


def world() -> Any | None:
    """``MPI.COMM_WORLD`` when this process is one of several MPI ranks;
    None for a serial run.

    Examples
    --------
    >>> world() is None  # not started by mpiexec
    True
    """
    if launched_ranks() <= 1:
        return None
    try:
        from mpi4py import MPI
    except ImportError:
        raise ParallelError(
            "started by mpiexec with several ranks, but mpi4py is not installed; "
            "install it with: pip install 'quarry-index[mpi]'"
        ) from None
    comm = MPI.COMM_WORLD
    return comm if comm.size > 1 else None


def share(counts: list[int], rank: int, size: int) -> list[tuple[int, int]]:
    """Rank ``rank``'s share of units laid end to end: ``counts[i]`` units of
    item i (blocks of a variable or of a file), cut into ``size`` contiguous
    runs as equal as can be. Returns ``[first, stop)`` per item (empty
    ``(0, 0)`` where the rank has none of it). Contiguous runs keep each
    rank's reads sequential and its hits in order after the ranks'.

    Examples
    --------
    >>> [share([3, 5], r, 2) for r in range(2)]
    [[(0, 3), (0, 1)], [(0, 0), (1, 5)]]
    >>> share([5], 2, 3)
    [(3, 5)]
    """
    total = sum(counts)
    lo, hi = total * rank // size, total * (rank + 1) // size
    runs = []
    start = 0
    for n in counts:
        first, stop = max(lo - start, 0), min(hi - start, n)
        runs.append((first, stop) if first < stop else (0, 0))
        start += n
    return runs


def raise_failures(outcomes: list[tuple[int, str | None]], what: str) -> None:
    """Raise one :class:`ParallelError` naming every rank that failed and why."""
    failed = [f"rank {rank}: {why}" for rank, why in outcomes if why is not None]
    if failed:
        raise ParallelError(f"{what} failed on {len(failed)} rank(s): " + "; ".join(failed))


def world_rank() -> int:
    """This process's rank in ``MPI.COMM_WORLD`` (0 when serial): how errors
    name a rank, whatever sub-communicator it was working in."""
    if launched_ranks() <= 1:
        return 0
    from mpi4py import MPI

    return int(MPI.COMM_WORLD.rank)


def agree_to_start(comm: Any, failure: tuple[int, str] | None) -> tuple[int, str] | None:
    """Collective: every rank says whether it is ready to start the work
    (``failure`` None) or failed before it (its exit code and message); all
    learn the first failure, by rank, or None when every rank is ready.

    A user's mistake (a typo in a query, a missing file) is found by every
    rank while it plans, before any collective work; agreeing on it here
    lets every rank end normally with the same exit code, rank 0 reporting
    it once, instead of aborting the job from each rank at once.
    """
    outcomes: list[tuple[int, str] | None] = comm.allgather(failure)
    failed = [(rank, f) for rank, f in enumerate(outcomes) if f is not None]
    if not failed:
        return None
    first_rank, (code, message) = failed[0]
    if len(failed) < len(outcomes) or any(f[1] != message for _, f in failed):
        # Not the same mistake everywhere: say whose it is.
        message = f"rank {first_rank}: {message}"
        if len(failed) > 1:
            message += f" (and {len(failed) - 1} other rank(s) failed)"
    return code, message
