"""Following an ADIOS2 BP5 run as it writes: ``quarry index --follow run.bp``.

The follower reads the run with ADIOS2's streaming API (``begin_step`` /
``end_step`` on a BP5 file still being written): ``begin_step`` returns a
step only once the writer has ended it, so no half-written step is ever
read. Each step's variables (``/Step#<s>/<name>``, as the ADIOS2 driver
names them) are indexed by the file builder into a shard of their own
(``run.bp.qidx.<build>-<step>.qshard``), and a new manifest naming every
shard so far is published atomically: the index is ready, and queryable,
one step at a time. Steps that are already waiting when one is indexed (the
follower fell behind, or started late) are indexed first and published
together, :data:`MAX_BATCH_STEPS` at most, so the manifest is not rewritten
for each. Its manifest's ``follow`` says how many steps it covers
and records the run's metadata files, which prove those steps unchanged
while the run grows (see :mod:`quarry.index.fresh`); queries see the steps
indexed, never more (the manifest's listing holds only those).

It stops when the writer closes the run (the index is then marked closed)
or when no step comes for ``idle_timeout`` seconds. Killed, it loses no
published step: run again, it reads the published manifest, passes over
the steps it covers without reading them, and goes on from the next (a
shard written but not published is removed by the next run, see
:func:`quarry.index.layout.remove_debris`).
"""

from __future__ import annotations

import os
import secrets
import time
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from quarry.errors import CorruptIndexError, QuarryError, SourceError, UnsupportedVariableError
from quarry.formats.adios2 import adios_dtype
from quarry.formats.base import fingerprint
from quarry.formats.listing import Listing
from quarry.index import layout
from quarry.index.build import assemble
from quarry.index.locate import find_index, place_new_index
from quarry.index.manifest import (
    Follow,
    FollowedFile,
    Manifest,
    ManifestText,
    Shard,
    SourceRecord,
)
from quarry.index.options import BuildOptions
from quarry.insitu.blocks import index_arrays
from quarry.records import field, record, replace

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from quarry.formats.base import VariableInfo
    from quarry.query.series import SeriesSelection

#: Steps indexed before the index is published, when more are waiting.
MAX_BATCH_STEPS = 4
#: How often ADIOS2's reader looks for a step the writer has ended, while
#: ``begin_step`` waits (BP5's ``BeginStepPollingFrequencySecs``, 1 s by
#: default, which was most of the follower's latency). A look is a stat and
#: a read of the small ``md.idx``: a hundred a second cost well under 1 % of a core.
POLL_SECS = 0.01
#: The longest one call to ``begin_step`` waits: the bindings hold Python's
#: GIL while ADIOS2 waits, so a follower on a thread would stop the rest of
#: its process for the whole idle timeout; it waits in slices instead.
WAIT_SLICE_SECS = 0.05
#: The BP5 files whose bytes are recorded: the metadata, small, appended at
#: every step's end, and the bytes each begins with that the writer changes
#: in place (``md.idx``'s 64-byte header holds the "writer active" flag,
#: cleared on close). Data files (``data.<n>``) are recorded by size and inode.
METADATA_FILES = {"md.idx": 64, "md.0": 0, "mmd.0": 0}


@record(frozen=False)
class FollowReport:
    """What following a run did: the steps its index covers now, those this
    run indexed (the rest were published before), whether the writer closed
    the run, and per step indexed the seconds from the follower seeing the
    step to its index being published."""

    path: str
    index: str
    steps_indexed: int = 0
    indexed_now: list[int] = field(default_factory=list)
    closed: bool = False
    latencies: list[float] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.path,
            "index": self.index,
            "steps_indexed": self.steps_indexed,
            "indexed_now": self.indexed_now,
            "closed": self.closed,
        }


