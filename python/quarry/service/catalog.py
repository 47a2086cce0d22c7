"""The catalog: every data file under the roots, what it holds, and the state of
its index and reorganised copy, kept in SQLite so that it survives restarts.

A scan walks the roots. A file (or a Zarr/ADIOS2 store directory) is a data
file when quarry's format registry recognises its content
(:func:`quarry.formats.detect`); Quarry's own files (indexes, copies,
descriptions, selections, temporaries) and hidden names are passed over, and
so is anything whose real path leaves the roots (a symlink pointing out). A
file whose stat, index and copy are as the last scan saw them keeps its
entry; anything else is described again: its variables as ``quarry info``
gives them (:meth:`quarry.Dataset.info`), its index ``fresh``, ``stale``
(the file was written since: :mod:`quarry.index.fresh`), ``damaged`` or
``none``, and its copy as :func:`quarry.reorg.read.describe_copy` says.

Invariant: readers see one whole scan or the next, never a mix. A scan's
entries are written in one SQLite transaction and then published as a new
immutable snapshot by one reference assignment; requests read the snapshot.

The schema is versioned (SQLite's ``user_version``) and each version is a
migration applied in order, so a catalog written by an older server opens in
a newer one with its rows kept; one written by a newer server is refused.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Mapping
from typing import Any

from quarry.errors import QuarryError
from quarry.records import record, replace
from quarry.service.config import ServiceError, inside
from quarry.service.sources import leaving_source

#: Each schema version's migration, in order: ``MIGRATIONS[k]`` takes a
#: catalog from version ``k`` to ``k + 1``.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE datasets (
        path TEXT PRIMARY KEY,
        root TEXT NOT NULL,
        real TEXT NOT NULL,
        format TEXT NOT NULL,
        size INTEGER NOT NULL,
        mtime_ns INTEGER NOT NULL,
        stamp TEXT NOT NULL,
        variables TEXT NOT NULL,
        index_state TEXT NOT NULL
    );
    """,
    """
    ALTER TABLE datasets ADD COLUMN copy TEXT;
    CREATE TABLE jobs (
        id TEXT PRIMARY KEY,
        dataset TEXT NOT NULL,
        state TEXT NOT NULL,
        options TEXT NOT NULL,
        created REAL NOT NULL,
        finished REAL,
        result TEXT
    );
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)

#: Names of Quarry's own files, never catalogued as data.
OWN_SUFFIXES = (".qidx", ".qmd", ".checked", ".qraw.json", ".qsel", ".tmp", ".qshard", ".sqlite")

log = logging.getLogger(__name__)


@record
class Entry:
    """One catalogued data file: ``path`` relative to its ``root`` (``/``
    separated), its real path, format, size, modification time (ns), the
    stat it was described at, its variables (as ``quarry info --json``), its
    index (``path``, ``state``, ``error``) and copy (None, or as
    :func:`~quarry.reorg.read.describe_copy` says)."""

    path: str
    root: str
    real: str
    format: str
    size: int
    mtime_ns: int
    stamp: Mapping[str, Any]
    variables: list[dict[str, Any]]
    index: Mapping[str, Any]
    copy: Mapping[str, Any] | None

    @property
    def indexed(self) -> bool:
        return self.index["state"] in ("fresh", "stale")

    @property
    def fresh(self) -> bool:
        return bool(self.index["state"] == "fresh")

    def summary(self) -> dict[str, Any]:
        """The entry as ``GET /api/v1/datasets`` lists it."""
        return {
            "path": self.path,
            "format": self.format,
            "size": self.size,
            "mtime": self.mtime_ns / 1e9,
            "indexed": self.indexed,
            "fresh": self.fresh,
        }

    def detail(self) -> dict[str, Any]:
        """The entry as ``GET /api/v1/datasets/{path}`` gives it; paths of its
        index and copy (and messages naming them) relative to the root, so a
        client learns nothing of the server's directories."""
        index = {k: v for k, v in self.index.items() if k != "watch"}
        text = json.dumps([index, self.copy], ensure_ascii=False)
        inside = json.dumps(self.root.rstrip(os.sep) + os.sep, ensure_ascii=False)[1:-1]
        index, copy = json.loads(text.replace(inside, ""))
        return {**self.summary(), "index": index, "reorganised": copy, "variables": self.variables}


def watch_stat(real: str) -> dict[str, Any]:
    """What says an entry must be described again: the file's stat, and
    those of its index and copy (absent: None)."""
    from quarry.formats.base import fingerprint
    from quarry.index.locate import find_index
    from quarry.reorg.locate import find_copy

    def stat(path: str) -> list[int] | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]

    return {
        "file": fingerprint(real),
        "index": stat(find_index(real)),
        "copy": stat(find_copy(real)),
    }


