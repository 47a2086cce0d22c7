"""What a server is told, and the checks every request passes.

Invariant: a path a client names is opened only when it is a catalogued data
file whose real path (every symlink resolved) lies inside a root's real path.
A name that is not in the catalog, or whose file now resolves outside the
roots, is answered as unknown (404), never with a hint of what lies there.

Writes (index builds, rescans) need the bearer token of ``--token-file``,
compared with :func:`hmac.compare_digest` so the time taken says nothing of
how much of a guess was right; without a token file there are no writes.
"""

from __future__ import annotations

import hmac
import os
from typing import Any

from quarry.errors import QuarryError
from quarry.records import field, record


class ServiceError(QuarryError):
    """A request the service refuses, with the HTTP status that says why."""

    def __init__(self, status: int, message: str, **details: Any) -> None:
        self.status = status
        self.message = message
        self.details = details
        """More for the client: a bad query's ``query`` and ``position``."""
        super().__init__(message)


def refusal(exc: QuarryError, real: str, shown: str) -> ServiceError:
    """The refusal of a request that made quarry raise ``exc`` on the file
    ``real``, with the CLI's message (a bad query's caret included) naming
    the file ``shown`` instead, and the status that fits: 400 a bad query,
    404 an unknown variable or path, 409 a stale or damaged index or copy
    (naming the request that rebuilds it), 400 else.

    Examples
    --------
    >>> from quarry.errors import QuerySyntaxError, StaleIndexError
    >>> r = refusal(QuerySyntaxError("expected a value", "e > )", 4), "/srv/a.h5", "a.h5")
    >>> r.status, r.details
    (400, {'query': 'e > )', 'position': 4})
    >>> print(r)
    expected a value
      e > )
          ^
    >>> refusal(StaleIndexError("/srv/a.h5 has changed"), "/srv/a.h5", "a.h5").message
    'a.h5 has changed'
    >>> stale = StaleIndexError("/srv/a.h5 changed; rebuild the index with: quarry index /srv/a.h5")
    >>> refusal(stale, "/srv/a.h5", "a.h5").message
    'a.h5 changed; rebuild it with POST /api/v1/index {"dataset": "a.h5"}'
    >>> from quarry.errors import CorruptIndexError
    >>> damaged = CorruptIndexError("a.qidx is damaged; rebuild it with: quarry index /srv/a.h5")
    >>> refusal(damaged, "/srv/a.h5", "a.h5").message
    'a.qidx is damaged; rebuild it with POST /api/v1/index {"dataset": "a.h5", "force": true}'
    """
    from quarry.errors import (
        CorruptIndexError,
        QuerySyntaxError,
        StaleIndexError,
        UnknownPathError,
        UnknownVariableError,
    )

    text = str(exc).replace(real, shown)
    if isinstance(exc, QuerySyntaxError):
        return ServiceError(400, text, query=exc.query, position=exc.position)
    if isinstance(exc, UnknownVariableError | UnknownPathError):
        return ServiceError(404, text)
    if isinstance(exc, StaleIndexError | CorruptIndexError):
        # The CLI's command would run on the server, in a directory the client
        # does not see: a client rebuilds through the API (a copy with the
        # index); damage, which a fresh stat hides, only when forced.
        force = ', "force": true' if isinstance(exc, CorruptIndexError) else ""
        for said in (
            "; rebuild the index with: ",
            "; build the copy again with: ",
            "; rebuild it with: ",
            "; build it again with: ",
        ):
            head, command, _ = text.partition(said)
            if command:
                text = f'{head}; rebuild it with POST /api/v1/index {{"dataset": "{shown}"{force}}}'
        return ServiceError(409, text)
    return ServiceError(400, text)


@record
class Limits:
    """What one request may cost the server.

    ``body_bytes``: the largest request body; ``rows`` and ``result_bytes``:
    the largest answer of ids or values (a larger one is refused with 413,
    to be narrowed, or written on the server with ``quarry query --out``);
    ``query_seconds``: how long one request's quarry work may run (504 after);
    ``builds``: index builds running at once; ``bins``: the most bins of a
    histogram's axis.
    """

    body_bytes: int = 1 << 20
    rows: int = 10_000_000
    result_bytes: int = 256 << 20
    query_seconds: float = 60.0
    builds: int = 1
    bins: int = 100_000


#: The names of the loopback addresses.
LOOPBACK = ("127.0.0.1", "localhost", "::1")


