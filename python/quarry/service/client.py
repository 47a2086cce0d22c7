"""The client of a Quarry server: :func:`quarry.connect`.

``quarry.connect(url).open(path)`` gives an object asked as a local
:class:`quarry.Dataset` is: ``query(q).count() / ids() / values(name) /
histogram(...)`` and ``histogram(names, where=...)``, with the same answers
(the server runs the same calls). A query whose names spread over a file's
step groups answers as a :class:`quarry.SeriesSelection` does: ``count()``
the total, ``counts()`` and ``per_step()`` per member, ``ids()`` and
``values()`` a list of arrays, one per member. Ids and values travel as Arrow
IPC streams, so dtypes, NaNs and infinities arrive as they are stored.

Errors are raised as locally where the server says what they were: a bad
query as :class:`~quarry.errors.QuerySyntaxError` (with its caret), a stale
index as :class:`~quarry.errors.StaleIndexError`; anything else as
:class:`~quarry.service.config.ServiceError` with the HTTP status.

Under MPI (``comm``, an mpi4py communicator), rank 0 alone talks to the
server and broadcasts each answer (or error) to the other ranks, so a job of
a thousand ranks makes one request per call, not a thousand.

Only the standard library's HTTP client is used; pyarrow decodes the hits.
"""

from __future__ import annotations

import json
import operator
import urllib.error
import urllib.parse
import urllib.request
from typing import TYPE_CHECKING, Any

from quarry.service.config import ServiceError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from quarry.query.histogram import Histogram

ARROW = "application/vnd.apache.arrow.stream"


def connect(
    url: str, token: str | None = None, comm: Any = None, timeout: float = 300.0
) -> Connection:
    """A connection to the Quarry server at ``url`` (``http://host:port``);
    ``token`` is sent as ``Authorization: Bearer`` (needed only to write);
    ``comm`` an MPI communicator whose rank 0 alone talks to the server.

    Examples
    --------
    >>> conn = connect("http://127.0.0.1:8750")
    >>> conn.url
    'http://127.0.0.1:8750'
    """
    return Connection(url.rstrip("/"), token, comm, timeout)


