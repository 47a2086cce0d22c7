"""Many ranges of one variable: planned once per shape, counted in one pass.

A batch such as issue 15's 400 slices ``mean(t) + a <= t && t < mean(t) + b``
of every step of a run differs from query to query only in its numbers.
Queries of one *shape* (:func:`quarry.expr.ast.shape`: the same text up to
its literals) are planned once per member: their names resolved and
aggregates computed once (any mistake raised, named as the first query's),
and every query of the shape planned only in its literals, all at once in
float64 arrays: the same IEEE operations the planner folds one number at a
time (``+ - * /`` and negation), so every bound is bit for bit the one the
planner would make. Where the shape is not one interval of one variable,
its first query is planned in full and the others alone.

Queries whose plan is one range of one variable (however they were planned)
are then counted together (:meth:`quarry.query.execute.Executor.count_ranges`):
through the index, or in one pass over the column when the index would
check more rows than the column holds.

A query stays on its own (planned and counted as any other) where a literal
is an integer (integer arithmetic is exact, float64 is not), where a bound
comes out NaN, or where its plan is not one range.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from quarry.expr.ast import And, Arith, BinOp, Compare, Cond, Literal, Neg, Num, Var
from quarry.expr.ast import variables as named_in
from quarry.expr.keys import KEY_DTYPES, key_kind
from quarry.expr.plan import (
    ARITH,
    FLIP,
    RangeLeaf,
    as_float,
    everything,
    float_interval,
    resolved_arith,
    ufunc,
)
from quarry.query.execute import Intervals
from quarry.records import field, record, replace

if TYPE_CHECKING:
    import numpy.typing as npt

    from quarry.formats.base import VariableInfo
    from quarry.query.planner import PlannedQuery, Planner

#: The operations float64 arrays compute bit for bit as the planner folds
#: scalars (``**`` and functions may differ between scalar and array loops).
_EXACT_OPS = frozenset("+-*/")


@record(frozen=False)
class Ranges:
    """Intervals of one variable, one per query of a batch (``queries``
    holds their positions in it), gathered in pieces and read as arrays in
    the variable's key domain."""

    var: VariableInfo
    pieces: list[tuple[Any, ...]] = field(default_factory=list)
    """``(queries, lo, lo_incl, hi, hi_incl, empty)``, each a sequence."""

    def add(self, query: int, leaf: RangeLeaf) -> None:
        iv = leaf.interval
        if iv.empty:  # its bounds may lie outside the domain (x < 0 of a uint)
            iv = replace(everything(iv.kind), empty=True)
        self.pieces.append(([query], [iv.lo], [iv.lo_incl], [iv.hi], [iv.hi_incl], [iv.empty]))

    def arrays(self) -> tuple[npt.NDArray[np.int64], Intervals]:
        """The queries' positions and their intervals, in the order added."""
        dtype = KEY_DTYPES[key_kind(self.var.dtype)]
        columns = list(zip(*self.pieces, strict=True))

        def joined(column: tuple[Any, ...], kind: Any) -> npt.NDArray[Any]:
            return np.concatenate([np.asarray(part, dtype=kind) for part in column])

        kinds = (np.int64, dtype, bool, dtype, bool, bool)
        queries, lo, lo_incl, hi, hi_incl, empty = map(joined, columns, kinds)
        return queries, Intervals(lo, lo_incl, hi, hi_incl, empty)


@record(frozen=False)
class _Group:
    """Queries of one shape in a batch: the first, those whose literals are
    all floats (re-planned in their literals; the first among them where its
    literals are floats too), and the rest (planned alone)."""

    first: int
    cond: Cond
    numbers: tuple[Literal, ...]
    rest: list[int] = field(default_factory=list)
    literals: list[list[float]] = field(default_factory=list)
    alone: list[int] = field(default_factory=list)
    matrix: npt.NDArray[np.float64] = field(default_factory=lambda: np.empty((0, 0)))
    """``literals`` as an array, one row per query of ``rest``."""

    @property
    def first_floats(self) -> bool:
        """Whether the first query's literals are all floats, as ``rest``'s are."""
        return all(type(n.value) is float for n in self.numbers)