@record
class Config:
    """A server's roots (real paths), catalog file, token (None: writes are
    disabled), limits, worker threads, whether it rebuilds indexes itself and
    how often it rescans (seconds; 0: only when asked)."""

    roots: tuple[str, ...]
    catalog: str
    token: bytes | None = None
    limits: Limits = field(default_factory=Limits)
    workers: int = 4
    auto_index: bool = False
    scan_every: float = 60.0
    hosts: tuple[str, ...] | None = LOOPBACK
    """The names a request's ``Host`` may give (None: any), so that a page
    whose name was rebound to a loopback address cannot talk to the server."""

    @staticmethod
    def make(roots: list[str], catalog: str | None = None, **options: object) -> Config:
        """A config for ``roots`` (each must be a directory), their real paths
        kept; the catalog defaults to one per set of roots in the user's cache.

        Examples
        --------
        >>> import tempfile
        >>> d = tempfile.mkdtemp()
        >>> Config.make([d], catalog=":memory:").roots == (os.path.realpath(d),)
        True
        >>> Config.make(["/no/such/dir"])
        Traceback (most recent call last):
        ...
        quarry.service.config.ServiceError: the root /no/such/dir is not a directory
        """
        real = []
        for root in roots:
            if not os.path.isdir(root):
                raise ServiceError(400, f"the root {root} is not a directory")
            real.append(os.path.realpath(root))
        chosen = catalog or default_catalog(real)
        return Config(tuple(real), chosen, **options)  # type: ignore[arg-type]


def default_catalog(roots: list[str]) -> str:
    """The catalog of a set of roots when none is named: in the user's cache
    directory, one per set of roots (so two servers of other roots do not
    share one)."""
    import hashlib

    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    key = hashlib.sha256("\0".join(roots).encode()).hexdigest()[:16]
    return os.path.join(cache, "quarry", f"catalog-{key}.sqlite")


def read_token(path: str) -> bytes:
    """The token in ``path`` (surrounding whitespace dropped); refused when
    empty, so an empty file cannot open the writes to everyone."""
    try:
        with open(path, "rb") as f:
            token = f.read().strip()
    except OSError as exc:
        raise ServiceError(400, f"cannot read the token file {path}: {exc.strerror}") from None
    if not token:
        raise ServiceError(400, f"the token file {path} is empty; put a secret in it")
    return token


def check_write(config: Config, authorization: str | None) -> None:
    """Refuse a write unless ``authorization`` is ``Bearer <the token>``:
    403 when the server has no token (writes disabled) or the token is wrong,
    401 when none was given.

    Examples
    --------
    >>> config = Config(("/d",), ":memory:", token=b"s3cret")
    >>> check_write(config, "Bearer s3cret")
    >>> check_write(config, "Bearer guess")
    Traceback (most recent call last):
    ...
    quarry.service.config.ServiceError: the token is not this server's
    """
    if config.token is None:
        raise ServiceError(403, "writes are disabled: the server was started without --token-file")
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        raise ServiceError(401, "this request writes: send Authorization: Bearer <token>")
    # HTTP carries header bytes; Starlette decodes them as Latin-1, so this is
    # the token exactly as sent (a UTF-8 token's bytes included)
    if not hmac.compare_digest(given.strip().encode("latin-1"), config.token):
        raise ServiceError(403, "the token is not this server's")


def host_allowed(header: str | None, hosts: tuple[str, ...] | None) -> bool:
    """Whether the ``Host`` header ``header`` (a name, an IPv4 address or a
    bracketed IPv6 one, with or without a port) names one of ``hosts``
    (None: any).

    Examples
    --------
    >>> host_allowed("127.0.0.1:8750", LOOPBACK), host_allowed("[::1]:80", LOOPBACK)
    (True, True)
    >>> host_allowed("evil.example:8750", LOOPBACK), host_allowed(None, LOOPBACK)
    (False, False)
    """
    if hosts is None:
        return True
    if not header:
        return False
    name = header.strip().lower()
    if name.startswith("["):
        name = name[1 : name.find("]")] if "]" in name else ""
    elif name.count(":") == 1:
        name = name.partition(":")[0]
    return name.rstrip(".") in hosts


def inside(path: str, roots: tuple[str, ...]) -> str | None:
    """The real path of ``path`` when it lies inside one of ``roots`` (real
    paths themselves), else None.

    Examples
    --------
    >>> inside("/data/run/../run/p.h5", ("/data",)), inside("/data/../etc/passwd", ("/data",))
    ('/data/run/p.h5', None)
    """
    real = os.path.realpath(path)
    for root in roots:
        if real == root or real.startswith(root.rstrip(os.sep) + os.sep):
            return real
    return None
