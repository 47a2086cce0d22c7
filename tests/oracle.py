"""A NumPy oracle for query semantics, written from DESIGN.md and nothing else.

Comparisons of a variable with a number are exact: values and literal are
compared as long doubles (64-bit mantissa on x86-64, exact for every int64,
uint64 and float64). Arithmetic is float64. A comparison that reads a NaN is
unknown; unknown rows are never returned; NOT keeps unknown; AND/OR follow
SQL's truth tables.
"""

from __future__ import annotations

import numpy as np

from quarry.expr import parse
from quarry.expr.ast import And, BinOp, Call, Compare, Neg, Not, Num, Or, Var

CMP = {
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
    "==": np.equal,
    "!=": np.not_equal,
}
FUNCS = {
    "sqrt": np.sqrt,
    "abs": np.abs,
    "exp": np.exp,
    "log": np.log,
    "log10": np.log10,
    "min": np.fmin,
    "max": np.fmax,
}


def _arith(node, cols):
    match node:
        case Num(value=v):
            return np.float64(v)
        case Var(name=n):
            return cols[n].astype(np.float64)
        case Neg(operand=x):
            return -_arith(x, cols)
        case BinOp(op=op, left=a, right=b):
            a, b = _arith(a, cols), _arith(b, cols)
            return {"+": a + b, "-": a - b, "*": a * b, "/": a / b, "**": a**b}[op]
        case Call(func=f, args=args):
            return FUNCS[f](*(_arith(a, cols) for a in args))
    raise TypeError(node)


def _literal(node):
    """A number, if ``node`` is a (possibly negated) literal."""
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Neg) and isinstance(node.operand, Num):
        return -node.operand.value
    return None


def _truth(node, cols, n):
    """(true, unknown) boolean arrays."""
    match node:
        case Compare(op=op, left=left, right=right):
            lit_r, lit_l = _literal(right), _literal(left)
            if isinstance(left, Var) and lit_r is not None:
                return _exact(cols[left.name], op, lit_r)
            if isinstance(right, Var) and lit_l is not None:
                flip = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
                return _exact(cols[right.name], flip[op], lit_l)
            with np.errstate(all="ignore"):
                a = np.broadcast_to(_arith(left, cols), (n,))
                b = np.broadcast_to(_arith(right, cols), (n,))
                unknown = np.isnan(a) | np.isnan(b)
                return CMP[op](a, b) & ~unknown, unknown
        case Not(operand=x):
            t, u = _truth(x, cols, n)
            return ~t & ~u, u
        case And(items=items):
            t, u = _truth(items[0], cols, n)
            for it in items[1:]:
                t2, u2 = _truth(it, cols, n)
                f = (~t & ~u) | (~t2 & ~u2)
                t = t & t2
                u = ~t & ~f
            return t, u
        case Or(items=items):
            t, u = _truth(items[0], cols, n)
            for it in items[1:]:
                t2, u2 = _truth(it, cols, n)
                f = (~t & ~u) & (~t2 & ~u2)
                t = t | t2
                u = ~t & ~f
            return t, u
    raise TypeError(node)


def _exact(values, op, literal):
    if isinstance(literal, float) and np.isnan(literal):
        return np.zeros(len(values), bool), np.ones(len(values), bool)
    v = values.astype(np.longdouble)
    unknown = np.isnan(v)
    lit = np.longdouble(literal) if not isinstance(literal, int) else _ld_int(literal)
    return CMP[op](v, lit) & ~unknown, unknown


def _ld_int(i: int) -> np.longdouble:
    # np.longdouble(int) goes through float64 for large ints; build it exactly.
    if abs(i) < 2**53:
        return np.longdouble(i)
    return np.longdouble(str(i))


def oracle_ids(query: str, columns: dict[str, np.ndarray]) -> np.ndarray:
    """Flat ids (ascending) where ``query`` is true; names are keys of ``columns``."""
    cols = {k: np.asarray(v).reshape(-1) for k, v in columns.items()}
    n = len(next(iter(cols.values())))
    t, _ = _truth(parse(query), cols, n)
    return np.flatnonzero(t).astype(np.int64)
