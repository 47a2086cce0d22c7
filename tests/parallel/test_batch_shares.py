"""How Mpi shares a batch's members out, with stand-in communicators (the
real thing runs under mpiexec in test_mpi.py)."""

from __future__ import annotations

import numpy as np
import pytest

from quarry.errors import ParallelError, QuarryError
from quarry.parallel.runners import Local, Mpi


class Comm:
    """One rank of ``size``: no other rank fails (``said`` is what the others
    tell ``allgather``); ``Allreduce`` records this rank's part and returns it."""

    def __init__(self, rank: int, size: int, said: list[object] | None = None) -> None:
        self.rank, self.size = rank, size
        self.said = said or [None] * size
        self.parts: list[np.ndarray] = []

    def allgather(self, value: object) -> list[object]:
        return [value if r == self.rank else self.said[r] for r in range(self.size)]

    def Allreduce(self, local: np.ndarray, total: np.ndarray) -> None:  # noqa: N802
        self.parts.append(local.copy())
        total[...] = local


def test_each_rank_counts_a_contiguous_run_of_members_and_one_allreduce_sums_them():
    n_members, width, size = 7, 3, 3
    whole = np.zeros((n_members, width), dtype=np.int64)
    runs = []
    for rank in range(size):
        asked: list[int] = []

        def count(i: int, asked: list[int] = asked) -> list[int]:
            asked.append(i)
            return [i * 10 + k for k in range(width)]

        comm = Comm(rank, size)
        Mpi(comm).count_members(count, n_members, width)
        assert len(comm.parts) == 1  # one collective call for the whole batch
        whole += comm.parts[0]
        runs.append(asked)
    assert whole.tolist() == [[i * 10 + k for k in range(width)] for i in range(n_members)]
    assert [i for run in runs for i in run] == list(range(n_members))  # contiguous, in order
    assert all(runs)


def test_a_failure_on_one_rank_is_raised_on_every_rank_with_one_message():
    size = 2

    def count(i: int) -> list[int]:
        if i == 3:
            raise QuarryError("no variable 'zz'")
        return [1]

    said = [None, (3, "no variable 'zz'")]  # rank 1 owns member 3 of 4
    for rank in range(size):
        comm = Comm(rank, size, said)
        expected = QuarryError if rank == 1 else ParallelError
        with pytest.raises(expected, match="no variable 'zz'") as err:
            Mpi(comm).count_members(count, 4, 1)
        assert (type(err.value) is ParallelError) == (rank == 0)
        assert comm.parts == []  # no rank goes on to the sum


def test_local_counts_every_member_in_order():
    assert Local(jobs=1).count_members(lambda i: [i, i + 1], 3, 2) == [[0, 1], [1, 2], [2, 3]]
