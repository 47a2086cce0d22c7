"""The HTTP API and the web page, as a Starlette application.

Every route answers JSON (or an Arrow IPC stream of hits when the request
accepts ``application/vnd.apache.arrow.stream``); every error is JSON,
``{"error": message}`` with the CLI's message (a bad query's caret included,
and its ``query`` and ``position``) and a status that says why (see
:func:`quarry.service.config.refusal`).

Quarry's work blocks, so it runs on worker threads, at most ``workers`` at
once, each request's work within ``query_seconds`` (504 after, the answer
dropped). A core call cannot be interrupted, so a thread past its time runs to
its end, no longer counted among the ``workers`` and holding its file until
then. The event loop only reads requests and writes answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from quarry.service import answers, fields
from quarry.service.catalog import Catalog
from quarry.service.config import Config, ServiceError, check_write
from quarry.service.jobs import OPTIONS, Builds

#: The media type of hits as an Arrow IPC stream.
ARROW = "application/vnd.apache.arrow.stream"
STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
T = TypeVar("T")


class Service:
    """What the routes share: the config, the catalog, the open files, the
    builds and the bound on worker threads. Made when the app starts."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.catalog = Catalog(config.catalog)
        self.files = answers.OpenFiles(config.roots)
        self.builds = Builds(self.catalog, config.limits.builds)
        self.workers = anyio.CapacityLimiter(config.workers)

    async def work(self, job: Callable[[], T]) -> T:
        """``job``'s answer from a worker thread, within the time limit."""
        seconds = self.config.limits.query_seconds
        try:
            with anyio.fail_after(seconds):
                return await anyio.to_thread.run_sync(
                    answers.run_guarded, job, limiter=self.workers, abandon_on_cancel=True
                )
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
                    self.builds.submit(entry, {})
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


def _service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


async def datasets(request: Request) -> Response:
    entries = _service(request).catalog.entries()
    return JSONResponse({"datasets": [e.summary() for e in entries]})


async def dataset(request: Request) -> Response:
    entry = _service(request).catalog.get(request.path_params["path"])
    return JSONResponse(answers.json_ready(entry.detail()))


async def query(request: Request) -> Response:
    service = _service(request)
    body = await fields.body(request, service.config.limits)
    entry = service.catalog.get(fields.text(body, "dataset") or "")
    text = fields.text(body, "query") or ""
    context = fields.text(body, "context", required=False)
    output = fields.choice(body, "output", ("count", "ids", "values"))
    per_step = fields.flag(body, "per_step")
    variables = fields.names(body, "variables")
    if output == "count":
        counted = await service.work(
            lambda: answers.count(service.files, entry, text, context, per_step)
        )
        return JSONResponse(counted)
    if output == "values" and not variables:
        raise ServiceError(400, "'values' needs 'variables', the names to fetch at the hits")
    limits = service.config.limits
    chosen = variables if output == "values" else []
    hits = await service.work(
        lambda: answers.hits(service.files, entry, text, context, chosen, limits)
    )
    if ARROW in request.headers.get("accept", ""):
        data = await anyio.to_thread.run_sync(hits.to_arrow, limiter=service.workers)
        return Response(data, media_type=ARROW, headers={"X-Quarry-Count": str(hits.count)})
    return JSONResponse(hits.to_json())


async def histogram(request: Request) -> Response:
    service = _service(request)
    limits = service.config.limits
    body = await fields.body(request, limits)
    entry = service.catalog.get(fields.text(body, "dataset") or "")
    variables = fields.names(body, "variables")
    if not 1 <= len(variables) <= 3:
        raise ServiceError(400, "'variables' must name one to three variables")
    where = fields.text(body, "where", required=False)
    context = fields.text(body, "context", required=False)
    bins = fields.bins(body, limits)
    if len(variables) > 1 and isinstance(bins, int) and bins ** len(variables) > limits.rows:
        raise ServiceError(413, f"{bins}^{len(variables)} bins is more than this server gives")
    value_range = fields.value_range(body, len(variables))
    result = await service.work(
        lambda: answers.histogram(
            service.files, entry, variables, where, bins, value_range, context
        )
    )
    return JSONResponse(result)


async def build(request: Request) -> Response:
    service = _service(request)
    check_write(service.config, request.headers.get("authorization"))
    body = await fields.body(request, service.config.limits)
    entry = service.catalog.get(fields.text(body, "dataset") or "")
    options: dict[str, Any] = {}
    for key, kind in OPTIONS.items():
        if kind is bool:
            options[key] = fields.flag(body, key)
        else:
            options[key] = fields.whole(body, key, 0 if key == "precision" else 1, 2**40)
    options["variables"] = fields.names(body, "variables") or None
    job = service.builds.submit(entry, options)
    return JSONResponse({"job": job["id"], "state": job["state"]}, status_code=202)


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
    found = await anyio.to_thread.run_sync(service.builds.get, request.path_params["id"], wait)
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
        lifespan=lifespan,
        exception_handlers={
            ServiceError: _refused,
            HTTPException: _http,
            Exception: _failed,
        },
    )
