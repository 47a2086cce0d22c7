"""Arithmetic in the core's wire encoding: a postfix program.

The core (``quarry._core.evaluate``, ``scan_compare``) runs arithmetic as a
list of ``(operation, argument)`` pairs in postfix order, over a stack of
float64 columns: ``("load", slot)`` pushes a variable's column, ``("const",
value)`` a number, and each operator or function (``"+"``, ``"neg"``,
``"sqrt"``, ``"min"``, ...) pops its operands and pushes its result; the
argument is 0 for those. The operation names are the grammar's own, so the
encoding is written next to it and read by ``quarry-py``'s ``scan::program``.
"""

from __future__ import annotations

from quarry.expr.ast import Arith, BinOp, Call, Neg, Num, Var
from quarry.expr.plan import as_float


def postfix(node: Arith, slot: dict[str, int]) -> list[tuple[str, float]]:
    """Arithmetic as the core's postfix program; variables load their column slot.

    Examples
    --------
    >>> from quarry.expr.ast import BinOp, Var, Num
    >>> postfix(BinOp("*", Var("/x", 0), Num(2, 0), 0), {"/x": 0})
    [('load', 0.0), ('const', 2.0), ('*', 0.0)]
    """
    match node:
        case Num(value=v):
            return [("const", as_float(v))]
        case Var(name=path):
            return [("load", float(slot[path]))]
        case Neg(operand=x):
            return [*postfix(x, slot), ("neg", 0.0)]
        case BinOp(op=op, left=a, right=b):
            return [*postfix(a, slot), *postfix(b, slot), (op, 0.0)]
        case Call(func=func, args=args):
            return [*(step for a in args for step in postfix(a, slot)), (func, 0.0)]
    raise TypeError(node)
