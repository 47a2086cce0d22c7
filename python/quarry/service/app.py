"""The HTTP API and the web page, as a Starlette application.

Every route answers JSON (or an Arrow IPC stream of hits when the request
accepts ``application/vnd.apache.arrow.stream``); every error is JSON,
``{"error": message}`` with the CLI's message (a bad query's caret included,
and its ``query`` and ``position``) and a status that says why (see
:func:`quarry.service.config.refusal`).

Quarry's work blocks, so it runs on worker threads, at most ``workers`` at
once, each request's work within ``query_seconds`` (504 after, the answer
dropped). A core call cannot be interrupted, so a thread past its time runs to
its end, still counted among the ``workers`` and holding its file until then;
when every worker is such a thread, requests are refused with 503 (see
:class:`Slots`). The event loop only reads requests and writes answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import anyio
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from quarry.outputs.json_text import json_ready
from quarry.service import answers, fields
from quarry.service.catalog import Catalog
from quarry.service.config import Config, ServiceError, check_write, host_allowed
from quarry.service.jobs import OPTIONS, Builds

#: The media type of hits as an Arrow IPC stream.
ARROW = "application/vnd.apache.arrow.stream"
STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
T = TypeVar("T")


class Service:
    """What the routes share: the config, the catalog, the open files, the
    builds and the worker slots. Made when the app starts."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.catalog = Catalog(config.catalog)
        self.files = answers.OpenFiles(config.roots, damage_seen=self.catalog.note_damage)
        self.builds = Builds(self.catalog, config.limits.builds)
        self.slots = Slots(config.workers)

    async def work(self, job: Callable[[], T]) -> T:
        """``job``'s answer from a worker thread, within the time limit: 504
        past it, 503 when every slot is held by work past its own."""
        seconds = self.config.limits.query_seconds
        # The slot's deadline is taken before the request's own clock starts,
        # so a request answered 504 has made its slot overdue by then: the
        # next request finding every slot so is refused at once (503), not
        # queued behind it (its slot, taken later, would still look in time).
        deadline = time.monotonic() + seconds
        try:
            with anyio.fail_after(seconds):
                return await self.slots.run(answers.run_guarded, job, deadline)
        except TimeoutError:
            raise ServiceError(
                504, f"the answer took longer than this server allows ({seconds:g} s); narrow it"
            ) from None

    async def rescan(self) -> dict[str, int]:
        """Walk the roots again; with ``--auto-index``, queue a build of every
        file whose index is missing or stale (none where one is going)."""
        found = await anyio.to_thread.run_sync(self.catalog.rescan, self.config.roots)
        if self.config.auto_index:
            for entry in self.catalog.entries():
                if not entry.fresh and not self.builds.busy(entry.path):
                    # A damaged index's stat is as fresh as it was: only a forced build mends it.
                    self.builds.submit(entry, {"force": entry.index["state"] == "damaged"})
        return found

    async def scan_now_and_then(self) -> None:
        while True:
            await anyio.sleep(self.config.scan_every)
            with contextlib.suppress(Exception):  # a failed scan is tried again next time
                await self.rescan()

    def stop(self) -> None:
        self.builds.stop()
        self.files.close()
        self.catalog.close()


