"""Indexing a run from the producer's memory: :class:`InSituIndexer`.

The producer writes its file as it always has (h5py, or the ADIOS2 helper
of :mod:`quarry.insitu.adios`) and hands each step's arrays to
:meth:`InSituIndexer.add` under the path the file holds them at. A
background thread indexes them with the file builder
(:mod:`quarry.insitu.blocks`) while the producer computes its next step;
``add`` blocks while ``max_pending_steps`` steps already wait (back-pressure:
memory stays bounded when indexing falls behind). Finished blocks are kept
in memory and appended to a temporary file every ``batch_steps`` steps (the
index is written after the data, in batches).

On close, once the file is closed too (an indexer closed while this process
still holds the file open for writing through h5py raises
:class:`~quarry.errors.InSituUsageError`: its index would be stale as soon
as the file closed), the values the file holds are read
back and their blocks' CRCs checked against those of the values handed (a
step written to another place, an off-by-one between the file's steps and
``add``'s, a lossy filter: the file is the truth, and an index of other
values would give wrong counts); a finished run whose file differs is an
:class:`~quarry.errors.InSituMismatchError` and publishes nothing. Then the
index is published: its blocks
in the order ``quarry index`` writes them (what else the file holds, such as
the steps written before a restart, indexed from the file), its manifest recording the file's
fingerprint as it is then, so the index is the one ``quarry index`` builds
afterwards from the file, byte for byte but for the moment the fingerprint
was taken (``source.read_ns``), and a query trusts it at once.

If the producer fails (an exception leaves the ``with`` block, or
``close(failed=True)``), the steps already handed are indexed and published
as far as the file holds them as handed (the same check): a step missing
from the file or holding other values is left out. The index then
covers exactly the steps listed in :attr:`InSituIndexer.steps_indexed`;
what else the file holds (a step cut short) is not indexed and is scanned
by queries, as any variable without an index is. A producer killed outright
(SIGKILL) publishes nothing: its temporary file is removed by the next
build of the index, and ``quarry index`` indexes what the file holds.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import sys
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from quarry.errors import (
    InSituMismatchError,
    InSituUsageError,
    SourceError,
    UnsupportedVariableError,
)
from quarry.formats.base import Driver, VariableInfo, fingerprint
from quarry.index import layout
from quarry.index.build import VariablePart, assemble, block_count, index_blocks
from quarry.index.fresh import FINE_RACY_NS, RACY_NS
from quarry.index.locate import find_index, place_new_index
from quarry.index.options import BuildOptions
from quarry.insitu.blocks import BatchWriter, IndexedStep, as_indexed, index_arrays, info_of

if TYPE_CHECKING:
    from types import TracebackType

    import numpy.typing as npt

    from quarry.formats.listing import Listing
    from quarry.index.manifest import Manifest

#: H5Part's layout, Quarry's default: step 3 of ``energy`` is ``/Step#3/energy``.
H5PART_TEMPLATE = "/Step#{step}/{name}"
_DONE = None


class InSituIndexer:
    """Index a run's arrays as the producer writes them (see the module notes).

    Parameters
    ----------
    path
        The file the producer writes (HDF5; an ADIOS2 BP directory through
        :class:`quarry.insitu.adios.Writer`).
    template
        Where step ``step`` of array ``name`` lies in the file;
        ``"/Step#{step}/{name}"`` (H5Part) by default.
    index
        Where to put the index (a file or a directory), as ``quarry index
        --index``; by default where ``quarry index`` would.
    bins, precision, block_len
        As :class:`quarry.index.BuildOptions` (the same defaults as ``quarry index``).
    max_pending_steps
        Steps handed over and not yet indexed before :meth:`add` waits.
    batch_steps
        Steps whose blocks are kept in memory before they are written out.
    copy
        Copy each array in :meth:`add` (default), so the producer may reuse
        its buffers at once; ``False`` keeps a reference, and the producer
        must not change an array until the step is indexed.

    Examples
    --------
    >>> import quarry, h5py, numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "run.h5")
    >>> with quarry.InSituIndexer(path, block_len=4) as ix, h5py.File(path, "w") as f:
    ...     for step in range(2):
    ...         energy = np.arange(10.0) + step
    ...         _ = f.create_dataset(f"Step#{step}/energy", data=energy)
    ...         ix.add(step, {"energy": energy})
    >>> ix.steps_indexed
    [0, 1]
    >>> with quarry.open(path) as ds:
    ...     ds.query("energy > 8").count()
    3
    """

    def __init__(
        self,
        path: str,
        template: str = H5PART_TEMPLATE,
        *,
        index: str | None = None,
        bins: int | None = None,
        precision: int | None = None,
        block_len: int | None = None,
        max_pending_steps: int = 2,
        batch_steps: int = 4,
        copy: bool = True,
    ) -> None:
        _check_template(template)
        if max_pending_steps < 1 or batch_steps < 1:
            raise ValueError("max_pending_steps and batch_steps must be at least 1")
        defaults = BuildOptions()
        self.options = BuildOptions(
            bins=bins or defaults.bins,
            precision=defaults.precision if precision is None else precision,
            block_len=block_len or defaults.block_len,
        )
        self.path = path
        self.template = template if template.startswith("/") else "/" + template
        self.index_path = place_new_index(path, find_index(path, index), index is not None)
        self.copy = copy
        self.batch_steps = batch_steps
        self.manifest: Manifest | None = None
        self.steps_indexed: list[int] = []
        layout.remove_debris(self.index_path)
        self._staging = _Staging(self.index_path)
        self._batch = BatchWriter(self._staging)
        self._queue: queue.Queue[tuple[int, dict[str, npt.NDArray[np.generic]]] | None] = (
            queue.Queue(max_pending_steps)
        )
        self._steps: list[IndexedStep] = []
        self._handed: set[str] = set()
        self._error: BaseException | None = None
        self._closed = False
        self._worker = threading.Thread(target=self._index_steps, name="quarry-insitu", daemon=True)
        self._worker.start()

    def __enter__(self) -> InSituIndexer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close(failed=error is not None)

    def add(self, step: int, arrays: Mapping[str, npt.ArrayLike]) -> None:
        """Hand over step ``step``'s arrays, by name; returns once they are
        queued for indexing (waiting while ``max_pending_steps`` steps wait).
        For one producer thread: calls from several threads at once may
        hand the same path twice unnoticed."""
        self._raise_worker_error()
        if self._closed:
            raise ValueError("this InSituIndexer is closed")
        named: dict[str, npt.NDArray[np.generic]] = {}
        for name, values in arrays.items():
            path = self.template.format(step=step, name=name)
            if path in self._handed or path in named:
                raise ValueError(f"{path} was already handed to this InSituIndexer")
            array = as_indexed(np.array(values, copy=True) if self.copy else values)
            problem = info_of(path, array).problem
            if problem is not None:
                raise UnsupportedVariableError(f"cannot index {path}: {problem}")
            named[path] = array
        self._handed.update(named)
        self._queue.put((step, named))
        self._raise_worker_error()

    def _index_steps(self) -> None:
        while (item := self._queue.get()) is not _DONE:
            step, arrays = item
            if self._error is not None:
                continue  # drained, so that add() never waits for a dead worker
            try:
                indexed = index_arrays(self.path, step, arrays, self.options, self._batch)
                self._steps.append(indexed)
                if len(self._steps) % self.batch_steps == 0:
                    self._batch.flush()
            except BaseException as exc:  # reported to the producer by add() or close()
                self._error = exc

    def _raise_worker_error(self) -> None:
        if self._error is not None:
            why = f"indexing {self.path} in situ failed: {self._error}"
            raise SourceError(why) from self._error

    def close(self, failed: bool = False) -> None:
        """Index what is still queued and publish the index (see the module
        notes; ``failed``: the producer did not finish its run). Call it once
        the file is closed: it takes the file's fingerprint."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(_DONE)
        try:  # begun before the join, so that an interrupt still removes the staging file
            self._worker.join()
            if self._error is not None and not failed:
                self._raise_worker_error()
            if _open_for_writing(self.path):
                raise InSituUsageError(
                    f"{self.path} is still open for writing (h5py) while its InSituIndexer "
                    f"closes, so the index would be stale once the file is closed; no index "
                    f"was written. Open the indexer first and the file second, so the file "
                    f'closes first: \'with InSituIndexer(path) as ix, h5py.File(path, "w") '
                    f"as f:', or run 'quarry index {self.path}'"
                )
            self._batch.flush()
            self.manifest = self._publish(failed)
        finally:
            self._staging.abort()

    def _publish(self, failed: bool) -> Manifest | None:
        from concurrent.futures import ThreadPoolExecutor

        from quarry.formats import backend_for
        from quarry.formats.listing import Listing

        if not self._steps or (failed and not os.path.exists(self.path)):
            return None  # nothing handed over, or the run failed before it wrote anything
        backend = backend_for(self.path)
        driver = backend.open(self.path)
        try:
            listing = Listing.of(backend.name, driver)
            in_file = {v.path: v for v in driver.variables()}
            steps = [s for s in self._steps if self._held(s, in_file, failed)]
            if not steps:
                return None
            # The file's values are read back while the blocks are copied
            # into the index (the kernel copies; the disk syncs): nothing is
            # published before the check has passed.
            # A finished run's index is the one quarry index builds: what else
            # the file holds (steps written before a restart, arrays not handed)
            # is indexed from the file, through a driver of its own.
            handed = {path for s in steps for path in s.parts}
            others = [] if failed else _not_handed(in_file, handed)
            with (
                ThreadPoolExecutor(1, thread_name_prefix="quarry-insitu-check") as checker,
                contextlib.closing(backend.open(self.path)) as reader,
            ):
                checking = checker.submit(self._holding_as_handed, driver, steps, failed)
                with layout.writing(self.index_path) as final:
                    parts = self._write_in_order(steps, in_file, final, reader, others)
                    held = checking.result()
                    if len(held) == len(steps):
                        return self._commit(final, held, in_file, parts, listing, failed)
                    final.abort()
        finally:
            driver.close()
        if not held:  # a failed run whose file holds none of its steps as handed
            return None
        with layout.writing(self.index_path) as final:  # the steps held, copied again
            parts = self._write_in_order(held, in_file, final)
            return self._commit(final, held, in_file, parts, listing, failed)

    def _commit(
        self,
        final: layout.IndexWriter,
        steps: list[IndexedStep],
        in_file: dict[str, VariableInfo],
        parts: dict[str, VariablePart],
        listing: Listing | None,
        failed: bool,
    ) -> Manifest:
        """Publish the index of ``steps`` (their blocks copied into ``final``),
        the file's fingerprint taken now."""
        stamp, read_ns = _settled_fingerprint(self.path)
        order = [v for v in in_file.values() if v.path in parts]
        manifest = assemble(self.path, stamp, read_ns, order, self.options, parts, [], [], listing)
        final.commit(manifest)
        self.steps_indexed = sorted(s.step for s in steps)
        if failed:
            warnings.warn(
                f"the run writing {self.path} failed: its index {self.index_path} covers "
                f"{len(steps)} of the {len(self._steps)} step(s) indexed "
                f"({', '.join(map(str, self.steps_indexed))})",
                RuntimeWarning,
                stacklevel=4,
            )
        return manifest

    def _held(self, step: IndexedStep, in_file: dict[str, VariableInfo], failed: bool) -> bool:
        """Whether the file holds every array of ``step`` as handed (same
        shape and dtype); a finished run that does not is an error."""
        for info in step.infos:
            found = in_file.get(info.path)
            if (
                found is not None
                and found.decoding is not None
                and " read as " not in found.decoding
            ):
                if failed:
                    return False
                raise SourceError(
                    f"{self.path} declares how to decode {info.path} ({found.decoding}), so it "
                    f"reads other values than were handed to InSituIndexer.add; no index was "
                    f"written: index the file with 'quarry index {self.path}'"
                )
            if found is not None and found.shape == info.shape and found.dtype == info.dtype:
                continue
            if failed:
                return False
            held = "nothing" if found is None else f"{found.dtype} {found.shape}"
            raise SourceError(
                f"{self.path} holds {held} at {info.path}, where {info.dtype} {info.shape} "
                f"was handed to InSituIndexer.add; no index was written (the arrays must "
                f"be written where the template {self.template!r} puts them)"
            )
        return True

    def _holding_as_handed(
        self, driver: Any, steps: list[IndexedStep], failed: bool
    ) -> list[IndexedStep]:
        """The ``steps`` whose values the file holds as they were handed (their
        blocks' CRCs read back from the file); in a finished run, a step the
        file holds otherwise is an error."""
        differing = _differing(driver, steps, self.options)
        if differing and not failed:
            step, path = next(iter(differing.items()))
            raise InSituMismatchError(
                f"{self.path} holds other values at {path} than were handed to "
                f"InSituIndexer.add as step {step} (another step's, or changed by a lossy "
                f"filter?); no index was written: index the file with 'quarry index {self.path}'"
            )
        return [s for s in steps if s.step not in differing]

    def _write_in_order(
        self,
        steps: list[IndexedStep],
        in_file: dict[str, VariableInfo],
        final: layout.IndexWriter,
        reader: Driver | None = None,
        others: Sequence[VariableInfo] = (),
    ) -> dict[str, VariablePart]:
        """Write the index's blocks in the order the file lists its variables
        (``quarry index``'s): those of ``steps`` copied from the staging file,
        ``others`` indexed from the file through the driver ``reader``; their
        parts, with the spans they have there."""
        handed = {p: v for s in steps for p, v in s.parts.items()}
        from_file = {v.path: v for v in others}
        order = [path for path in in_file if path in handed or path in from_file]
        out: dict[str, VariablePart] = {}
        for copied, run in itertools.groupby(order, key=lambda path: path in handed):
            paths = list(run)
            if copied:
                out.update(self._copy_blocks([(p, handed[p]) for p in paths], final))
            else:
                assert reader is not None, "variables to index from the file need its driver"
                chosen = [from_file[p] for p in paths]
                runs = {v.path: (0, block_count(v, self.options)) for v in chosen}
                out.update(index_blocks(reader, chosen, runs, self.options, final))
        return out

    def _copy_blocks(
        self, handed: list[tuple[str, VariablePart]], final: layout.IndexWriter
    ) -> dict[str, VariablePart]:
        """Copy the blocks of the ``handed`` variables' parts from the staging
        file into the index, in that order."""
        staged = {path: self._batch.placed(part.spans) for path, part in handed}
        extents = [(offset, length) for path, _ in handed for _, offset, length in staged[path]]
        with open(self._staging.path, "rb") as source:
            placed = iter(final.add_copied(source.fileno(), extents))
        out = {}
        for path, part in handed:
            spans = [list(next(placed)) for _ in staged[path]]
            out[path] = VariablePart(0, part.edges, spans, part.source_crc32)
        return out