def follow_bp(
    path: str,
    *,
    index: str | None = None,
    idle_timeout: float = 60.0,
    options: BuildOptions | None = None,
    published: Callable[[int], object] | None = None,
) -> FollowReport:
    """Index the BP5 run at ``path`` step by step as it is written (see the
    module notes); ``published(step)`` is called after each step's index is
    published.

    Examples
    --------
    >>> import adios2, numpy as np, tempfile, os, quarry
    >>> path = os.path.join(tempfile.mkdtemp(), "run.bp")
    >>> with adios2.Stream(path, "w") as s:
    ...     for i, _ in enumerate(s.steps(3)):
    ...         s.write("energy", np.arange(8.0) + i, [8], [0], [8])
    >>> report = follow_bp(path, idle_timeout=5, options=BuildOptions(block_len=4))
    >>> report.steps_indexed, report.closed
    (3, True)
    >>> with quarry.open_series(path) as series:
    ...     [r["count"] for r in series.query("energy > 6").per_step()]
    [1, 2, 3]
    """
    import adios2

    opts = options or BuildOptions()
    index_path = place_new_index(path, find_index(path, index), index is not None)
    report = FollowReport(path, index_path)
    layout.remove_debris(index_path)
    manifest = _resumable(index_path, path, opts)
    if manifest is not None and manifest.follow is not None and manifest.follow.closed:
        report.steps_indexed, report.closed = manifest.follow.steps, True
        return report
    done = manifest.follow.steps if manifest is not None and manifest.follow else 0
    build = secrets.token_hex(4)
    adios = adios2.Adios()
    io = adios.declare_io("quarry-follow")
    io.set_engine("BP5")
    io.set_parameters(
        {"OpenTimeoutSecs": str(idle_timeout), "BeginStepPollingFrequencySecs": str(POLL_SECS)}
    )
    try:
        stream = adios2.Stream(io, path, "r")
    except Exception:  # the bindings' text (colour codes, "iostream error") tells a user nothing
        raise SourceError(
            f"no BP5 run at {path} within {idle_timeout:g} s: its writer has not started it, or "
            f"it is not an ADIOS2 BP5 run; start the follower with the writer, or give a "
            f"longer --idle-timeout"
        ) from None
    pending: list[_IndexedStep] = []
    text = ManifestText()  # encodes each step's variables once, not at every publish
    ok, not_ready = adios2.bindings.StepStatus.OK, adios2.bindings.StepStatus.NotReady
    try:
        while True:
            # Steps waiting already are indexed before the index is published.
            status = _begin_step(stream, 0.0 if pending else idle_timeout)
            if status == not_ready and pending:
                manifest = _publish(path, index_path, manifest, pending, report, text, published)
                pending = []
                continue
            if status != ok:
                report.closed = status == adios2.bindings.StepStatus.EndOfStream
                break
            seen = time.perf_counter()
            step = stream.current_step()
            if step < done:  # published before: passed over unread
                stream.end_step()
                continue
            if step != done:
                raise CorruptIndexError(
                    f"{path} gave step {step} where step {done} was expected; "
                    f"rebuild its index with 'quarry index {path}'"
                )
            arrays = _read_step(stream, path, step)
            stream.end_step()
            number = len(manifest.shards if manifest else ()) + len(pending) + 1
            pending.append(_index_step(path, index_path, step, arrays, opts, build, number, seen))
            done = step + 1
            if len(pending) >= MAX_BATCH_STEPS:
                manifest = _publish(path, index_path, manifest, pending, report, text, published)
                pending = []
        if pending or (report.closed and manifest is not None):
            manifest = _publish(
                path, index_path, manifest, pending, report, text, published, report.closed
            )
            pending = []
    finally:
        for left in pending:  # indexed, never published: removed
            left.writer.abort()
        stream.close()
        _remove_profile(path)
    report.steps_indexed = done
    return report


def _resumable(index_path: str, path: str, opts: BuildOptions) -> Manifest | None:
    """The published manifest of an earlier follow of this run, if it is
    still true of the run and was built with these options; None to start
    from the first step (an index of another kind is replaced)."""
    from quarry.index.fresh import assess

    if not os.path.exists(index_path):
        return None
    try:
        _, manifest = layout.read_manifest(index_path)
        assess(index_path, path, manifest)
    except QuarryError:
        return None
    entries = list(manifest.variables.values())
    if manifest.follow is None or manifest.block_len != opts.block_len:
        return None
    if any(e.bins != opts.bins or e.precision != opts.precision for e in entries):
        return None
    return manifest


