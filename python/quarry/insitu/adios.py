"""For codes on ADIOS2: :class:`Writer` writes a step with the adios2 API and
hands it to an :class:`~quarry.insitu.InSituIndexer` in the same call."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from quarry.insitu.blocks import as_indexed
from quarry.insitu.producer import InSituIndexer

if TYPE_CHECKING:
    from types import TracebackType

    import numpy.typing as npt


class Writer:
    """An ADIOS2 BP5 run whose steps are indexed as they are written.

    Each :meth:`write_step` writes its arrays as global arrays of one step
    (``begin_step``, ``write``, ``end_step``), then hands them to an
    :class:`~quarry.insitu.InSituIndexer`, which indexes them on its own
    thread while the code computes the next step. Step ``s`` of ``energy``
    is ``/Step#<s>/energy``, as Quarry reads BP files. On close (leaving the
    ``with`` block) the run is closed and then its index published: the
    index ``quarry index run.bp`` would build, ready for queries at once.
    Keyword arguments go to the InSituIndexer (``index``, ``bins``,
    ``block_len``, ``max_pending_steps``...).

    Examples
    --------
    >>> import quarry, numpy as np, tempfile, os
    >>> from quarry.insitu import Writer
    >>> path = os.path.join(tempfile.mkdtemp(), "run.bp")
    >>> with Writer(path, block_len=4) as w:
    ...     for step in range(3):
    ...         _ = w.write_step({"energy": np.arange(10.0) + step})
    >>> with quarry.open_series(path) as series:
    ...     [r["count"] for r in series.query("energy > 9").per_step()]
    [0, 1, 2]
    """

    def __init__(self, path: str, **indexer: Any) -> None:
        import adios2

        self.path = path
        self.indexer = InSituIndexer(path, **indexer)
        self._stream = adios2.Stream(path, "w")
        self.steps = 0

    def write_step(self, arrays: Mapping[str, npt.ArrayLike]) -> int:
        """Write the arrays (by name) as the next step, and hand them to the
        indexer; returns the step's number."""
        native = {name: as_indexed(values) for name, values in arrays.items()}
        self._stream.begin_step()
        for name, values in native.items():
            shape = list(values.shape)
            self._stream.write(name, values, shape, [0] * len(shape), shape)
        self._stream.end_step()
        step = self.steps
        self.indexer.add(step, native)
        self.steps += 1
        return step

    def close(self, failed: bool = False) -> None:
        """Close the run, then publish its index (``failed``: see
        :meth:`InSituIndexer.close`)."""
        try:
            self._stream.close()
        finally:
            self.indexer.close(failed=failed)

    def __enter__(self) -> Writer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close(failed=error is not None)
