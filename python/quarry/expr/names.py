"""Resolving the names written in a query to the variables of a file.

A name starting with ``/`` is a full path. A bare name (or a relative path in
backticks) matches every variable whose path ends with it, component-wise;
exactly one match resolves, several is an error listing them, none is an
error naming the closest variables.
"""

from __future__ import annotations

from quarry.errors import AmbiguousNameError, UnknownVariableError
from quarry.formats.base import VariableInfo


def resolve(name: str, variables: list[VariableInfo], source: str) -> VariableInfo:
    """The variable ``name`` refers to.

    Examples
    --------
    >>> import numpy as np
    >>> vs = [VariableInfo("/Step#0/x", (3,), np.dtype("f4")),
    ...       VariableInfo("/Step#1/x", (3,), np.dtype("f4")),
    ...       VariableInfo("/Step#0/energy", (3,), np.dtype("f4"))]
    >>> resolve("energy", vs, "run.h5").path
    '/Step#0/energy'
    >>> resolve("Step#1/x", vs, "run.h5").path
    '/Step#1/x'
    >>> resolve("x", vs, "run.h5")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    quarry.errors.AmbiguousNameError: 'x' matches 2 variables: /Step#0/x, /Step#1/x; ...
    >>> resolve("enrgy", vs, "run.h5")
    Traceback (most recent call last):
    ...
    quarry.errors.UnknownVariableError: no variable 'enrgy' in run.h5; did you mean energy?
    """
    if name.startswith("/"):
        wanted = "/" + name.strip("/")
        for info in variables:
            if info.path == wanted:
                return info
        matches: list[VariableInfo] = []
    else:
        suffix = "/" + name.strip("/")
        matches = [info for info in variables if info.path.endswith(suffix)]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise AmbiguousNameError(name, sorted(info.path for info in matches))
    raise UnknownVariableError(name, source, suggest(name, variables))


def suggest(name: str, variables: list[VariableInfo], limit: int = 3) -> list[str]:
    """The closest variable names (bare when unique in the file, else full paths)."""
    import difflib  # only an error needs it

    bare_counts: dict[str, int] = {}
    for info in variables:
        bare_counts[info.name] = bare_counts.get(info.name, 0) + 1
    labels = {(info.name if bare_counts[info.name] == 1 else info.path): info for info in variables}
    key = name.rsplit("/", 1)[-1] if not name.startswith("/") else name
    pool = list(labels) + [info.path for info in variables]
    seen: list[str] = []
    for match in difflib.get_close_matches(key, pool, n=limit * 2, cutoff=0.6):
        label = (
            match
            if match in labels
            else next((lab for lab, info in labels.items() if info.path == match), match)
        )
        if label not in seen:
            seen.append(label)
    return seen[:limit]
