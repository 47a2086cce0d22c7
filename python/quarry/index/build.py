"""Building an index: sample for bin edges, then stream blocks through the core.

Reading the next span of the file overlaps with indexing the current one
(the core releases the GIL and indexes a span's blocks on all cores).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

import quarry
from quarry import _core
from quarry.errors import SourceError, UnsupportedVariableError
from quarry.expr.plan import KEY_DTYPES, key_kind
from quarry.formats.base import Driver, VariableInfo, fingerprint
from quarry.index import layout
from quarry.index.options import BuildOptions

if TYPE_CHECKING:
    import numpy.typing as npt

#: Rows read from the file per step of the build (several blocks at once).
READ_SPAN = 1 << 22
#: Edges come from 64 evenly spread spans of 1024 rows: 64 samples per bin
#: at the default 1024 bins, enough for equal-weight cut points.
SAMPLE_SPANS = 64
SAMPLE_SPAN_LEN = 1 << 10


def _sample(driver: Driver, var: VariableInfo) -> npt.NDArray[np.generic]:
    if var.size <= SAMPLE_SPANS * SAMPLE_SPAN_LEN:
        return driver.read(var.path, 0, var.size)
    starts = np.linspace(0, var.size - SAMPLE_SPAN_LEN, SAMPLE_SPANS).astype(np.int64)
    return np.concatenate([driver.read(var.path, int(s), int(s) + SAMPLE_SPAN_LEN) for s in starts])


def build_index(
    driver: Driver,
    variables: list[VariableInfo],
    index_path: str,
    options: BuildOptions | None = None,
    progress: Callable[[int], object] | None = None,
    derived: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Index ``variables`` of an open file into ``index_path``; returns the manifest.
    ``progress`` is called with the number of rows indexed after each span;
    ``derived`` definitions (``{"name", "expr"}``) are recorded so the index
    can compute its derived variables again when queried.

    Examples
    --------
    >>> import h5py, numpy as np, tempfile, os
    >>> from quarry.formats.hdf5 import HDF5Driver
    >>> path = os.path.join(tempfile.mkdtemp(), "d.h5")
    >>> with h5py.File(path, "w") as f:
    ...     _ = f.create_dataset("x", data=np.arange(10.0))
    >>> drv = HDF5Driver(path)
    >>> manifest = build_index(drv, drv.variables(), path + ".qidx", BuildOptions(block_len=4))
    >>> len(manifest["variables"]["/x"]["blocks"])
    3
    >>> drv.close()
    """
    opts = options or BuildOptions()
    for var in variables:
        if var.problem is not None:
            raise UnsupportedVariableError(f"cannot index {var.path}: {var.problem}")
    before = fingerprint(driver.path)
    entries: dict[str, Any] = {}
    with (
        layout.writing(index_path) as writer,
        ThreadPoolExecutor(1) as reader,
        ThreadPoolExecutor(1) as write_thread,
    ):
        stages = _Stages(reader, write_thread, writer)
        writes: dict[str, list[Future[list[tuple[int, int]]]]] = {}
        for var in variables:
            entries[var.path], writes[var.path] = _build_variable(
                driver, var, opts, stages, progress
            )
        # Block spans are known once their writes are done; waiting only here
        # lets one variable's writes overlap the next variable's indexing.
        for path, pending in writes.items():
            entries[path]["blocks"] = [list(span) for w in pending for span in w.result()]
        after = fingerprint(driver.path)
        if after != before:
            raise SourceError(f"{driver.path} changed while it was being indexed; run again")
        manifest = {
            "format": "quarry-index",
            "version": layout.VERSION,
            "created_by": f"quarry {quarry.__version__}",
            "source": {"name": os.path.basename(driver.path), **before},
            "block_len": opts.block_len,
            "derived": derived or [],
            "variables": entries,
        }
        writer.commit(manifest)
    return manifest


@dataclass(frozen=True)
class _Stages:
    """The build's pipeline: the reader thread reads span k+1 and the writer
    thread writes span k-1 while the core indexes span k (file I/O and the
    core both release the GIL). One writer thread keeps blocks in order."""

    reader: ThreadPoolExecutor
    write_thread: ThreadPoolExecutor
    writer: layout.IndexWriter


def _build_variable(
    driver: Driver,
    var: VariableInfo,
    opts: BuildOptions,
    stages: _Stages,
    progress: Callable[[int], object] | None,
) -> tuple[dict[str, Any], list[Future[list[tuple[int, int]]]]]:
    """Index one variable; returns its manifest entry and its pending writes."""
    kind = key_kind(var.dtype)
    key_dtype = KEY_DTYPES[kind]
    sample = _sample(driver, var).astype(key_dtype)
    edges = _core.variable_edges(sample, opts.bins, opts.precision)
    step = max(opts.block_len, READ_SPAN // opts.block_len * opts.block_len)
    writes: list[Future[list[tuple[int, int]]]] = []
    checksums: list[int] = []
    reads = [(start, min(start + step, var.size)) for start in range(0, var.size, step)]
    pending = stages.reader.submit(driver.read, var.path, *reads[0]) if reads else None
    for k in range(len(reads)):
        assert pending is not None
        values = pending.result()
        if k + 1 < len(reads):
            pending = stages.reader.submit(driver.read, var.path, *reads[k + 1])
        built = _core.build_blocks(np.ascontiguousarray(values), edges, opts.block_len)
        checksums.extend(crc for _, crc in built)
        writes.append(stages.write_thread.submit(stages.writer.add_all, [b for b, _ in built]))
        if progress is not None:
            progress(len(values))
    entry = {
        "dtype": var.dtype.str,
        "shape": list(var.shape),
        "key": kind,
        "bins": opts.bins,
        "precision": opts.precision,
        "edges": edges.tolist(),
        "blocks": [],  # filled in when the writes are done
        "source_crc32": checksums,
    }
    return entry, writes
