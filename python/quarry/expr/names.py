"""Resolving the names written in a query to the variables of a file.

FastQuery's ``(name, path)`` scheme, made safe for files whose subtrees reuse
names (openPMD's ``fields/E/x`` beside ``particles/electrons/position/x``):

- A name starting with ``/`` is a full path, whatever the context.
- A bare name (or a relative path: ``position.x`` or ```position/x```, a dot
  in a bare name joining a group to its member) matches every variable whose
  path ends with it, component by component.
- A *context* path narrows the matches to variables under it: with context
  ``Step#3`` a bare name ``x`` matches paths of the form ``*/Step#3/*/x``
  (the context is a contiguous run of group names anywhere above the name;
  ``*`` stands for any number of groups, none included). A context starting
  with ``/`` is anchored at the root. Each component may be a glob
  (``Step#*``, ``group/sub*``), matched with :func:`fnmatch.fnmatchcase`.
- One match is the answer. Several resolve only when one of them lies in a
  group that holds every other match, at any depth below it: ``/x`` beside
  ``/g/x`` is ``/x``. Matches in separate subtrees are an
  :class:`~quarry.errors.AmbiguousNameError` that lists the topmost match of
  each subtree with a spelling that picks it (``E.x``, ``position.x``). No
  match is an :class:`~quarry.errors.UnknownVariableError` naming the closest
  variables, and a context that names no group at all is an
  :class:`~quarry.errors.UnknownPathError`.

Names are compared after Unicode NFC normalisation, so ``énergie`` typed with
a combining accent finds the variable written with the composed letter.

A glob context that matches several groups is how a time series addresses its
steps (:func:`matching_groups` lists them); for one query it resolves only when
the rule above leaves one variable.
"""

from __future__ import annotations

import functools
import operator
import unicodedata
from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase

from quarry.errors import (
    AmbiguousNameError,
    QuarryError,
    UnknownPathError,
    UnknownVariableError,
    UsageError,
)
from quarry.formats.base import VariableInfo

_GLOB = frozenset("*?[")


def _components(path: str) -> tuple[str, ...]:
    """A path's components, NFC-normalised for comparison."""
    if not path.isascii():
        path = unicodedata.normalize("NFC", path)
    return tuple(p for p in path.split("/") if p)


class _Names:
    """A file's variables by full path and, built when a search first needs
    them, by their last path component and by the groups above them."""

    def __init__(self, variables: Sequence[VariableInfo]) -> None:
        self.variables = variables
        self.by_path: dict[str, VariableInfo] = {}
        for info in variables:
            path = info.path
            if not _plain(path):
                path = "/" + "/".join(_components(path))
            self.by_path[path] = info  # the last of one path, as listed

    @functools.cached_property
    def named(self) -> list[tuple[tuple[str, ...], VariableInfo]]:
        """Each variable with its path's components: one pair per variable,
        shared by the tables below (5,040 variables, 5,040 pairs)."""
        return [(_components(info.path), info) for info in self.variables]

    @functools.cached_property
    def by_last(self) -> dict[str, list[tuple[tuple[str, ...], VariableInfo]]]:
        """Each variable (its path's components, and itself) by its name."""
        by_last: dict[str, list[tuple[tuple[str, ...], VariableInfo]]] = {}
        for named in self.named:
            parts = named[0]
            by_last.setdefault(parts[-1] if parts else "", []).append(named)
        return by_last

    @functools.cached_property
    def groups(self) -> set[tuple[str, ...]]:
        """The groups holding variables, as components."""
        return {parts[:-1] for parts, _ in self.named}

    @functools.cached_property
    def under(self) -> dict[tuple[str, ...], list[tuple[tuple[str, ...], VariableInfo]]]:
        """Every variable below each group, for contexts that name one group
        exactly (``/Step#3``, as a series gives each of its steps)."""
        under: dict[tuple[str, ...], list[tuple[tuple[str, ...], VariableInfo]]] = {}
        for named in self.named:
            parts = named[0]
            for depth in range(1, len(parts)):
                under.setdefault(parts[:depth], []).append(named)
        return under