def _begin_step(stream: Any, timeout: float) -> Any:
    """``stream.begin_step(timeout=timeout)``, waiting at most
    :data:`WAIT_SLICE_SECS` in each call (the GIL is free between calls)."""
    import adios2

    not_ready = adios2.bindings.StepStatus.NotReady
    deadline = time.monotonic() + timeout
    while True:
        left = max(0.0, deadline - time.monotonic())
        status = stream.begin_step(timeout=min(WAIT_SLICE_SECS, left))
        if status != not_ready or left <= WAIT_SLICE_SECS:
            return status


def _read_step(stream: Any, path: str, step: int) -> dict[str, npt.NDArray[np.generic]]:
    """The current step's global arrays, read through the stream."""
    import numpy as np

    arrays = {}
    for name, meta in sorted(stream.available_variables().items()):
        if not meta.get("Shape", "").strip():
            raise UnsupportedVariableError(
                f"{path}: {name} has no global shape (per-writer blocks or a single value); "
                f"--follow indexes global arrays: index the run with 'quarry index' once written"
            )
        shape = tuple(int(n) for n in meta["Shape"].split(","))
        if 0 in shape:  # the bindings divide by the step's size to read it
            arrays[f"/Step#{step}/{name.strip('/')}"] = np.empty(shape, adios_dtype(meta["Type"]))
        else:
            arrays[f"/Step#{step}/{name.strip('/')}"] = stream.read(name)
    return arrays


@record(frozen=False)
class _IndexedStep:
    """A step indexed into its own shard (kept open and locked until a
    published manifest names it), with what its manifest entries need."""

    step: int
    writer: layout.ShardWriter
    infos: list[VariableInfo]
    manifest: Manifest
    seen: float


def _index_step(
    path: str,
    index_path: str,
    step: int,
    arrays: dict[str, npt.NDArray[np.generic]],
    opts: BuildOptions,
    build: str,
    file_number: int,
    seen: float,
) -> _IndexedStep:
    """Index one step into a shard of its own (the ``file_number``-th file
    of the index)."""
    writer = layout.ShardWriter(index_path, build, step, file_number)
    try:
        indexed = index_arrays(path, step, arrays, opts, writer)
        writer.finish()
        infos = _listed(path, step, indexed.infos)
        this = assemble(path, {}, 0, infos, opts, indexed.parts, [], [], None)
    except BaseException:
        writer.abort()
        raise
    return _IndexedStep(step, writer, infos, this, seen)


def _publish(
    path: str,
    index_path: str,
    previous: Manifest | None,
    steps: list[_IndexedStep],
    report: FollowReport,
    text: ManifestText,
    published: Callable[[int], object] | None,
    closed: bool = False,
) -> Manifest:
    """Publish a manifest naming every shard so far (the ``steps`` indexed
    since the last one included), the run's state now recorded."""
    assert previous is not None or steps
    base = previous if previous is not None else steps[0].manifest
    variables = dict(previous.variables) if previous is not None else {}
    listed = list(previous.listing.variables) if previous and previous.listing else []
    shards = list(previous.shards) if previous is not None else []
    for indexed in steps:
        variables.update(indexed.manifest.variables)
        listed += indexed.infos
        shards.append(Shard(os.path.basename(indexed.writer.path), indexed.writer.size))
    covered = steps[-1].step + 1 if steps else base.follow.steps if base.follow else 0
    source = SourceRecord(os.path.basename(path), fingerprint(path), time.time_ns())
    manifest = replace(
        base,
        source=source,
        shards=tuple(shards),
        variables=variables,
        listing=Listing("adios2", None, tuple(listed)),
        follow=Follow(covered, closed, _followed_files(path)),
    )
    _commit(index_path, manifest, previous, text)
    for indexed in steps:
        indexed.writer.release()
        report.indexed_now.append(indexed.step)
        report.latencies.append(time.perf_counter() - indexed.seen)
        if published is not None:
            published(indexed.step)
    steps.clear()
    return manifest


