"""A NumPy oracle for query semantics, written from DESIGN.md and nothing else.

It shares no code with Quarry: it has its own tokenizer and recursive-descent
parser for the grammar in the README (comparisons and chains, ``&& || !`` and
``and or not``, ``+ - * / **``, ``sqrt abs exp log log10 min max``, names bare,
as ``/paths`` or in backticks) and evaluates the text straight into NumPy.

Semantics, from DESIGN.md:

- A variable compared with a number literal is compared exactly on its stored
  value, with Python's exact int/float/Fraction comparisons on each value: a
  float value against the float64 nearest a decimal literal (``x.astype('f8')
  > 0.1``), an integer value against the literal's exact value, an integer
  literal exactly whatever the variable. Arithmetic on integer literals alone
  (``2**53 + 1``; ``+ - *`` and ``**`` with a non-negative exponent) is exact
  integer arithmetic, so it is an integer literal too (README, Semantics).
- Every other comparison is evaluated in float64 (arithmetic included); ``min``
  and ``max`` of two values are NumPy's ``minimum``/``maximum`` (NaN in, NaN out).
- A comparison that reads a NaN (or compares with a NaN literal) is unknown;
  unknown rows are never returned; NOT keeps unknown; AND/OR follow SQL's
  truth tables (``true || unknown`` is true, ``false && unknown`` is false).

Aggregates (``mean(x)``) and subscripts are not part of it: tests substitute
NumPy's values into the text and pass the sliced arrays as columns.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

# --- tokens -----------------------------------------------------------------

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
    | `(?P<quoted>[^`]+)`
    | (?P<word>[A-Za-z_][A-Za-z0-9_#.:]*)
    | (?P<path>/[A-Za-z0-9_#.:-]+(?:/[A-Za-z0-9_#.:-]+)*)
    | (?P<op>\*\*|<=|>=|==|!=|&&|\|\||[<>!+\-*/(),])
    )""",
    re.VERBOSE,
)
_WORDS = {"and": "&&", "or": "||", "not": "!"}


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) pairs, ending with ("end", ""). A ``/`` where a value is
    expected starts a path; after a value it divides."""
    out: list[tuple[str, str]] = []
    i = 0
    while text[i:].strip():
        value_expected = not out or (out[-1][0] == "op" and out[-1][1] != ")")
        m = _TOKEN.match(text, i)
        if m is None:
            raise SyntaxError(f"oracle cannot read {text[i:]!r}")
        if m.lastgroup == "path" and not value_expected:
            m = re.compile(r"\s*(?P<op>/)").match(text, i)
            assert m is not None
        kind, value = m.lastgroup, m.group(m.lastgroup or "")
        if kind == "word" and value.lower() in _WORDS:
            kind, value = "op", _WORDS[value.lower()]
        elif kind == "word" and value.lower() in ("inf", "nan"):
            kind = "num"
        elif kind in ("word", "quoted", "path"):
            kind = "name"
        out.append((str(kind), value))
        i = m.end()
    return [*out, ("end", "")]


# --- syntax -----------------------------------------------------------------


@dataclass(frozen=True)
class Lit:
    text: str  # as written, sign applied: "-0.5", "18446744073709551615", "inf"


@dataclass(frozen=True)
class Name:
    name: str


@dataclass(frozen=True)
class Op:
    """Arithmetic (``+ - * / ** neg`` or a function) or logic (``and or not``)
    or a comparison (``< <= > >= == !=``)."""

    op: str
    args: tuple[object, ...]


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, str]:
        return self.toks[self.i]

    def take(self, *ops: str) -> str | None:
        kind, text = self.peek()
        if kind == "op" and text in ops:
            self.i += 1
            return text
        return None

    def expect(self, op: str) -> None:
        if self.take(op) is None:
            raise SyntaxError(f"oracle expected {op!r} at {self.peek()}")

    def parse(self) -> object:
        node = self.or_()
        if self.peek()[0] != "end":
            raise SyntaxError(f"oracle: trailing {self.peek()}")
        return node

    def or_(self) -> object:
        items = [self.and_()]
        while self.take("||"):
            items.append(self.and_())
        return items[0] if len(items) == 1 else Op("or", tuple(items))

    def and_(self) -> object:
        items = [self.not_()]
        while self.take("&&"):
            items.append(self.not_())
        return items[0] if len(items) == 1 else Op("and", tuple(items))

    def not_(self) -> object:
        if self.take("!"):
            return Op("not", (self.not_(),))
        return self.comparison()

    def comparison(self) -> object:
        terms, ops = [self.sum_()], []
        while (op := self.take("<", "<=", ">", ">=", "==", "!=")) is not None:
            ops.append(op)
            terms.append(self.sum_())
        if not ops:
            return terms[0]
        pairs = [Op(op, (a, b)) for op, a, b in zip(ops, terms, terms[1:], strict=False)]
        return pairs[0] if len(pairs) == 1 else Op("and", tuple(pairs))

    def sum_(self) -> object:
        node = self.term()
        while (op := self.take("+", "-")) is not None:
            node = _integer_literal(op, node, self.term())
        return node

    def term(self) -> object:
        node = self.unary()
        while (op := self.take("*", "/")) is not None:
            node = _integer_literal(op, node, self.unary())
        return node

    def unary(self) -> object:
        if self.take("-"):
            operand = self.unary()
            if isinstance(operand, Lit):  # a negative literal stays a literal
                text = operand.text
                return Lit(text[1:] if text.startswith("-") else "-" + text)
            return Op("neg", (operand,))
        if self.take("+"):
            return self.unary()
        return self.power()

    def power(self) -> object:
        base = self.atom()
        if self.take("**"):
            return _integer_literal("**", base, self.unary())
        return base

    def atom(self) -> object:
        kind, text = self.peek()
        self.i += 1
        if kind == "num":
            return Lit(text)
        if kind == "name":
            if self.take("("):
                args = [self.sum_()]
                while self.take(","):
                    args.append(self.sum_())
                self.expect(")")
                return Op(text, tuple(args))
            return Name(text)
        if (kind, text) == ("op", "("):
            node = self.or_()
            self.expect(")")
            return node
        raise SyntaxError(f"oracle: unexpected {text!r}")


def _integer_literal(op: str, a: object, b: object) -> object:
    """``a op b``, a literal when both are integer literals and the integer
    result is exact (and of a size a test uses); else an operation."""
    if isinstance(a, Lit) and isinstance(b, Lit):
        x, y = (int(t.text) if t.text.lstrip("-").isdigit() else None for t in (a, b))
        if x is not None and y is not None and (op in "+-*" or (op == "**" and 0 <= y <= 256)):
            return Lit(str({"+": x + y, "-": x - y, "*": x * y}[op] if op != "**" else x**y))
    return Op(op, (a, b))


# --- evaluation -------------------------------------------------------------

_COMPARE = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_FUNCTIONS = {
    "sqrt": np.sqrt,
    "abs": np.abs,
    "exp": np.exp,
    "log": np.log,
    "log10": np.log10,
    "min": np.minimum,  # NaN-propagating: a comparison that reads NaN is unknown
    "max": np.maximum,
}
_BINARY = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "/": np.true_divide,
    "**": np.power,
}


def _exact(text: str) -> int | float | Fraction:
    """A literal's exact value: an int for digits, a float for inf/nan, else a Fraction."""
    body = text.lstrip("-")
    sign = -1 if text.startswith("-") else 1
    if body.isdigit():
        return sign * int(body)
    if body.lower() in ("inf", "nan"):
        return sign * float(body)
    return sign * Fraction(body)