class Slots:
    """At most ``workers`` quarry threads at once. A slot is taken before its
    task is queued and given back only when the task ends, so work whose
    request was answered 504 still counts (a core call cannot be interrupted):
    slow queries cannot pile up threads. When every slot is held by work past
    its deadline, a request is refused at once (503) rather than queued behind
    work nobody waits for. Requests wait for a slot on a semaphore, woken one
    per slot freed (an event waking every waiter cost each count 1 ms of CPU
    under 256 clients)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._lock = threading.Lock()
        self._deadlines: dict[int, float] = {}
        self._free = asyncio.Semaphore(workers)
        self._tasks: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []

    def running(self) -> int:
        """How many tasks hold a slot now."""
        with self._lock:
            return len(self._deadlines)

    def _refuse_when_stuck(self) -> None:
        now = time.monotonic()
        with self._lock:
            stuck = len(self._deadlines) >= self.workers and all(
                deadline <= now for deadline in self._deadlines.values()
            )
        if stuck:
            raise ServiceError(
                503, "the server is busy with work past its time limit; try again later"
            )

    def _take(self, deadline: float) -> int:
        with self._lock:
            slot = next(i for i in range(self.workers) if i not in self._deadlines)
            self._deadlines[slot] = deadline
            return slot

    def _give_back(self, slot: int, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            del self._deadlines[slot]
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
            loop.call_soon_threadsafe(self._free.release)

    async def run(
        self, work: Callable[[Callable[[], T]], T], job: Callable[[], T], deadline: float
    ) -> T:
        """``work(job)`` on one of the worker threads once a slot is free, the
        slot past its time from ``deadline`` (:func:`time.monotonic`) on."""
        loop = asyncio.get_running_loop()
        self._start_threads()
        self._refuse_when_stuck()
        await self._free.acquire()
        slot = self._take(deadline)
        done: asyncio.Future[T] = loop.create_future()

        def settle(outcome: Callable[[], None]) -> None:
            if not done.done():
                outcome()

        def task() -> None:
            try:
                answer = work(job)
            except BaseException as exc:  # handed to the request, raised there
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(settle, lambda e=exc: done.set_exception(e))
            else:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(settle, lambda a=answer: done.set_result(a))
            finally:
                self._give_back(slot, loop)

        self._tasks.put(task)
        return await done

    def _start_threads(self) -> None:
        """The ``workers`` threads, started once and kept: a thread per
        request doubled a count's cost. They are daemons, so stopping the
        server does not wait for abandoned work; a slot is taken before its
        task is queued, so a queued task always finds a thread free."""
        with self._lock:
            if self._threads:
                return
            for _ in range(self.workers):
                worker = threading.Thread(target=self._serve, name="quarry-work", daemon=True)
                worker.start()
                self._threads.append(worker)

    def _serve(self) -> None:
        while True:
            self._tasks.get()()


def _service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


async def datasets(request: Request) -> Response:
    entries = _service(request).catalog.entries()
    return JSONResponse({"datasets": [e.summary() for e in entries]})


async def dataset(request: Request) -> Response:
    entry = _service(request).catalog.get(request.path_params["path"])
    return JSONResponse(json_ready(entry.detail()))


async def query(request: Request) -> Response:
    service = _service(request)
    body = await fields.body(request, service.config.limits)
    fields.only(body, ("dataset", "query", "context", "output", "per_step", "variables"))
    entry = service.catalog.get(fields.text(body, "dataset") or "")
    text = fields.text(body, "query") or ""
    context = fields.text(body, "context", required=False)
    output = fields.choice(body, "output", ("count", "ids", "values"))
    per_step = fields.flag(body, "per_step")
    variables = fields.names(body, "variables")
    if output == "count":
        return await answer_json(
            service, lambda: answers.count(service.files, entry, text, context, per_step)
        )
    if output == "values" and not variables:
        raise ServiceError(400, "'values' needs 'variables', the names to fetch at the hits")
    if output != "values" and variables:
        raise ServiceError(
            400,
            f'\'variables\' goes with "output": "values", not {output!r}; drop it, or ask '
            "for the values",
        )
    limits = service.config.limits
    chosen = list(dict.fromkeys(variables)) if output == "values" else []
    arrow = fields.wants_arrow(request.headers.get("accept", ""), ARROW)

    def found() -> tuple[int, bytes]:
        hits = answers.hits(service.files, entry, text, context, chosen, limits)
        return hits.count, answers.encoded(hits, arrow, limits)

    count, data = await service.work(found)
    if arrow:
        return Response(data, media_type=ARROW, headers={"X-Quarry-Count": str(count)})
    return Response(data, media_type="application/json")


async def answer_json(service: Service, job: Callable[[], Any]) -> Response:
    """``job``'s answer as JSON, made and encoded on a worker thread (a large
    answer's encoding would otherwise stall every other request)."""
    data = await service.work(lambda: answers.json_bytes(job()))
    return Response(data, media_type="application/json")


async def histogram(request: Request) -> Response:
    service = _service(request)
    limits = service.config.limits
    body = await fields.body(request, limits)
    fields.only(body, ("dataset", "variables", "where", "context", "bins", "edges", "range"))
    entry = service.catalog.get(fields.text(body, "dataset") or "")
    variables = fields.names(body, "variables")
    if not 1 <= len(variables) <= 3:
        raise ServiceError(400, "'variables' must name one to three variables")
    where = fields.text(body, "where", required=False)
    context = fields.text(body, "context", required=False)
    bins = fields.bins(body, limits, len(variables))
    value_range = fields.value_range(body, len(variables))
    return await answer_json(
        service,
        lambda: answers.histogram(
            service.files, entry, variables, where, bins, value_range, context, limits.bins
        ),
    )


async def build(request: Request) -> Response:
    service = _service(request)
    check_write(service.config, request.headers.get("authorization"))
    body = await fields.body(request, service.config.limits)
    fields.only(body, ("dataset", "variables", *OPTIONS))
    entry = service.catalog.get(fields.text(body, "dataset") or "")
    options: dict[str, Any] = {}
    for key, kind in OPTIONS.items():
        if kind is bool:
            options[key] = fields.flag(body, key)
        else:
            options[key] = fields.whole(body, key, 0 if key == "precision" else 1, 2**40)
    options["variables"] = fields.names(body, "variables") or None
    check_build_options(options)
    job = service.builds.submit(entry, options)
    return JSONResponse({"job": job["id"], "state": job["state"]}, status_code=202)