def _plain(path: str) -> bool:
    """Whether ``path`` is already written as :func:`_components` reads it
    (``/a/b``): ASCII, from the root, no empty component."""
    return path.isascii() and path.startswith("/") and "//" not in path and path[-1] != "/"


# Drivers return the same (cached) list on every call, so the table built for
# it is kept: a series of hundreds of step groups resolves every name of every
# step against one table instead of scanning the file's variables each time.
# A new list holding the same variables (an index's derived variables appended
# to the file's) finds its table too. The variables are held, so the identity
# comparison cannot be fooled by a reused id.
_TABLES: list[tuple[Sequence[VariableInfo], tuple[VariableInfo, ...], _Names]] = []


def _names(variables: Sequence[VariableInfo]) -> _Names:
    first = variables[0] if variables else None
    for k, (seen, items, table) in enumerate(_TABLES):
        # The first variable rejects another file's list without a scan.
        if len(items) == len(variables) and (
            seen is variables
            or ((not items or items[0] is first) and all(map(operator.is_, items, variables)))
        ):
            if k:
                _TABLES.insert(0, _TABLES.pop(k))
            return table
    table = _Names(variables)
    _TABLES.insert(0, (variables, tuple(variables), table))
    del _TABLES[16:]
    return table


@functools.lru_cache(maxsize=4096)
def _split_context(context: str | None) -> tuple[bool, tuple[str, ...]] | None:
    """(anchored at the root, components) of a context, or None for the whole
    file; kept per context, as every name of a step resolves in it."""
    if context is None:
        return None
    parts = tuple(p for p in context.strip().split("/") if p)
    if not parts:
        return None
    return context.strip().startswith("/"), parts


def _exact(context: str | None) -> bool:
    """Whether ``context`` names its groups exactly: no glob, and no
    character Unicode normalisation could change."""
    return context is not None and context.isascii() and _GLOB.isdisjoint(context)


def _component_matches(name: str, pattern: str) -> bool:
    if _GLOB.isdisjoint(pattern):
        return name == pattern
    return fnmatchcase(name, pattern)


def _context_ends(groups: tuple[str, ...], anchored: bool, ctx: tuple[str, ...]) -> list[int]:
    """Where in ``groups`` each match of the context run ends (exclusive)."""
    n = len(ctx)
    starts = [0] if anchored else range(len(groups) - n + 1)
    return [
        i + n
        for i in starts
        if i + n <= len(groups) and all(map(_component_matches, groups[i : i + n], ctx))
    ]