class Shapes:
    """A batch's queries grouped by shape, once for every member it is
    planned in.

    Examples
    --------
    >>> shapes = Shapes(["t < 1.5", "t < 2.5", "x > 0", "t < 3"])
    >>> [(g.first, g.rest, g.alone) for g in shapes.groups]
    [(0, [0, 1], [3]), (2, [], [])]
    """

    def __init__(self, queries: Sequence[str]) -> None:
        from quarry.query.planner import parse_cached

        self.queries = list(queries)
        by_shape: dict[Hashable, _Group] = {}
        for k, query in enumerate(self.queries):
            parsed = parse_cached(query)
            key, numbers = parsed.shape
            group = by_shape.get(key)
            if group is None:
                group = by_shape[key] = _Group(k, parsed.cond, numbers)
            if group.first == k and not group.first_floats:
                continue
            if all(type(n.value) is float for n in numbers):
                group.rest.append(k)
                group.literals.append([n.value for n in numbers])
            else:
                group.alone.append(k)
        self.groups = list(by_shape.values())
        for group in self.groups:
            group.matrix = np.array(group.literals, dtype=np.float64)


def plan_ranges(
    planner: Planner,
    shapes: Shapes,
    path: str | None,
    plan: Callable[[int], PlannedQuery],
    named: Callable[[int, Callable[[], Any]], Any],
) -> tuple[dict[str, Ranges], list[int]]:
    """Each query of the batch that is one range of one variable, grouped by
    variable, and the positions of the others. ``plan(k)`` plans query ``k``
    in full (raising what planning it raises, named as the caller wishes),
    and ``named(k, work)`` runs the planning of a shape whose first query is
    ``k`` (raising its mistakes named so); shapes are planned in the order
    they first appear, so the mistake raised is the first query's that has
    one (a mistake is in the shape: in names, not numbers). A shape that is
    not one interval has its first query planned in full, and every query
    that cannot be re-planned in its literals is planned alone."""
    ranges: dict[str, Ranges] = {}
    others: list[int] = []

    def planned_alone(k: int) -> None:
        leaf = plan(k).plan
        if isinstance(leaf, RangeLeaf) and leaf.var.subarray is None:
            ranges.setdefault(leaf.var.key, Ranges(leaf.var)).add(k, leaf)
        else:
            others.append(k)

    for group in shapes.groups:
        first, alone = group.first, group.alone
        others_of_shape = [k for k in group.rest if k != first]
        form: _Form | None = None
        if others_of_shape:
            form = named(first, partial(_interval_shape, planner, group, path))
        if form is None or not group.first_floats:
            planned_alone(first)
        if form is not None:
            query = shapes.queries[first]
            bound = partial(_bound, planner, form, group, ranges, query, path)
            alone = named(first, bound) + alone
        else:
            alone = others_of_shape + alone
        for k in alone:
            planned_alone(k)
    others.sort()
    return ranges, others


@record(frozen=False)
class _Form:
    """A shape whose queries are each one interval of ``var``."""

    var: VariableInfo
    compares: list[tuple[str, Arith]]
    """Each comparison as ``var op side``."""


def _interval_shape(planner: Planner, group: _Group, path: str | None) -> _Form | None:
    """The shape of ``cond`` if its queries are each one interval of one
    float variable read as stored: comparisons (under one ``&&``) of one
    unsubscripted variable with sides of numbers and aggregates joined by
    ``+ - * /``."""
    cond = group.cond
    items = cond.items if isinstance(cond, And) else (cond,)
    compares: list[tuple[str, Arith]] = []
    name = None
    for item in items:
        if not isinstance(item, Compare) or item.op not in FLIP or item.op == "!=":
            return None
        op, left, right = item.op, item.left, item.right
        if isinstance(right, Var) and not isinstance(left, Var):
            op, left, right = FLIP[op], right, left
        if not isinstance(left, Var) or left.index is not None or (name or left.name) != left.name:
            return None
        if named_in(right, in_aggregates=False) or not _float_arithmetic(right):
            return None
        name = left.name
        compares.append((op, right))
    if name is None:
        return None
    var = planner.variable(Var(name, 0), path)
    if key_kind(var.dtype) != "f64" or (planner.factor is not None and planner.factor(var)):
        return None
    return _Form(var, compares)


def _float_arithmetic(node: Arith) -> bool:
    """Whether ``node`` is numbers and aggregates joined by the operations
    float64 arrays compute exactly as the planner's scalars do."""
    match node:
        case Num():
            return True
        case Neg(operand=x):
            return _float_arithmetic(x)
        case BinOp(op=op, left=left, right=right):
            return op in _EXACT_OPS and _float_arithmetic(left) and _float_arithmetic(right)
    return not named_in(node, in_aggregates=False)  # an aggregate: one number


