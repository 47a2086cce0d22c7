"""Batches: many small queries against one open file (or series) and its index.

The index is opened once and its columns stay loaded, and the queries are
answered table by table (:func:`count_table`): those that are one range of
one variable are planned once per shape and counted together
(:mod:`quarry.query.ranges`), in one pass over the column where that is
cheaper than the index: the way to ask hundreds of slices (``0 <= t < 0.1``,
``0.1 <= t < 0.2``, ...) of the same data.

Every query is checked for syntax before any is evaluated; a bad one is a
:class:`~quarry.errors.QuerySyntaxError` naming where it is (``line 7`` of a
batch file, ``query 3`` of a list) with the caret under the bad token. Other
failures raise :class:`~quarry.errors.BatchQueryError` naming the query.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from quarry.errors import BatchQueryError, QuarryError, QuerySyntaxError, SourceError

if TYPE_CHECKING:
    from quarry.formats.base import VariableInfo
    from quarry.query.execute import Executor, Intervals, Table
    from quarry.query.planner import PlannedQuery, Planner
    from quarry.query.ranges import Shapes

T = TypeVar("T")


def parse_batch(text: str) -> list[tuple[int, str]]:
    """(line number, query) of each query in a batch file's text: one query per
    line; blank lines and lines starting with ``#`` are skipped (a ``#`` inside
    a line is part of the query, as in ``/Step#0/x``).

    Examples
    --------
    >>> parse_batch("# slices\\nt < 1\\n\\n  /Step#0/t >= 1  \\n")
    [(2, 't < 1'), (4, '/Step#0/t >= 1')]
    """
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        query = line.strip()
        if query and not query.startswith("#"):
            out.append((number, query))
    return out


def read_batch(path: str) -> list[tuple[int, str]]:
    """(line number, query) of each query in the batch file ``path``; see
    :func:`parse_batch`."""
    try:
        with open(path, encoding="utf-8") as f:
            return parse_batch(f.read())
    except FileNotFoundError:
        raise SourceError(f"no such batch file: {path}") from None
    except UnicodeDecodeError as exc:
        raise BatchQueryError(path, "", QuarryError(f"not a text file ({exc.reason})")) from None


def batch_items(
    queries: Iterable[str], labels: Sequence[str] | None = None
) -> list[tuple[str, str]]:
    """``(where, query)`` for each query: ``where`` is how a failure names it,
    ``labels[k]`` or ``query k+1``.

    Examples
    --------
    >>> batch_items(["t < 1", "t > 2"]), batch_items(["t < 1"], ["line 4"])
    ([('query 1', 't < 1'), ('query 2', 't > 2')], [('line 4', 't < 1')])
    """
    queries = list(queries)
    if labels is None:
        labels = [f"query {k}" for k in range(1, len(queries) + 1)]
    return list(zip(labels, queries, strict=True))


def check_syntax(items: Iterable[tuple[str, str]]) -> None:
    """Parse every ``(where, query)``; the first that does not parse raises
    :class:`QuerySyntaxError` with ``where`` in its message.

    Examples
    --------
    >>> try:
    ...     check_syntax([("line 1", "t < 1"), ("line 2", "t < < 1")])
    ... except QuerySyntaxError as err:
    ...     print(err)
    line 2: expected a value but found '<'
      t < < 1
          ^
    """
    from quarry.expr import parse

    for where, query in items:
        try:
            parse(query)
        except QuerySyntaxError as exc:
            raise QuerySyntaxError(f"{where}: {exc.message}", exc.query, exc.position) from None


def evaluate(
    items: list[tuple[str, str]], answer: Callable[[str], T]
) -> Iterator[tuple[str, str, T]]:
    """``(where, query, answer(query))`` for each item in order, after checking
    them all for syntax; a failure is a :class:`BatchQueryError` naming ``where``."""
    check_syntax(items)
    for where, query in items:
        try:
            result = answer(query)
        except QuerySyntaxError:
            raise
        except QuarryError as exc:
            raise BatchQueryError(where, query, exc) from exc
        yield where, query, result


def count_table(
    planner: Planner,
    executor: Callable[[Table], Executor],
    shapes: Shapes,
    path: str | None,
    fail: Callable[[int, QuarryError], Exception],
) -> list[int]:
    """The count of each query of ``shapes`` in one table (names resolving
    under ``path``), planned by ``planner`` and answered by the executors
    ``executor(table)`` makes. A failure in query ``k`` raises ``fail(k,
    error)`` (a syntax error as it is); a failure counting a group of ranges
    names the group's first query."""
    import numpy as np

    from quarry.query.ranges import plan_ranges

    queries = shapes.queries

    def named(k: int, work: Callable[[], T]) -> T:
        try:
            return work()
        except QuerySyntaxError:
            raise
        except QuarryError as exc:
            raise fail(k, exc) from exc

    def plan(k: int) -> PlannedQuery:
        return named(k, lambda: planner.plan(queries[k], path))

    def batch_plan() -> tuple[list[tuple[VariableInfo, Any, Intervals]], list[int]]:
        ranges, others = plan_ranges(planner, shapes, path, plan, named)
        return [(group.var, *group.arrays()) for group in ranges.values()], others

    by_var, others = planner.batch(tuple(queries), path, batch_plan)
    counts = np.zeros(len(queries), dtype=np.int64)
    for var, positions, intervals in by_var:
        if not len(positions):
            continue  # every range of the group was empty (a NaN mean(t)): 0 each
        ex = executor(planner.table([var]))
        first = int(positions.min())
        counts[positions] = named(first, partial(ex.count_ranges, var, intervals))
    for k in others:
        planned = plan(k)
        counts[k] = named(k, partial(executor(planned.table).count, planned.plan))
    listed: list[int] = counts.tolist()
    return listed
