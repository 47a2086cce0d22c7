"""Index builds in the background: a job per build, at most ``builds`` running
at once, one at a time per file.

A job is ``queued``, ``running``, then ``done`` (its result says ``built`` or
``up to date``), ``failed`` (its result holds the error) or ``cancelled`` (the
server stopped before it began). Asking to build a file that already has a
queued or running job gives that job, so builds of one file never overlap.
Each build publishes its index by a rename (:mod:`quarry.index.layout`), so a
reader sees the old index or the new one; the catalog entry is then
described again and published whole (:meth:`Catalog.refresh`). Jobs are
recorded in the catalog, so their ids still answer after a restart.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from quarry.errors import QuarryError
from quarry.service.catalog import Catalog, Entry
from quarry.service.config import ServiceError
from quarry.service.sources import leaving_source

log = logging.getLogger(__name__)

#: The build options a client may give, and their types.
OPTIONS: dict[str, type] = {"bins": int, "precision": int, "block_size": int, "force": bool}


class Builds:
    """The build jobs of one server, run on ``builds`` threads."""

    def __init__(self, catalog: Catalog, builds: int) -> None:
        self.catalog = catalog
        self._pool = ThreadPoolExecutor(max_workers=builds, thread_name_prefix="quarry-build")
        self._lock = threading.Lock()
        self._jobs: dict[str, dict[str, Any]] = {}
        self._active: dict[str, str] = {}  # dataset -> its queued or running job
        self._ended: dict[str, threading.Event] = {}
        self._watchers: dict[str, list[Callable[[], None]]] = {}
        catalog.abandon_jobs()

    def submit(self, entry: Entry, options: dict[str, Any]) -> dict[str, Any]:
        """A job building ``entry``'s index with ``options`` (``variables``,
        ``bins``, ``precision``, ``block_size``, ``force``), or the job already
        building it."""
        with self._lock:
            active = self._active.get(entry.path)
            if active is not None:
                return dict(self._jobs[active])
            job_id = uuid.uuid4().hex
            job: dict[str, Any] = {
                "id": job_id,
                "dataset": entry.path,
                "state": "queued",
                "options": options,
                "created": time.time(),
                "finished": None,
                "result": None,
            }
            self._jobs[job_id] = job
            self._ended[job_id] = threading.Event()
            self._active[entry.path] = job_id
            self.catalog.record_job(job)
            self._pool.submit(self._run, entry, job_id)
            return dict(job)

    def _update(self, job_id: str, **changes: Any) -> None:
        with self._lock:
            job = self._jobs[job_id]
            job.update(changes)
            self.catalog.record_job(job)
            if job["state"] not in ("queued", "running"):
                self._active.pop(job["dataset"], None)
                self._ended[job_id].set()
                callbacks = self._watchers.pop(job_id, [])
            else:
                callbacks = []
        for callback in callbacks:
            callback()

    def when_ended(self, job_id: str, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (on the thread that ends it) once the job
        ``job_id`` ends; at once if it has ended or is not running here.
        Returns what forgets the callback, for a waiter that stops waiting."""
        with self._lock:
            ended = self._ended.get(job_id)
            if ended is not None and not ended.is_set():
                self._watchers.setdefault(job_id, []).append(callback)

                def forget() -> None:
                    with self._lock:
                        waiting = self._watchers.get(job_id, [])
                        if callback in waiting:
                            waiting.remove(callback)

                return forget
        callback()
        return lambda: None

    def _run(self, entry: Entry, job_id: str) -> None:
        from quarry.dataset import open as open_dataset
        from quarry.series import open_series

        self._update(job_id, state="running", started=time.time())
        options = self._jobs[job_id]["options"]
        try:
            if leaving_source(entry.real, self.catalog.roots) is not None:
                raise ServiceError(404, f"no dataset {entry.path!r} in the catalog")
            with open_series(entry.real) as series:
                (report,) = series.build_indexes(
                    options.get("variables"),
                    bins=options.get("bins"),
                    precision=options.get("precision"),
                    block_len=options.get("block_size"),
                    force=bool(options.get("force")),
                )
            result: dict[str, Any] = {"status": report.status}
            # A stale copy refuses every query of its file, as a stale index
            # does, and its 409 names this request: build it again as it was.
            with open_dataset(entry.real) as ds:
                if ds.reorganize_again(force=bool(options.get("force"))) is not None:
                    result["copy"] = "rebuilt"
            state = "done"
        except (QuarryError, OSError) as exc:
            result = {"error": str(exc).replace(entry.real, entry.path)}
            state = "failed"
        except Exception as exc:  # never a job left 'running', holding its file's builds
            log.exception("building the index of %s failed", entry.path)
            result = {"error": f"the build failed: {exc}".replace(entry.real, entry.path)}
            state = "failed"
        self.catalog.refresh(entry.path)
        self._update(job_id, state=state, finished=time.time(), result=result)

    def get(self, job_id: str, wait: float = 0.0) -> dict[str, Any]:
        """The job ``job_id`` as it stands (404 when there is none), after
        waiting up to ``wait`` seconds for it to end."""
        ended = self._ended.get(job_id)
        if ended is not None and wait > 0:
            ended.wait(wait)
        with self._lock:
            job = self._jobs.get(job_id)
            if job is not None:
                return dict(job)
        recorded = self.catalog.job(job_id) if isinstance(job_id, str) else None
        if recorded is None:
            raise ServiceError(404, f"no job {job_id!r}")
        return recorded

    def busy(self, path: str) -> bool:
        """Whether ``path`` has a build queued or running."""
        with self._lock:
            return path in self._active

    def stop(self) -> None:
        """Cancel the jobs not yet started, then wait for the running ones."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            queued = [j["id"] for j in self._jobs.values() if j["state"] == "queued"]
        for job_id in queued:
            self._update(job_id, state="cancelled", finished=time.time())
        self._pool.shutdown(wait=True)
