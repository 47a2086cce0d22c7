"""Syntax tree -> plan: what the executor evaluates.

Comparisons of one variable with a number become :class:`RangeLeaf` nodes with
an exact interval in the variable's key domain (float64 for floats, int64 or
uint64 for integers); these are what an index answers. Every other
comparison becomes a :class:`ScanLeaf`, evaluated in float64 on the rows that
can still matter. Ranges on the same variable under one AND are merged, so
``1.5 < energy < 1.6`` is a single index lookup.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from quarry.errors import QuerySyntaxError
from quarry.expr.ast import (
    And,
    Arith,
    BinOp,
    Call,
    Compare,
    Cond,
    Neg,
    Not,
    Num,
    Or,
    Var,
    is_aggregate,
)
from quarry.expr.keys import INTEGER_RANGES, key_kind
from quarry.formats.base import VariableInfo
from quarry.records import record, replace

if TYPE_CHECKING:
    from fractions import Fraction

    import numpy as np
    import numpy.typing as npt

Number = int | float
_I64 = INTEGER_RANGES["i64"]
_U64 = INTEGER_RANGES["u64"]


@record
class Interval:
    """``lo (<|<=) x (<|<=) hi`` in one key domain; ``empty`` matches nothing."""

    kind: str
    lo: Number
    lo_incl: bool
    hi: Number
    hi_incl: bool
    empty: bool = False

    def mask(self, values: npt.NDArray[np.generic]) -> npt.NDArray[np.bool_]:
        """Exact membership of stored values (missing values are not members)."""
        import numpy as np

        from quarry.expr.keys import KEY_DTYPES

        keys = values.astype(KEY_DTYPES[self.kind], copy=False)
        if self.empty:
            return np.zeros(keys.shape, dtype=bool)
        above = keys >= self.lo if self.lo_incl else keys > self.lo
        below = keys <= self.hi if self.hi_incl else keys < self.hi
        return np.asarray(above & below)

    def text(self, name: str) -> str:
        """The interval as a condition on ``name``, as ``--explain`` shows it.

        Examples
        --------
        >>> Interval("f64", 1.5, False, 1.6, True).text("/e"), everything("i64").text("/n")
        ('1.5 < /e <= 1.6', '/n is not missing')
        >>> float_interval(">", 2.0).text("/e"), Interval("i64", 3, True, 3, True).text("/n")
        ('/e > 2.0', '/n == 3')
        """
        whole = everything(self.kind)
        if self.empty:
            return f"{name} matches nothing"
        if self.lo == self.hi:
            return f"{name} == {self.lo!r}"
        low = not (self.lo == whole.lo and self.lo_incl)
        high = not (self.hi == whole.hi and self.hi_incl)
        left = f"{self.lo!r} {'<=' if self.lo_incl else '<'} " if low else ""
        right = f" {'<=' if self.hi_incl else '<'} {self.hi!r}" if high else ""
        if low and not high:
            return f"{name} {'>=' if self.lo_incl else '>'} {self.lo!r}"
        return f"{left}{name}{right}" if low or high else f"{name} is not missing"

    def intersect(self, other: Interval) -> Interval:
        if self.empty or other.empty:
            return replace(self, empty=True)
        if other.lo > self.lo or (other.lo == self.lo and not other.lo_incl):
            lo, lo_incl = other.lo, other.lo_incl
        else:
            lo, lo_incl = self.lo, self.lo_incl
        if other.hi < self.hi or (other.hi == self.hi and not other.hi_incl):
            hi, hi_incl = other.hi, other.hi_incl
        else:
            hi, hi_incl = self.hi, self.hi_incl
        empty = lo > hi or (lo == hi and not (lo_incl and hi_incl))
        return Interval(self.kind, lo, lo_incl, hi, hi_incl, empty)


@record
class RangeLeaf:
    var: VariableInfo
    interval: Interval


@record
class ScanLeaf:
    """``left op right`` over arbitrary arithmetic, evaluated in float64."""

    op: str
    left: Arith
    right: Arith
    variables: tuple[VariableInfo, ...]


@record
class Const:
    """True, False, or None (unknown) for every row."""

    value: bool | None


@record
class AndNode:
    items: tuple[PlanNode, ...]


@record
class OrNode:
    items: tuple[PlanNode, ...]


@record
class NotNode:
    operand: PlanNode


PlanNode = RangeLeaf | ScanLeaf | Const | AndNode | OrNode | NotNode

#: Each comparison with its sides swapped (``1 < x`` is ``x > 1``).
FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def as_float(value: Number) -> float:
    """A number as float64, integers too large for it becoming +-inf.

    Examples
    --------
    >>> as_float(10**400)
    inf
    """
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def everything(kind: str) -> Interval:
    """The interval holding every non-missing value of a key domain."""
    if kind == "f64":
        return Interval(kind, -math.inf, True, math.inf, True)
    lo, hi = _I64 if kind == "i64" else _U64
    return Interval(kind, lo, True, hi, True)


def float_interval(op: str, literal: Number) -> Interval | None:
    """Interval of float64 values ``x`` with ``x op literal``, compared exactly.

    A literal that is not a float64 (a huge integer) is compared exactly too.
    Returns None for a NaN literal (every comparison with it is unknown).

    Examples
    --------
    >>> float_interval(">", 2**53 + 1)  # no float64 lies between 2**53 and 2**53+1
    Interval(kind='f64', lo=9007199254740992.0, lo_incl=False, hi=inf, hi_incl=True, empty=False)
    """
    f = as_float(literal)
    if math.isnan(f):
        return None
    inf = math.inf
    exact, below = f == literal, f < literal
    if op == "==":
        return Interval("f64", f, True, f, True, empty=not exact)
    if op in (">", ">="):
        incl = (op == ">=" and exact) or (not exact and not below)
        return Interval("f64", f, incl, inf, True)
    incl = (op == "<=" and exact) or (not exact and below)
    return Interval("f64", -inf, True, f, incl)


def int_interval(op: str, literal: Number | Fraction, kind: str) -> Interval | None:
    """Interval of integers ``x`` with ``x op literal``, exact for any literal.

    Examples
    --------
    >>> int_interval(">", 2.5, "i64")
    Interval(kind='i64', lo=3, lo_incl=True, hi=9223372036854775807, hi_incl=True, empty=False)
    >>> int_interval("<", 0, "u64").empty
    True
    """
    if isinstance(literal, float) and math.isnan(literal):
        return None
    lo_dom, hi_dom = _I64 if kind == "i64" else _U64
    lo, hi = lo_dom, hi_dom
    if isinstance(literal, float) and math.isinf(literal):
        if (op in (">", ">=")) == (literal > 0) or op == "==":
            return Interval(kind, lo, True, hi, True, empty=True)
        return Interval(kind, lo, True, hi, True)
    floor, ceil = math.floor(literal), math.ceil(literal)
    if op == ">":
        lo = floor + 1
    elif op == ">=":
        lo = ceil
    elif op == "<":
        hi = ceil - 1
    elif op == "<=":
        hi = floor
    else:  # ==
        if floor != ceil:
            return Interval(kind, lo_dom, True, hi_dom, True, empty=True)
        lo = hi = floor
    lo, hi = max(lo, lo_dom), min(hi, hi_dom)
    return Interval(kind, lo, True, hi, True, empty=lo > hi)


def fold(node: Arith, values: Mapping[int, Number] | None = None) -> Arith:
    """Fold arithmetic on constants (``2*3``, ``-1e-3``) into numbers; an
    aggregate call whose value ``values`` holds (by the call's ``id``) is
    that number, as :func:`resolved_arith` makes it."""
    if values is not None and id(node) in values:
        return Num(values[id(node)], node.pos)
    match node:
        case Neg(operand=x):
            x = fold(x, values)
            if isinstance(x, Num):
                return Num(-x.value, node.pos, -x.exact if x.exact is not None else None)
            return Neg(x, node.pos)
        case BinOp(op=op, left=left, right=right):
            left, right = fold(left, values), fold(right, values)
            if isinstance(left, Num) and isinstance(right, Num):
                return Num(_apply(op, left.value, right.value), node.pos)
            return BinOp(op, left, right, node.pos)
        case Call(func=func, args=args):
            folded = tuple(fold(a, values) for a in args)
            if all(isinstance(a, Num) for a in folded):
                import numpy as np

                vals = [as_float(a.value) for a in folded if isinstance(a, Num)]
                with np.errstate(all="ignore"):
                    return Num(float(ufunc(FUNCS[func])(*vals)), node.pos)
            return Call(func, folded, node.pos)
    return node


#: Integer literals fold exactly while the result fits in this many bits;
#: beyond, float64 gives +-inf, which compares the same with every stored
#: value, and hostile text (``9**9**9``) cannot build a gigantic integer.
_EXACT_BITS = 4096


def _apply(op: str, a: Number, b: Number) -> Number:
    """``a op b`` for two folded literals: exact for integers (``2**53 + 1``
    compares exactly with an int64 column), float64 otherwise.

    Examples
    --------
    >>> _apply("+", _apply("**", 2, 53), 1), _apply("**", 9, 9**9), _apply("**", 2, -1)
    (9007199254740993, inf, 0.5)
    """
    if isinstance(a, int) and isinstance(b, int):
        exact = _exact_int(op, a, b)
        if exact is not None:
            return exact
    x, y = as_float(a), as_float(b)
    # Python's float arithmetic is float64's, rounded as NumPy's (IEEE 754),
    # at a fraction of the cost; NumPy keeps what Python raises on (x / 0).
    if op in _PYTHON_OPS and (op != "/" or y != 0.0):
        return _PYTHON_OPS[op](x, y)
    import numpy as np

    with np.errstate(all="ignore"):
        return float(ufunc(ARITH[op])(np.float64(x), np.float64(y)))


#: The operators Python computes on floats exactly as float64 does.
_PYTHON_OPS: dict[str, Callable[[float, float], float]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
}


def _exact_int(op: str, a: int, b: int) -> int | None:
    """``a op b`` as an exact integer, or None where float64 must do it
    (``/``, negative powers, results past :data:`_EXACT_BITS`)."""
    if op in "+-":  # at most one bit longer than the longer operand
        return a + b if op == "+" else a - b
    if op == "*":
        return a * b if a.bit_length() + b.bit_length() <= _EXACT_BITS else None
    if op == "**" and b >= 0:
        return a**b if abs(a) <= 1 or a.bit_length() * b <= _EXACT_BITS else None
    return None


#: The NumPy ufunc (its name) of each arithmetic operator and function:
#: NumPy is imported only when constants are folded (see :mod:`quarry`).
ARITH = {"+": "add", "-": "subtract", "*": "multiply", "/": "true_divide", "**": "power"}
FUNCS = {
    "sqrt": "sqrt",
    "abs": "abs",
    "exp": "exp",
    "log": "log",
    "log10": "log10",
    # NaN-propagating, as the core's scan: max(a, nan) > 1 is unknown.
    "min": "minimum",
    "max": "maximum",
}


def ufunc(name: str) -> Callable[..., npt.NDArray[np.float64]]:
    """NumPy's ufunc ``name`` (a value of :data:`ARITH` or :data:`FUNCS`)."""
    import numpy as np

    ufunc: Callable[..., npt.NDArray[np.float64]] = getattr(np, name)
    return ufunc


#: Computes an aggregate (``"mean"``, ...) of resolved arithmetic.
Aggregate = Callable[[str, Arith], Number]


def compile_plan(
    cond: Cond,
    resolve: Callable[[Var], VariableInfo],
    query: str = "",
    aggregate: Aggregate | None = None,
    factor: Callable[[VariableInfo], float | None] | None = None,
) -> PlanNode:
    """Turn a parsed condition into a plan, resolving every name. Aggregates
    (``mean(x)``) are computed through ``aggregate`` and become numbers, so
    ``x > mean(x)`` is an index lookup like ``x > 1.5``.

    ``factor`` gives the number a variable's stored values are multiplied by
    to become the values the query means (openPMD's ``unitSI`` under
    ``si=True``), None for none: arithmetic and aggregates then see
    ``x * factor`` in float64, and a comparison of ``x`` with a number
    becomes the exact range of stored values it holds for (see
    :mod:`quarry.expr.scaled`), still an index lookup."""

    return _Compiler(resolve, query, aggregate, factor).build(cond)


def compile_known(
    cond: Cond,
    known: Mapping[int, Arith],
    resolve: Callable[[Var], VariableInfo],
    factor: Callable[[VariableInfo], float | None] | None = None,
) -> PlanNode:
    """:func:`compile_plan` of ``cond`` whose comparisons' sides are already
    resolved (as :func:`resolved_arith` makes them): ``known[id(side)]``.
    What a plan made in one member of a series re-derives in another from
    that member's variables and aggregate values (see
    :mod:`quarry.query.planner`): the same ranges, merges and constants."""
    return _Compiler(resolve, "", None, factor, known).build(cond)


class _Compiler:
    """What :func:`compile_plan` compiles with. A class, not nested functions:
    a recursive closure is a reference cycle, and 720 members planned one
    after another would leave 16,000 objects for the cyclic collector."""

    def __init__(
        self,
        resolve: Callable[[Var], VariableInfo],
        query: str,
        aggregate: Aggregate | None,
        factor: Callable[[VariableInfo], float | None] | None,
        known: Mapping[int, Arith] | None = None,
    ) -> None:
        self.resolve = resolve
        self.query = query
        self.aggregate = aggregate
        self.factor = factor
        self.known = known

    def scale(self, node: Arith) -> Arith:
        factor, resolve = self.factor, self.resolve
        if factor is None:
            return node
        from quarry.expr.scaled import scaled

        return scaled(node, lambda v: factor(resolve(v)))

    def arith(self, node: Arith) -> Arith:
        if self.known is not None:
            return self.known[id(node)]
        return resolved_arith(node, self.resolve, self.query, self.aggregate, self.factor)

    def build(self, node: Cond) -> PlanNode:
        resolve, factor, build = self.resolve, self.factor, self.build
        match node:
            case Not(operand=x):
                return NotNode(build(x))
            case Or(items=items):
                return merge_or(OrNode(tuple(build(x) for x in items)))
            case And(items=items):
                return merge_ranges(AndNode(tuple(build(x) for x in items)))
            case Compare(op=op, left=left, right=right):
                left, right = self.arith(left), self.arith(right)
                if isinstance(left, Num) and isinstance(right, Var):
                    left, right, op = right, left, FLIP[op]
                if isinstance(left, Var) and isinstance(right, Num):
                    var = resolve(left)
                    by = factor(var) if factor is not None else None
                    if by is not None:
                        from quarry.expr.scaled import scaled_range_leaf

                        return scaled_range_leaf(var, op, right.value, by)
                    exact = right.exact if right.exact is not None else right.value
                    return range_leaf(var, op, exact if var.dtype.kind in "iu" else right.value)
                if isinstance(left, Num) and isinstance(right, Num):
                    return Const(_compare_numbers(op, left.value, right.value))
                left, right = self.scale(left), self.scale(right)
                variables = tuple(
                    {resolve(v).key: resolve(v) for v in _vars(left) + _vars(right)}.values()
                )
                return ScanLeaf(op, left, right, variables)
        raise QuerySyntaxError("unsupported expression", self.query, getattr(node, "pos", 0))


def resolved_arith(
    node: Arith,
    resolve: Callable[[Var], VariableInfo],
    query: str = "",
    aggregate: Aggregate | None = None,
    factor: Callable[[VariableInfo], float | None] | None = None,
) -> Arith:
    """``node`` as :func:`compile_plan` compares it: names resolved to full
    paths, aggregates computed, values scaled by ``factor``, constants
    folded (a side with no row variables becomes one :class:`Num`)."""
    if factor is None:
        return fold(_resolved(node, resolve, aggregate, query))
    from quarry.expr.scaled import scaled

    def scale(x: Arith) -> Arith:
        return scaled(x, lambda v: factor(resolve(v)))

    return fold(_resolved(node, resolve, aggregate, query, scale))


def _resolved(
    node: Arith,
    resolve: Callable[[Var], VariableInfo],
    aggregate: Aggregate | None,
    query: str,
    scale: Callable[[Arith], Arith] = lambda node: node,
) -> Arith:
    """``node`` with every name replaced by its variable's full path and
    every aggregate by its value (of the values ``scale`` makes of it)."""

    def inner(x: Arith) -> Arith:
        return _resolved(x, resolve, aggregate, query, scale)

    match node:
        case Var():
            return Var(resolve(node).key, node.pos)
        case Neg(operand=x):
            return Neg(inner(x), node.pos)
        case BinOp(op=op, left=a, right=b):
            return BinOp(op, inner(a), inner(b), node.pos)
        case Call(func=func, args=(arg,)) if is_aggregate(node):
            over = fold(inner(arg))
            if isinstance(over, Num):
                raise QuerySyntaxError(f"{func}() needs a variable to aggregate", query, node.pos)
            if aggregate is None:
                raise QuerySyntaxError(f"{func}() needs a data set to compute", query, node.pos)
            return Num(aggregate(func, scale(over)), node.pos)
        case Call(func=func, args=args):
            return Call(func, tuple(inner(a) for a in args), node.pos)
    return node


def _vars(node: Arith) -> list[Var]:
    from quarry.expr.ast import variables

    return variables(node)


def _compare_numbers(op: str, a: Number, b: Number) -> bool | None:
    if any(isinstance(x, float) and math.isnan(x) for x in (a, b)):
        return None
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[op]


def range_leaf(var: VariableInfo, op: str, literal: Number | Fraction) -> PlanNode:
    """``var op literal`` as one or two range leaves (``!=`` is ``<`` or ``>``)."""
    if op == "!=":
        return OrNode((range_leaf(var, "<", literal), range_leaf(var, ">", literal)))
    kind = key_kind(var.dtype)
    if kind == "f64":
        # A Fraction (an integer literal's exact value) compares as its float.
        iv = float_interval(op, literal if isinstance(literal, int | float) else float(literal))
    else:
        iv = int_interval(op, literal, kind)
    if iv is None:
        return Const(None)
    return RangeLeaf(var, iv)


def merge_ranges(node: AndNode) -> PlanNode:
    """Intersect the ranges on each variable under one AND (a range, or an OR
    of ranges on that variable alone, as ``x != 3`` is); other items stay.

    Exact under three-valued logic: every range on a variable is unknown on
    the same rows (the variable's missing values), so merging them changes no
    row's truth value. The intersection is taken as the complement of the
    union of complements, one sort however many items: a 3,000-term
    ``x != 1 && x != 2 && ...`` plans in milliseconds into two ranges. A
    nested AND (already merged) is spread into this one.
    """
    sets: dict[str, tuple[VariableInfo, list[list[Interval]]]] = {}
    others: list[PlanNode] = []
    # AND is associative: ``(a && b) && c`` is one box, as ``a && b && c`` is.
    flat = [
        x for item in node.items for x in (item.items if isinstance(item, AndNode) else (item,))
    ]
    for item in flat:
        ranges = _ranges_of_one_variable(item)
        if ranges is None:
            others.append(item)
        else:
            sets.setdefault(ranges[0].key, (ranges[0], []))[1].append(ranges[1])
    items: list[PlanNode] = []
    for var, interval_sets in sets.values():
        if len(interval_sets) == 1:
            kept = interval_sets[0]
        elif all(len(ivs) == 1 for ivs in interval_sets):  # 1.5 < energy < 1.6
            kept = [functools.reduce(Interval.intersect, (ivs[0] for ivs in interval_sets))]
        else:
            kind = key_kind(var.dtype)
            outside = [iv for ivs in interval_sets for iv in complement(ivs, kind)]
            kept = complement(union(outside), kind)
        items.append(_ranges_node(var, kept))
    items.extend(others)
    return items[0] if len(items) == 1 else AndNode(tuple(items))


def merge_or(node: OrNode) -> PlanNode:
    """Unite the ranges on each variable under one OR into disjoint ranges
    (``x == 1 || x == 2 || x == 3`` is one range); exact for the reason
    :func:`merge_ranges` gives."""
    flat: list[PlanNode] = []
    for item in node.items:
        flat.extend(item.items if isinstance(item, OrNode) else (item,))
    ranges: dict[str, tuple[VariableInfo, list[Interval]]] = {}
    items: list[PlanNode] = []
    for item in flat:
        if isinstance(item, RangeLeaf):
            ranges.setdefault(item.var.key, (item.var, []))[1].append(item.interval)
        else:
            items.append(item)
    merged: list[PlanNode] = []
    for var, intervals in ranges.values():
        united = _ranges_node(var, union(intervals))
        merged.extend(united.items if isinstance(united, OrNode) else (united,))
    items[:0] = merged
    return items[0] if len(items) == 1 else OrNode(tuple(items))


def _ranges_of_one_variable(item: PlanNode) -> tuple[VariableInfo, list[Interval]] | None:
    """A range, or an OR of ranges on one variable, as (variable, intervals)."""
    if isinstance(item, RangeLeaf):
        return item.var, [item.interval]
    if isinstance(item, OrNode) and all(isinstance(x, RangeLeaf) for x in item.items):
        leaves = [x for x in item.items if isinstance(x, RangeLeaf)]
        if len({leaf.var.key for leaf in leaves}) == 1:
            return leaves[0].var, [leaf.interval for leaf in leaves]
    return None


def _ranges_node(var: VariableInfo, intervals: list[Interval]) -> PlanNode:
    if not intervals:  # false on every value, unknown where missing
        return RangeLeaf(var, replace(everything(key_kind(var.dtype)), empty=True))
    leaves = tuple(RangeLeaf(var, iv) for iv in intervals)
    return leaves[0] if len(leaves) == 1 else OrNode(leaves)


def union(intervals: list[Interval]) -> list[Interval]:
    """The union as sorted, disjoint, non-touching intervals.

    Examples
    --------
    >>> pts = [Interval("i64", v, True, v, True) for v in (3, 1, 2, 7)]
    >>> [(iv.lo, iv.hi) for iv in union(pts)]
    [(1, 3), (7, 7)]
    >>> half = [Interval("f64", 0.0, True, 1.0, False), Interval("f64", 1.0, True, 2.0, False)]
    >>> [(iv.lo, iv.hi, iv.hi_incl) for iv in union(half)]
    [(0.0, 2.0, False)]
    >>> union([float_interval("<", -math.inf), float_interval("<", 0.0)])  # the first is empty
    [Interval(kind='f64', lo=-inf, lo_incl=True, hi=0.0, hi_incl=False, empty=False)]
    """
    closed = (_closed(iv) for iv in intervals)
    live = sorted((iv for iv in closed if not iv.empty), key=lambda iv: (iv.lo, not iv.lo_incl))
    out: list[Interval] = []
    for iv in live:
        if out and _meets(out[-1], iv):
            last = out[-1]
            if (iv.hi, iv.hi_incl) > (last.hi, last.hi_incl):
                out[-1] = replace(last, hi=iv.hi, hi_incl=iv.hi_incl)
        else:
            out.append(iv)
    return out


def complement(intervals: list[Interval], kind: str) -> list[Interval]:
    """The values of the key domain (missing ones aside) in none of the sorted,
    disjoint ``intervals`` (as :func:`union` returns them)."""
    domain = everything(kind)
    out: list[Interval] = []
    lo, lo_incl = domain.lo, True
    for iv in union(intervals):
        out.append(Interval(kind, lo, lo_incl, iv.lo, not iv.lo_incl))
        lo, lo_incl = iv.hi, not iv.hi_incl
    out.append(Interval(kind, lo, lo_incl, domain.hi, True))
    return [iv for iv in map(_closed, out) if not iv.empty]


def _closed(iv: Interval) -> Interval:
    """Integer intervals with inclusive ends (``x > 2`` is ``x >= 3``); float
    intervals as they are. Either is marked empty when nothing lies inside."""
    lo, lo_incl, hi, hi_incl = iv.lo, iv.lo_incl, iv.hi, iv.hi_incl
    if iv.kind != "f64":
        lo, hi = (lo if lo_incl else lo + 1), (hi if hi_incl else hi - 1)
        lo_incl = hi_incl = True
    empty = iv.empty or lo > hi or (lo == hi and not (lo_incl and hi_incl))
    return Interval(iv.kind, lo, lo_incl, hi, hi_incl, empty)


def _meets(a: Interval, b: Interval) -> bool:
    """Whether ``b`` (starting no earlier than ``a``) overlaps or touches ``a``."""
    if b.lo < a.hi or (b.lo == a.hi and (a.hi_incl or b.lo_incl)):
        return True
    return a.kind != "f64" and b.lo == a.hi + 1
