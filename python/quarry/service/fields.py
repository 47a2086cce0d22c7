"""Reading a request's JSON body and its fields, refusing what does not fit
with a message that names the field: a body that is too large (413), not
JSON or not an object, a field of the wrong type or out of range (400).

Nothing a client sends is evaluated except by the query grammar: fields are
strings, numbers, booleans and lists of them, checked here one by one.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from quarry.service.config import Limits, ServiceError

if TYPE_CHECKING:
    from starlette.requests import Request


async def body(request: Request, limits: Limits) -> dict[str, Any]:
    """The request's JSON object, read no further than ``limits.body_bytes``;
    415 unless it is declared ``Content-Type: application/json`` (so that a web
    page elsewhere cannot send one as a plain form post, which a browser
    sends to any address without asking)."""
    declared_type = request.headers.get("content-type", "").partition(";")[0].strip()
    if declared_type.lower() != "application/json":
        shown = repr(declared_type) if declared_type else "none"
        raise ServiceError(415, f"send the body as Content-Type: application/json, not {shown}")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limits.body_bytes:
        raise ServiceError(413, _too_large(limits))
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > limits.body_bytes:
            raise ServiceError(413, _too_large(limits))
    return parse(bytes(data))


def _too_large(limits: Limits) -> str:
    return f"the request body is larger than this server takes ({limits.body_bytes} bytes)"


def parse(data: bytes) -> dict[str, Any]:
    """A JSON object from ``data``, or a 400 saying what is wrong.

    Examples
    --------
    >>> parse('{"query": "énergie > 1"}'.encode())
    {'query': 'énergie > 1'}
    >>> parse(b'[1, 2]')
    Traceback (most recent call last):
    ...
    quarry.service.config.ServiceError: the request body must be a JSON object, not a list
    >>> from quarry.service.config import ServiceError
    >>> try:  # an escape JSON allows, but one that stands for no character
    ...     parse(rb'{"query": "x > 1 && \\ud800 > 1"}')
    ... except ServiceError as exc:
    ...     print(exc.status, exc.message.partition(": ")[2])
    400 it holds a lone surrogate (\\ud800), which stands for no character
    """
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeDecodeError:
        raise ServiceError(400, "the request body is not UTF-8 text") from None
    except UnicodeEncodeError as exc:
        lone = exc.object[exc.start : exc.end].encode("unicode_escape").decode()
        raise ServiceError(
            400,
            f"the request body is not valid JSON: it holds a lone surrogate ({lone}), "
            "which stands for no character",
        ) from None
    except (ValueError, RecursionError) as exc:
        raise ServiceError(400, f"the request body is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ServiceError(
            400, f"the request body must be a JSON object, not a {type(value).__name__}"
        )
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def only(fields: dict[str, Any], known: tuple[str, ...]) -> None:
    """A 400 naming a key of the body that the endpoint does not take, and
    the nearest one it does: a slip (``query`` for a histogram's ``where``,
    the command line's ``path`` for ``context``) would otherwise be ignored
    and a different question answered.

    Examples
    --------
    >>> only({"dataset": "a.h5", "query": "x > 1"}, ("dataset", "where"))
    Traceback (most recent call last):
    quarry.service.config.ServiceError: unknown field 'query' (this request takes dataset, where)
    >>> only({"dataset": "a.h5", "outptu": "ids"}, ("dataset", "query", "output"))
    Traceback (most recent call last):
    quarry.service.config.ServiceError: unknown field 'outptu' (did you mean 'output'?)
    """
    import difflib

    for key in fields:
        if key not in known:
            near = difflib.get_close_matches(key, known, n=1)
            hint = (
                f"did you mean {near[0]!r}?" if near else f"this request takes {', '.join(known)}"
            )
            raise ServiceError(400, f"unknown field {key!r} ({hint})")


def text(fields: dict[str, Any], key: str, required: bool = True) -> str | None:
    """The string field ``key`` (None where absent and not ``required``).

    Examples
    --------
    >>> text({"query": 3}, "query")
    Traceback (most recent call last):
    ...
    quarry.service.config.ServiceError: 'query' must be a string, not int
    """
    value = fields.get(key)
    if value is None and not required:
        return None
    if value is None:
        raise ServiceError(400, f"the request needs {key!r}")
    if not isinstance(value, str):
        raise ServiceError(400, f"{key!r} must be a string, not {type(value).__name__}")
    return value


def names(fields: dict[str, Any], key: str) -> list[str]:
    """The field ``key`` as a list of names: one string, or a list of them,
    as given (a histogram of ``["x", "x"]`` is 2-D, as locally).

    Examples
    --------
    >>> names({"variables": "x"}, "variables"), names({}, "variables")
    (['x'], [])
    """
    value = fields.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ServiceError(400, f"{key!r} must be a name or a list of names")


def flag(fields: dict[str, Any], key: str) -> bool:
    """The boolean field ``key`` (false where absent)."""
    value = fields.get(key, False)
    if not isinstance(value, bool):
        raise ServiceError(400, f"{key!r} must be true or false, not {type(value).__name__}")
    return value


def choice(fields: dict[str, Any], key: str, allowed: tuple[str, ...]) -> str:
    """The field ``key``, one of ``allowed`` (the first where absent)."""
    value = fields.get(key, allowed[0])
    if value not in allowed or not isinstance(value, str):
        raise ServiceError(400, f"{key!r} must be one of {', '.join(allowed)}")
    return value


def whole(fields: dict[str, Any], key: str, low: int, high: int) -> int | None:
    """The integer field ``key`` within ``[low, high]`` (None where absent).

    Examples
    --------
    >>> whole({"bins": 10**400}, "bins", 1, 1000)
    Traceback (most recent call last):
    ...
    quarry.service.config.ServiceError: 'bins' must be a whole number from 1 to 1000
    """
    value = fields.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ServiceError(400, f"{key!r} must be a whole number from {low} to {high}")
    return value


def number(value: Any, key: str) -> float:
    """``value`` as a finite float, or a 400 naming ``key``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ServiceError(400, f"{key!r} must hold numbers")
    try:
        out = float(value)
    except OverflowError:
        raise ServiceError(400, f"{key!r} holds a number too large for a float") from None
    if not math.isfinite(out):
        raise ServiceError(400, f"{key!r} must hold finite numbers")
    return out


#: NumPy's bin estimators (``numpy.histogram_bin_edges``), which one variable's bins may name.
ESTIMATORS = ("auto", "fd", "doane", "scott", "stone", "rice", "sturges", "sqrt")


def bins(fields: dict[str, Any], limits: Limits, axes: int = 1) -> int | str | list[Any]:
    """``bins`` (a count per axis, default 10; for one variable, or one of
    NumPy's :data:`ESTIMATORS`) or ``edges`` (ascending numbers; with two or
    three variables, one list per variable) of a histogram of ``axes``
    variables; 413 when the bins of every axis together are more than the
    server's row limit (an estimator's, once its bins are made)."""
    edges = fields.get("edges")
    if edges is None and isinstance(fields.get("bins"), str):
        named: str = fields["bins"]
        if named not in ESTIMATORS or axes != 1:
            raise ServiceError(
                400,
                f"'bins' must be a whole number, or for one variable one of NumPy's "
                f"estimators: {', '.join(ESTIMATORS)}; not {named!r} for {axes}",
            )
        return named
    if edges is None:
        chosen = whole(fields, "bins", 1, limits.bins)
        count = 10 if chosen is None else chosen
        _check_cells([count] * axes, limits)
        return count
    if axes == 1:
        return _axis_edges(edges, limits)
    if not isinstance(edges, list) or len(edges) != axes:
        raise ServiceError(400, f"'edges' must hold {axes} lists of numbers, one per variable")
    per_axis = [_axis_edges(e, limits) for e in edges]
    _check_cells([len(e) - 1 for e in per_axis], limits)
    return per_axis


def _axis_edges(edges: Any, limits: Limits) -> list[float]:
    if not isinstance(edges, list) or not 2 <= len(edges) <= limits.bins + 1:
        raise ServiceError(400, f"'edges' must be a list of 2 to {limits.bins + 1} numbers")
    return [number(e, "edges") for e in edges]


def _check_cells(counts: list[int], limits: Limits) -> None:
    if len(counts) > 1 and math.prod(counts) > limits.rows:
        shown = " x ".join(map(str, counts))
        raise ServiceError(413, f"{shown} bins is more than this server gives ({limits.rows})")


def value_range(fields: dict[str, Any], axes: int) -> Any:
    """``range``: ``[lo, hi]`` for one variable, a pair per variable for more."""
    value = fields.get("range")
    if value is None:
        return None

    def pair(p: Any) -> tuple[float, float]:
        if not isinstance(p, list) or len(p) != 2:
            raise ServiceError(400, "'range' must be [low, high] (a pair per variable)")
        return number(p[0], "range"), number(p[1], "range")

    if axes == 1:
        return pair(value)
    if not isinstance(value, list) or len(value) != axes:
        raise ServiceError(400, f"'range' must hold {axes} pairs [low, high], one per variable")
    return [pair(p) for p in value]


def wants_arrow(accept: str, arrow: str = "application/vnd.apache.arrow.stream") -> bool:
    """Whether a request's ``Accept`` header asks for an Arrow stream over
    JSON: it names ``arrow`` with a quality above 0 and at least that of the
    most specific range JSON matches (``application/json``, then
    ``application/*``, then ``*/*``). JSON is the answer otherwise, also to
    a header naming neither (RFC 9110 lets a server answer what it has).

    Examples
    --------
    >>> arrow = "application/vnd.apache.arrow.stream"
    >>> wants_arrow(arrow), wants_arrow("*/*"), wants_arrow("")
    (True, False, False)
    >>> wants_arrow(f"{arrow};q=0, application/json")  # q=0: not acceptable
    False
    >>> wants_arrow(f"application/json;q=0.5, {arrow};q=0.1")
    False
    >>> wants_arrow(f"{arrow}, application/json;q=0.9"), wants_arrow(f"*/*, {arrow}")
    (True, True)
    """
    qualities: dict[str, float] = {}
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        quality = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if media:
            qualities[media.lower()] = max(quality, qualities.get(media.lower(), 0.0))
    arrow_q = qualities.get(arrow, 0.0)
    json_q = next(
        (qualities[m] for m in ("application/json", "application/*", "*/*") if m in qualities), 0.0
    )
    return arrow_q > 0 and arrow_q >= json_q
