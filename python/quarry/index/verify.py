"""Checking a source against the per-block CRC-32 its index recorded.

A build records, for every block of every variable, the CRC-32 of the values
it indexed (their native bytes, as the driver read them; for a derived
variable the computed float64 values). :func:`source_crcs` computes the same
numbers from the source as it is now: one thread reads span after span
(a driver reads one span at a time, as a build's reader does) while a pool of
threads checksums the blocks of the span before (with the core's CRC-32,
``zlib.crc32``'s numbers several times faster, and without the GIL), so
checking costs about one read of the columns.

What this can and cannot see is in the README ("What a changed source does").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from quarry import _core
from quarry.formats.base import Driver, fingerprint
from quarry.index.build import READ_SPAN, indexed_values
from quarry.index.fresh import describe_blocks, record_checked, same, trusted
from quarry.index.manifest import Manifest
from quarry.records import field, record

if TYPE_CHECKING:
    from quarry.reorg.read import CopyCheck

#: Reads ``rows [start, stop)`` of a variable, as a driver's ``read`` does.
Reader = Callable[[str, int, int], Any]


def source_crcs(
    read: Reader, columns: list[tuple[str, int]], block_len: int, jobs: int = 0
) -> dict[str, list[int]]:
    """The CRC-32 of every block of each ``(variable, rows)``, computed from
    the source now exactly as a build records them, on ``jobs`` threads
    (0: one per core).

    Examples
    --------
    >>> import numpy as np, zlib
    >>> data = {"/x": np.arange(10.0)}
    >>> crcs = source_crcs(lambda p, a, b: data[p][a:b], [("/x", 10)], 4)
    >>> crcs["/x"] == [zlib.crc32(data["/x"][a : a + 4]) for a in (0, 4, 8)]
    True
    """
    from quarry import _core
    from quarry.pool import jobs as core_jobs

    step = max(block_len, READ_SPAN // block_len * block_len)
    spans = [(path, s, min(s + step, rows)) for path, rows in columns for s in range(0, rows, step)]
    out: dict[str, list[Future[int]]] = {path: [] for path, _ in columns}
    with (
        ThreadPoolExecutor(jobs or core_jobs()) as pool,
        ThreadPoolExecutor(1) as reader,
    ):
        pending = reader.submit(read, *spans[0]) if spans else None
        previous: list[Future[int]] = []
        for k, (path, _, _) in enumerate(spans):
            assert pending is not None
            values = indexed_values(pending.result())
            if k + 1 < len(spans):
                pending = reader.submit(read, *spans[k + 1])
            raw, size = values.reshape(-1).view(np.uint8), block_len * values.itemsize
            sums = [pool.submit(_core.crc32, raw[a : a + size]) for a in range(0, len(raw), size)]
            out[path].extend(sums)
            # At most two spans in memory: this one and the one being read.
            for done in previous:
                done.result()
            previous = sums
    return {path: [f.result() for f in sums] for path, sums in out.items()}


def changed_blocks(recorded: Sequence[int], now: Sequence[int]) -> list[int]:
    """Blocks whose CRC differs (a block missing on either side counts).

    Examples
    --------
    >>> changed_blocks([1, 2, 3], [1, 5, 3])
    [1]
    """
    return [
        b
        for b in range(max(len(recorded), len(now)))
        if b >= len(recorded) or b >= len(now) or recorded[b] != now[b]
    ]


@record(frozen=False)
class Verification:
    """What :meth:`quarry.Dataset.verify` found: per variable, the blocks
    whose values no longer have the recorded CRC-32 (``changed``), the
    variables that could not be compared at all (``problems``: gone from the
    file, another shape or dtype), and those whose index bytes are damaged
    (``damaged``: a block's header or bitmaps, with why); and what the check
    of the file's reorganised copy found (``copy``, None where it has none).
    ``index`` is None for a file with a copy and no index."""

    file: str
    index: str | None
    variables: int
    blocks: int
    changed: dict[str, list[int]] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)
    block_counts: dict[str, int] = field(default_factory=dict)
    damaged: dict[str, str] = field(default_factory=dict)
    copy: CopyCheck | None = None

    @property
    def index_ok(self) -> bool:
        return not self.changed and not self.problems and not self.damaged

    @property
    def ok(self) -> bool:
        return self.index_ok and (self.copy is None or self.copy.ok)

    def summary(self) -> str:
        """One line: ``ok FILE: ...``, or ``changed FILE: ...`` or ``damaged
        FILE: ...`` naming what differs and the command that builds it again."""
        said = [] if self.index is None else [self._index_summary()]
        if self.copy is not None:
            said.append(self.copy.summary())
        copy = self.copy
        damaged = self.damaged or (copy is not None and (copy.damaged or copy.unreadable))
        word = "ok" if self.ok else "damaged" if damaged else "changed"
        return f"{word} {self.file}: {'; '.join(said)}"

    def _index_summary(self) -> str:
        from quarry.index.locate import rebuild_command

        if self.index_ok:
            return f"{self.blocks} blocks of {self.variables} variable(s) match"
        assert self.index is not None
        rebuild = rebuild_command(self.file, self.index)
        if self.damaged:
            parts = [f"{path} {why}" for path, why in self.damaged.items()]
            return (
                f"its index {self.index} is damaged at {'; '.join(parts)}; "
                f"rebuild it with: {rebuild} --force"
            )
        parts = [
            f"{path} {describe_blocks(blocks, self.block_counts[path])}"
            for path, blocks in self.changed.items()
        ]
        parts += [f"{path} {why}" for path, why in self.problems.items()]
        return f"{'; '.join(parts)}; rebuild the index with: {rebuild}"

    def to_json(self) -> dict[str, Any]:
        copy = self.copy
        return {
            "file": self.file,
            "index": self.index,
            "ok": self.ok,
            "variables": self.variables,
            "blocks": self.blocks,
            "changed": self.changed,
            "problems": self.problems,
            "damaged": self.damaged,
            "copy": None
            if copy is None
            else {
                "path": copy.path,
                "ok": copy.ok,
                "changed": copy.changed,
                "damaged": copy.damaged,
                "unreadable": copy.unreadable,
                "rebuild": copy.rebuild,
            },
        }


def damaged_columns(files: Sequence[_core.IndexFile], manifest: Manifest) -> dict[str, str]:
    """Each variable of the index whose bytes are damaged (a block header
    that does not parse, a bitmap whose CRC-32 or count is wrong), with
    where and why: what a query would refuse when it came to that block.

    Examples
    --------
    >>> import quarry, h5py, numpy as np, tempfile, os
    >>> from quarry.index.layout import read
    >>> path = os.path.join(tempfile.mkdtemp(), "d.h5")
    >>> with h5py.File(path, "w") as f:
    ...     f["e"] = np.arange(1000.0)
    >>> with quarry.open(path) as ds:
    ...     _ = ds.build_index()
    >>> damaged_columns(*read(path + ".qidx"))
    {}
    """
    out = {}
    for path, entry in manifest.variables.items():
        try:
            col = _core.Column.open(
                list(files), entry.key, entry.spans, entry.n_rows, manifest.block_len
            )
        except _core.CorruptBlockError as exc:
            out[path] = f"(a block header: {exc})"
            continue
        found = col.check_bitmaps()
        if found is not None:
            block, why = found
            out[path] = f"block {block} ({why})"
    return out


def verify(
    source_path: str,
    index_path: str,
    manifest: Manifest,
    driver: Driver,
    jobs: int = 0,
    files: Sequence[_core.IndexFile] = (),
) -> Verification:
    """Check every block ``manifest`` recorded against the source read
    through ``driver`` (derived variables included), and, given the index's
    mapped ``files``, every block of the index itself (headers and bitmaps,
    :func:`damaged_columns`); when all match, record the source's stat as
    checked (:func:`quarry.index.fresh.record_checked`)."""
    before = fingerprint(source_path)
    read_ns = time.time_ns()
    block_len = manifest.block_len
    known = {v.path: v for v in driver.variables()}
    entries = manifest.variables
    report = Verification(source_path, index_path, len(entries), 0)
    columns = []
    for path, entry in entries.items():
        report.block_counts[path] = len(entry.crcs)
        info = known.get(path)
        if info is None:
            report.problems[path] = "is no longer in the file"
        elif info.shape != entry.shape or info.dtype.str != entry.dtype:
            report.problems[path] = (
                f"was {np.dtype(entry.dtype)} of shape {entry.shape}, "
                f"is {info.dtype} of shape {info.shape}"
            )
        else:
            columns.append((path, entry.n_rows))
    for path, crcs in source_crcs(driver.read, columns, block_len, jobs).items():
        report.blocks += len(crcs)
        blocks = changed_blocks(entries[path].crcs, crcs)
        if blocks:
            report.changed[path] = blocks
    if files:
        report.damaged.update(damaged_columns(files, manifest))
    recorded = manifest.source.stamp
    proven = same(before, recorded, tuple(before)) and trusted(recorded, manifest.source.read_ns)
    if report.ok and not proven and fingerprint(source_path) == before:
        record_checked(index_path, before, read_ns, frozenset(entries))
    return report