def _float64(text: str) -> float:
    value = _exact(text)
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf  # float(value) overflows again


class _Eval:
    def __init__(self, columns: dict[str, np.ndarray], n: int) -> None:
        self.columns, self.n = columns, n

    def arith(self, node: object) -> np.ndarray:
        """float64 values of ``node`` on every row."""
        match node:
            case Lit(text=text):
                return np.full(self.n, _float64(text))
            case Name(name=name):
                return self.columns[name].astype(np.float64)
            case Op(op="neg", args=(x,)):
                return -self.arith(x)
            case Op(op=op, args=(a, b)) if op in _BINARY:
                return _BINARY[op](self.arith(a), self.arith(b))
            case Op(op=op, args=args) if op in _FUNCTIONS:
                return _FUNCTIONS[op](*(self.arith(a) for a in args))
        raise ValueError(f"oracle: not arithmetic: {node}")

    def truth(self, node: object) -> tuple[np.ndarray, np.ndarray]:
        """(true, unknown) for every row; a row is false where neither holds."""
        match node:
            case Op(op="not", args=(x,)):
                t, u = self.truth(x)
                return ~t & ~u, u
            case Op(op="and", args=items):
                t, u = self.truth(items[0])
                for item in items[1:]:
                    t2, u2 = self.truth(item)
                    false = (~t & ~u) | (~t2 & ~u2)  # one false side makes it false
                    t, u = t & t2, ~(t & t2) & ~false
                return t, u
            case Op(op="or", args=items):
                t, u = self.truth(items[0])
                for item in items[1:]:
                    t2, u2 = self.truth(item)
                    false = (~t & ~u) & (~t2 & ~u2)
                    t, u = t | t2, ~(t | t2) & ~false
                return t, u
            case Op(op=op, args=(Name(name=name), Lit(text=text))) if op in _COMPARE:
                return self.stored(self.columns[name], op, text)
            case Op(op=op, args=(Lit(text=text), Name(name=name))) if op in _COMPARE:
                return self.stored(self.columns[name], _FLIP[op], text)
            case Op(op=op, args=(a, b)) if op in _COMPARE:
                left, right = self.arith(a), self.arith(b)
                unknown = np.isnan(left) | np.isnan(right)
                return _COMPARE[op](left, right) & ~unknown, unknown
        raise ValueError(f"oracle: not a condition: {node}")

    def stored(self, values: np.ndarray, op: str, text: str) -> tuple[np.ndarray, np.ndarray]:
        """``values op literal`` compared exactly, value by value, in Python."""
        literal = _exact(text)
        if isinstance(literal, float) and math.isnan(literal):
            return np.zeros(self.n, bool), np.ones(self.n, bool)
        if values.dtype.kind == "f":
            unknown = np.isnan(values)
            if isinstance(literal, Fraction):  # a decimal: its nearest float64
                literal = _float64(text)
            as_python = values.astype(np.float64).tolist()  # exact: float32 -> float64
        else:
            unknown = np.zeros(self.n, bool)
            as_python = values.tolist()  # Python ints, exact for int64 and uint64
        compare = _COMPARE[op]
        true = np.fromiter((compare(v, literal) for v in as_python), bool, self.n)
        return true & ~unknown, unknown


def oracle_ids(query: str, columns: dict[str, np.ndarray]) -> np.ndarray:
    """Flat ids (ascending) where ``query`` is true; names are keys of ``columns``."""
    cols = {k: np.asarray(v).reshape(-1) for k, v in columns.items()}
    n = len(next(iter(cols.values())))
    with np.errstate(all="ignore"):
        true, _ = _Eval(cols, n).truth(_Parser(query).parse())
    return np.flatnonzero(true).astype(np.int64)
