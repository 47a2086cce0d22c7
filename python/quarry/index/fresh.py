"""Whether an index is still true of its source, learned from git's index ("racy git").

A build records the source's :func:`~quarry.formats.base.fingerprint` (size,
mtime_ns, ctime_ns, inode; for a directory store the file count too) and
``read_ns``, the moment it began reading the source. Opening the index stats
the source once and compares:

- nothing moved, and every time is safely older than ``read_ns``: *trusted*;
  the open reads nothing more.
- size, mtime or the file count moved: the source was written; *refused*.
- only ctime or the inode moved (``touch -r`` restores mtime but sets ctime;
  a copy renamed into place has another inode), or a time is not safely
  older than ``read_ns``: *suspect*. Each column is checked against its
  per-block CRC-32 (:mod:`quarry.index.verify`) before it answers, and
  refused if a block differs.

A time is safely older when it is a *racy window* before the reading began.
A write that lands in the same tick of a coarse clock (one second on some
file systems, two on FAT) just after a build read the data leaves size and
every time as recorded: the index would be *racily clean*, so such a time is
never taken as proof. The window is :data:`RACY_NS` (2 s: the coarsest
timestamps, and the clock skew between a client and a network file server)
unless the stat says its times are fine (``fine_times``: sub-second times on
a local file system, which the kernel stamps from a clock ticking every few
milliseconds); then it is :data:`FINE_RACY_NS`. A file written and indexed
at once on a laptop's disk is trusted a tenth of a second later, not two.

An index published while following a run (``quarry index --follow``; its
manifest's ``follow``) is decided otherwise, since the run grows under it:
it is fresh while every file it recorded is still there with the same
inode and at least the recorded size, and the files it recorded a CRC-32
of (the run's metadata) still begin with the same bytes (but for a header
the writer updates in place, such as BP5's "writer active" flag). A BP5 writer only
appends, so the steps the index covers are then as they were indexed; once
the writer has closed the run, the store's size and file count must not
have moved either.

When a check finds columns unchanged, it records the source's new stat and
those columns beside the index (``<index>.checked``, written atomically and
skipped where the directory is read-only), so the next open at the same stat
is cheap again. So does an open that had to walk the file and found its
listing as the index recorded it (:data:`LISTING`): the next open at that
stat answers from the listing without walking the file, its columns still
checked before their first use. ``quarry verify`` checks and records every column, which
also accepts a source whose size or mtime moved while its indexed values
did not (a variable appended to an HDF5 file).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from quarry.errors import StaleIndexError
from quarry.formats.base import fingerprint
from quarry.index.locate import rebuild_command
from quarry.records import record

if TYPE_CHECKING:
    from quarry.index.manifest import Manifest

#: How much older than the reading a recorded time must be to be trusted:
#: the coarsest timestamps in use (FAT's two seconds) and some clock skew
#: between a client and a network file server.
RACY_NS = 2 * 10**9
#: The same for sub-second times on a local file system: ten times the
#: kernel's coarsest timestamp tick (10 ms at 100 Hz).
FINE_RACY_NS = 10**8
#: The stat fields that prove nothing moved; size, mtime and file count are
#: the ones that only a write moves.
STAT_FIELDS = ("size", "mtime_ns", "ctime_ns", "ino", "files")
WRITE_FIELDS = ("size", "mtime_ns", "files")
CHECKED_SUFFIX = ".checked"
#: What a check record names for the file's listing (its variables, shapes,
#: dtypes...: see :mod:`quarry.formats.listing`) found as the index recorded
#: it; no variable's path (they begin with ``/``) can be this.
LISTING = "(listing)"


def trusted(stamp: Mapping[str, Any], read_ns: int | None) -> bool:
    """Whether a stat taken before reading began at ``read_ns`` is proof of
    content: every time in it safely older than the reading (and ctime
    recorded at all; an index written before Quarry recorded it is not).

    Examples
    --------
    >>> stamp = {"size": 8, "mtime_ns": 10**18, "ctime_ns": 10**18, "ino": 5}
    >>> trusted(stamp, 10**18 + 5 * 10**9), trusted(stamp, 10**18 + 10**9)
    (True, False)
    >>> trusted({"size": 8, "mtime_ns": 10**18}, 10**18 + 5 * 10**9)
    False
    >>> trusted({**stamp, "fine_times": 1}, 10**18 + 2 * 10**8)  # sub-second, local
    True
    """
    if read_ns is None or "ctime_ns" not in stamp or "ino" not in stamp:
        return False
    window = FINE_RACY_NS if stamp.get("fine_times") else RACY_NS
    return max(int(stamp["mtime_ns"]), int(stamp["ctime_ns"])) + window < read_ns


def same(now: Mapping[str, Any], recorded: Mapping[str, Any], fields: tuple[str, ...]) -> bool:
    return all(now.get(f) == recorded.get(f) for f in fields)


@record
class Freshness:
    """What opening an index found: the source's stat now, the variables
    whose values must be checked against their CRCs before they answer,
    whether a walk of the file at this stat found its listing as recorded
    (:data:`LISTING`), and whether the stat alone proves the file unchanged
    (``proven``). Columns checked at a new stat prove nothing of the rest of
    the file: it may hold a step or a variable more."""

    now: dict[str, int]
    unchecked: frozenset[str]
    listed: bool = False
    proven: bool = False


def assess(index_path: str, source_path: str, manifest: Manifest) -> Freshness:
    """Compare the source as it is now with what the index recorded (see the
    module notes); raises :class:`StaleIndexError` when the source was
    written, naming what moved and the command that rebuilds the index."""
    recorded = manifest.source.stamp
    now = fingerprint(source_path)
    if "description_crc32" in recorded:  # indexes from before it was recorded are not checked
        _check_description(index_path, source_path, recorded)
    if manifest.follow is not None:
        return _assess_followed(index_path, source_path, manifest, now)
    if same(now, recorded, STAT_FIELDS) and trusted(recorded, manifest.source.read_ns):
        return Freshness(now, frozenset(), proven=True)
    every = frozenset(manifest.variables)
    checked = read_checked(index_path, now)
    if not same(now, recorded, WRITE_FIELDS) and not every <= checked:
        changes = []
        if now["size"] != recorded.get("size"):
            changes.append(f"size {recorded.get('size')} -> {now['size']} bytes")
        if now["mtime_ns"] != recorded.get("mtime_ns"):
            changes.append("modification time differs")
        if now.get("files") != recorded.get("files"):
            changes.append(f"{recorded.get('files')} -> {now.get('files')} files")
        raise StaleIndexError(
            f"{source_path} has changed since it was indexed ({'; '.join(changes)}); "
            f"rebuild the index with: {rebuild_command(source_path, index_path)}"
        )
    return Freshness(now, every - checked, LISTING in checked)


def _check_description(index_path: str, source_path: str, recorded: Mapping[str, Any]) -> None:
    """Raise :class:`StaleIndexError` where the raw-binary description the
    source was indexed by is not the one it is read by now (see
    :func:`quarry.formats.raw.described_otherwise`)."""
    from quarry.formats.raw import described_otherwise

    if described_otherwise(source_path, index_path, recorded):
        raise StaleIndexError(
            f"the description of {source_path} (quarry register) has changed since it was "
            f"indexed, so its values read otherwise; rebuild the index with: "
            f"{rebuild_command(source_path, index_path)}"
        )


def _assess_followed(
    index_path: str, source_path: str, manifest: Manifest, now: dict[str, int]
) -> Freshness:
    """Freshness of an index published while following a run (module notes)."""
    import zlib

    follow = manifest.follow
    assert follow is not None
    moved = []
    for recorded in follow.files:
        try:
            with open(os.path.join(source_path, recorded.name), "rb") as f:
                st = os.fstat(f.fileno())
                head = f.read(recorded.size) if recorded.crc32 is not None else b""
        except OSError:
            moved.append(f"{recorded.name} is gone")
            continue
        if st.st_ino != recorded.ino or st.st_size < recorded.size:
            moved.append(f"{recorded.name} was replaced or cut short")
        elif recorded.crc32 is not None and zlib.crc32(head[recorded.start :]) != recorded.crc32:
            moved.append(f"{recorded.name} was rewritten")
    if follow.closed and not same(now, manifest.source.stamp, ("size", "files")):
        moved.append("it was written after its writer closed it")
    if moved:
        raise StaleIndexError(
            f"{source_path} has changed since it was followed ({'; '.join(moved)}); "
            f"rebuild the index with: {rebuild_command(source_path, index_path)}"
        )
    return Freshness(now, frozenset(), proven=True)


def _index_identity(index_path: str) -> list[int]:
    """Which index file a record belongs to: a rebuild publishes a new file
    (another inode), so a record of the old one no longer applies."""
    st = os.stat(index_path)
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def read_checked(index_path: str, now: dict[str, Any]) -> frozenset[str]:
    """The variables of ``index_path`` found unchanged at the stat ``now``
    by a trusted check (none if there is no such record)."""
    try:
        with open(index_path + CHECKED_SUFFIX, "rb") as f:
            record = json.loads(f.read())
        if (
            record.get("index") == _index_identity(index_path)
            and same(now, record.get("source", {}), STAT_FIELDS)
            and trusted(now, record.get("read_ns"))
        ):
            return frozenset(str(v) for v in record.get("variables", []))
    except (OSError, ValueError, AttributeError):
        pass
    return frozenset()


def record_checked(
    index_path: str, now: dict[str, Any], read_ns: int, variables: frozenset[str]
) -> bool:
    """Record that ``variables`` matched their CRCs at the stat ``now``, taken
    before reading began at ``read_ns``; returns whether it was recorded.
    Nothing is recorded when ``now`` is not safely older than the reading
    (the next open checks again) or the directory is not writable (the
    answer stands; only the next open's cost is at stake)."""
    from quarry.index.layout import replace_atomically

    if not trusted(now, read_ns):
        return False
    record = {
        "index": _index_identity(index_path),
        "source": now,
        "read_ns": read_ns,
        "variables": sorted(variables | read_checked(index_path, now)),
    }
    with contextlib.suppress(OSError):
        replace_atomically(index_path + CHECKED_SUFFIX, json.dumps(record).encode())
        return True
    return False


def describe_blocks(blocks: list[int], total: int) -> str:
    """Block numbers as a person reads them.

    Examples
    --------
    >>> describe_blocks([3], 16)
    'block 3 of 16'
    >>> describe_blocks(list(range(0, 40, 2)), 40)
    'blocks 0, 2, 4, 6, 8, 10, 12, 14 and 12 more of 40'
    """
    shown = ", ".join(str(b) for b in blocks[:8])
    more = f" and {len(blocks) - 8} more" if len(blocks) > 8 else ""
    return f"block{'s' if len(blocks) > 1 else ''} {shown}{more} of {total}"
