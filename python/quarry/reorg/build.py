"""Building a reorganised copy (MDBin, after SDS-MD): two passes over the variables.

1. *Ranges*: every part of the rows finds each variable's least and greatest
   value and whether it holds NaN; the parts' extents merged give each
   variable's :class:`~quarry.reorg.binning.Axis`. A fresh index of the file
   already knows them (its blocks' statistics, :func:`indexed_extents`): the
   variables it covers are not read for this pass, which is then most of a
   cold source's reading saved.
2. *Clustering*: every part reads its rows of each variable (one span per
   variable) and hands them to the core in one call without the GIL
   (:func:`quarry._core.cluster_part`): it gives each row its 1-D bin per
   variable and its row-major MDBin number, orders the rows by MDBin number
   (stable, so rows keep their ascending order within a bin: a counting
   sort over the part's range of MDBin numbers, or a radix sort where that
   range is much wider than the part), writes each column in that order
   into the part's rows of the copy, a span of 65,536 values at a time
   (regrouped by span in one streaming pass, each span put in order in a
   buffer that stays in cache, checksummed there and written from there: one
   sequential run per column, its write-back to disk started at once), and
   hands back the part's offset table and CRCs.

Parts are ``part_rows`` consecutive rows and are the unit of parallel work:
threads take parts in turn, and no data moves between them; only the small
offset tables come back to be written with the manifest. Reads from the file
are made one at a time (drivers such as netCDF4 are not thread-safe); the
binning, sorting and writing of parts run on every thread at once. A worker
holds one part of each variable at a time (a memory-mapped source lends
it without a copy) and keeps its buffers from part to part.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from quarry import _core
from quarry.errors import (
    QuarryError,
    ReorgError,
    ShapeMismatchError,
    SourceError,
    UnsupportedVariableError,
)
from quarry.formats.base import Driver, VariableInfo, fingerprint
from quarry.formats.raw import description_stamp
from quarry.index.layout import remove_debris
from quarry.index.manifest import SourceRecord
from quarry.pool import jobs as core_jobs
from quarry.records import record
from quarry.reorg.binning import Axis, Binning, Extent, extent_of, mdbin_strides
from quarry.reorg.layout import (
    CopyWriter,
    MemberTables,
    column_dtype,
    crc32,
    rows_dtype,
    table_crc,
    writing,
)
from quarry.reorg.manifest import CopyManifest, MemberEntry, PartEntry
from quarry.version import VERSION

if TYPE_CHECKING:
    import numpy.typing as npt

    from quarry.index.store import IndexStore

#: Reads rows ``[start, stop)`` of a variable as a contiguous array.
Reader = Callable[[str, int, int], Any]

#: Rows per part: the unit of parallel work and of the offset tables, and
#: what one worker holds of each variable at a time.
DEFAULT_PART_ROWS = 1 << 22
#: A float column's axis as the core bins it (:func:`quarry._core.add_bins`):
#: origin, size, count, stride, and its decimal edges (None: the formula's).
CoreAxis = tuple[float, float, int, int, "npt.NDArray[np.float64] | None"]


@record
class MemberPlan:
    """One table to reorganise: the copy's group ``name`` for it, the step and
    step group it is (None for a file without steps), and its variables, in
    the order of the MDBin number."""

    name: str
    step: int | None
    group: str | None
    variables: tuple[VariableInfo, ...]


def check_member(plan: MemberPlan) -> int:
    """The rows of a member's table; its variables must be supported and
    share one shape, with no variable named twice."""
    if not plan.variables:
        raise ReorgError("name at least one variable to reorganise")
    for var in plan.variables:
        if var.problem is not None:
            raise UnsupportedVariableError(f"cannot reorganise {var.path}: {var.problem}")
    paths = [v.path for v in plan.variables]
    if len(set(paths)) != len(paths):
        raise ReorgError(f"a variable is named twice: {', '.join(paths)}")
    first = plan.variables[0]
    for var in plan.variables[1:]:
        if var.shape != first.shape:
            raise ShapeMismatchError(
                f"{first.path} has shape {first.shape} and {var.path} has shape {var.shape}; "
                "the variables of a reorganisation form one table and must share one shape"
            )
    return first.size


def reorganize(
    driver: Driver,
    members: list[MemberPlan],
    path: str,
    binning: Binning,
    part_rows: int = DEFAULT_PART_ROWS,
    jobs: int | None = None,
    progress: Callable[[int], object] | None = None,
    index: IndexStore | None = None,
    context: str | None = None,
) -> CopyManifest:
    """Write the reorganised copy of ``members`` of an open file to ``path``
    (atomically, replacing any old copy); returns its manifest. ``jobs``
    threads share the parts (None or 0: as many as the core uses);
    ``progress`` is called with the rows of each part clustered; the file's
    ``index``, if given, saves reading the variables it knows the ranges of
    (see :func:`indexed_extents`); ``context`` is the group the variables
    were named under, recorded with ``binning`` so the copy can be built
    again as it was.

    Examples
    --------
    >>> import h5py, numpy as np, tempfile, os
    >>> from quarry.formats.hdf5 import HDF5Driver
    >>> file = os.path.join(tempfile.mkdtemp(), "p.h5")
    >>> with h5py.File(file, "w") as f:
    ...     f["x"], f["y"] = np.array([3.0, 0.0, 2.0, 1.0]), np.array([0.0, 1.0, 0.0, 1.0])
    >>> drv = HDF5Driver(file)
    >>> plan = MemberPlan("m0", None, None, tuple(drv.variables()))
    >>> manifest = reorganize(drv, [plan], file + ".qmd", Binning.of(2, None, 2), part_rows=3)
    >>> [(p.first, p.rows) for p in manifest.members[0].parts]
    [(0, 3), (3, 1)]
    >>> with h5py.File(file + ".qmd") as f:
    ...     f["m0/rows"][()].tolist(), f["m0/columns/0"][()].tolist()
    ([1, 0, 2, 3], [0.0, 3.0, 2.0, 1.0])
    >>> drv.close()
    """
    sizes, cuts = cut_parts(members, part_rows)
    before = fingerprint(driver.path)
    read_ns = time.time_ns()  # the stat above is trusted only if safely older
    known = indexed_extents(index, members, before)
    remove_debris(path)
    read = serial_reader(driver)
    with ThreadPoolExecutor(jobs or core_jobs()) as workers:
        all_axes = [
            make_axes(plan, binning, measure(read, plan, parts, workers, known))
            for plan, parts in zip(members, cuts, strict=True)
        ]
        shapes = [(m.name, n, axes) for m, n, axes in zip(members, sizes, all_axes, strict=True)]
        with writing(path, shapes) as writer:
            clustered = [
                cluster_parts(read, writer, plan, axes, parts, workers, progress)
                for plan, axes, parts in zip(members, all_axes, cuts, strict=True)
            ]
            check_unchanged(driver.path, before)
            stamp = {**before, **description_stamp(driver.path, path)}
            manifest, tables = assemble(
                driver.path,
                stamp,
                read_ns,
                part_rows,
                members,
                all_axes,
                clustered,
                binning,
                context,
            )
            writer.publish(manifest, tables)
    return manifest


def cut_parts(
    members: list[MemberPlan], part_rows: int
) -> tuple[list[int], list[list[tuple[int, int]]]]:
    """Each member's rows (checked, see :func:`check_member`) and its parts,
    ``[start, stop)`` of ``part_rows`` rows (the last may be shorter)."""
    if part_rows < 1:
        raise ReorgError(f"parts must hold at least one row, got {part_rows}")
    sizes = [check_member(m) for m in members]
    return sizes, [[(a, min(a + part_rows, n)) for a in range(0, n, part_rows)] for n in sizes]


def serial_reader(driver: Driver) -> Reader:
    """``driver.read`` made one at a time (drivers need not be thread-safe),
    giving contiguous arrays."""
    lock = threading.Lock()

    def read(var: str, start: int, stop: int) -> npt.NDArray[Any]:
        with lock:
            return np.ascontiguousarray(driver.read(var, start, stop))

    return read


def indexed_extents(
    index: IndexStore | None, members: list[MemberPlan], now: dict[str, Any]
) -> dict[str, Extent]:
    """The extents of ``members``' variables that ``index`` already holds,
    by variable path: each one's least and greatest value and NaN count
    over the file's blocks (:meth:`Extent.of_statistics`), exactly what pass
    1 would find. Only an index that the source's stat ``now`` proves fresh
    is asked: trusted without reading the source, and opened at this very
    stat (a file written since then gets its variables read); a variable it
    does not cover whole, or whose statistics cannot tell its extent, is left
    to pass 1, as is every variable of an index that cannot be read.

    Examples
    --------
    >>> import h5py, numpy as np, tempfile, os, quarry
    >>> from quarry.formats.hdf5 import HDF5Driver
    >>> file = os.path.join(tempfile.mkdtemp(), "p.h5")
    >>> with h5py.File(file, "w") as f:
    ...     f["x"], f["y"] = np.array([3.0, np.nan, 2.0]), np.array([0.0, np.inf, 1.0])
    >>> with quarry.open(file) as ds:
    ...     _ = ds.build_index()
    ...     plan = MemberPlan("m0", None, None, tuple(HDF5Driver(file).variables()))
    ...     before = indexed_extents(ds.index, [plan], fingerprint(file))
    ...     ds.index.check()  # written just now: trusted once its CRCs are checked
    ...     after = indexed_extents(ds.index, [plan], fingerprint(file))
    >>> before, after  # y's infinity: read
    ({}, {'/x': Extent(low=2.0, high=3.0, has_nan=True, finite_low=2.0, finite_high=3.0)})
    """
    from quarry.index.stats import column_stats

    if index is None or not index.trusted or index.source_stat != now:
        return {}
    known = {}
    for var in {v.path: v for member in members for v in member.variables}.values():
        entry = index.variables.get(var.path)
        if entry is None or entry.n_rows != var.size or var.dtype.kind not in "fiu":
            continue
        try:
            stats = column_stats(index.column(var.path))
        except QuarryError:  # a damaged column: the pass reads it
            continue
        extent = Extent.of_statistics(
            stats.count, stats.missing, stats.min, stats.max, var.dtype.kind in "iu"
        )
        if extent is not None:
            known[var.path] = extent
    return known


def measure(
    read: Reader,
    plan: MemberPlan,
    parts: list[tuple[int, int]],
    workers: ThreadPoolExecutor,
    known: dict[str, Extent] | None = None,
) -> list[Extent]:
    """The extent of each variable of ``plan`` over ``parts`` (pass 1): as
    ``known`` gives it (by path; the whole variable's), else read."""
    known = known or {}
    todo = [v for v in plan.variables if v.path not in known]
    found = (
        list(workers.map(lambda cut: [extent_of(read(v.path, *cut)) for v in todo], parts))
        if todo
        else []
    )
    measured = iter(merge_extents(found, len(todo)))
    return [known[v.path] if v.path in known else next(measured) for v in plan.variables]


def merge_extents(found: list[list[Extent]], n_vars: int) -> list[Extent]:
    """Per variable, the extents of several parts (or ranks) as one."""
    extents = [Extent(None, None, False)] * n_vars
    for part in found:
        extents = [a.merge(b) for a, b in zip(extents, part, strict=True)]
    return extents


def make_axes(plan: MemberPlan, binning: Binning, extents: list[Extent]) -> list[Axis]:
    """The axis of each variable of ``plan`` over its extent."""
    return [
        binning.axis(k, v, e) for k, (v, e) in enumerate(zip(plan.variables, extents, strict=True))
    ]


def check_unchanged(path: str, before: dict[str, Any]) -> None:
    if fingerprint(path) != before:
        raise SourceError(f"{path} changed while it was being reorganised; run again")


def cluster_parts(
    read: Reader,
    writer: CopyWriter,
    plan: MemberPlan,
    axes: list[Axis],
    parts: list[tuple[int, int]],
    workers: ThreadPoolExecutor,
    progress: Callable[[int], object] | None = None,
) -> list[Clustered]:
    """Bin, order and write every part of ``parts`` on the ``workers`` (pass 2).
    Interrupted (Ctrl-C) or failed, it returns only once no part is being
    written: the parts not started are dropped and the running ones finish,
    so the copy's file is never closed under a part still writing to it."""
    from concurrent.futures import FIRST_EXCEPTION, wait

    running = [
        workers.submit(_cluster, read, writer, plan, axes, start, stop, progress)
        for start, stop in parts
    ]
    try:
        # Woken every 0.1 s: a Ctrl-C the kernel gave another thread (a core
        # worker's) is handled here, on the main thread, and not only once
        # the part being clustered ends.
        pending = set(running)
        while pending and not any(p.done() and p.exception() is not None for p in running):
            pending = wait(pending, timeout=0.1, return_when=FIRST_EXCEPTION).not_done
        return [part.result() for part in running]
    except BaseException:
        for part in running:
            part.cancel()
        wait(running)
        raise


def assemble(
    source: str,
    before: dict[str, Any],
    read_ns: int,
    part_rows: int,
    members: list[MemberPlan],
    all_axes: list[list[Axis]],
    clustered: list[list[Clustered]],
    binning: Binning | None = None,
    context: str | None = None,
) -> tuple[CopyManifest, dict[str, MemberTables]]:
    """The manifest of a copy whose parts ``clustered`` holds (per member, in
    order), binned as ``binning`` asked, its variables named under
    ``context``, and each member's offset tables and block CRC-32s, the
    parts' laid end to end."""
    entries, tables = [], {}
    for plan, axes, parts in zip(members, all_axes, clustered, strict=True):
        entry, bins, starts = _member_entry(plan, plan.variables[0].size, axes, parts)
        entries.append(entry)
        blocks = np.zeros((len(axes) + 1, 0), np.uint32)
        tables[plan.name] = MemberTables(
            bins, starts, np.concatenate([blocks] + [p.copy_blocks for p in parts], axis=1)
        )
    manifest = CopyManifest(
        f"quarry {VERSION}",
        SourceRecord(source.rstrip("/").rsplit("/", 1)[-1], before, read_ns),
        part_rows,
        tuple(entries),
        _core.CHECK_ROWS,
        binning,
        context,
    )
    return manifest, tables


@record
class Clustered:
    """What one part hands back: its rows, CRCs and offset table."""

    first: int
    rows: int
    source_crc32: tuple[int, ...]
    copy_crc32: tuple[int, ...]
    copy_blocks: npt.NDArray[np.uint32]
    """The CRC-32 of each block of ``_core.CHECK_ROWS`` rows of each column
    as written, then of the rows: one row per column, one entry per block."""
    bins: npt.NDArray[np.int64]
    starts: npt.NDArray[np.int64]


def _cluster(
    read: Reader,
    writer: CopyWriter,
    plan: MemberPlan,
    axes: list[Axis],
    start: int,
    stop: int,
    progress: Callable[[int], object] | None,
) -> Clustered:
    """Bin, order and write rows ``[start, stop)`` of one member: the core
    does it in one call without the GIL (:func:`quarry._core.cluster_part`),
    writing each column in MDBin order a span at a time straight into the
    copy's file, so a part is never held twice in its final order."""
    as_read = [read(var.path, start, stop) for var in plan.variables]
    columns = [
        np.ascontiguousarray(values, column_dtype(axis))
        for values, axis in zip(as_read, axes, strict=True)
    ]
    floats, float_axes, keys = core_binning(columns, axes)
    rows_wide = rows_dtype(plan.variables[0].size).itemsize == 8
    source_crcs, copy_crcs, blocks, bins, starts = _core.cluster_part(
        [c.view(f"u{c.dtype.itemsize}") for c in columns],
        floats,
        float_axes,
        keys,
        start,
        rows_wide,
        writer.fileno(),
        writer.part_offsets(plan.name, len(columns), start),
    )
    # The source's CRC is of its values as read (the core's, of the native
    # values, is the same bytes unless they had to be converted).
    source_crcs = [
        crc if native.dtype == values.dtype else crc32(values)
        for crc, native, values in zip(source_crcs, columns, as_read, strict=True)
    ]
    if progress is not None:
        progress(stop - start)
    return Clustered(
        start,
        stop - start,
        tuple(source_crcs),
        tuple(copy_crcs),
        blocks.reshape(len(columns) + 1, -1),
        bins.astype(np.int64),
        starts,
    )


def core_binning(
    columns: list[npt.NDArray[Any]], axes: list[Axis]
) -> tuple[list[npt.NDArray[Any]], list[CoreAxis], npt.NDArray[np.uint64] | None]:
    """How the MDBin numbers of ``columns`` are made: the native float32
    and float64 columns with their ``(origin, size, count, stride)``, binned
    by the core (:func:`quarry._core.add_bins`, the arithmetic of
    :meth:`Axis.assign`), and the sum of the other columns' bin numbers
    times their strides (by :meth:`Axis.assign`; None when there are none).

    Examples
    --------
    >>> from quarry.reorg.binning import Axis
    >>> x = Axis("/x", "<f4", 0.0, 1.0, 0.0, 0.5, 2, True)
    >>> n = Axis("/n", ">i2", 0, 9, 0, 5, 2, False)
    >>> values = [np.array([0.0, 0.7, np.nan], "f4"), np.array([9, 0, 5], ">i2")]
    >>> floats, float_axes, keys = core_binning(values, [x, n])
    >>> float_axes, keys.tolist()
    ([(0.0, 0.5, 2, 2, None)], [1, 0, 1])
    """
    strides = mdbin_strides(axes)
    keys: npt.NDArray[np.uint64] | None = None
    floats, float_axes = [], []
    for values, axis, stride in zip(columns, axes, strides, strict=True):
        if axis.kind == "f64" and values.dtype in (np.float32, np.float64):
            floats.append(values)
            table = axis.decimal_table()
            float_axes.append((float(axis.origin), float(axis.size), axis.count, stride, table))
        else:
            if keys is None:
                keys = np.zeros(len(values), np.uint64)
            keys += axis.assign(values, np.uint64) * np.uint64(stride)
    return floats, float_axes, keys


def mdbin_numbers(columns: list[npt.NDArray[Any]], axes: list[Axis]) -> npt.NDArray[np.uint64]:
    """The row-major MDBin number of each row of ``columns`` (one per axis),
    as :func:`core_binning` makes them.

    Examples
    --------
    >>> from quarry.reorg.binning import Axis
    >>> x = Axis("/x", "<f4", 0.0, 1.0, 0.0, 0.5, 2, True)
    >>> n = Axis("/n", ">i2", 0, 9, 0, 5, 2, False)
    >>> values = [np.array([0.0, 0.7, np.nan], "f4"), np.array([9, 0, 5], ">i2")]
    >>> mdbin_numbers(values, [x, n]).tolist()
    [1, 2, 5]
    """
    floats, float_axes, keys = core_binning(columns, axes)
    mdbin = keys if keys is not None else np.zeros(len(columns[0]) if columns else 0, np.uint64)
    if floats:
        _core.add_bins(floats, float_axes, mdbin)
    return mdbin


def _member_entry(
    plan: MemberPlan, rows: int, axes: list[Axis], parts: list[Clustered]
) -> tuple[MemberEntry, npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
    """A member's manifest entry and its offset tables, the parts' laid end to end."""
    entries, at = [], 0
    for part in parts:
        entries.append(
            PartEntry(
                part.first, part.rows, (at, len(part.bins)), part.source_crc32, part.copy_crc32
            )
        )
        at += len(part.bins)
    bins = np.concatenate([np.zeros(0, np.uint64)] + [p.bins.astype(np.uint64) for p in parts])
    starts = np.concatenate([np.zeros(0, np.int64)] + [p.starts for p in parts])
    entry = MemberEntry(
        plan.name, plan.step, plan.group, rows, tuple(axes), tuple(entries), table_crc(bins, starts)
    )
    return entry, bins, starts