def _listed(path: str, step: int, indexed: list[VariableInfo]) -> list[VariableInfo]:
    """The step's variables as the ADIOS2 driver lists them (what a query
    sees), in the order indexed; their values must be the ones read."""
    from quarry.formats.adios2 import ADIOS2Driver

    driver = ADIOS2Driver(path)
    try:
        if driver.step_context is not None:
            raise UnsupportedVariableError(
                f"{path} is an openPMD series; --follow indexes plain ADIOS2 steps: "
                f"index it with 'quarry index' once written"
            )
        listed = {v.path: v for v in driver.variables()}
    finally:
        driver.close()
    out = []
    for info in indexed:
        found = listed.get(info.path)
        if found is None or found.decoding is not None or found.shape != info.shape:
            raise UnsupportedVariableError(
                f"{path}: {info.path} is read with decoding or another shape than its step "
                f"holds; index the run with 'quarry index' once written"
            )
        out.append(found)
    return out


def _followed_files(path: str) -> tuple[FollowedFile, ...]:
    files = []
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if name in METADATA_FILES:
            with open(full, "rb") as f:
                data = f.read()
                ino = os.fstat(f.fileno()).st_ino
            start = METADATA_FILES[name]
            files.append(FollowedFile(name, len(data), ino, zlib.crc32(data[start:]), start))
        elif name.startswith("data."):
            st = os.stat(full)
            files.append(FollowedFile(name, st.st_size, st.st_ino, None))
    return tuple(files)


def _commit(
    index_path: str, manifest: Manifest, previous: Manifest | None, text: ManifestText
) -> None:
    with layout.writing(index_path) as writer:
        writer.commit(manifest, replaces=previous, text=text)


def _remove_profile(path: str) -> None:
    """ADIOS2's BP5 reader leaves ``/tmp/<name>_<pid>_profiling.json``
    (see :meth:`quarry.formats.adios2.ADIOS2Driver.close`)."""
    import contextlib

    name = os.path.basename(os.path.normpath(path))
    with contextlib.suppress(OSError):
        os.remove(os.path.join("/tmp", f"{name}_{os.getpid():x}_profiling.json"))


def followed_steps(manifest: Manifest, path: str) -> dict[str, Any] | None:
    """What a query reports of a followed run's index: ``steps_indexed``
    and whether the writer has ``closed`` the run ``path`` (None: not
    followed). The run's own header says so where the follower stopped
    before the writer closed it; the steps written after are then scanned.

    Examples
    --------
    >>> from quarry.index.manifest import SourceRecord
    >>> m = Manifest(3, "", SourceRecord("run.bp", {}), 4, (), (), {},
    ...              follow=Follow(5, False, ()))
    >>> followed_steps(m, "run.bp")
    {'steps_indexed': 5, 'closed': False}
    """
    if manifest.follow is None:
        return None
    return {"steps_indexed": manifest.follow.steps, "closed": manifest.follow.writer_closed(path)}


def followed_report(sel: SeriesSelection) -> dict[str, Any]:
    """For a run indexed while it is written (``quarry index --follow``),
    what a query's answer adds: the steps its index covers, which are the
    steps answered for (``steps_indexed``), and whether its writer has
    closed it (``writer_closed``); nothing for other files. The CLI's
    ``--json`` and the service's counts say the same."""
    found: dict[str, dict[str, Any]] = {}
    for part in sel.selections:
        ds = part.dataset
        if ds.path in found or not ds.has_index:
            continue
        try:
            state = followed_steps(ds.index.manifest, ds.path)
        except QuarryError:  # stale or damaged: the query has said so already
            continue
        if state is not None:
            found[ds.path] = state
    if not found:
        return {}
    return {
        "steps_indexed": sum(s["steps_indexed"] for s in found.values()),
        "writer_closed": all(s["closed"] for s in found.values()),
    }