def resolve(
    name: str, variables: Sequence[VariableInfo], source: str, context: str | None = None
) -> VariableInfo:
    """The variable ``name`` refers to, bare names looked up under ``context``.

    Examples
    --------
    >>> import numpy as np
    >>> f4 = np.dtype("f4")
    >>> paths = ["/x", "/g/x", "/Step#0/x", "/Step#1/x", "/Step#1/sub/energy",
    ...          "/fields/E/x", "/particles/e/position/x", "/particles/e/momentum/x"]
    >>> vs = [VariableInfo(p, (3,), f4) for p in paths]
    >>> resolve("x", vs, "run.h5").path  # /x's group holds every other x
    '/x'
    >>> resolve("Step#1/x", vs, "run.h5").path, resolve("position.x", vs, "run.h5").path
    ('/Step#1/x', '/particles/e/position/x')
    >>> resolve("energy", vs, "run.h5", context="/Step#1").path
    '/Step#1/sub/energy'
    >>> resolve("x", vs, "run.h5", context="particles")
    Traceback (most recent call last):
    ...
    quarry.errors.AmbiguousNameError: 'x' matches 2 variables in separate groups: \
/particles/e/position/x (write position.x), /particles/e/momentum/x (write momentum.x); \
write the one you mean, or narrow the search to one group with --path GROUP (path= in Python)
    >>> resolve("x", vs, "run.h5", context="Step#*")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    quarry.errors.AmbiguousNameError: 'x' matches 2 variables ... --path Step#0 ... --per-step
    >>> resolve("enrgy", vs, "run.h5")
    Traceback (most recent call last):
    ...
    quarry.errors.UnknownVariableError: no variable 'enrgy' in run.h5; did you mean energy?
    >>> resolve("y", vs, "run.h5", context="Step#1")
    Traceback (most recent call last):
    ...
    quarry.errors.UnknownVariableError: no variable 'y' in run.h5 under path 'Step#1'
    >>> resolve("x", vs, "run.h5", context="Step#7")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    quarry.errors.UnknownPathError: no group matches path 'Step#7' in run.h5; did you mean ...
    """
    table = _names(variables)
    if name.startswith("/"):
        found = table.by_path.get("/" + "/".join(_components(name)))
        if found is not None:
            return found
        raise UnknownVariableError(name, source, suggest(name, variables))
    ctx = _split_context(context)
    tails = _spellings(name)
    if len(tails[0]) == 1 and (ctx is None or (ctx[0] and _exact(context))):
        # A plain name right inside the root, or inside a group the context
        # names exactly (a series' step, ``/Step#3``): that variable's group
        # holds every other match, so it is the answer, found without a search.
        direct = table.by_path.get("/" + "/".join((*(ctx[1] if ctx else ()), *tails[0])))
        if direct is not None:
            return direct
    matches = _matches(table, tails, ctx)
    if matches:
        tops = _topmost(matches)
        if len(tops) == 1:
            return tops[0][1]
        raise AmbiguousNameError(
            name,
            [info.path for _, info in tops],
            # Spelled only when shown: a series catches this to ask each step.
            lambda: [_spelling_for(parts, table, ctx) for parts, _ in tops],
        )
    if ctx is None:
        raise UnknownVariableError(name, source, suggest(name, variables))
    assert context is not None
    if not any(_context_ends(groups, *ctx) for groups in table.groups):
        raise UnknownPathError(context, source, _suggest_groups(context, table))
    within = [
        info
        for parts, info in (e for entries in table.by_last.values() for e in entries)
        if _context_ends(parts[:-1], *ctx)
    ]
    raise UnknownVariableError(
        name, f"{source} under path {context.strip()!r}", suggest(name, within)
    )


_Match = tuple[tuple[str, ...], VariableInfo]


@functools.lru_cache(maxsize=4096)
def _spellings(name: str) -> tuple[tuple[str, ...], ...]:
    """The component sequences a bare name may mean: as written, and with its
    dots as group separators (``position.x`` is ``position/x``). Kept per
    name: every step of a series spells its names again."""
    tail = _components(name)
    dotted = tuple(q for p in tail for q in p.split(".") if q)
    return (tail,) if dotted == tail or not dotted else (tail, dotted)


def _matches(
    table: _Names,
    tails: Sequence[tuple[str, ...]],
    ctx: tuple[bool, tuple[str, ...]] | None,
) -> list[_Match]:
    """Variables whose path ends with one of ``tails``, under the context."""
    found: dict[str, _Match] = {}
    for tail in tails:
        if ctx is not None and ctx[0] and all(_GLOB.isdisjoint(c) for c in ctx[1]):
            candidates = table.under.get(ctx[1], [])
        else:
            candidates = table.by_last.get(tail[-1] if tail else "", [])
        for parts, info in candidates:
            if len(parts) < len(tail) or parts[len(parts) - len(tail) :] != tail:
                continue
            if ctx is not None and not _context_ends(parts[: len(parts) - len(tail)], *ctx):
                continue
            found[info.path] = (parts, info)
    return list(found.values())