def check_build_options(options: dict[str, Any]) -> None:
    """A 400 for build options the index refuses (``bins`` past its most,
    ``precision`` above 6), before a job is queued: the build would fail
    on a worker, or ask for memory it cannot have."""
    from quarry.errors import UsageError
    from quarry.index.options import BuildOptions

    given = {"bins": "bins", "precision": "precision", "block_size": "block_len"}
    try:
        BuildOptions(**{field: options[key] for key, field in given.items() if options.get(key)})
    except UsageError as exc:
        raise ServiceError(400, str(exc)) from None


async def job(request: Request) -> Response:
    """A job; with ``?wait=S`` (at most 60) once it ended or S seconds passed."""
    service = _service(request)
    given = request.query_params.get("wait", "0")
    try:
        wait = float(given)
    except ValueError:
        wait = -1.0
    if not 0 <= wait <= 60:
        raise ServiceError(400, f"'wait' must be a number of seconds from 0 to 60, not {given!r}")
    job_id = request.path_params["id"]
    if wait > 0:
        # waited for on the event loop, not on a thread: a hundred clients
        # waiting take no thread from the rescans and answers that need one
        loop = asyncio.get_running_loop()
        ended = asyncio.Event()

        def wake() -> None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
                loop.call_soon_threadsafe(ended.set)

        forget = service.builds.when_ended(job_id, wake)
        try:
            with anyio.move_on_after(wait):
                await ended.wait()
        finally:
            forget()
    found = await anyio.to_thread.run_sync(service.builds.get, job_id)
    return JSONResponse(found)


async def rescan(request: Request) -> Response:
    service = _service(request)
    check_write(service.config, request.headers.get("authorization"))
    return JSONResponse(await service.rescan())


async def openapi(request: Request) -> Response:
    from quarry.service.openapi import document

    return JSONResponse(document())


async def page(request: Request) -> Response:
    return FileResponse(os.path.join(STATIC, "index.html"), media_type="text/html")


ROUTES = [
    Route("/", page, methods=["GET"]),
    Route("/api/v1/datasets", datasets, methods=["GET"]),
    Route("/api/v1/datasets/{path:path}", dataset, methods=["GET"]),
    Route("/api/v1/query", query, methods=["POST"]),
    Route("/api/v1/histogram", histogram, methods=["POST"]),
    Route("/api/v1/index", build, methods=["POST"]),
    Route("/api/v1/jobs/{id}", job, methods=["GET"]),
    Route("/api/v1/rescan", rescan, methods=["POST"]),
    Route("/api/v1/openapi.json", openapi, methods=["GET"]),
]


async def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ServiceError)
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    return JSONResponse({"error": exc.message, **exc.details}, exc.status, headers=headers)


async def _http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    message = "no such page" if exc.status_code == 404 else str(exc.detail)
    return JSONResponse({"error": message}, exc.status_code)


async def _failed(request: Request, exc: Exception) -> Response:
    """Anything unforeseen: a 500 naming the kind of failure, never a traceback."""
    return JSONResponse({"error": f"the server failed ({type(exc).__name__})"}, 500)


class HostCheck:
    """Refuse (421) a request whose ``Host`` header names none of ``hosts``:
    a web page whose own name was rebound to the server's address (DNS
    rebinding) sends its name, not one the server answers to."""

    def __init__(self, app: ASGIApp, hosts: tuple[str, ...] | None) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.hosts is not None:
            header = Headers(scope=scope).get("host")
            if not host_allowed(header, self.hosts):
                message = (
                    f"this server does not answer to the name {header!r}; "
                    "use its address, or start it with --allow-host"
                )
                await JSONResponse({"error": message}, 421)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(config: Config) -> Starlette:
    """The application serving ``config``'s roots: it opens the catalog and
    scans the roots when it starts, rescans every ``scan_every`` seconds,
    and on stopping cancels queued builds, waits for running ones and
    closes the catalog."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        service = await anyio.to_thread.run_sync(Service, config)
        app.state.service = service
        scanner = None
        try:
            await service.rescan()
            if config.scan_every > 0:
                scanner = asyncio.create_task(service.scan_now_and_then())
            yield
        finally:
            if scanner is not None:
                scanner.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await scanner
            await anyio.to_thread.run_sync(service.stop)

    return Starlette(
        routes=ROUTES,
        middleware=[Middleware(HostCheck, hosts=config.hosts)],
        lifespan=lifespan,
        exception_handlers={
            ServiceError: _refused,
            HTTPException: _http,
            Exception: _failed,
        },
    )
