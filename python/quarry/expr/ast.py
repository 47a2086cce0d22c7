"""Query syntax tree. Every node keeps the position of its first token so errors
found after parsing (an unknown name, a type mismatch) can still point at it."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

Number = int | float


@dataclass(frozen=True)
class Num:
    value: Number
    pos: int
    exact: Fraction | None = field(default=None, compare=False, repr=False)
    """The literal's exact decimal value when ``value`` (a float64) rounds it:
    integer variables compare against this, exactly."""


@dataclass(frozen=True)
class Var:
    name: str
    pos: int


@dataclass(frozen=True)
class Call:
    func: str
    args: tuple[Arith, ...]
    pos: int


@dataclass(frozen=True)
class BinOp:
    op: str  # + - * / **
    left: Arith
    right: Arith
    pos: int


@dataclass(frozen=True)
class Neg:
    operand: Arith
    pos: int


Arith = Num | Var | Call | BinOp | Neg


@dataclass(frozen=True)
class Compare:
    op: str  # < <= > >= == !=
    left: Arith
    right: Arith
    pos: int


@dataclass(frozen=True)
class And:
    items: tuple[Cond, ...]
    pos: int


@dataclass(frozen=True)
class Or:
    items: tuple[Cond, ...]
    pos: int


@dataclass(frozen=True)
class Not:
    operand: Cond
    pos: int


Cond = Compare | And | Or | Not

FUNCTIONS = {"sqrt": 1, "abs": 1, "exp": 1, "log": 1, "log10": 1, "min": 2, "max": 2}


def variables(node: Arith | Cond) -> list[Var]:
    """Every variable reference in ``node``, in the order written."""
    match node:
        case Var():
            return [node]
        case Num():
            return []
        case Call(args=args):
            return [v for a in args for v in variables(a)]
        case BinOp(left=left, right=right) | Compare(left=left, right=right):
            return variables(left) + variables(right)
        case Neg(operand=x) | Not(operand=x):
            return variables(x)
        case And(items=items) | Or(items=items):
            return [v for c in items for v in variables(c)]
    raise TypeError(node)
