"""Building an index: sample for bin edges, then stream blocks through the core.

Reading the next span of the file overlaps with indexing the current one
(the core releases the GIL and indexes a span's blocks on all cores). The
same pieces build an index in one process (:func:`build_index`) and in many
MPI ranks (:mod:`quarry.parallel.build`): each writer indexes a run of
blocks into its own file, and one manifest is assembled from the parts.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from quarry import _core
from quarry.errors import CorruptIndexError, SourceError, UnsupportedVariableError
from quarry.expr.keys import KEY_DTYPES, key_kind
from quarry.formats.base import Driver, VariableInfo, fingerprint
from quarry.formats.raw import description_stamp
from quarry.index import layout
from quarry.index.manifest import Manifest, Shard, SourceRecord, VariableEntry
from quarry.index.options import BuildOptions
from quarry.records import field, record
from quarry.version import VERSION

if TYPE_CHECKING:
    import numpy.typing as npt

    from quarry.formats.listing import Listing
    from quarry.index.derived import Derivation

#: Rows read from the file per step of the build (several blocks at once).
READ_SPAN = 1 << 22
#: Spans of finished blocks that may wait for the writer thread.
MAX_WRITES_IN_FLIGHT = 2
#: Edges come from 64 evenly spread spans of 1024 rows: 64 samples per bin
#: at the default 1024 bins, enough for equal-weight cut points.
SAMPLE_SPANS = 64
SAMPLE_SPAN_LEN = 1 << 10

W = TypeVar("W")


def _sample(
    driver: Driver, var: VariableInfo, whole: npt.NDArray[np.generic] | None
) -> npt.NDArray[np.generic]:
    if var.size <= SAMPLE_SPANS * SAMPLE_SPAN_LEN:
        return whole if whole is not None else driver.read(var.path, 0, var.size)
    starts = np.linspace(0, var.size - SAMPLE_SPAN_LEN, SAMPLE_SPANS).astype(np.int64)
    if whole is not None:
        return np.concatenate([whole[s : s + SAMPLE_SPAN_LEN] for s in starts])
    return np.concatenate([driver.read(var.path, int(s), int(s) + SAMPLE_SPAN_LEN) for s in starts])


def edges_of(
    driver: Driver,
    var: VariableInfo,
    opts: BuildOptions,
    whole: npt.NDArray[np.generic] | None = None,
) -> npt.NDArray[np.generic]:
    """The bin edges of ``var``: a pure function of the file, so every rank
    that indexes some of its blocks computes the same ones. ``whole``, the
    variable's values when they are in memory already, gives the same sample
    without reading it again (64 small reads: most of a small step's build)."""
    sample = _sample(driver, var, whole).astype(KEY_DTYPES[key_kind(var.dtype)])
    # NumPy's vectorised sort first: the core's own sort then finds the
    # sample in order, and the edges cost 0.6 ms instead of 1.5 (65,536 values).
    return _core.variable_edges(np.sort(sample), opts.bins, opts.precision)


def block_count(var: VariableInfo, opts: BuildOptions) -> int:
    return -(-var.size // opts.block_len)


def check_indexable(variables: list[VariableInfo]) -> None:
    for var in variables:
        if var.problem is not None:
            raise UnsupportedVariableError(f"cannot index {var.path}: {var.problem}")


def build_index(
    driver: Driver,
    variables: list[VariableInfo],
    index_path: str,
    options: BuildOptions | None = None,
    progress: Callable[[int], object] | None = None,
    derived: list[Derivation] | None = None,
    listing: Listing | None = None,
) -> Manifest:
    """Index ``variables`` of an open file into ``index_path``; returns the manifest.
    ``progress`` is called with the number of rows indexed after each span;
    ``derived`` definitions are recorded so the index
    can compute its derived variables again when queried, and the file's
    ``listing`` so a fresh index opens it without walking it.

    Examples
    --------
    >>> import h5py, numpy as np, tempfile, os
    >>> from quarry.formats.hdf5 import HDF5Driver
    >>> path = os.path.join(tempfile.mkdtemp(), "d.h5")
    >>> with h5py.File(path, "w") as f:
    ...     _ = f.create_dataset("x", data=np.arange(10.0))
    >>> drv = HDF5Driver(path)
    >>> manifest = build_index(drv, drv.variables(), path + ".qidx", BuildOptions(block_len=4))
    >>> len(manifest.variables["/x"].spans)
    3
    >>> drv.close()
    """
    opts = options or BuildOptions()
    check_indexable(variables)
    before = fingerprint(driver.path)
    read_ns = time.time_ns()  # the stat above is trusted only if safely older
    layout.remove_debris(index_path)
    with layout.writing(index_path) as writer:
        runs = {v.path: (0, block_count(v, opts)) for v in variables}
        parts = index_blocks(driver, variables, runs, opts, writer, progress)
        check_unchanged(driver.path, before)
        stamp = {**before, **description_stamp(driver.path, index_path)}
        manifest = assemble(
            driver.path, stamp, read_ns, variables, opts, parts, [], derived or [], listing
        )
        writer.commit(manifest)
    return manifest


def indexed_values(values: npt.NDArray[np.generic]) -> npt.NDArray[np.generic]:
    """The array the core indexes, and whose native bytes give each block's
    recorded CRC-32 (:mod:`quarry.index.verify` computes them again from it)."""
    return np.ascontiguousarray(values)


def check_unchanged(path: str, before: dict[str, Any]) -> None:
    if fingerprint(path) != before:
        raise SourceError(f"{path} changed while it was being indexed; run again")


@record(frozen=False)
class VariablePart:
    """A run of consecutive blocks of one variable, as one writer indexed them."""

    first_block: int
    edges: bytes | None  # encoded; None: sent by the part holding the variable's first block
    spans: list[list[int]] = field(default_factory=list)  # [file, offset, length] per block
    source_crc32: list[int] = field(default_factory=list)


def index_blocks(
    driver: Driver,
    variables: list[VariableInfo],
    runs: dict[str, tuple[int, int]],
    opts: BuildOptions,
    writer: layout.BlockWriter,
    progress: Callable[[int], object] | None = None,
) -> dict[str, VariablePart]:
    """Index blocks ``[first, stop)`` of each variable in ``runs`` into
    ``writer``. A reader thread reads span k+1 and a writer thread writes
    span k-1 while the core indexes span k (file I/O and the core both
    release the GIL); the one writer thread keeps each variable's blocks in
    order. At most :data:`MAX_WRITES_IN_FLIGHT` spans of blocks wait for it,
    so a disk slower than the indexing bounds the memory instead of queueing
    the whole index.

    With several threads (:func:`quarry.parallel.threads`), variables of
    fewer blocks than threads (a step of a series) are indexed side by side,
    each on one thread: their blocks are too few to share among the threads,
    and handing each small call to the pool costs more than it gains."""
    from quarry.pool import jobs

    workers = jobs()
    todo = [v for v in variables if v.path in runs]
    small = [v for v in todo if runs[v.path][1] - runs[v.path][0] < workers]
    parts: dict[str, VariablePart] = {}
    writes: dict[str, list[Future[list[tuple[int, int, int]]]]] = {}
    with ThreadPoolExecutor(1) as write_thread:
        room = threading.BoundedSemaphore(MAX_WRITES_IN_FLIGHT + 1)

        def write(blocks: list[bytes]) -> Future[list[tuple[int, int, int]]]:
            room.acquire()  # a slow disk holds the indexing back
            done = write_thread.submit(writer.add_all, blocks)
            done.add_done_callback(lambda _: room.release())
            return done

        # Small variables are built side by side, a few ahead of the one
        # being written, and written in order: the index's bytes do not
        # depend on the threads.
        side = _side_pool(workers) if len(small) > 1 else None
        if side is not None:  # the formats' libraries read from one thread at a time
            driver = _OneReader(driver)
        upcoming = iter(small if side is not None else [])
        ahead: dict[str, Future[tuple[VariablePart, list[list[bytes]]]]] = {}

        def top_up() -> None:
            while side is not None and len(ahead) < 2 * workers:
                var = next(upcoming, None)
                if var is None:
                    return
                ahead[var.path] = side.submit(_alone, driver, var, runs[var.path], opts)

        try:
            with ThreadPoolExecutor(1) as reader:
                for var in todo:
                    top_up()
                    if var.path in ahead:
                        parts[var.path], spans = ahead.pop(var.path).result()
                        writes[var.path] = [write(blocks) for blocks in spans]
                        if progress is not None:
                            first, stop = runs[var.path]
                            end = min(stop * opts.block_len, var.size)
                            progress(max(end - first * opts.block_len, 0))
                    else:
                        parts[var.path], writes[var.path] = _index_run(
                            driver, var, runs[var.path], opts, reader.submit, write, progress
                        )
        finally:  # on an error, what was started ends before the writer does
            for future in ahead.values():
                future.cancel()
            wait(ahead.values())
        # Spans are known once the writes are done; waiting only here lets
        # one variable's writes overlap the next variable's indexing.
        for path, pending_writes in writes.items():
            parts[path].spans = [list(s) for w in pending_writes for s in w.result()]
    return parts


class _OneReader:
    """A driver whose reads are made one at a time, whatever the thread (the
    libraries of some formats, netCDF4's among them, must not be entered by
    two threads at once); the core's work on what they read runs side by side."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.path = driver.path
        self.step_context = driver.step_context
        self._lock = threading.Lock()

    def variables(self) -> list[VariableInfo]:
        with self._lock:
            return self.driver.variables()

    def read(self, var: str, start: int, stop: int) -> npt.NDArray[np.generic]:
        with self._lock:
            return self.driver.read(var, start, stop)

    def gather(self, var: str, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.generic]:
        with self._lock:
            return self.driver.gather(var, positions)

    def close(self) -> None:
        self.driver.close()


#: Threads building small variables side by side, by their number: kept, so
#: that the files of a series do not each start threads (and give each a
#: pool of its own in the core).
_SIDE_POOLS: dict[int, ThreadPoolExecutor] = {}
_SIDE_LOCK = threading.Lock()


def _side_pool(workers: int) -> ThreadPoolExecutor:
    with _SIDE_LOCK:
        pool = _SIDE_POOLS.get(workers)
        if pool is None:
            pool = ThreadPoolExecutor(workers, thread_name_prefix="quarry-build")
            _SIDE_POOLS[workers] = pool
        return pool


def _alone(
    driver: Driver, var: VariableInfo, run: tuple[int, int], opts: BuildOptions
) -> tuple[VariablePart, list[list[bytes]]]:
    """Blocks ``run`` of ``var`` indexed on this thread alone, reading where
    it indexes; its blocks, span by span, are returned for writing."""
    from quarry.pool import threads

    def at_once(read: Callable[..., Any], *args: Any) -> Future[Any]:
        done: Future[Any] = Future()
        done.set_result(read(*args))
        return done

    with threads(1):
        return _index_run(driver, var, run, opts, at_once, lambda blocks: blocks, None)


def _index_run(
    driver: Driver,
    var: VariableInfo,
    run: tuple[int, int],
    opts: BuildOptions,
    read_ahead: Callable[..., Future[Any]],
    write: Callable[[list[bytes]], W],
    progress: Callable[[int], object] | None,
) -> tuple[VariablePart, list[W]]:
    """Blocks ``run`` of ``var`` indexed span by span, each span read by
    ``read_ahead(driver.read, ...)`` (the next while this one is indexed) and
    its blocks handed to ``write``; returns what ``write`` gave back for each."""
    first, stop = run
    step = max(opts.block_len, READ_SPAN // opts.block_len * opts.block_len)
    end = min(stop * opts.block_len, var.size)
    reads = [(s, min(s + step, end)) for s in range(first * opts.block_len, end, step)]
    # A variable all in one read takes its edges from that read; any other is
    # sampled now, before reading ahead (not every format reads from two
    # threads at once).
    whole = first == 0 and len(reads) == 1 and reads[0][1] == var.size
    edges = None if whole else edges_of(driver, var, opts)
    kind = key_kind(var.dtype)
    part = VariablePart(first, None if edges is None else layout.encode_edges(edges, kind))
    written = []
    pending = read_ahead(driver.read, var.path, *reads[0]) if reads else None
    for k in range(len(reads)):
        assert pending is not None
        values = pending.result()
        if k + 1 < len(reads):
            pending = read_ahead(driver.read, var.path, *reads[k + 1])
        if edges is None:
            edges = edges_of(driver, var, opts, whole=values)
            part.edges = layout.encode_edges(edges, kind)
        built = _core.build_blocks(indexed_values(values), edges, opts.block_len)
        part.source_crc32.extend(crc for _, crc in built)
        written.append(write([b for b, _ in built]))
        if progress is not None:
            progress(len(values))
    return part, written


def assemble(
    source: str,
    fingerprint: dict[str, Any],
    read_ns: int,
    variables: list[VariableInfo],
    opts: BuildOptions,
    parts: dict[str, VariablePart] | list[dict[str, VariablePart]],
    shards: list[Shard],
    derived: list[Derivation],
    listing: Listing | None = None,
) -> Manifest:
    """The manifest of an index whose blocks the ``parts`` hold (from one
    writer, or a list from many), built from the source whose ``fingerprint``
    was taken before reading began at ``read_ns`` (see
    :mod:`quarry.index.fresh`). Every block of every variable must be in
    exactly one part, all parts of a variable having the same edges."""
    per_writer = parts if isinstance(parts, list) else [parts]
    entries: dict[str, VariableEntry] = {}
    for var in variables:
        runs = sorted((p[var.path] for p in per_writer if var.path in p), key=_first)
        expected = block_count(var, opts)
        spans = [s for p in runs for s in p.spans]
        starts = [p.first_block for p in runs]
        if len(spans) != expected or starts != list(
            np.cumsum([0] + [len(p.spans) for p in runs[:-1]])
        ):
            raise CorruptIndexError(
                f"the parts of {var.path} hold {len(spans)} blocks of {expected}, or overlap; "
                "the build is incomplete"
            )
        if any(p.edges is not None and p.edges != runs[0].edges for p in runs):
            raise CorruptIndexError(f"writers disagree on the bin edges of {var.path}")
        entries[var.path] = VariableEntry(
            dtype=var.dtype.str,
            shape=tuple(var.shape),
            key=key_kind(var.dtype),
            bins=opts.bins,
            precision=opts.precision,
            edges=(runs[0].edges if runs else None)
            or layout.encode_edges(np.empty(0), key_kind(var.dtype)),
            blocks=spans,
            source_crc32=[c for p in runs for c in p.source_crc32],
        )
    return Manifest(
        version=layout.VERSION,
        created_by=f"quarry {VERSION}",
        source=SourceRecord(os.path.basename(source), fingerprint, read_ns),
        block_len=opts.block_len,
        derived=tuple(derived),
        shards=tuple(shards),
        variables=entries,
        listing=listing,
    )


def _first(part: VariablePart) -> int:
    return part.first_block