def _bound(
    planner: Planner,
    form: _Form,
    group: _Group,
    ranges: dict[str, Ranges],
    query: str,
    path: str | None,
) -> list[int]:
    """Add the intervals of the group's re-planned queries to ``ranges``;
    return those whose bounds came out NaN (planned alone: a comparison
    with NaN is unknown, not a range)."""
    numbers = group.matrix
    slots = {id(n.node): j for j, n in enumerate(group.numbers)}
    n = len(group.rest)
    lo: Any = np.full(n, -math.inf)
    hi: Any = np.full(n, math.inf)
    lo_incl: Any = np.ones(n, dtype=bool)
    hi_incl: Any = np.ones(n, dtype=bool)
    unknown = np.zeros(n, dtype=bool)

    def constant(node: Arith) -> int | float:
        by_key: dict[str, VariableInfo] = {}

        def resolve(var: Var) -> VariableInfo:
            info = planner.variable(var, path)
            by_key[info.key] = info
            return info

        folded = resolved_arith(node, resolve, query, planner.aggregator(by_key))
        assert isinstance(folded, Num), folded
        return folded.value

    for op, side in form.compares:
        bound = _values(side, numbers, slots, constant)
        if isinstance(bound, np.ndarray):
            unknown |= np.isnan(bound)
            b_lo, b_lo_incl, b_hi, b_hi_incl = _float_bounds(op, bound)
        else:  # the same number in every query: the planner's own interval
            iv = float_interval(op, bound)
            if iv is None:
                unknown[:] = True
                continue
            b_lo, b_lo_incl, b_hi, b_hi_incl = iv.lo, iv.lo_incl, iv.hi, iv.hi_incl
        # Interval.intersect row by row: the higher start (exclusive on a
        # tie), the lower end (exclusive on a tie).
        take = (b_lo > lo) | ((b_lo == lo) & ~np.asarray(b_lo_incl))
        lo, lo_incl = np.where(take, b_lo, lo), np.where(take, b_lo_incl, lo_incl)
        take = (b_hi < hi) | ((b_hi == hi) & ~np.asarray(b_hi_incl))
        hi, hi_incl = np.where(take, b_hi, hi), np.where(take, b_hi_incl, hi_incl)
    empty = (lo > hi) | ((lo == hi) & ~(lo_incl & hi_incl))
    known = ~unknown
    rest = np.asarray(group.rest, dtype=np.int64)
    piece = (rest[known], lo[known], lo_incl[known], hi[known], hi_incl[known], empty[known])
    ranges.setdefault(form.var.key, Ranges(form.var)).pieces.append(piece)
    return [int(k) for k in rest[unknown]]


def _float_bounds(
    op: str, bound: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64] | float, bool, npt.NDArray[np.float64] | float, bool]:
    """:func:`quarry.expr.plan.float_interval` of float64 bounds (each
    exactly itself): ``lo, lo_incl, hi, hi_incl``."""
    if op == "==":
        return bound, True, bound, True
    if op in (">", ">="):
        return bound, op == ">=", math.inf, True
    return -math.inf, True, bound, op == "<="


def _f64(x: npt.NDArray[np.float64] | int | float) -> npt.NDArray[np.float64] | np.float64:
    """A scalar operand as the planner's ``_apply`` takes it (``as_float``)."""
    return x if isinstance(x, np.ndarray) else np.float64(as_float(x))


def _values(
    node: Arith,
    numbers: npt.NDArray[np.float64],
    slots: dict[int, int],
    constant: Callable[[Arith], int | float],
) -> Any:
    """``node`` computed for every query at once: the literal in slot ``j``
    is column ``j`` of ``numbers``; a part without literals is one number
    (``constant``). A module function: a recursive closure is a reference
    cycle, left to the cyclic collector once per member."""
    match node:
        case Num() | Neg() if id(node) in slots:
            return numbers[:, slots[id(node)]]
        case Neg(operand=x) if _has_slot(x, slots):
            return -_values(x, numbers, slots, constant)
        case BinOp(op=op, left=a, right=b) if _has_slot(node, slots):
            left, right = (_values(x, numbers, slots, constant) for x in (a, b))
            with np.errstate(all="ignore"):
                return ufunc(ARITH[op])(_f64(left), _f64(right))
    return constant(node)


def _has_slot(node: Arith, slots: dict[int, int]) -> bool:
    if id(node) in slots:
        return True
    match node:
        case Neg(operand=x):
            return _has_slot(x, slots)
        case BinOp(left=a, right=b):
            return _has_slot(a, slots) or _has_slot(b, slots)
    return False
