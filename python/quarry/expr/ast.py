"""Query syntax tree. Every node keeps the position of its first token so errors
found after parsing (an unknown name, a type mismatch) can still point at it."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, NamedTuple

from quarry.records import field, record

if TYPE_CHECKING:
    from fractions import Fraction

Number = int | float


@record
class Num:
    value: Number
    pos: int
    exact: Fraction | None = field(default=None, compare=False, repr=False)
    """The literal's exact decimal value when ``value`` (a float64) rounds it:
    integer variables compare against this, exactly."""


#: One subscript as written: an index, or a slice's (start, stop, step).
Subscript = int | tuple[int | None, int | None, int | None]


@record
class Var:
    name: str
    pos: int
    index: tuple[Subscript, ...] | None = None
    """NumPy-style subscripts (``x[0:100, 5]``), if written."""


@record
class Call:
    func: str
    args: tuple[Arith, ...]
    pos: int


@record
class BinOp:
    op: str  # + - * / **
    left: Arith
    right: Arith
    pos: int


@record
class Neg:
    operand: Arith
    pos: int


Arith = Num | Var | Call | BinOp | Neg


@record
class Compare:
    op: str  # < <= > >= == !=
    left: Arith
    right: Arith
    pos: int


@record
class And:
    items: tuple[Cond, ...]
    pos: int


@record
class Or:
    items: tuple[Cond, ...]
    pos: int


@record
class Not:
    operand: Cond
    pos: int


Cond = Compare | And | Or | Not

#: Functions and the argument counts they take. ``min``/``max`` of two values
#: are row by row; of one, they are aggregates like the rest of AGGREGATES.
FUNCTIONS = {
    "sqrt": (1,),
    "abs": (1,),
    "exp": (1,),
    "log": (1,),
    "log10": (1,),
    "min": (1, 2),
    "max": (1, 2),
    "mean": (1,),
    "std": (1,),
    "rms": (1,),
    "sum": (1,),
    "count": (1,),
}
#: One number over a whole variable (or expression), missing values left out.
AGGREGATES = frozenset({"mean", "std", "rms", "min", "max", "sum", "count"})


def is_aggregate(node: Arith | Cond) -> bool:
    """Whether ``node`` is an aggregate call such as ``mean(x)``."""
    return isinstance(node, Call) and node.func in AGGREGATES and len(node.args) == 1


def has_aggregate(node: Arith | Cond) -> bool:
    """Whether ``node`` holds an aggregate call anywhere.

    Examples
    --------
    >>> from quarry.expr.parser import parse_expression
    >>> has_aggregate(parse_expression("x - mean(x)")), has_aggregate(parse_expression("x*2"))
    (True, False)
    """
    match node:
        case Call(args=args):
            return is_aggregate(node) or any(has_aggregate(a) for a in args)
        case BinOp(left=left, right=right) | Compare(left=left, right=right):
            return has_aggregate(left) or has_aggregate(right)
        case Neg(operand=x) | Not(operand=x):
            return has_aggregate(x)
        case And(items=items) | Or(items=items):
            return any(has_aggregate(c) for c in items)
    return False


def variables(node: Arith | Cond, in_aggregates: bool = True) -> list[Var]:
    """Every variable reference in ``node``, in the order written; with
    ``in_aggregates=False`` only those read row by row (not only inside an
    aggregate): these form a query's table.

    Examples
    --------
    >>> from quarry.expr.parser import parse
    >>> tree = parse("r > 4*std(x) && e > mean(e)")
    >>> [v.name for v in variables(tree)], [v.name for v in variables(tree, False)]
    (['r', 'x', 'e', 'e'], ['r', 'e'])
    """

    # A module function, not a closure: a recursive closure is a reference
    # cycle left to the cyclic collector at every call.
    return _variables(node, in_aggregates)


def _variables(n: Arith | Cond, in_aggregates: bool) -> list[Var]:
    match n:
        case Var():
            return [n]
        case Num():
            return []
        case Call(args=args):
            if not in_aggregates and is_aggregate(n):
                return []
            return [v for a in args for v in _variables(a, in_aggregates)]
        case BinOp(left=left, right=right) | Compare(left=left, right=right):
            return _variables(left, in_aggregates) + _variables(right, in_aggregates)
        case Neg(operand=x) | Not(operand=x):
            return _variables(x, in_aggregates)
        case And(items=items) | Or(items=items):
            return [v for c in items for v in _variables(c, in_aggregates)]
    raise TypeError(n)


def to_text(node: Arith) -> str:
    """Arithmetic written back as query text (fully parenthesised).

    Examples
    --------
    >>> from quarry.expr.parser import parse
    >>> to_text(parse("sqrt(x**2 + y**2) > 1").left)
    'sqrt(((x ** 2) + (y ** 2)))'
    """
    match node:
        case Num(value=v):
            return repr(v)
        case Var(name=name):
            return name  # resolved names carry their subarray
        case Neg(operand=x):
            return f"-{to_text(x)}"
        case BinOp(op=op, left=a, right=b):
            return f"({to_text(a)} {op} {to_text(b)})"
        case Call(func=func, args=args):
            return f"{func}({', '.join(to_text(a) for a in args)})"
    raise TypeError(node)


class Literal(NamedTuple):
    """A number as written: its node (a :class:`Num`, or the :class:`Neg` of
    one) and its value."""

    node: Arith
    value: Number


def shape(cond: Cond) -> tuple[Hashable, tuple[Literal, ...]]:
    """The condition up to its numbers, and its numbers in the order written:
    queries of one shape differ only in their literals (``0.1 < t < 0.2`` and
    ``0.2 < t < 0.3``). Numbers inside an aggregate stay part of the shape,
    since the aggregate's value depends on them.

    Examples
    --------
    >>> from quarry.expr.parser import parse
    >>> a, b = shape(parse("mean(t) + 0.5 <= t")), shape(parse("mean(t) + -2 <= t"))
    >>> a[0] == b[0], [n.value for n in a[1] + b[1]]
    (True, [0.5, -2])
    >>> shape(parse("mean(2*t) < t"))[0] == shape(parse("mean(3*t) < t"))[0]
    False
    """
    numbers: list[Literal] = []
    return _shape(cond, numbers), tuple(numbers)


def _shape(n: Arith | Cond, numbers: list[Literal]) -> Hashable:
    """:func:`shape`'s walk, appending the numbers it meets to ``numbers``."""
    match n:
        case Num(value=value):
            numbers.append(Literal(n, value))
            return "#"
        case Neg(operand=Num(value=value)):  # -0.5 is a number like 0.5
            numbers.append(Literal(n, -value))
            return "#"
        case Var(name=name, index=index):
            return ("var", name, index)
        case Call(func=func, args=args):
            if is_aggregate(n):
                return ("aggregate", to_text(n))
            return ("call", func, tuple(_shape(a, numbers) for a in args))
        case BinOp(op=op, left=left, right=right) | Compare(op=op, left=left, right=right):
            return (type(n).__name__, op, _shape(left, numbers), _shape(right, numbers))
        case Neg(operand=x) | Not(operand=x):
            return (type(n).__name__, _shape(x, numbers))
        case And(items=items) | Or(items=items):
            return (type(n).__name__, tuple(_shape(c, numbers) for c in items))
    raise TypeError(n)
