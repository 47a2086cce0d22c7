"""Query text -> syntax tree.

Grammar (lowest precedence first)::

    or    := and (('||' | 'or') and)*
    and   := not (('&&' | 'and') not)*
    not   := ('!' | 'not') not | cmp
    cmp   := sum (('<' | '<=' | '>' | '>=' | '==' | '!=') sum)*   # chains: a < x <= b
    sum   := term (('+' | '-') term)*
    term  := unary (('*' | '/') unary)*
    unary := ('-' | '+') unary | power
    power := atom ('**' unary)?
    atom  := number | name subs? | func '(' sum (',' sum)* ')' | '(' or ')'
    subs  := '[' sub (',' sub)* ']'     # NumPy basic indexing: i, a:b, a:b:s, :

Names are bare (``energy``), full paths (``/Step#0/energy``), or anything in
backticks (```Step#0/energy```, ```my var```). A ``/`` where a value is
expected starts a path; after a value it divides.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from fractions import Fraction

from quarry.errors import QuerySyntaxError
from quarry.expr.ast import (
    FUNCTIONS,
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
    Subscript,
    Var,
)

_NUMBER = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_#.:]*")
_PATH = re.compile(r"/[A-Za-z0-9_#.:-]+(?:/[A-Za-z0-9_#.:-]+)*")
_OPERATORS = (
    "**",
    "<=",
    ">=",
    "==",
    "!=",
    "&&",
    "||",
    "<",
    ">",
    "!",
    "+",
    "-",
    "*",
    "/",
    "(",
    ")",
    ",",
    "[",
    "]",
    ":",
)
_WORDS = {"and": "&&", "or": "||", "not": "!"}
_CONSTANTS = {"inf": float("inf"), "nan": float("nan")}


@dataclass(frozen=True)
class Token:
    kind: str  # 'num', 'name', 'op', 'end'
    text: str
    pos: int
    value: int | float | str | None = None


def tokenize(query: str) -> list[Token]:
    """Split ``query`` into tokens; raise with a caret at the first bad character."""
    tokens: list[Token] = []
    i = 0
    n = len(query)

    def value_expected() -> bool:
        return not tokens or (tokens[-1].kind == "op" and tokens[-1].text not in (")", "]"))

    while i < n:
        c = query[i]
        if c.isspace():
            i += 1
            continue
        if c == "`":
            end = query.find("`", i + 1)
            if end < 0:
                raise QuerySyntaxError("unclosed backtick", query, i)
            if end == i + 1:
                raise QuerySyntaxError("empty name in backticks", query, i)
            tokens.append(Token("name", query[i : end + 1], i, query[i + 1 : end]))
            i = end + 1
            continue
        if c.isdigit() or (c == "." and i + 1 < n and query[i + 1].isdigit()):
            m = _NUMBER.match(query, i)
            assert m is not None
            text = m.group()
            if m.end() < n and (query[m.end()].isalpha() or query[m.end()] == "_"):
                raise QuerySyntaxError(f"malformed number {text + query[m.end()]!r}", query, i)
            is_int = text.isdigit()
            tokens.append(Token("num", text, i, int(text) if is_int else float(text)))
            # The decimal text is kept too: float(text) may round it.
            i = m.end()
            continue
        if c == "/" and value_expected():
            m = _PATH.match(query, i)
            if m is None:
                raise QuerySyntaxError("expected a path after '/'", query, i)
            tokens.append(Token("name", m.group(), i, m.group()))
            i = m.end()
            continue
        if c.isalpha() or c == "_":
            m = _NAME.match(query, i)
            assert m is not None
            text = m.group()
            lower = text.lower()
            if lower in _WORDS:
                tokens.append(Token("op", _WORDS[lower], i))
            elif lower in _CONSTANTS:
                tokens.append(Token("num", text, i, _CONSTANTS[lower]))
            else:
                tokens.append(Token("name", text, i, text))
            i = m.end()
            continue
        for op in _OPERATORS:
            if query.startswith(op, i):
                tokens.append(Token("op", op, i))
                i += len(op)
                break
        else:
            if c == "=":
                raise QuerySyntaxError("use '==' to compare for equality", query, i)
            if c in "&|":
                raise QuerySyntaxError(
                    f"use '{c}{c}' (or '{'and' if c == '&' else 'or'}')", query, i
                )
            raise QuerySyntaxError(f"unexpected character {c!r}", query, i)
    tokens.append(Token("end", "", n))
    return tokens


class _Parser:
    def __init__(self, query: str) -> None:
        self.query = query
        self.tokens = tokenize(query)
        self.i = 0

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def error(self, message: str, pos: int | None = None) -> QuerySyntaxError:
        return QuerySyntaxError(message, self.query, self.tok.pos if pos is None else pos)

    def accept(self, *ops: str) -> Token | None:
        if self.tok.kind == "op" and self.tok.text in ops:
            t = self.tok
            self.i += 1
            return t
        return None

    def parse(self) -> Cond:
        if self.tok.kind == "end":
            raise self.error("empty query")
        node = self.condition()
        if self.tok.kind != "end":
            if self.tok.text == ")":
                raise self.error("unmatched ')'")
            raise self.error(f"unexpected {self.describe(self.tok)}; expected an operator")
        return node

    def describe(self, t: Token) -> str:
        return "end of query" if t.kind == "end" else repr(t.text)

    def condition(self) -> Cond:
        node = self.parse_or()
        if not isinstance(node, Compare | And | Or | Not):
            raise self.error("expected a comparison such as 'x > 1'", _pos(node))
        return node

    def parse_or(self) -> Cond | Arith:
        first = self.parse_and()
        items = [first]
        while self.accept("||"):
            items.append(self.parse_and())
        if len(items) == 1:
            return first
        return Or(tuple(self.as_cond(x) for x in items), _pos(first))

    def parse_and(self) -> Cond | Arith:
        first = self.parse_not()
        items = [first]
        while self.accept("&&"):
            items.append(self.parse_not())
        if len(items) == 1:
            return first
        return And(tuple(self.as_cond(x) for x in items), _pos(first))

    def parse_not(self) -> Cond | Arith:
        t = self.accept("!")
        if t is not None:
            return Not(self.as_cond(self.parse_not()), t.pos)
        return self.comparison()

    def comparison(self) -> Cond | Arith:
        left = self.sum()
        pairs: list[Compare] = []
        while (t := self.accept("<", "<=", ">", ">=", "==", "!=")) is not None:
            right = self.sum()
            pairs.append(Compare(t.text, self.as_arith(left), self.as_arith(right), t.pos))
            left = right
        if not pairs:
            return left
        return pairs[0] if len(pairs) == 1 else And(tuple(pairs), pairs[0].pos)

    def sum(self) -> Cond | Arith:
        node = self.term()
        while (t := self.accept("+", "-")) is not None:
            node = BinOp(t.text, self.as_arith(node), self.as_arith(self.term()), t.pos)
        return node

    def term(self) -> Cond | Arith:
        node = self.unary()
        while (t := self.accept("*", "/")) is not None:
            node = BinOp(t.text, self.as_arith(node), self.as_arith(self.unary()), t.pos)
        return node

    def unary(self) -> Cond | Arith:
        t = self.accept("-", "+")
        if t is not None:
            operand = self.as_arith(self.unary())
            return Neg(operand, t.pos) if t.text == "-" else operand
        return self.power()

    def power(self) -> Cond | Arith:
        base = self.atom()
        t = self.accept("**")
        if t is not None:
            return BinOp("**", self.as_arith(base), self.as_arith(self.unary()), t.pos)
        return base

    def atom(self) -> Cond | Arith:
        t = self.tok
        if t.kind == "num":
            self.i += 1
            assert isinstance(t.value, int | float)
            exact = None
            if isinstance(t.value, float) and math.isfinite(t.value):
                exact = Fraction(t.text)
                if exact == t.value:
                    exact = None  # float64 holds it exactly
            return Num(t.value, t.pos, exact)
        if t.kind == "name":
            self.i += 1
            assert isinstance(t.value, str)
            if self.accept("("):
                return self.call(t)
            if self.accept("["):
                return Var(t.value, t.pos, self.subscripts())
            return Var(t.value, t.pos)
        if self.accept("("):
            inner = self.parse_or()
            if not self.accept(")"):
                raise self.error(f"expected ')' but found {self.describe(self.tok)}")
            return inner
        if t.kind == "end":
            raise self.error("query ends where a value was expected")
        raise self.error(f"expected a value but found {self.describe(t)}")

    def subscripts(self) -> tuple[Subscript, ...]:
        """``[`` seen: indices and ``start:stop:step`` slices up to ``]``."""
        out: list[Subscript] = []
        while True:
            parts: list[int | None] = [self.integer()]
            while len(parts) < 3 and self.accept(":"):
                parts.append(self.integer())
            if len(parts) == 1:
                if parts[0] is None:
                    raise self.error("expected an index or a slice such as 0:10")
                out.append(parts[0])
            else:
                start, stop, step = (*parts, None, None)[:3]
                out.append((start, stop, step))
            if self.accept("]"):
                return tuple(out)
            if not self.accept(","):
                raise self.error(f"expected ',' or ']' but found {self.describe(self.tok)}")

    def integer(self) -> int | None:
        """An optionally signed integer inside subscripts, or None if absent."""
        sign = -1 if self.accept("-") else 1
        t = self.tok
        if t.kind == "num":
            if not isinstance(t.value, int):
                raise self.error("subscripts are integers")
            self.i += 1
            return sign * t.value
        if sign < 0:
            raise self.error("expected an integer after '-'")
        return None

    def call(self, name: Token) -> Arith:
        func = str(name.value).lower()
        if func not in FUNCTIONS:
            known = ", ".join(sorted(FUNCTIONS))
            raise self.error(f"unknown function {name.value!r} (known: {known})", name.pos)
        args = [self.as_arith(self.sum())]
        while self.accept(","):
            args.append(self.as_arith(self.sum()))
        if not self.accept(")"):
            raise self.error(f"expected ')' but found {self.describe(self.tok)}")
        if len(args) not in FUNCTIONS[func]:
            takes = " or ".join(str(n) for n in FUNCTIONS[func])
            raise self.error(f"{func}() takes {takes} argument(s), got {len(args)}", name.pos)
        return Call(func, tuple(args), name.pos)

    def as_arith(self, node: Cond | Arith) -> Arith:
        if isinstance(node, Compare | And | Or | Not):
            raise self.error("a condition cannot be used as a number here", _pos(node))
        return node

    def as_cond(self, node: Cond | Arith) -> Cond:
        if not isinstance(node, Compare | And | Or | Not):
            raise self.error("expected a comparison such as 'x > 1'", _pos(node))
        return node


def _pos(node: Cond | Arith) -> int:
    return node.pos


def parse(query: str) -> Cond:
    """Parse a query into a condition tree.

    Examples
    --------
    >>> tree = parse("1.2 < energy < 1.3")
    >>> [(c.op, c.left, c.right) for c in tree.items]  # doctest: +NORMALIZE_WHITESPACE
    [('<', Num(value=1.2, pos=0), Var(name='energy', pos=6, index=None)),
     ('<', Var(name='energy', pos=6, index=None), Num(value=1.3, pos=15))]
    >>> parse("energy >")
    Traceback (most recent call last):
    ...
    quarry.errors.QuerySyntaxError: query ends where a value was expected
      energy >
              ^
    """
    return _parse(query)


@functools.lru_cache(maxsize=4096)
def _parse(query: str) -> Cond:
    # Trees are immutable: a query asked of many steps or files parses once.
    return _Parser(query).parse()


def parse_variable(text: str) -> Var:
    """A variable as named outside a query (an output column, a histogram
    axis): a bare name, a path, optionally with subscripts.

    Examples
    --------
    >>> parse_variable("Step#0/x[0:10, 5]")
    Var(name='Step#0/x', pos=0, index=((0, 10, None), 5))
    """
    name, bracket, _ = text.partition("[")
    if not bracket:
        return Var(text, 0)
    offset = len(name)
    parser = _Parser(text[offset:])
    try:
        parser.accept("[")
        index = parser.subscripts()
        if parser.tok.kind != "end":
            raise parser.error(f"unexpected {parser.describe(parser.tok)} after ']'")
    except QuerySyntaxError as exc:
        raise QuerySyntaxError(exc.message, text, exc.position + offset) from None
    return Var(name.strip(), 0, index)


def parse_expression(text: str) -> Arith:
    """Arithmetic on its own (no comparison), as in a derived variable.

    Examples
    --------
    >>> parse_expression("sqrt(x**2)")  # doctest: +ELLIPSIS
    Call(func='sqrt', args=(BinOp(op='**', ...),), pos=0)
    >>> parse_expression("x > 1")
    Traceback (most recent call last):
    ...
    quarry.errors.QuerySyntaxError: expected arithmetic, not a condition
      x > 1
        ^
    """
    parser = _Parser(text)
    if parser.tok.kind == "end":
        raise parser.error("empty expression")
    node = parser.parse_or()
    if isinstance(node, Compare | And | Or | Not):
        raise QuerySyntaxError("expected arithmetic, not a condition", text, node.pos)
    if parser.tok.kind != "end":
        raise parser.error(f"unexpected {parser.describe(parser.tok)}; expected an operator")
    return node
