"""Parallel execution: threads within a process (:mod:`.threads`) and MPI
ranks across nodes (:mod:`.mpi`)."""

from quarry.parallel.threads import jobs, threads

__all__ = ["jobs", "threads"]
