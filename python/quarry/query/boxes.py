"""Small boxes kept for a query asked again.

A *small box* (:meth:`Executor.small_box <quarry.query.execute.Executor.small_box>`)
is an AND of ranges over a small table's own columns, counted in one pass.
Planning it (names, the index's columns, the weighing of paths) costs several
times that pass: an open dataset or series keeps, per query, the boxes its
tables gave (:class:`StepBoxes`), in a :class:`KeptBoxes`, and the query asked
again is counted by one call of the core (:func:`quarry._core.count_boxes`)
without being planned again.
"""

from __future__ import annotations

import _thread
from collections.abc import Hashable
from typing import TYPE_CHECKING

from quarry import _core

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from quarry.query.execute import BoxSpec, SmallBox

#: Queries whose boxes an open dataset or series keeps, and the bytes their
#: columns may hold that are not views of a file's memory map (values copied
#: out of the file: compressed, of another byte order, at an odd offset); past
#: either, the boxes kept longest are let go.
MAX_KEPT_QUERIES = 64
KEPT_BYTES = 64 << 20


class StepBoxes:
    """The small boxes of one query in each member (a table: a dataset's, or
    a step's of a series), kept so that the query asked again counts every
    member in one call of the core: over 720 steps of 2,000 rows, a call and a
    plan per step cost several times what a NumPy program takes for the whole
    series. A member without one (``None``: a step too large for a box, or
    answered another way) is answered by its own selection, each time.

    ``state`` is what the files looked like when the boxes were made (each
    file's open dataset and its driver: :meth:`quarry.Dataset.query_state`):
    a rebuilt index or a file opened again makes other columns, and the boxes
    are made anew.

    Examples
    --------
    >>> import quarry, h5py, numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "s.h5")
    >>> with h5py.File(path, "w") as f:
    ...     for s in range(3):
    ...         f[f"Step#{s}/e"], f[f"Step#{s}/x"] = np.arange(9.0) + s, np.arange(9.0)
    >>> with quarry.open_series(path) as series:
    ...     first = series.query("e > 4 && x < 7").counts()
    ...     again = series.query("e > 4 && x < 7")  # the kept boxes count it
    ...     first, again.counts()
    ([2, 3, 4], [2, 3, 4])
    """

    def __init__(self, boxes: list[SmallBox | None], state: tuple[tuple[object, ...], ...]) -> None:
        self.boxes = boxes
        self.state = state
        self.specs: list[BoxSpec | None] = [None if b is None or b.empty else b.spec for b in boxes]
        """Each member's box as the core takes it; None: no box, or an empty one."""
        self._scanned = [spec for spec in self.specs if spec is not None]
        self.whole = all(b is not None for b in boxes)
        """Whether every member has its box: the counts are then the core's alone."""
        self.nbytes = sum(
            _held_bytes(values) for b in boxes if b is not None for values in b.columns
        )
        """Bytes the boxes' columns hold of their own (see :data:`KEPT_BYTES`)."""

    def made_in(self, state: tuple[tuple[object, ...], ...]) -> bool:
        """Whether ``state`` is the state the boxes were made in: the same
        drivers and indexes (which compare by identity: a driver opened again
        on the same file is another) and copies listing the same tables.

        Examples
        --------
        >>> a, b = object(), object()
        >>> boxes = StepBoxes([], ((a, b),))
        >>> boxes.made_in(((a, b),)), boxes.made_in(((a, object()),)), boxes.made_in(())
        (True, False, False)
        """
        # Tuples compare in C, each item by identity before equality.
        return state == self.state

    def counts(self) -> list[int]:
        """Each member's count, where every member has its box (:attr:`whole`).

        Examples
        --------
        >>> import numpy as np
        >>> from quarry.query.execute import SmallBox
        >>> from quarry.expr.plan import Interval
        >>> box = SmallBox([np.arange(10.0)], [Interval("f", 2.0, True, 5.0, False)])
        >>> StepBoxes([box, box], ()).counts()
        [3, 3]
        """
        assert self.whole, "a member without a box is counted by its selection"
        if len(self.specs) == 1:  # a dataset's own: the common case, kept short
            return _core.count_boxes(self._scanned) if self._scanned else [0]
        counted = iter(_core.count_boxes(self._scanned) if self._scanned else ())
        return [0 if spec is None else next(counted) for spec in self.specs]


class KeptBoxes:
    """The :class:`StepBoxes` an open dataset or series keeps, by query (and
    context), at most :data:`MAX_KEPT_QUERIES` of them and :data:`KEPT_BYTES`
    of columns of their own; past either, those kept longest are let go.
    Safe to use from several threads at once (a service's).

    Examples
    --------
    >>> kept = KeptBoxes()
    >>> kept.keep("e > 4", StepBoxes([], ((1,),)))
    >>> kept.get("e > 4", ((1,),)) is not None, kept.get("e > 4", ((2,),))
    (True, None)
    """

    def __init__(self) -> None:
        self._held: dict[Hashable, StepBoxes] = {}
        self._bytes = 0
        """What the boxes held keep of their own (their ``nbytes`` summed)."""
        # ``_thread``: what ``threading`` builds on, without its import in a
        # command's start-up.
        self._lock = _thread.allocate_lock()

    def get(self, query: Hashable, state: tuple[tuple[object, ...], ...]) -> StepBoxes | None:
        """The boxes kept for ``query``, where they were made in ``state``."""
        kept = self._held.get(query)
        return kept if kept is not None and kept.made_in(state) else None

    def keep(self, query: Hashable, boxes: StepBoxes) -> None:
        """Keep ``boxes`` for ``query`` (none past :data:`KEPT_BYTES` alone)."""
        if boxes.nbytes > KEPT_BYTES:
            return
        with self._lock:
            held = self._held
            if query in held:
                self._bytes -= held.pop(query).nbytes
            while held and (
                len(held) >= MAX_KEPT_QUERIES or self._bytes + boxes.nbytes > KEPT_BYTES
            ):
                self._bytes -= held.pop(next(iter(held))).nbytes  # the one kept longest
            held[query] = boxes
            self._bytes += boxes.nbytes

    def queries(self) -> list[Hashable]:
        """The queries kept, the one kept longest first."""
        return list(self._held)

    def clear(self) -> None:
        """Let every box go (their columns may be views of files now closed)."""
        with self._lock:
            self._held.clear()
            self._bytes = 0


def _held_bytes(values: npt.NDArray[np.generic]) -> int:
    """Bytes ``values`` keep in memory: none for a view of a memory map.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> with tempfile.NamedTemporaryFile() as f:
    ...     f.write(bytes(64))
    ...     f.flush()
    ...     mapped = np.memmap(f.name, dtype="f8", mode="r")[2:6]
    ...     _held_bytes(mapped), _held_bytes(mapped.copy())
    64
    (0, 32)
    """
    import mmap

    base: object = values
    while getattr(base, "base", None) is not None:
        base = base.base  # type: ignore[attr-defined]
    return 0 if isinstance(base, mmap.mmap) else int(values.nbytes)
