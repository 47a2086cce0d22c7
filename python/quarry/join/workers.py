"""A field's interpolation spread over worker threads, in bands.

The particles inside the field are cut into *bands* along its axis 0, by
the index of their cell there: as many bands as workers (the dataset's
``jobs``, see :func:`quarry.open`), of about as many particles each, all
the particles of one cell index in one band. Each band runs on its own
thread and reads only the region its own particles touch (the rows of their
MDBin groups, :mod:`quarry.join.groups`, or their box), holds only that,
and fills in its particles' values. Axis 0 is the first position variable,
the slowest-varying part of an MDBin number, so a band holds whole groups
but at its two ends, and neighbouring bands share at most the one row of
nodes between them.

Each particle's value is the same float64 operations on the same node
values whichever band computes it, so the answer is bit for bit the
one-thread one, in the same ascending particle order. Where there is too
little work to share (fewer than :data:`MIN_PER_BAND` particles a band,
or one cell index), the whole runs as one band on the calling thread:
exactly the one-thread path, with no thread started.

Where a field's driver must not be entered by two threads at once, its
reads take a lock (:class:`~quarry.join.field.Field`): the bands then read
one at a time and interpolate side by side.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt

    IntArray = npt.NDArray[np.int64]
    FloatArray = npt.NDArray[np.float64]

#: The fewest particles worth a band of their own. Measured on Q4 (three
#: 256^3 fields, trilinear) of benches/reorg.py's data on 2 cores shared
#: with other work: two bands lost to one below about 100,000 particles
#: (0.7-0.85x at 26,000-41,000), broke even at 123,000.
MIN_PER_BAND = 1 << 16


def bands(cells: IntArray, workers: int) -> list[IntArray] | None:
    """The particles of each band (ascending indices into ``cells``, each
    particle's cell index along axis 0), at most ``workers`` of them; None
    where the work is one band.

    Examples
    --------
    >>> cells = np.repeat(np.arange(4), MIN_PER_BAND // 2)
    >>> [(int(cells[p].min()), int(cells[p].max()), len(p)) for p in bands(cells, 2)]
    [(0, 1, 65536), (2, 3, 65536)]
    >>> bands(cells, 1) is None, bands(np.zeros(10**6, np.int64), 4) is None
    (True, True)
    """
    n = len(cells)
    count = min(workers, n // MIN_PER_BAND)
    if count < 2:
        return None
    kth = (np.arange(1, count) * n) // count
    # Each band but the first starts at a cell index: its particles' count
    # quantile, so bands hold about n / count particles each.
    firsts = np.unique(np.partition(cells, kth)[kth])
    band = np.searchsorted(firsts, cells, side="right")
    parts = [np.flatnonzero(band == k) for k in range(len(firsts) + 1)]
    parts = [p for p in parts if len(p)]
    return parts if len(parts) > 1 else None


def spread(
    cells: IntArray, workers: int, work: Callable[[IntArray | None], FloatArray]
) -> FloatArray:
    """``work`` of every band (:func:`bands`), each on its own thread (the
    first on the calling one), its values put back in place: ``work(part)``
    gives the values of the particles ``part`` (along its last axis: one row
    per field, say), ``work(None)`` those of all of them (one band, run on
    the calling thread).

    Examples
    --------
    >>> cells = np.repeat(np.arange(8), MIN_PER_BAND // 2)
    >>> seen = []
    >>> out = spread(cells, 4, lambda part: seen.append(len(part)) or cells[part] * 2.0)
    >>> bool((out == cells * 2.0).all()), sorted(seen)
    (True, [65536, 65536, 65536, 65536])
    >>> spread(cells[:9], 4, lambda part: np.full(9, 0.5) if part is None else None)[:2]
    array([0.5, 0.5])
    """
    parts = bands(cells, workers)
    if parts is None:
        return work(None)
    results: list[FloatArray | None] = [None] * len(parts)
    failures: dict[int, BaseException] = {}

    def run(k: int) -> None:
        try:
            results[k] = work(parts[k])
        except BaseException as exc:  # raised on the calling thread below
            failures[k] = exc

    # Band k on thread k, the first on the calling thread: every band is
    # under way at once, whatever the threads' start-up order.
    others = [threading.Thread(target=run, args=(k,)) for k in range(1, len(parts))]
    for thread in others:
        thread.start()
    run(0)
    for thread in others:
        thread.join()
    if failures:
        raise failures[min(failures)]
    first = results[0]
    assert first is not None
    out = np.empty((*first.shape[:-1], len(cells)))  # the particles along the last axis
    for part, values in zip(parts, results, strict=True):
        out[..., part] = values
    return out