def _topmost(matches: list[_Match]) -> list[_Match]:
    """The matches that no other match's group holds, in file order."""

    # A match's group holds another when it is a prefix of that one's group,
    # shorter by one component at least: looked up by prefix, not pairwise,
    # so 720 steps' matches cost 720 lookups (each of a path's depth).
    groups = {parts[:-1] for parts, _ in matches}
    return [m for m in matches if not any(m[0][:depth] in groups for depth in range(len(m[0]) - 1))]


def _spelling_for(
    parts: tuple[str, ...], table: _Names, ctx: tuple[bool, tuple[str, ...]] | None
) -> str:
    """The shortest name that resolves to the variable at ``parts``: a suffix
    with dots (``position.x``) where its components allow, else in backticks,
    else the full path. A suffix is tried as it would be read back: a dot in
    a group's name (``p.q/x``) also reads as a separator (``p/q/x``)."""
    for k in range(2, len(parts) + 1):
        written = _written(parts[-k:])
        if written.startswith("/"):
            break
        read_back = written[1:-1].replace("``", "`") if written.startswith("`") else written
        tops = _topmost(_matches(table, _spellings(read_back), ctx))
        if len(tops) == 1 and tops[0][0] == parts:
            return written
    return "/" + "/".join(parts)


def _written(tail: tuple[str, ...]) -> str:
    from quarry.expr.parser import tokenize  # the parser decides what a bare name is

    dotted = ".".join(tail)
    if not any("." in p for p in tail):
        try:
            tokens = tokenize(dotted)
        except QuarryError:
            tokens = []
        if len(tokens) == 2 and tokens[0].kind == "name" and tokens[0].text == dotted:
            return dotted
    slashed = "/".join(tail)
    return "`" + slashed.replace("`", "``") + "`"


def matching_groups(variables: Sequence[VariableInfo], context: str) -> list[str]:
    """Full paths of the groups a context (glob) path names, in file order.

    Examples
    --------
    >>> import numpy as np
    >>> f4 = np.dtype("f4")
    >>> vs = [VariableInfo(f"/Step#{s}/{v}", (3,), f4) for s in (0, 1, 10) for v in "xy"]
    >>> matching_groups(vs, "Step#1*")
    ['/Step#1', '/Step#10']
    >>> matching_groups(vs, "nothing")
    []
    """
    ctx = _split_context(context)
    if ctx is None:
        return ["/"]
    seen: dict[str, None] = {}
    for info in variables:
        groups = tuple(p for p in info.path.split("/") if p)[:-1]
        for end in _context_ends(groups, *ctx):
            seen.setdefault("/" + "/".join(groups[:end]), None)
    return list(seen)


def in_context(path: str, context: str | None) -> bool:
    """Whether the variable at full ``path`` lies under the context path.

    Examples
    --------
    >>> in_context("/Step#3/sub/x", "Step#*"), in_context("/Step#3/x", "sub")
    (True, False)
    """
    ctx = _split_context(context)
    if ctx is None:
        return True
    return bool(_context_ends(tuple(p for p in path.split("/") if p)[:-1], *ctx))


def within_context(path: str, context: str | None) -> str | None:
    """The variable at full ``path`` as a path from the first group the
    context names on its way (what a bare name under that context spells);
    None where it does not lie under the context.

    Examples
    --------
    >>> within_context("/Step#3/r/s", "Step#3"), within_context("/Step#3/x", "sub")
    ('/r/s', None)
    """
    ctx = _split_context(context)
    parts = tuple(p for p in path.split("/") if p)
    if ctx is None:
        return "/" + "/".join(parts)
    ends = _context_ends(parts[:-1], *ctx)
    return "/" + "/".join(parts[ends[0] :]) if ends else None


def _suggest_groups(context: str, table: _Names, limit: int = 3) -> list[str]:
    import difflib  # only an error needs it

    pool = sorted({"/".join(g[: i + 1]) for g in table.groups for i in range(len(g))})
    return difflib.get_close_matches(context.strip().strip("/"), pool, n=limit, cutoff=0.6)


