"""The OpenAPI 3.1 document of the API, served at ``/api/v1/openapi.json``.

Written out rather than generated: the routes are few, and
``tests/service/test_api.py`` checks that every route of
:data:`quarry.service.app.ROUTES` under ``/api/v1`` is described here with its
method, and nothing else.
"""

from __future__ import annotations

from typing import Any

from quarry.version import VERSION

_ERROR = {
    "description": "refused: the CLI's message, with a bad query's caret",
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {
                    "error": {"type": "string"},
                    "query": {"type": "string"},
                    "position": {"type": "integer"},
                },
                "required": ["error"],
            }
        }
    },
}
_NAMES = {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
_TEXT = {"type": "string"}
_JSON = {"application/json": {"schema": {"type": "object"}}}


def _body(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema = {"type": "object", "properties": properties, "required": required}
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def _answers(ok: str, *errors: int, status: str = "200") -> dict[str, Any]:
    out: dict[str, Any] = {status: {"description": ok, "content": _JSON}}
    out.update({str(code): _ERROR for code in errors})
    return out


def document() -> dict[str, Any]:
    """The OpenAPI document.

    Examples
    --------
    >>> doc = document()
    >>> doc["openapi"], sorted(doc["paths"])[0]
    ('3.1.0', '/api/v1/datasets')
    """
    write: list[dict[str, list[str]]] = [{"bearer": []}]
    return {
        "openapi": "3.1.0",
        "info": {"title": "Quarry data service", "version": VERSION},
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "paths": {
            "/api/v1/datasets": {
                "get": {
                    "summary": "every catalogued data file: path, format, size, mtime, "
                    "indexed, fresh",
                    "responses": _answers("the catalog"),
                }
            },
            "/api/v1/datasets/{path}": {
                "get": {
                    "summary": "a data file's variables (name, shape, dtype, attributes, "
                    "indexed), its index and reorganised copy",
                    "parameters": [
                        {
                            "name": "path",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        }
                    ],
                    "responses": _answers("the file", 404),
                }
            },
            "/api/v1/query": {
                "post": {
                    "summary": "count, ids or values of the rows where a query is true; ids "
                    "and values as an Arrow IPC stream when accepted",
                    "requestBody": _body(
                        {
                            "dataset": {"type": "string"},
                            "query": {"type": "string"},
                            "context": {"type": ["string", "null"]},
                            "output": {"enum": ["count", "ids", "values"]},
                            "variables": _NAMES,
                            "per_step": {"type": "boolean"},
                        },
                        ["dataset", "query"],
                    ),
                    "responses": {
                        **_answers("the answer", 400, 404, 409, 413, 415, 503, 504),
                        "200": {
                            "description": "the answer",
                            "content": {
                                **_JSON,
                                "application/vnd.apache.arrow.stream": {
                                    "schema": {"type": "string", "format": "binary"}
                                },
                            },
                        },
                    },
                }
            },
            "/api/v1/histogram": {
                "post": {
                    "summary": "histogram of one to three variables over a selection",
                    "requestBody": _body(
                        {
                            "dataset": {"type": "string"},
                            "variables": _NAMES,
                            "where": {"type": ["string", "null"]},
                            "context": {"type": ["string", "null"]},
                            "bins": {"type": "integer"},
                            "edges": {
                                "type": "array",
                                "description": "numbers; a list per variable for two or three",
                            },
                            "range": {"type": "array"},
                        },
                        ["dataset", "variables"],
                    ),
                    "responses": _answers("counts and edges", 400, 404, 409, 413, 415, 503, 504),
                }
            },
            "/api/v1/index": {
                "post": {
                    "summary": "build a file's index in the background; gives the job",
                    "security": write,
                    "requestBody": _body(
                        {
                            "dataset": {"type": "string"},
                            "variables": _NAMES,
                            "bins": {"type": "integer"},
                            "precision": {"type": "integer"},
                            "block_size": {"type": "integer"},
                            "force": {"type": "boolean"},
                        },
                        ["dataset"],
                    ),
                    "responses": _answers("the job", 400, 401, 403, 404, 415, status="202"),
                }
            },
            "/api/v1/jobs/{id}": {
                "get": {
                    "summary": "a build job: queued, running, done, failed or cancelled",
                    "parameters": [
                        {"name": "id", "in": "path", "required": True, "schema": _TEXT},
                        {"name": "wait", "in": "query", "schema": {"type": "number"}},
                    ],
                    "responses": _answers("the job, once ended or after ?wait seconds", 400, 404),
                }
            },
            "/api/v1/rescan": {
                "post": {
                    "summary": "walk the roots again: files added, changed and removed",
                    "security": write,
                    "responses": _answers("what changed", 401, 403),
                }
            },
            "/api/v1/openapi.json": {
                "get": {"summary": "this document", "responses": _answers("the document")}
            },
        },
    }