def _not_handed(in_file: dict[str, VariableInfo], handed: set[str]) -> list[VariableInfo]:
    """The variables of the file that ``quarry index`` indexes and no step
    handed: steps written before a restart, arrays written and not handed."""
    return [v for v in in_file.values() if v.problem is None and v.path not in handed]


def _check_template(template: str) -> None:
    """Refuse, before any step, a template that does not format with
    ``step`` and ``name`` alone, or that leaves ``{name}`` out."""
    try:
        template.format(step=0, name="x")
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        raise InSituUsageError(
            f"the path template {template!r} does not format ({type(exc).__name__}: {exc}): "
            "it may hold only {step} and {name}, as in '/Step#{step}/{name}'"
        ) from None
    if "{name}" not in template:
        raise InSituUsageError(f"the path template {template!r} must hold {{name}}")


class _Staging:
    """The file blocks wait in until close puts them into the index in the
    file's order; never committed. Made at the first batch written, so an
    indexer that never wrote one leaves nothing behind; once aborted, a
    batch the worker still writes is refused rather than made anew."""

    def __init__(self, index_path: str) -> None:
        self.index_path = index_path
        self._writer: layout.IndexWriter | None = None
        self._aborted = False
        self._lock = threading.Lock()  # the worker writes, close aborts

    def add_all(self, blobs: list[bytes], sync: bool = True) -> list[tuple[int, int, int]]:
        return self._opened().add_all(blobs, sync=sync)

    @property
    def path(self) -> str:
        return self._opened().path

    def _opened(self) -> layout.IndexWriter:
        with self._lock:
            if self._aborted:
                raise RuntimeError("the InSituIndexer was closed")
            if self._writer is None:
                self._writer = layout.IndexWriter(self.index_path)
            return self._writer

    def abort(self) -> None:
        with self._lock:
            self._aborted = True
            if self._writer is not None:
                self._writer.abort()


