"""Indexing arrays already in memory with the builder ``quarry index`` uses.

An in-situ index must be the index a later ``quarry index`` builds from the
file, byte for byte, so nothing here bins or cuts on its own: the arrays a
producer hands over (or a step the follower read from a stream) are put
behind a :class:`MemoryDriver`, a driver that reads from memory what the
file will hold, and :func:`quarry.index.build.index_blocks` indexes them as
it indexes a file (same edges from the same sample, same spans, same
blocks, same CRCs).

A :class:`BatchWriter` stands where the builder expects a block writer and
keeps the blocks in memory until :meth:`BatchWriter.flush` appends a whole
batch to the real writer: the index is written after the data, in batches.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

import numpy as np

from quarry.formats.base import VariableInfo, queryable_dtype, variable_problem
from quarry.index.build import VariablePart, index_blocks
from quarry.records import record

if TYPE_CHECKING:
    import numpy.typing as npt

    from quarry.index import layout
    from quarry.index.options import BuildOptions


def as_indexed(values: npt.ArrayLike) -> npt.NDArray[np.generic]:
    """``values`` as a driver reads them from a file that stores them: native
    byte order, C order, bool as uint8 and float16 as float32.

    Examples
    --------
    >>> as_indexed(np.array([True, False])).dtype, as_indexed(np.zeros(2, ">f8")).dtype.str
    (dtype('uint8'), '<f8')
    """
    array = np.asarray(values)
    dtype = queryable_dtype(array.dtype).newbyteorder("=")
    out: npt.NDArray[np.generic] = np.require(
        array.astype(dtype, copy=False), requirements=["C", "A"]
    )
    return out


def info_of(path: str, values: npt.NDArray[np.generic]) -> VariableInfo:
    """The variable a file holding ``values`` at ``path`` lists (shape, dtype,
    and why it cannot be indexed, if it cannot).

    Examples
    --------
    >>> info = info_of("/Step#0/x", np.zeros((2, 3), "f4"))
    >>> info.shape, info.dtype.str, info.problem
    ((2, 3), '<f4', None)
    """
    shape = tuple(int(s) for s in values.shape)
    return VariableInfo(path, shape, values.dtype, problem=variable_problem(shape, values.dtype))


class MemoryDriver:
    """A driver over arrays in memory, read as the file that holds them reads.

    Examples
    --------
    >>> drv = MemoryDriver("run.h5", {"/x": np.arange(6.0).reshape(2, 3)})
    >>> drv.read("/x", 2, 5)
    array([2., 3., 4.])
    """

    step_context = None

    def __init__(self, path: str, arrays: Mapping[str, npt.NDArray[np.generic]]) -> None:
        self.path = path
        read = {p: as_indexed(a) for p, a in arrays.items()}
        self._infos = [info_of(p, a) for p, a in read.items()]
        self._arrays = {p: a.reshape(-1) for p, a in read.items()}

    def variables(self) -> list[VariableInfo]:
        return self._infos

    def read(self, var: str, start: int, stop: int) -> npt.NDArray[np.generic]:
        return self._arrays[var][start:stop]

    def gather(self, var: str, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.generic]:
        return self._arrays[var][positions]

    def close(self) -> None:
        self._arrays.clear()


class BlockSink(Protocol):
    """Where a :class:`BatchWriter` appends its blocks (a block writer)."""

    def add_all(self, blobs: list[bytes], sync: bool = True) -> list[tuple[int, int, int]]:
        """Append ``blobs``; their ``(file, offset, length)``."""
        ...


class BatchWriter:
    """Keeps blocks in memory; :meth:`flush` appends them to ``target``.

    :meth:`add_all` returns provisional spans (``[-1, k, length]``, k the
    block's number in this writer); :meth:`placed` gives the real span of
    each once it is flushed.
    """

    file_number = -1

    def __init__(self, target: BlockSink) -> None:
        self._target = target
        self._pending: list[bytes] = []
        self._placed: list[tuple[int, int, int]] = []

    def add_all(self, blobs: list[bytes]) -> list[tuple[int, int, int]]:
        first = len(self._placed) + len(self._pending)
        self._pending.extend(blobs)
        return [(-1, first + k, len(b)) for k, b in enumerate(blobs)]

    def flush(self) -> None:
        """Append every pending block to the target writer."""
        if self._pending:
            # Not synced: the staging file is never published, only copied from.
            self._placed.extend(self._target.add_all(self._pending, sync=False))
            self._pending = []

    def placed(self, spans: list[list[int]]) -> list[list[int]]:
        """The real ``[file, offset, length]`` of provisional ``spans``."""
        return [list(self._placed[k]) for _, k, _ in spans]


@record(frozen=False)
class IndexedStep:
    """One step's variables as indexed: their infos and their parts (spans
    provisional until the batch is flushed)."""

    step: int
    infos: list[VariableInfo]
    parts: dict[str, VariablePart]


def index_arrays(
    path: str,
    step: int,
    arrays: Mapping[str, npt.NDArray[np.generic]],
    opts: BuildOptions,
    writer: BatchWriter | layout.BlockWriter,
) -> IndexedStep:
    """Index the arrays of one step (by their paths in the file ``path``)
    into ``writer`` with the file builder, in the order given."""
    driver = MemoryDriver(path, arrays)
    infos = driver.variables()
    runs = {v.path: (0, -(-v.size // opts.block_len)) for v in infos}
    parts = index_blocks(driver, infos, runs, opts, writer)  # type: ignore[arg-type]
    driver.close()
    return IndexedStep(step, infos, parts)