def suggest_groups(context: str, variables: Sequence[VariableInfo], limit: int = 3) -> list[str]:
    """The groups of the file closest to a context path that matched none.

    Examples
    --------
    >>> import numpy as np
    >>> vs = [VariableInfo(p, (3,), np.dtype("f4")) for p in ["/Step#0/x", "/Step#1/x"]]
    >>> suggest_groups("Stp#1", vs)
    ['Step#1', 'Step#0']
    """
    return _suggest_groups(context, _names(variables), limit)


def suggest(name: str, variables: Sequence[VariableInfo], limit: int = 3) -> list[str]:
    """The closest variable names (bare when unique in the file, else full paths)."""
    import difflib  # only an error needs it

    bare_counts: dict[str, int] = {}
    for info in variables:
        bare_counts[info.name] = bare_counts.get(info.name, 0) + 1
    labels = {(info.name if bare_counts[info.name] == 1 else info.path): info for info in variables}
    key = name.rsplit("/", 1)[-1] if not name.startswith("/") else name
    # Bare names shared by several variables (one per time step) are offered
    # too: with a context path (``--path Step#3``) they resolve.
    pool = list(labels) + [info.path for info in variables] + list(bare_counts)
    seen: list[str] = []
    # A short name one letter off (``pz`` beside ``px``) scores 0.5: offered too.
    cutoff = 0.5 if len(key) <= 3 else 0.6
    close = difflib.get_close_matches(key, pool, n=limit * 2, cutoff=cutoff)
    for match in [*differing_in_case(key, pool), *close]:
        label = (
            match
            if match in labels or match in bare_counts
            else next((lab for lab, info in labels.items() if info.path == match), match)
        )
        if label not in seen:
            seen.append(label)
    return seen[:limit]


def differing_in_case(name: str, pool: Sequence[str]) -> list[str]:
    """The names of ``pool`` equal to ``name`` but for letter case, which a
    spelling distance misses in short names (``Px`` and ``px`` are only 50 %
    alike to difflib).

    Examples
    --------
    >>> differing_in_case("Px", ["px", "py", "PX", "px"])
    ['px', 'PX']
    """
    folded = name.casefold()
    return list(dict.fromkeys(p for p in pool if p.casefold() == folded and p != name))


def name_list(names: Sequence[str]) -> list[str]:
    """Variable names given to the Python API as a list (or tuple) of
    strings; one string is refused, since iterating it would name each of
    its letters.

    Examples
    --------
    >>> name_list(("energy", "x"))
    ['energy', 'x']
    >>> name_list("energy,x")
    Traceback (most recent call last):
    quarry.errors.UsageError: give the variables as a list of names, e.g. ['energy', 'x'], \
not the string 'energy,x'
    >>> name_list(None)
    Traceback (most recent call last):
    quarry.errors.UsageError: give the variables as a list of names, e.g. ['energy', 'x'] \
(or [] for none), not None
    """
    if isinstance(names, str):
        raise UsageError(
            f"give the variables as a list of names, e.g. ['energy', 'x'], not the string {names!r}"
        )
    if not isinstance(names, Iterable):
        raise UsageError(
            f"give the variables as a list of names, e.g. ['energy', 'x'] (or [] for none), "
            f"not {names!r}"
        )
    listed = list(names)
    wrong = [n for n in listed if not isinstance(n, str)]
    if wrong:
        raise UsageError(f"variable names are strings, not {wrong[0]!r}")
    return listed


def names_to_select(names: Sequence[str]) -> list[str]:
    """:func:`name_list` of the variables a ``select_all`` is given: at least one.

    Examples
    --------
    >>> names_to_select(["x"])
    ['x']
    >>> names_to_select([])
    Traceback (most recent call last):
    quarry.errors.UsageError: select_all: give at least one variable, e.g. ['x', 'y', 'z']
    """
    listed = name_list(names)
    if not listed:
        raise UsageError("select_all: give at least one variable, e.g. ['x', 'y', 'z']")
    return listed