def describe(
    real: str, rel: str, root: str, watch: dict[str, Any], roots: tuple[str, ...]
) -> Entry:
    """The entry of the data file ``real``: its variables and index as
    :meth:`quarry.Dataset.info` gives them, and its copy. Raises
    :class:`~quarry.errors.QuarryError` when quarry cannot read it, or when
    it reads data outside ``roots`` (:mod:`quarry.service.sources`)."""
    from quarry.dataset import open as open_dataset
    from quarry.errors import StaleIndexError
    from quarry.formats import detect
    from quarry.reorg.read import describe_copy

    if leaving_source(real, roots) is not None:
        raise ServiceError(404, f"{rel} reads data outside the roots; it is not served")
    fmt = detect(real)
    with open_dataset(real) as ds:
        state: dict[str, Any] = {"path": ds.index_path, "state": "none", "watch": watch}
        if ds.has_index:
            try:
                _ = ds.index.variables
                state["state"] = "fresh"
            except StaleIndexError as exc:
                state.update(state="stale", error=str(exc))
            except QuarryError as exc:
                state.update(state="damaged", error=str(exc))
        info = ds.info()
        if state["state"] == "fresh" and info["index"].get("state") == "stale":
            # A variable changed behind an unmoved stat (its CRCs differ).
            state.update(state="stale", error=info["index"]["error"])
    copy = describe_copy(real)
    stamp = watch["file"]
    return Entry(
        rel,
        root,
        real,
        fmt,
        int(stamp["size"]),
        int(stamp["mtime_ns"]),
        stamp,
        info["variables"],
        state,
        copy,
    )


def _candidates(root: str) -> list[tuple[str, str]]:
    """Every (real path, path relative to ``root``) a scan of ``root`` asks
    the format registry about: files and store directories, in sorted order,
    inside the roots, not Quarry's own nor hidden."""
    from quarry.formats import is_store

    found = []
    for top, dirs, files in os.walk(root):
        dirs.sort()
        stores = [d for d in dirs if not d.startswith(".") and is_store(os.path.join(top, d))]
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in stores]
        for name in sorted([*files, *stores]):
            if name.startswith(".") or name.endswith(OWN_SUFFIXES):
                continue
            path = os.path.join(top, name)
            real = inside(path, (root,))
            if real is None:
                continue  # a symlink out of the root
            found.append((real, os.path.relpath(path, root).replace(os.sep, "/")))
    return found


