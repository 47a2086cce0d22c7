"""Queries on values multiplied by a factor, answered on the stored values.

With ``si=True`` a query means openPMD's physical values, ``stored * unitSI``
in float64, exactly as CF's ``scale_factor`` decoding makes them; the index
holds the stored values. Arithmetic is simply rewritten (``x`` becomes
``x * unitSI``). A comparison of one variable with a number is carried back
to the stored values instead, so the index still answers it, exactly:

``g(s) = float64(s) * u`` is monotone in the stored value ``s`` (rounding is
monotone; non-decreasing for ``u > 0``, non-increasing for ``u < 0``), so the
stored values with ``g(s) op c`` form one interval of the stored key domain.
Its ends are found by bisection over that domain, ordered as integers (int64,
uint64, or the float64 values through their bit patterns): 64 steps, each one
evaluation of ``g`` with the same float64 multiplication the values undergo.
A factor that is zero or not finite (``inf * 0`` is NaN) is not monotone in
that sense, and such comparisons are scanned as arithmetic.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable

from quarry.expr.ast import Arith, BinOp, Call, Neg, Num, Var
from quarry.expr.keys import INTEGER_RANGES, key_kind
from quarry.expr.plan import (
    Interval,
    OrNode,
    PlanNode,
    RangeLeaf,
    ScanLeaf,
    float_interval,
)
from quarry.formats.base import VariableInfo

_SIGN = 1 << 63


def scaled(node: Arith, factor: Callable[[Var], float | None]) -> Arith:
    """``node`` with each variable ``x`` that has a factor ``u`` written ``x * u``.

    Examples
    --------
    >>> node = scaled(BinOp("+", Var("/x", 0), Var("/y", 4), 2), lambda v: {"/x": 0.5}.get(v.name))
    >>> node.left.op, node.left.left.name, node.left.right.value, node.right.name
    ('*', '/x', 0.5, '/y')
    """
    match node:
        case Var():
            by = factor(node)
            return node if by is None else BinOp("*", node, Num(by, node.pos), node.pos)
        case Neg(operand=x):
            return Neg(scaled(x, factor), node.pos)
        case BinOp(op=op, left=a, right=b):
            return BinOp(op, scaled(a, factor), scaled(b, factor), node.pos)
        case Call(func=func, args=args):
            return Call(func, tuple(scaled(a, factor) for a in args), node.pos)
    return node


def scaled_range_leaf(var: VariableInfo, op: str, literal: int | float, by: float) -> PlanNode:
    """``var * by op literal`` (the product in float64) as a range of ``var``'s
    stored values, or a scan where ``by`` is zero or not finite.

    Examples
    --------
    >>> import numpy as np
    >>> x = VariableInfo("/x", (3,), np.dtype("i4"))
    >>> scaled_range_leaf(x, ">", 1.0, 0.25).interval   # x * 0.25 > 1 is x >= 5
    Interval(kind='i64', lo=5, lo_incl=True, hi=9223372036854775807, hi_incl=True, empty=False)
    >>> y = VariableInfo("/y", (3,), np.dtype("f8"))
    >>> hi = scaled_range_leaf(y, "<=", 3e-6, 1e-6).interval.hi   # the last y with y*1e-6 <= 3e-6
    >>> hi, hi * 1e-6 <= 3e-6 < float(np.nextafter(hi, np.inf)) * 1e-6
    (3.0, True)
    """
    if op == "!=":
        return OrNode(
            (scaled_range_leaf(var, "<", literal, by), scaled_range_leaf(var, ">", literal, by))
        )
    if by == 0 or not math.isfinite(by):
        product = BinOp("*", Var(var.key, 0), Num(by, 0), 0)
        return ScanLeaf(op, product, Num(literal, 0), (var,))
    wanted = float_interval(op, literal)
    kind = key_kind(var.dtype)
    if wanted is None:  # a NaN literal: unknown everywhere, as every comparison with it
        from quarry.expr.plan import Const

        return Const(None)
    lo_dom, hi_dom, value = _domain(kind)

    def physical(k: int) -> float:
        return float(value(k)) * by

    def above_lo(k: int) -> bool:
        v = physical(k)
        return v > wanted.lo or (wanted.lo_incl and v == wanted.lo)

    def below_hi(k: int) -> bool:
        v = physical(k)
        return v < wanted.hi or (wanted.hi_incl and v == wanted.hi)

    if wanted.empty:
        first, last = hi_dom, lo_dom
    elif by > 0:  # g rises: above_lo goes false -> true, below_hi true -> false
        first = _first(lo_dom, hi_dom, above_lo)
        last = _first(lo_dom, hi_dom, lambda k: not below_hi(k)) - 1
    else:
        first = _first(lo_dom, hi_dom, below_hi)
        last = _first(lo_dom, hi_dom, lambda k: not above_lo(k)) - 1
    empty = first > last
    lo, hi = (value(lo_dom), value(hi_dom)) if empty else (value(first), value(last))
    return RangeLeaf(var, Interval(kind, lo, True, hi, True, empty))


def _domain(kind: str) -> tuple[int, int, Callable[[int], int | float]]:
    """(first key, last key, key -> stored value) of a key domain, ordered as integers."""
    if kind in INTEGER_RANGES:
        return *INTEGER_RANGES[kind], int
    return -_float_key(math.inf), _float_key(math.inf), _float_of_key


def _float_key(value: float) -> int:
    """A non-negative float64's bit pattern: its place in float order."""
    (bits,) = struct.unpack("<q", struct.pack("<d", value))
    return int(bits)


def _float_of_key(key: int) -> float:
    """The float64 at ``key`` in float order (negative keys mirror positive ones)."""
    (value,) = struct.unpack("<d", struct.pack("<q", abs(key)))
    return -float(value) if key < 0 else float(value)


def _first(lo: int, hi: int, pred: Callable[[int], bool]) -> int:
    """The first key in ``[lo, hi]`` where the monotone ``pred`` holds; ``hi + 1``
    when it holds nowhere."""
    while lo <= hi:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid - 1
        else:
            lo = mid + 1
    return lo
