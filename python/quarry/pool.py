"""How many cores the core's work runs on.

Every long core call (building blocks, evaluating ranges, scanning, counting
histogram bins) releases the GIL and runs on a rayon pool. By default that
pool has one thread per core; :func:`threads` chooses another size for the
calling Python thread only, so concurrent callers do not disturb each other.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from quarry import _core


class threads:  # noqa: N801 -- used as a function: ``with threads(2):``
    """Run the core's work inside the block on ``jobs`` threads (None or 0:
    one per core); yields the number of threads in use. A class rather than
    a generator: a series enters it once per member.

    Examples
    --------
    >>> with threads(2) as n:
    ...     n
    2
    """

    __slots__ = ("_jobs", "_previous")

    def __init__(self, jobs: int | None) -> None:
        if jobs is not None and jobs < 0:
            raise ValueError(f"jobs must be a positive number of threads, got {jobs}")
        self._jobs = jobs or 0
        self._previous = 0

    def __enter__(self) -> int:
        self._previous = _core.set_jobs(self._jobs)
        return _core.jobs()

    def __exit__(self, *exc: object) -> None:
        _core.set_jobs(self._previous)


def jobs() -> int:
    """Threads the core's work runs on for the calling thread right now.

    Examples
    --------
    >>> with threads(3):
    ...     jobs()
    3
    """
    return _core.jobs()


class _HasJobs(Protocol):
    @property
    def jobs(self) -> int | None: ...


_Owner = TypeVar("_Owner", bound=_HasJobs)
_P = ParamSpec("_P")
_R = TypeVar("_R")


def on_own_threads(
    method: Callable[Concatenate[_Owner, _P], _R],
) -> Callable[Concatenate[_Owner, _P], _R]:
    """Run ``method`` on the threads its object asks for (its ``jobs``; None:
    whatever the caller chose with :func:`threads`)."""

    @functools.wraps(method)
    def run(self: _Owner, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        if self.jobs is None:
            return method(self, *args, **kwargs)
        with threads(self.jobs):
            return method(self, *args, **kwargs)

    return run