class Catalog:
    """The catalog in the SQLite file ``path`` (made, or migrated to
    :data:`SCHEMA_VERSION`, on opening) and the snapshot requests read.

    Examples
    --------
    >>> import h5py, numpy as np, tempfile, os
    >>> root = tempfile.mkdtemp()
    >>> with h5py.File(os.path.join(root, "p.h5"), "w") as f:
    ...     f["energy"] = np.arange(5.0)
    >>> catalog = Catalog(os.path.join(root, ".catalog.sqlite"))
    >>> catalog.rescan((root,))
    {'added': 1, 'changed': 0, 'removed': 0, 'hidden': 0, 'datasets': 1}
    >>> [e.summary()["format"] for e in catalog.entries()]
    ['hdf5']
    >>> catalog.close()
    """

    def __init__(self, path: str) -> None:
        if path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()  # one writer of the connection at a time
        self._scanning = threading.Lock()  # one scan at a time
        with self._lock:
            migrate(self._db, path)
        self._snapshot: dict[str, Entry] = self._load()
        self.roots: tuple[str, ...] = ()
        """The last scan's roots (none before it)."""
        self._hidden_said: set[str] = set()
        """Files hidden by one of the same path under an earlier root, logged once."""

    def _load(self) -> dict[str, Entry]:
        with self._lock:
            rows = self._db.execute(
                "SELECT path, root, real, format, size, mtime_ns, stamp, variables, "
                "index_state, copy FROM datasets ORDER BY path"
            ).fetchall()
        return {
            r[0]: Entry(
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                json.loads(r[6]),
                json.loads(r[7]),
                json.loads(r[8]),
                json.loads(r[9]) if r[9] else None,
            )
            for r in rows
        }

    def entries(self) -> list[Entry]:
        """Every catalogued data file, by path."""
        return list(self._snapshot.values())

    def get(self, path: str) -> Entry:
        """The entry of ``path`` (relative to its root); 404 when there is none."""
        entry = self._snapshot.get(path) if isinstance(path, str) else None
        if entry is None:
            raise ServiceError(404, f"no dataset {path!r} in the catalog")
        return entry

    def rescan(self, roots: tuple[str, ...]) -> dict[str, int]:
        """Walk ``roots`` again: new files added, changed ones described again,
        gone ones removed, in one transaction, then published at once.
        A path found under two roots is the first root's: the others are
        counted as ``hidden`` and each named once in the server's log."""
        with self._scanning:
            self.roots = roots
            old = self._snapshot
            new: dict[str, Entry] = {}
            changed = 0
            hidden = []
            for root in roots:
                for real, rel in _candidates(root):
                    if rel in new:
                        hidden.append((real, new[rel].real))
                        continue
                    try:
                        watch = watch_stat(real)
                    except OSError:
                        continue  # gone since the walk
                    before = old.get(rel)
                    if (
                        before is not None
                        and before.real == real
                        and before.index["watch"] == watch
                    ):
                        new[rel] = before
                        continue
                    try:
                        new[rel] = describe(real, rel, root, watch, roots)
                    except (QuarryError, OSError):
                        continue  # not a data file quarry reads
                    changed += before is not None
            new = dict(sorted(new.items()))
            self._write(new)
            self._snapshot = new
            added = len(new.keys() - old.keys())
            removed = len(old.keys() - new.keys())
            for real, shown in hidden:
                if real not in self._hidden_said:
                    self._hidden_said.add(real)
                    log.warning(
                        "%s is not served: %s has its path under an earlier root", real, shown
                    )
            return {
                "added": added,
                "changed": changed,
                "removed": removed,
                "hidden": len(hidden),
                "datasets": len(new),
            }

    def refresh(self, path: str) -> Entry | None:
        """Describe the entry ``path`` again (after its index was built) and
        publish it at once; None (and the entry dropped) when its file is gone
        or no longer read."""
        with self._scanning:
            old = self._snapshot.get(path)
            if old is None:
                return None
            try:
                watch = watch_stat(old.real)
                entry: Entry | None = describe(old.real, path, old.root, watch, self.roots)
            except (QuarryError, OSError):
                entry = None
            new = dict(self._snapshot)
            if entry is None:
                del new[path]
            else:
                new[path] = entry
            new = dict(sorted(new.items()))
            self._write(new)
            self._snapshot = new
            return entry

    def note_damage(self, path: str, error: str, copy: bool) -> None:
        """Record that a request found the index (``copy``: the reorganised
        copy) of entry ``path`` damaged, saying ``error``, and publish it. A
        scan checks no more than the stat, which damage leaves as it was; the
        entry stays so until its index or copy is written again (a new stat,
        which the next scan or build describes afresh)."""
        with self._scanning:
            old = self._snapshot.get(path)
            if old is None:
                return
            said = {"state": "damaged", "error": error}
            if copy:
                if old.copy is None or old.copy.get("state") == "damaged":
                    return
                entry = replace(
                    old, copy={"path": old.copy["path"], "bytes": old.copy.get("bytes"), **said}
                )
            else:
                if old.index["state"] == "damaged":
                    return
                entry = replace(old, index={**old.index, **said})
            new = dict(self._snapshot)
            new[path] = entry
            self._write(new)
            self._snapshot = new

    def _write(self, entries: Mapping[str, Entry]) -> None:
        rows = [
            (
                e.path,
                e.root,
                e.real,
                e.format,
                e.size,
                e.mtime_ns,
                json.dumps(e.stamp),
                json.dumps(e.variables),
                json.dumps(e.index),
                None if e.copy is None else json.dumps(e.copy),
            )
            for e in entries.values()
        ]
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("DELETE FROM datasets")
                self._db.executemany("INSERT INTO datasets VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def record_job(self, job: Mapping[str, Any]) -> None:
        """Keep a build job's state (``id``, ``dataset``, ``state``, ``options``,
        ``created``, ``finished``, ``result``) so that it outlives the server."""
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO jobs VALUES (?,?,?,?,?,?,?)",
                (
                    job["id"],
                    job["dataset"],
                    job["state"],
                    json.dumps(job["options"]),
                    job["created"],
                    job.get("finished"),
                    json.dumps(job.get("result")),
                ),
            )

    def job(self, job_id: str) -> dict[str, Any] | None:
        """A recorded job, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT id, dataset, state, options, created, finished, result FROM jobs "
                "WHERE id = ?",
                (job_id,),
            ).fetchone()
        if row is None:
            return None
        keys = ("id", "dataset", "state", "options", "created", "finished", "result")
        out = dict(zip(keys, row, strict=True))
        out["options"] = json.loads(out["options"])
        out["result"] = json.loads(out["result"]) if out["result"] else None
        return out

    def abandon_jobs(self) -> int:
        """Mark jobs a stopped server left queued or running as failed; how many."""
        with self._lock:
            done = self._db.execute(
                "UPDATE jobs SET state = 'failed', finished = ?, result = ? "
                "WHERE state IN ('queued', 'running')",
                (time.time(), json.dumps({"error": "the server stopped before the build ended"})),
            )
        return done.rowcount

    def close(self) -> None:
        with self._lock:
            self._db.close()


def migrate(db: sqlite3.Connection, path: str) -> int:
    """Bring the catalog ``db`` to :data:`SCHEMA_VERSION`, each migration in
    its own transaction; returns the version it found. A catalog of a newer
    server is refused rather than damaged."""
    found = int(db.execute("PRAGMA user_version").fetchone()[0])
    if found > SCHEMA_VERSION:
        raise ServiceError(
            500,
            f"the catalog {path} has schema version {found}, newer than this quarry's "
            f"{SCHEMA_VERSION}; upgrade quarry or give another --catalog",
        )
    if path != ":memory:":
        db.execute("PRAGMA journal_mode = WAL")
    for version in range(found, SCHEMA_VERSION):
        db.execute("BEGIN IMMEDIATE")
        try:
            for statement in MIGRATIONS[version].split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute(f"PRAGMA user_version = {version + 1}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    return found