class Connection:
    """A server's catalog and its files; see :func:`connect`."""

    def __init__(self, url: str, token: str | None, comm: Any, timeout: float) -> None:
        self.url = url
        self.token = token
        self.comm = comm
        self.timeout = timeout

    def request(
        self, method: str, path: str, body: dict[str, Any] | None = None, arrow: bool = False
    ) -> Any:
        """The server's answer to ``method path`` with the JSON ``body``: a
        decoded JSON object, or with ``arrow`` a ``pyarrow.Table``. Under MPI
        rank 0 alone asks and broadcasts the bytes it got (errors included),
        which every rank then decodes."""
        if self.comm is None or self.comm.size == 1:
            fetched = self._fetch(method, path, body, arrow)
        else:
            mine = self._fetch(method, path, body, arrow) if self.comm.rank == 0 else None
            fetched = self.comm.bcast(mine, root=0)
        kind, status, payload = fetched
        if kind == "unreachable":
            raise ServiceError(503, f"cannot reach the server at {self.url}: {payload.decode()}")
        if status >= 400:
            raise _error(status, payload)
        if kind.startswith(ARROW):
            import pyarrow as pa

            return pa.ipc.open_stream(payload).read_all()
        try:
            return json.loads(payload)
        except ValueError:  # a proxy's login page, another program on the port
            raise ServiceError(
                502,
                f"{self.url} answered {path} with {kind or 'no content type'}, not Quarry's "
                "JSON: is it a Quarry server (quarry serve prints its URL)?",
            ) from None

    def _fetch(
        self, method: str, path: str, body: dict[str, Any] | None, arrow: bool
    ) -> tuple[str, int, bytes]:
        """The answer's content type, status and bytes (``unreachable`` and
        the reason where no answer came)."""
        headers = {"Accept": f"{ARROW}, application/json" if arrow else "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data, headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as answer:
                return answer.headers.get("Content-Type", ""), answer.status, answer.read()
        except urllib.error.HTTPError as exc:
            return "error", exc.code, exc.read()
        except (urllib.error.URLError, OSError) as exc:
            return "unreachable", 0, str(getattr(exc, "reason", exc)).encode()

    def datasets(self) -> list[dict[str, Any]]:
        """The catalog: each file's ``path``, ``format``, ``size``, ``mtime``,
        ``indexed`` and ``fresh``."""
        listed: list[dict[str, Any]] = self.request("GET", "/api/v1/datasets")["datasets"]
        return listed

    def open(self, path: str) -> RemoteDataset:
        """The catalogued file ``path`` (as :meth:`datasets` names it)."""
        quoted = urllib.parse.quote(path)
        return RemoteDataset(self, path, self.request("GET", f"/api/v1/datasets/{quoted}"))


def _error(status: int, payload: bytes) -> Exception:
    """The local error of a refusal: a bad query's syntax error (caret and
    all), a stale index, or the status and message."""
    from quarry.errors import QuerySyntaxError, StaleIndexError

    try:
        answer = json.loads(payload)
        message = str(answer["error"])
    except (ValueError, KeyError, TypeError):
        return ServiceError(status, f"the server answered {status}")
    if "position" in answer and "query" in answer:
        return QuerySyntaxError(message.split("\n  ", 1)[0], answer["query"], answer["position"])
    if status == 409:
        return StaleIndexError(message)
    return ServiceError(status, message)


class RemoteDataset:
    """A file of a server's catalog, asked as a local :class:`quarry.Dataset`."""

    def __init__(self, conn: Connection, path: str, detail: dict[str, Any]) -> None:
        self.conn = conn
        self.path = path
        self.detail = detail

    def variables(self) -> list[dict[str, Any]]:
        """Each variable's path, name, shape, dtype, attributes and whether indexed."""
        found: list[dict[str, Any]] = self.detail["variables"]
        return found

    def query(self, query: str, path: str | None = None) -> RemoteSelection:
        """The rows where ``query`` is true (names resolved under ``path``)."""
        return RemoteSelection(self, query, path)

    def histogram(
        self,
        names: str | list[str],
        where: str | None = None,
        bins: Any = 10,
        range: Any = None,
        path: str | None = None,
    ) -> Histogram:
        """Histogram of ``names`` over the rows where ``where`` is true, as
        :meth:`quarry.Dataset.histogram` makes it; ``bins`` as it takes them
        (a number, one of NumPy's estimators, the edges, or edges per variable)."""
        import numpy as np

        from quarry.query.histogram import Histogram

        body: dict[str, Any] = {"dataset": self.path, "variables": names, "context": path}
        body["where"] = where
        given = bins.tolist() if isinstance(bins, np.ndarray) else bins  # as lists travel
        if isinstance(given, str):
            body["bins"] = given  # one of NumPy's estimators
        elif not isinstance(given, list | tuple):
            body["bins"] = operator.index(given)  # a NumPy integer too
        elif given and isinstance(given[0], list | tuple | np.ndarray):  # a list per variable
            body["edges"] = [np.asarray(axis, float).tolist() for axis in given]
        else:
            body["edges"] = np.asarray(given, float).tolist()
        if range is not None:
            body["range"] = [list(map(float, r)) for r in range] if _pairs(range) else list(range)
        answer = self.conn.request("POST", "/api/v1/histogram", body)
        counts = np.array(answer["counts"])
        edges = answer["edges"]
        shaped = np.array(edges, float) if isinstance(names, str) else [np.array(e) for e in edges]
        return Histogram(counts, shaped, answer["path"], answer["values_read"])

    def __repr__(self) -> str:
        return f"quarry.connect({self.conn.url!r}).open({self.path!r})"


def _pairs(value: Any) -> bool:
    return bool(value) and isinstance(value[0], list | tuple)


class RemoteSelection:
    """The rows of a file where a query is true, on a server; asked as a local
    :class:`quarry.Selection` (or, over step groups, a ``SeriesSelection``)."""

    def __init__(self, ds: RemoteDataset, query: str, path: str | None) -> None:
        self.dataset = ds
        self.query = query
        self.path = path
        self._counted: dict[str, Any] | None = None

    def _body(self, **more: Any) -> dict[str, Any]:
        return {"dataset": self.dataset.path, "query": self.query, "context": self.path, **more}

    def per_step(self) -> list[dict[str, Any]]:
        """``{"file", "step", "count"}`` per member (one, step None, for a
        file without step groups)."""
        if self._counted is None:
            self._counted = self.dataset.conn.request(
                "POST", "/api/v1/query", self._body(output="count", per_step=True)
            )
        steps: list[dict[str, Any]] = self._counted["per_step"]
        return steps

    @property
    def series(self) -> bool:
        """Whether the answer spreads over step groups (a SeriesSelection's)."""
        members = self.per_step()
        return len(members) != 1 or members[0]["step"] is not None

    def count(self) -> int:
        """Number of rows where the query is true."""
        return sum(int(m["count"]) for m in self.per_step())

    def counts(self) -> list[int]:
        """Hits per member, in order."""
        return [int(m["count"]) for m in self.per_step()]

    def _hits(self, names: list[str]) -> Any:
        output = "values" if names else "ids"
        body = self._body(output=output, variables=names)
        return self.dataset.conn.request("POST", "/api/v1/query", body, arrow=True)

    def _split(self, table: Any, column: str | None) -> Any:  # an array, or a list of them
        """``column`` of the hits (None: their rows): an array, or over a
        series one per member, cut where the answer's metadata says each
        member's rows end."""
        import numpy as np

        about = json.loads(table.schema.metadata[b"quarry"])
        values = table[column or about["row"]].to_numpy(zero_copy_only=False)
        if "step" not in about:
            return values
        return np.split(values, np.cumsum(about["counts"])[:-1]) if about["counts"] else []

    def ids(self) -> npt.NDArray[np.int64] | list[npt.NDArray[np.int64]]:
        """Flat row-major positions of the hits, ascending (per member over a series)."""
        ids: npt.NDArray[np.int64] | list[npt.NDArray[np.int64]]
        ids = self._split(self._hits([]), None)
        return ids

    def values(self, name: str) -> npt.NDArray[Any] | list[npt.NDArray[Any]]:
        """Values of ``name`` at the hits (per member over a series)."""
        values: npt.NDArray[Any] | list[npt.NDArray[Any]] = self._split(self._hits([name]), name)
        return values

    def histogram(
        self, names: str | list[str], bins: int | list[float] = 10, range: Any = None
    ) -> Histogram:
        """Histogram of the hits' values, as :meth:`quarry.Selection.histogram`."""
        return self.dataset.histogram(names, self.query, bins, range, self.path)