def _differing(driver: Any, steps: list[IndexedStep], opts: BuildOptions) -> dict[int, str]:
    """The steps whose values the file does not hold as they were handed,
    each with its first such variable: their blocks' CRCs read back from the
    file and compared with those taken from the arrays handed."""
    from quarry.index.verify import source_crcs

    columns = [(v.path, v.size) for s in steps for v in s.infos]
    now = source_crcs(driver.read, columns, opts.block_len)
    differing: dict[int, str] = {}
    for s in steps:
        paths = [p for p, part in s.parts.items() if now[p] != part.source_crc32]
        if paths:
            differing[s.step] = paths[0]
    return differing


def _open_for_writing(path: str) -> bool:
    """Whether this process holds ``path`` open for writing through h5py (not
    imported by this check: a producer writing with it imported it)."""
    h5py = sys.modules.get("h5py")
    if h5py is None or not os.path.exists(path):
        return False
    for fid in h5py.h5f.get_obj_ids(types=h5py.h5f.OBJ_FILE):
        try:
            name, intent = os.fsdecode(fid.name), fid.get_intent()
        except (ValueError, RuntimeError):  # closed while listed
            continue
        if intent & h5py.h5f.ACC_RDWR and os.path.exists(name) and os.path.samefile(name, path):
            return True
    return False


def _settled_fingerprint(path: str) -> tuple[dict[str, int], int]:
    """The file's fingerprint and a ``read_ns`` it is trusted at: once its
    times are a racy window old (see :mod:`quarry.index.fresh`; 0.1 s on a
    local disk), the stat is taken again and must not have moved, so the
    first query trusts the index without reading the file to check it."""
    stamp = fingerprint(path)
    window = FINE_RACY_NS if stamp.get("fine_times") else RACY_NS
    settled = max(stamp["mtime_ns"], stamp["ctime_ns"]) + window
    while (now := time.time_ns()) <= settled:
        time.sleep((settled - now) / 1e9 + 1e-3)
    if fingerprint(path) != stamp:
        raise SourceError(
            f"{path} changed while its in-situ index was being published; "
            f"close the file before the InSituIndexer, or run 'quarry index {path}'"
        )
    return stamp, now
