"""Parallel execution, chosen by the caller: runners that answer queries in
this process or over MPI ranks (:mod:`.runners`), sharded builds
(:mod:`.build`), and MPI itself (:mod:`.mpi`). How many threads the core's
work uses is :func:`threads` (from :mod:`quarry.pool`, which the stages
below this one use too)."""

from quarry.pool import jobs, threads

__all__ = ["jobs", "threads"]
