"""Following a run that writes one file per step: ``quarry index --follow 'run_*.h5'``.

Each file matching the pattern gets its own index, built by the builder
``quarry index`` uses (the same index, byte for byte but for the moment its
fingerprint was taken), once the file is *complete*:

- its size and modification time have not moved for ``settle`` seconds
  (two looks at least that far apart saw the same, or a file first seen
  already last modified at least that long ago), and
- it opens: HDF5 locks a file its writer has open (h5py's default file
  locking), so a file still being written is refused however long it
  has been still.

Without HDF5 file locks (``HDF5_USE_FILE_LOCKING=FALSE``, common on parallel
file systems) a file still open for writing opens, and the settle time is
the only guard: a writer that pauses longer than ``settle`` has its file
indexed too early. So the follower remembers the stat each index was built
from and indexes a file again when it moves; a file that moved since its
index and was not complete again when the follower stopped is reported in
:attr:`FilesReport.stale` (its index is stale), and one that never became
complete in :attr:`FilesReport.incomplete` (it has no index).

A file whose index is already up to date is passed over, so running the
follower again resumes where it stopped. A file that changes while it is
being indexed is left for the next look. The follower stops once no file
has become complete for ``idle_timeout`` seconds, and never sooner than
``settle`` seconds and one more look after the last file completed.
"""

from __future__ import annotations

import glob
import os
import time
from collections.abc import Callable
from typing import Any

from quarry.errors import QuarryError
from quarry.formats.sources import natural_key
from quarry.index.locate import find_index, place_new_index
from quarry.index.options import BuildOptions
from quarry.records import field, record

#: Names a pattern may match that are Quarry's own files, never data.
_OWN = (".qidx", ".tmp", ".qshard", ".checked", ".qmd", ".qsel", ".qraw.json")


@record(frozen=False)
class FilesReport:
    """What following a pattern did: the files indexed now, and those whose
    index was already up to date."""

    pattern: str
    indexed: list[str] = field(default_factory=list)
    up_to_date: list[str] = field(default_factory=list)
    #: Files indexed (or found up to date) that moved since and had not
    #: become complete again when the follower stopped: their index is stale.
    stale: list[str] = field(default_factory=list)
    #: Files that matched but never became complete (kept moving, or never
    #: opened) while the follower ran: they have no index.
    incomplete: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "indexed": self.indexed,
            "up_to_date": self.up_to_date,
            "stale": self.stale,
            "incomplete": self.incomplete,
        }


def follow_files(
    pattern: str,
    *,
    index: str | None = None,
    idle_timeout: float = 60.0,
    settle: float = 2.0,
    options: BuildOptions | None = None,
    published: Callable[[str, str], object] | None = None,
    waiting: Callable[[str, str], object] | None = None,
) -> FilesReport:
    """Index each file matching ``pattern`` once it is complete (see the
    module notes). ``published(file, index)`` is called after each file's
    index is written; ``waiting(file, why)`` once for a file that has been
    still for ``settle`` seconds but does not open yet.

    Examples
    --------
    >>> import h5py, numpy as np, tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> for k in range(2):
    ...     with h5py.File(os.path.join(d, f"run_{k}.h5"), "w") as f:
    ...         f["energy"] = np.arange(10.0) + k
    >>> report = follow_files(os.path.join(d, "run_*.h5"), idle_timeout=0.2, settle=0)
    >>> [os.path.basename(f) for f in report.indexed]
    ['run_0.h5', 'run_1.h5']
    """
    opts = options or BuildOptions()
    report = FilesReport(pattern)
    still: dict[str, tuple[_Stat, float]] = {}
    said: set[tuple[str, str]] = set()
    done: dict[str, _Stat] = {}  # each file indexed, with the stat its index was built from
    poll = max(0.02, min(settle / 2, 0.5))
    patience = max(idle_timeout, settle + poll)  # a file seen moving gets a look once settled
    last_progress = time.monotonic()
    while True:
        for path in _matches(pattern):
            now = time.monotonic()
            try:
                key = _stat(path)
            except OSError:
                continue
            if done.get(path) == key:
                continue
            first_seen = path not in still
            if still.get(path, (None, 0.0))[0] != key:
                # New, moved since the last look, or moved since its index was built.
                old = first_seen and time.time_ns() - key[1] >= settle * 1e9
                still[path] = (key, now - settle if old else now)
            if now - still[path][1] < settle:
                continue
            try:
                status = _index_file(path, index, opts)
                if _stat(path) != key:
                    continue  # moved while indexed: look again once still
            except (QuarryError, OSError) as exc:  # does not open yet, or moved while indexed
                if waiting is not None and (path, str(exc)) not in said:
                    said.add((path, str(exc)))
                    waiting(path, str(exc))
                continue
            done[path] = key
            last_progress = time.monotonic()
            if status is None:
                if path not in report.indexed:
                    report.up_to_date.append(path)
                continue
            if path in report.up_to_date:
                report.up_to_date.remove(path)
            if path not in report.indexed:
                report.indexed.append(path)
            if published is not None:
                published(path, status)
        if time.monotonic() - last_progress >= patience:
            report.stale = [p for p, key in done.items() if not _still_at(p, key)]
            report.incomplete = [p for p in still if p not in done and os.path.exists(p)]
            return report
        time.sleep(poll)  # a file system gives no word when a file is complete: look again


#: What says a file moved: its size, modification and change times, and inode.
_Stat = tuple[int, int, int, int]


def _stat(path: str) -> _Stat:
    st = os.stat(path)
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def _still_at(path: str, key: _Stat) -> bool:
    try:
        return _stat(path) == key
    except OSError:
        return False


def _matches(pattern: str) -> list[str]:
    names = [p for p in glob.glob(pattern) if not p.endswith(_OWN) and os.path.isfile(p)]
    return sorted(names, key=natural_key)


def _index_file(path: str, index: str | None, opts: BuildOptions) -> str | None:
    """Index ``path`` as ``quarry index`` does; returns the index's path, or
    None when it was up to date already."""
    from quarry.formats import backend_for
    from quarry.formats.listing import Listing
    from quarry.index.build import build_index
    from quarry.index.maintain import up_to_date
    from quarry.index.store import IndexStore

    found = find_index(path, index)
    backend = backend_for(path)
    driver = backend.open(path)
    try:
        chosen = [v for v in driver.variables() if v.problem is None]

        def store() -> IndexStore:
            return IndexStore(found, path, driver.read)

        if os.path.exists(found) and up_to_date(
            store, chosen, opts.bins, opts.precision, opts.block_len, None
        ):
            return None
        index_path = place_new_index(path, found, index is not None)
        listing = Listing.of(backend.name, driver)
        build_index(driver, chosen, index_path, opts, None, [], listing)
    finally:
        driver.close()
    return index_path
