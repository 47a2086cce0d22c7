"""The quarry work behind the API: counts, hits and histograms of catalogued
files, answered by the same :class:`quarry.Dataset` calls as the command line.

Opened files are kept (a few dozen, least recently used dropped) so that a
client's hundredth query does not open the file again. A kept file is used
only while its stat, and those of its index and copy, are what they were when
it was opened: a rebuilt index (published by a rename, so another inode) or a
written file opens afresh, and a reader that began on the old index finishes
on it (the old file stays readable until closed). One request at a time uses
an open file; requests on different files run on worker threads at once.

Every function here blocks; :mod:`quarry.service.app` runs them on threads.
Messages that name the file's real path name the catalog's path instead, so a
client learns nothing of the server's directories.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from quarry.errors import CorruptCopyError, CorruptIndexError, QuarryError, SeriesMemberError
from quarry.formats.base import fingerprint
from quarry.outputs.json_text import json_list, json_ready
from quarry.records import record
from quarry.service.catalog import Entry, watch_stat
from quarry.service.config import Limits, ServiceError, inside, refusal
from quarry.service.sources import leaving_source

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from quarry.dataset import Dataset
    from quarry.query.selection import Selection
    from quarry.query.series import SeriesSelection

T = TypeVar("T")


def unreadable(shown: str, exc: OSError) -> ServiceError:
    """409 for a file the system will not let the server read now (a writer
    holds it locked, or it changed under the read), naming it as the catalog
    does: a conflict with the file's state, to try again, not a failure of
    the server (500).

    Examples
    --------
    >>> err = unreadable("run.h5", BlockingIOError(11, "Resource temporarily unavailable"))
    >>> err.status, err.message
    (409, 'run.h5 cannot be read now (resource temporarily unavailable): a program may be \
writing it; try again when it is done')
    """
    reason = (exc.strerror or str(exc) or type(exc).__name__).lower()
    return ServiceError(
        409,
        f"{shown} cannot be read now ({reason}): a program may be writing it; try again "
        "when it is done",
    )


#: Told of an entry's index (or, True, copy) found damaged, with the error.
DamageSeen = Callable[[str, str, bool], None]


@contextmanager
def refused_as_the_catalog_names(
    entry: Entry, damage_seen: DamageSeen | None = None
) -> Iterator[None]:
    """Quarry's errors on ``entry``'s file as refusals naming it by its
    catalog path (:func:`~quarry.service.config.refusal`), and the system's
    (a writer holding an HDF5 file locked) as :func:`unreadable`: opening
    the file and answering from it alike. A damaged index or copy is also
    told to ``damage_seen`` (the catalog's :meth:`Catalog.note_damage`)."""
    try:
        yield
    except ServiceError:
        raise
    except QuarryError as exc:
        damage = exc.error if isinstance(exc, SeriesMemberError) else exc
        if damage_seen is not None and isinstance(damage, CorruptIndexError):
            damage_seen(entry.path, str(damage), isinstance(damage, CorruptCopyError))
        raise refusal(exc, entry.real, entry.path) from None
    except OSError as exc:
        raise unreadable(entry.path, exc) from None


def release_locks(real: str) -> None:
    """Drop the file locks this process holds on the file ``real`` (its real
    path). The HDF5 library locks every file it opens (NetCDF-4's too) and
    keeps the lock while it is open: a kept file would refuse its writer
    (``unable to lock file``) until the server dropped it. A kept file is
    opened again once its stat changes, and a request that reads it while
    it is written is refused (409), so it needs no lock. Where the system
    lists no descriptors (``/proc``), nothing is done.

    Examples
    --------
    >>> import h5py, numpy as np, tempfile, os, subprocess, sys
    >>> path = os.path.realpath(os.path.join(tempfile.mkdtemp(), "a.h5"))
    >>> h5py.File(path, "w").close()
    >>> reader = h5py.File(path, "r")
    >>> write = [sys.executable, "-c", f"import h5py; h5py.File({path!r}, 'a').close()"]
    >>> subprocess.run(write, capture_output=True).returncode  # refused: locked
    1
    >>> release_locks(path)
    >>> subprocess.run(write, capture_output=True).returncode
    0
    >>> reader.close()
    """
    import fcntl
    import os

    listed = "/proc/self/fd"
    try:
        descriptors = os.listdir(listed)
    except OSError:
        return
    for name in descriptors:
        try:
            if os.readlink(f"{listed}/{name}") == real:
                fcntl.flock(int(name), fcntl.LOCK_UN)
        except (OSError, ValueError):
            continue  # closed meanwhile, or not a file


class OpenFiles:
    """Open datasets of catalogued files, at most ``keep`` of them, each used by
    one request at a time. A dataset dropped (least recently used, its file
    changed, or the server stopping) is closed once no request holds it."""

    def __init__(
        self, roots: tuple[str, ...], keep: int = 32, damage_seen: DamageSeen | None = None
    ) -> None:
        self.roots = roots
        self.keep = keep
        self.damage_seen = damage_seen
        self._lock = threading.Lock()
        self._open: OrderedDict[str, _Kept] = OrderedDict()

    @contextmanager
    def use(self, entry: Entry) -> Iterator[Dataset]:
        """The open dataset of ``entry``, opened again where it changed; a file
        whose real path now leaves the roots, or that now reads data outside
        them (:mod:`quarry.service.sources`), is unknown (404). Errors quarry
        raises inside name the catalog's path, not the real one."""
        from quarry.dataset import open as open_dataset

        unknown = ServiceError(404, f"no dataset {entry.path!r} in the catalog")
        if inside(entry.real, self.roots) != entry.real:
            raise unknown
        try:
            watch = watch_stat(entry.real)
        except OSError:
            raise unknown from None
        with self._lock:
            kept = self._open.get(entry.real)
            if kept is None or kept.watch != watch:
                if kept is not None:
                    self._retire(kept)
                    del self._open[entry.real]
                with refused_as_the_catalog_names(entry, self.damage_seen):
                    if leaving_source(entry.real, self.roots) is not None:
                        raise unknown  # changed since the scan to read outside the roots
                    kept = _Kept(watch, open_dataset(entry.real))
                self._open[entry.real] = kept
            self._open.move_to_end(entry.real)
            while len(self._open) > self.keep:
                self._retire(self._open.popitem(last=False)[1])
            kept.users += 1
        try:
            with kept.lock, refused_as_the_catalog_names(entry, self.damage_seen):
                try:
                    yield kept.ds
                finally:
                    # Once the file is open (by the open, or by this request's
                    # reads), the lock the HDF5 library took is dropped.
                    if not kept.unlocked and kept.ds.file_open:
                        release_locks(entry.real)
                        kept.unlocked = True
            if fingerprint(entry.real) != watch["file"]:
                # Written while being read (in place, HDF5's locking off): the
                # answer may mix the old file and the new, so none is given.
                # (An index or copy rebuilt meanwhile replaced its file whole:
                # the request read the old one throughout.)
                raise ServiceError(
                    409,
                    f"{entry.path} changed while it was being read (a program is "
                    "writing it): ask again once it is written",
                )
        finally:
            with self._lock:
                kept.users -= 1
                if kept.retired and kept.users == 0:
                    kept.ds.close()

    def _retire(self, kept: _Kept) -> None:
        """Drop ``kept`` (``self._lock`` held): closed now if no request holds
        it, else by the last one to let it go."""
        kept.retired = True
        if kept.users == 0:
            kept.ds.close()

    def close(self) -> None:
        """Drop every dataset; one still in use (work past its time limit, which
        cannot be interrupted) is closed when that work ends, not waited for."""
        with self._lock:
            for kept in self._open.values():
                self._retire(kept)
            self._open.clear()


class _Kept:
    """An open dataset, its lock, how many requests hold or wait for it,
    whether it was dropped and whether its file's lock was released."""

    def __init__(self, watch: Any, ds: Dataset) -> None:
        self.watch = watch
        self.ds = ds
        self.lock = threading.Lock()
        self.users = 0
        self.retired = False
        self.unlocked = False  # once the file is open, its lock released (release_locks)


def count(
    files: OpenFiles, entry: Entry, query: str, context: str | None, per_step: bool
) -> dict[str, Any]:
    """``{"count": N}``, with ``per_step`` each member's count too (a file
    without step groups is one member, step None), as ``quarry query
    --count --json`` and ``--per-step`` answer (over a run indexed as it is
    written, with ``steps_indexed`` and ``writer_closed``).

    Examples
    --------
    >>> import h5py, numpy as np, tempfile, os
    >>> from quarry.service.catalog import Catalog
    >>> root = os.path.realpath(tempfile.mkdtemp())
    >>> with h5py.File(os.path.join(root, "s.h5"), "w") as f:
    ...     f["Step#0/e"], f["Step#1/e"] = np.arange(5.0), np.arange(5.0) + 3
    >>> catalog = Catalog(":memory:")
    >>> _ = catalog.rescan((root,))
    >>> files = OpenFiles((root,))
    >>> answer = count(files, catalog.get("s.h5"), "e > 3", None, per_step=True)
    >>> answer["count"], answer["per_step"][1]
    (5, {'file': 's.h5', 'step': 1, 'count': 4})
    >>> files.close(); catalog.close()
    """
    from quarry.insitu.follow_bp import followed_report
    from quarry.query.series import SeriesSelection

    with files.use(entry) as ds:
        sel = ds.query(query, context)
        result: dict[str, Any] = {"count": sel.count()}
        if per_step:
            result["per_step"] = _per_step(sel, entry)
        if isinstance(sel, SeriesSelection):
            result.update(followed_report(sel))
    return result


def _per_step(sel: Selection | SeriesSelection, entry: Entry) -> list[dict[str, Any]]:
    from quarry.query.series import SeriesSelection

    if isinstance(sel, SeriesSelection):
        return [{**r, "file": entry.path} for r in sel.per_step()]
    return [{"file": entry.path, "step": None, "count": sel.count()}]


@record
class Member:
    """The hits of one member: its step (None for a file without step
    groups), flat row ids and the values of each variable asked for."""

    step: int | None
    ids: npt.NDArray[np.int64]
    values: dict[str, npt.NDArray[Any]]


@record
class Hits:
    """The hits of a query: one member, or one per step of a series."""

    members: list[Member]
    series: bool

    @property
    def count(self) -> int:
        return sum(len(m.ids) for m in self.members)

    def to_json(self) -> dict[str, Any]:
        """The hits as JSON: ids and values as lists (NaN as null, infinities
        as ``"inf"``/``"-inf"``); over a series, per member."""

        def member(m: Member) -> dict[str, Any]:
            out: dict[str, Any] = {"count": len(m.ids), "ids": m.ids.tolist()}
            if m.values:
                out["values"] = {n: json_list(v) for n, v in m.values.items()}
            return out

        if not self.series:
            return member(self.members[0])
        return {
            "count": self.count,
            "per_step": [{"step": m.step, **member(m)} for m in self.members],
        }

    def to_arrow(self) -> bytes:
        """The hits as an Arrow IPC stream of one table: ``quarry_row`` and a
        column per variable, led over a series by ``quarry_step``; each of
        Quarry's names gains a ``_`` where a variable asked for has it (as in
        every output: :func:`quarry.outputs.columns.own_name`). The schema's
        metadata ``quarry`` (JSON) names those two columns and gives each
        member's number of rows, in order: members whose step numbers are
        alike (``Step#1`` and ``Step#01``) stay apart.

        Examples
        --------
        >>> import json, numpy as np, pyarrow as pa
        >>> hits = Hits([Member(1, np.array([4]), {"quarry_step": np.array([7.0])})], True)
        >>> table = pa.ipc.open_stream(hits.to_arrow()).read_all()
        >>> table.column_names
        ['quarry_step_', 'quarry_row', 'quarry_step']
        >>> json.loads(table.schema.metadata[b"quarry"])
        {'row': 'quarry_row', 'step': 'quarry_step_', 'counts': [1]}
        """
        import numpy as np
        import pyarrow as pa

        from quarry.outputs.columns import ROW, STEP, own_name

        names = list(self.members[0].values) if self.members else []
        columns: dict[str, Any] = {}
        about: dict[str, Any] = {"row": own_name(ROW, names)}
        if self.series:
            about["step"] = own_name(STEP, names)
            steps = [np.full(len(m.ids), -1 if m.step is None else m.step) for m in self.members]
            joined = np.concatenate(steps) if steps else np.empty(0, np.int64)
            columns[about["step"]] = pa.array(joined.astype(np.int64))
        about["counts"] = [len(m.ids) for m in self.members]
        ids = [m.ids for m in self.members]
        columns[about["row"]] = pa.array(np.concatenate(ids).astype(np.int64))
        for name in names:
            columns[name] = pa.array(np.concatenate([m.values[name] for m in self.members]))
        table = pa.table(columns, metadata={"quarry": json.dumps(about)})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return bytes(sink.getvalue().to_pybytes())


def hits(
    files: OpenFiles,
    entry: Entry,
    query: str,
    context: str | None,
    variables: Sequence[str],
    limits: Limits,
) -> Hits:
    """The ids of the rows where ``query`` is true, and the values of
    ``variables`` there; refused with 413 when the answer would pass the
    server's ``limits`` on rows or bytes (at 8 bytes a value, the least any
    encoding takes, counted before anything is read; :func:`encoded` checks
    the answer's real size)."""
    from quarry.query.series import SeriesSelection

    with files.use(entry) as ds:
        sel = ds.query(query, context)
        parts = [part for _, part in sel] if isinstance(sel, SeriesSelection) else [sel]
        for part in parts:  # an unknown name is a 404 whatever the answer's size
            for name in variables:
                part.dataset.variable(name, part.path)
        n = sel.count()
        least = n * 8 * (1 + len(variables))  # no encoding holds a value in less
        if n > limits.rows or least > limits.result_bytes:
            raise too_large(n, least, limits)
        if isinstance(sel, SeriesSelection):
            members = [
                Member(m.step, part.ids(), {v: part.values(v) for v in variables})
                for m, part in sel
            ]
            return Hits(members, series=True)
        return Hits([Member(None, sel.ids(), {v: sel.values(v) for v in variables})], False)


def too_large(n: int, size: int, limits: Limits, arrow_fits: bool = False) -> ServiceError:
    """The 413 of an answer of ``n`` rows and ``size`` bytes; Arrow is
    suggested only where it would fit (``arrow_fits``: a JSON answer over the
    byte limit that 8 bytes a value would keep under it).

    Examples
    --------
    >>> limits = Limits(body_bytes=1000, rows=100, result_bytes=10_000)
    >>> "Arrow" in too_large(3413, 27304, limits).message
    False
    >>> "ask for Arrow" in too_large(90, 12_000, limits, arrow_fits=True).message
    True
    """
    arrow = (
        "ask for Arrow (Accept: application/vnd.apache.arrow.stream, about 8 bytes a value "
        "against JSON's 17 or more), "
        if arrow_fits
        else ""
    )
    return ServiceError(
        413,
        f"the answer holds {n} rows ({size} bytes), more than this server gives at "
        f"once ({limits.rows} rows, {limits.result_bytes} bytes); {arrow}narrow the query, "
        "ask for the count, or write the hits on the server with quarry query --out",
    )


def encoded(hits: Hits, arrow: bool, limits: Limits) -> bytes:
    """``hits`` as an Arrow IPC stream or as JSON text; refused with 413 when
    the encoded answer is larger than ``limits.result_bytes``."""
    data = hits.to_arrow() if arrow else json_bytes(hits.to_json())
    if len(data) > limits.result_bytes:
        raise too_large(hits.count, len(data), limits, arrow_fits=not arrow)
    return data


def json_bytes(content: Any) -> bytes:
    """``content`` as the JSON text the service answers (Starlette's
    ``JSONResponse`` encoding), made on the caller's thread.

    Examples
    --------
    >>> json_bytes({"e": [1.5, None]})
    b'{"e":[1.5,null]}'
    """
    text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.encode("utf-8")


def histogram(
    files: OpenFiles,
    entry: Entry,
    variables: list[str],
    where: str | None,
    bins: int | str | list[float],
    value_range: Any,
    context: str | None,
    most_bins: int,
) -> dict[str, Any]:
    """``{"counts", "edges", "path", "values_read"}`` of ``variables`` over the
    rows where ``where`` is true, as ``quarry hist --json`` gives it; 413
    where one of NumPy's estimators (``bins="fd"``) made more than
    ``most_bins`` bins."""
    with files.use(entry) as ds:
        target: str | list[str] = variables[0] if len(variables) == 1 else variables
        hist = ds.histogram(target, where=where, bins=bins, range=value_range, path=context)
    if isinstance(bins, str) and hist.counts.size > most_bins:
        raise ServiceError(
            413,
            f"bins={bins!r} made {hist.counts.size} bins, more than this server gives "
            f"({most_bins}); ask for a number of bins",
        )
    ready: dict[str, Any] = json_ready(hist.to_json())
    return ready


def run_guarded(work: Callable[[], T]) -> T:
    """Run ``work``; a MemoryError (an answer too large for the server) is
    refused as too large rather than ending the server."""
    try:
        return work()
    except MemoryError:
        raise ServiceError(413, "the answer does not fit in the server's memory") from None
