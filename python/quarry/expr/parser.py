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

Names are any Unicode identifier (``énergie``; ``#``, ``.`` and ``:`` may
follow the first letter), NFC-normalised; full paths (``/Step#0/energy``); or
anything in backticks (```Step#0/energy```, ```my var```). A ``/`` where a
value is expected starts a path; after a value it divides. In a name, a dot
joins a group and its member: ``position.x`` is the suffix ``position/x``
(see :mod:`quarry.expr.names`). Numbers are ASCII.

Every string is treated as hostile. The parser keeps explicit stacks and never
recurses on its input, so 5,000 parentheses cost a list, not the interpreter's
stack. Three limits bound what a parsed tree can cost the later stages, whose
tree walks do recurse: :data:`MAX_LENGTH` characters, :data:`MAX_OPERANDS`
names and numbers, and :data:`MAX_DEPTH` levels of nesting. Crossing one is a
:class:`~quarry.errors.QuerySyntaxError` with the caret where it was crossed.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from typing import TYPE_CHECKING

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
from quarry.records import record

if TYPE_CHECKING:
    from fractions import Fraction

#: The longest query text accepted, in characters.
MAX_LENGTH = 1_000_000
#: The most names and numbers one query may hold (a 3,000-term ``||`` holds 6,000).
MAX_OPERANDS = 10_000
#: The deepest nesting: parentheses, calls, ``!`` and unary ``-`` each open a
#: level, and so does every operator of a chain (``a + b + c`` nests two deep).
MAX_DEPTH = 200
#: The most digits of an integer literal, as Python's own ``int()`` allows;
#: such a number is far beyond every float64 and int64 already.
MAX_INT_DIGITS = 4300

_NUMBER = re.compile(r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_SPACE = re.compile(r"\s+")
_NAME_CHARS = re.compile(r"[\w#.:]+")
_PATH_CHARS = re.compile(r"[\w#.:/-]+")
# Longest first, so '**' is not read as '*' '*'.
_OPERATOR = re.compile(r"\*\*|<=|>=|==|!=|&&|\|\||[<>!+\-*/(),\[\]:]")
_WORDS = {"and": "&&", "or": "||", "not": "!"}
_CONSTANTS = {"inf": float("inf"), "nan": float("nan")}
_COMPARE = frozenset({"<", "<=", ">", ">=", "==", "!="})
#: Binding strength of binary operators; prefix ``!`` binds at 3, ``-`` at 7.
_BINARY = {"||": 1, "&&": 2, **dict.fromkeys(_COMPARE, 4), "+": 5, "-": 5, "*": 6, "/": 6, "**": 8}
_PREFIX = {"!": 3, "-": 7, "+": 7}


@record
class Token:
    kind: str  # 'num', 'name', 'op', 'end'
    text: str
    pos: int
    value: int | float | str | None = None


def _scan(query: str, i: int, chars: re.Pattern[str]) -> int:
    """End of the run of name characters from ``i``: ``chars`` plus any
    character that may continue a Unicode identifier (combining accents)."""
    n = len(query)
    while i < n:
        m = chars.match(query, i)
        if m is not None:
            i = m.end()
        elif ("a" + query[i]).isidentifier():
            i += 1
        else:
            break
    return i


def _nfc(text: str) -> str:
    return text if text.isascii() else unicodedata.normalize("NFC", text)


def _closing_backtick(query: str, start: int) -> int:
    """Where the name in backticks opened at ``start`` ends: the next
    backtick that is not doubled (two stand for one in the name, as SQL
    doubles a quote); -1 where none does.

    Examples
    --------
    >>> _closing_backtick("`a``b` > 1", 0), _closing_backtick("`a", 0)
    (5, -1)
    """
    at = start + 1
    while True:
        at = query.find("`", at)
        if at < 0 or not query.startswith("``", at):
            return at
        at += 2


def tokenize(query: str) -> list[Token]:
    """Split ``query`` into tokens; raise with a caret at the first bad character."""
    if len(query) > MAX_LENGTH:
        raise QuerySyntaxError(
            f"the query is longer than {MAX_LENGTH:,} characters", query, MAX_LENGTH
        )
    tokens: list[Token] = []
    i = 0
    n = len(query)

    def value_expected() -> bool:
        return not tokens or (tokens[-1].kind == "op" and tokens[-1].text not in (")", "]"))

    while i < n:
        c = query[i]
        if c.isspace():
            m = _SPACE.match(query, i)
            i = m.end() if m is not None else i + 1
            continue
        if c == "`":
            end = _closing_backtick(query, i)
            if end < 0:
                raise QuerySyntaxError("unclosed backtick", query, i)
            if end == i + 1:
                raise QuerySyntaxError("empty name in backticks", query, i)
            name = query[i + 1 : end].replace("``", "`")
            tokens.append(Token("name", query[i : end + 1], i, _nfc(name)))
            i = end + 1
            continue
        if "0" <= c <= "9" or (c == "." and i + 1 < n and "0" <= query[i + 1] <= "9"):
            tokens.append(_number(query, i))
            i += len(tokens[-1].text)
            continue
        if c == "/" and value_expected():
            end = _scan(query, i + 1, _PATH_CHARS)
            if end == i + 1:
                raise QuerySyntaxError("expected a path after '/'", query, i)
            tokens.append(Token("name", query[i:end], i, _nfc(query[i:end])))
            i = end
            continue
        if c == "_" or c.isidentifier():
            end = _scan(query, i + 1, _NAME_CHARS)
            text = query[i:end]
            lower = text.lower()
            if lower in _WORDS:
                tokens.append(Token("op", _WORDS[lower], i))
            elif lower in _CONSTANTS:
                tokens.append(Token("num", text, i, _CONSTANTS[lower]))
            else:
                tokens.append(Token("name", text, i, _nfc(text)))
            i = end
            continue
        m = _OPERATOR.match(query, i)
        if m is not None:
            tokens.append(Token("op", m.group(), i))
            i = m.end()
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


def _number(query: str, i: int) -> Token:
    m = _NUMBER.match(query, i)
    if m is None:  # the caller saw a digit, so the pattern matches
        raise QuerySyntaxError("malformed number", query, i)
    text = m.group()
    after = query[m.end()] if m.end() < len(query) else ""
    if after == "_" or after.isalpha():
        raise QuerySyntaxError(f"malformed number {text + after!r}", query, i)
    if text.isdigit():
        digits = text.lstrip("0")
        if len(digits) > MAX_INT_DIGITS:
            raise QuerySyntaxError(
                f"an integer of more than {MAX_INT_DIGITS:,} digits; "
                "write it as a float (such as 1e5000) if you mean infinity",
                query,
                i,
            )
        return Token("num", text, i, int(digits or "0"))
    # The decimal text is kept too: float(text) may round it.
    return Token("num", text, i, float(text))


def exact_literal(text: str, value: float) -> Fraction | None:
    """A stand-in for a float literal's decimal value when float64 rounds it,
    or None when ``value`` is exact.

    Integer variables compare against it, and only its order against the
    integers matters, so it is bounded: 0.5 for any decimal strictly between 0
    and 0.1, 2**65 for any beyond every uint64; otherwise the integer part,
    plus one half if a fraction remains. ``1e-999999999`` costs nothing.

    Examples
    --------
    >>> exact_literal("2.5", 2.5) is None
    True
    >>> exact_literal("9007199254740993.0", 9007199254740992.0)
    Fraction(9007199254740993, 1)
    >>> exact_literal("1e-999999999", 0.0), exact_literal("-3.1", -3.1)
    (Fraction(1, 2), Fraction(-7, 2))
    >>> exact_literal("1e-99999999999999999999999", 0.0)  # past Decimal's exponents
    Fraction(1, 2)
    """
    if not math.isfinite(value) or _plainly_exact(text, value):
        return None
    # Imported here: most literals (1.0, 2.5, 1e3) are plainly exact.
    from decimal import Decimal, InvalidOperation
    from fractions import Fraction

    try:
        exact = Decimal(text)
    except InvalidOperation:  # an exponent past Decimal's (10**18): ``value`` underflowed to 0
        parts = _PARTS.fullmatch(text.lstrip("+-"))
        mantissa = (parts.group(1) + parts.group(2)) if parts else text
        sign = -1 if text.startswith("-") else 1
        return Fraction(sign, 2) if mantissa.strip("0.") else None
    if exact == value:
        return None
    sign = -1 if exact < 0 else 1
    if exact.adjusted() >= 20:  # 10**20 > 2**64
        return Fraction(sign * 2**65)
    if exact.adjusted() < -1:
        return Fraction(sign, 2)
    whole = int(exact)
    return Fraction(whole) if exact == whole else whole + Fraction(sign, 2)


#: A number as :data:`_NUMBER` reads it: digits, a point, digits, an exponent.
_PARTS = re.compile(r"([0-9]*)\.?([0-9]*)(?:[eE]([+-]?[0-9]+))?")


def _plainly_exact(text: str, value: float) -> bool:
    """Whether the decimal ``text`` is exactly the float64 ``value``, told
    in integers where its exponent is small (``1.0``, ``2.5``, ``1e3``);
    False means "not known", and :func:`exact_literal` asks ``Decimal``.

    Examples
    --------
    >>> _plainly_exact("2.50", 2.5), _plainly_exact("0.1", 0.1), _plainly_exact("1e400", 1e308)
    (True, False, False)
    """
    m = _PARTS.fullmatch(text)
    if m is None:
        return False
    whole, fraction, power = m.groups()
    exponent = int(power or "0") - len(fraction)
    if abs(exponent) > 40 or len(whole) + len(fraction) > 40:
        return False
    digits = int(whole + fraction or "0")  # text == digits * 10**exponent
    numerator, denominator = value.as_integer_ratio()
    scale: int = 10 ** abs(exponent)
    if exponent >= 0:
        return digits * scale * denominator == numerator
    return digits * denominator == numerator * scale


@record(frozen=False)
class _Chain:
    """An open run of one n-ary operator: comparisons ``a < b <= c`` (``op`` is
    ``'cmp'``), or the items of ``&&`` / ``||``. It becomes a node when
    something other than the same operator takes it."""

    op: str
    items: list[Cond]
    pos: int


@record
class _Operator:
    kind: str  # 'binary', 'prefix', 'group' or 'call'
    text: str
    pos: int
    prec: int = 0
    base: int = 0  # a call: where its arguments start on the operand stack


_Operand = tuple[Cond | Arith | _Chain, int]  # (node, depth)


class _Parser:
    """Operator precedence with explicit stacks: operands and pending operators."""

    def __init__(self, query: str) -> None:
        self.query = query
        self.tokens = tokenize(query)
        self.i = 0
        self.operand_count = 0
        self.brackets: list[_Operator] = []  # the open groups and calls, innermost last
        self.nesting = 0  # open brackets and pending prefix operators

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

    def describe(self, t: Token) -> str:
        return "end of query" if t.kind == "end" else repr(t.text)

    def parse(self) -> Cond:
        if self.tok.kind == "end":
            raise self.error("empty query")
        node = self.expression()
        if not isinstance(node, Compare | And | Or | Not):
            raise self.error("expected a comparison such as 'x > 1'", node.pos)
        return node

    def expression(self) -> Cond | Arith:
        """Everything up to the end of the text."""
        operands: list[_Operand] = []
        operators: list[_Operator] = []
        while True:
            self.operand(operands, operators)
            if not self.operator(operands, operators):
                break
        while operators:
            top = operators[-1]
            if top.kind in ("group", "call"):
                raise self.error(f"expected ')' but found {self.describe(self.tok)}")
            self.reduce(operands, operators)
        node, _ = operands.pop()
        return self.finish(node)

    # -- operand position ---------------------------------------------------

    def operand(self, operands: list[_Operand], operators: list[_Operator]) -> None:
        """Pending prefix operators and brackets, then one value."""
        while True:
            t = self.tok
            if t.kind == "op" and t.text in _PREFIX:
                if t.text == "!" and not _negation_allowed_after(operators):
                    raise self.error("expected a value but found '!'")
                self.open(operators, _Operator("prefix", t.text, t.pos, _PREFIX[t.text]))
            elif t.kind == "op" and t.text == "(":
                self.open(operators, _Operator("group", "(", t.pos))
            elif (
                t.kind == "name"
                and self.tokens[self.i + 1].kind == "op"
                and self.tokens[self.i + 1].text == "("
            ):
                self.check_function(t)
                self.i += 1
                self.open(
                    operators, _Operator("call", str(t.value).lower(), t.pos, 0, len(operands))
                )
            else:
                break
            self.i += 1
        operands.append((self.value(), 0))

    def open(self, operators: list[_Operator], op: _Operator) -> None:
        """Push a prefix operator or a bracket: each opens a level of nesting."""
        if op.kind != "prefix":
            self.brackets.append(op)
        self.nesting += 1
        if self.nesting > MAX_DEPTH:
            raise self.error(f"the query nests deeper than {MAX_DEPTH} levels", op.pos)
        operators.append(op)

    def value(self) -> Arith:
        t = self.tok
        if t.kind in ("num", "name"):
            self.operand_count += 1
            if self.operand_count > MAX_OPERANDS:
                raise self.error(f"the query holds more than {MAX_OPERANDS:,} names and numbers")
        if t.kind == "num":
            self.i += 1
            assert isinstance(t.value, int | float)
            exact = exact_literal(t.text, t.value) if isinstance(t.value, float) else None
            return Num(t.value, t.pos, exact)
        if t.kind == "name":
            self.i += 1
            assert isinstance(t.value, str)
            if self.accept("["):
                return Var(t.value, t.pos, self.subscripts())
            return Var(t.value, t.pos)
        if t.kind == "end":
            raise self.error("query ends where a value was expected")
        raise self.error(f"expected a value but found {self.describe(t)}")

    def check_function(self, name: Token) -> None:
        if str(name.value).lower() not in FUNCTIONS:
            known = ", ".join(sorted(FUNCTIONS))
            raise self.error(f"unknown function {name.value!r} (known: {known})", name.pos)

    # -- operator position --------------------------------------------------

    def operator(self, operands: list[_Operand], operators: list[_Operator]) -> bool:
        """Binary operators, closing brackets and commas after a value; False
        at the end of the text."""
        while True:
            t = self.tok
            inner = self.brackets[-1] if self.brackets else None
            if t.kind == "op" and t.text in _BINARY:
                prec = _BINARY[t.text]
                if inner is not None and inner.kind == "call" and prec < _BINARY["+"]:
                    raise self.error(f"expected ')' but found {self.describe(t)}")
                while operators and operators[-1].kind in ("binary", "prefix"):
                    top = operators[-1]
                    if top.prec < prec or (top.prec == prec and t.text == "**"):
                        break
                    self.reduce(operands, operators)
                self.check_left(operands, t.text)
                operators.append(_Operator("binary", t.text, t.pos, prec))
                self.i += 1
                return True
            if t.kind == "op" and t.text == ")":
                if inner is None:
                    raise self.error("unmatched ')'")
                self.close(operands, operators)
                self.i += 1
                continue
            if t.kind == "op" and t.text == "," and inner is not None and inner.kind == "call":
                while operators[-1].kind != "call":
                    self.reduce(operands, operators)
                node, depth = operands.pop()
                operands.append((self.as_arith(node), depth))
                self.i += 1
                return True
            if t.kind == "end":
                return False
            if inner is not None:
                raise self.error(f"expected ')' but found {self.describe(t)}")
            raise self.error(f"unexpected {self.describe(t)}; expected an operator")

    def close(self, operands: list[_Operand], operators: list[_Operator]) -> None:
        """``)``: end a group or a call."""
        while operators[-1].kind not in ("group", "call"):
            self.reduce(operands, operators)
        bracket = operators.pop()
        self.brackets.pop()
        self.nesting -= 1
        if bracket.kind == "group":
            node, depth = operands.pop()
            operands.append((self.finish(node), depth))
            return
        args = operands[bracket.base :]
        del operands[bracket.base :]
        allowed = FUNCTIONS[bracket.text]
        if len(args) not in allowed:
            takes = " or ".join(str(k) for k in allowed)
            raise self.error(
                f"{bracket.text}() takes {takes} argument(s), got {len(args)}", bracket.pos
            )
        call = Call(bracket.text, tuple(self.as_arith(a) for a, _ in args), bracket.pos)
        operands.append((call, self.deeper(max(d for _, d in args), bracket.pos)))

    def check_left(self, operands: list[_Operand], op: str) -> None:
        """The left operand of ``op``, checked (and an open chain of another
        operator closed) as soon as ``op`` is seen."""
        node, depth = operands[-1]
        if isinstance(node, _Chain) and node.op == _family(op):
            return
        node = self.finish(node)
        node = self.as_cond(node) if op in ("&&", "||") else self.as_arith(node)
        operands[-1] = (node, depth)

    def reduce(self, operands: list[_Operand], operators: list[_Operator]) -> None:
        """Apply the operator on top of the stack to its operands."""
        op = operators.pop()
        right, right_depth = operands.pop()
        if op.kind == "prefix":
            self.nesting -= 1
            depth = self.deeper(right_depth, op.pos)
            if op.text == "!":
                operands.append((Not(self.as_cond(self.finish(right)), op.pos), depth))
            elif op.text == "-":
                operands.append((Neg(self.as_arith(right), op.pos), depth))
            else:
                operands.append((self.as_arith(right), right_depth))
            return
        left, left_depth = operands.pop()
        family = _family(op.text)
        if family == "arith":
            node = BinOp(op.text, self.as_arith(left), self.as_arith(right), op.pos)
            operands.append((node, self.deeper(max(left_depth, right_depth), op.pos)))
            return
        # A chain's items sit side by side under one node: it nests one level
        # above its deepest item, however long it is.
        if isinstance(left, _Chain) and left.op == family:
            chain, depth = left, max(left_depth, self.deeper(right_depth, op.pos))
        else:
            chain = _Chain(family, [], op.pos)
            depth = self.deeper(max(left_depth, right_depth), op.pos)
        if family == "cmp":
            right_arith = self.as_arith(right)
            left_arith = _right_of(chain.items[-1]) if chain.items else self.as_arith(left)
            chain.items.append(Compare(op.text, left_arith, right_arith, op.pos))
        else:
            if not chain.items:
                chain.items.append(self.as_cond(self.finish(left)))
                chain.pos = chain.items[0].pos
            chain.items.append(self.as_cond(self.finish(right)))
        operands.append((chain, depth))

    def deeper(self, depth: int, pos: int) -> int:
        if depth + 1 > MAX_DEPTH:
            raise self.error(f"the query nests deeper than {MAX_DEPTH} levels", pos)
        return depth + 1

    def finish(self, node: Cond | Arith | _Chain) -> Cond | Arith:
        if not isinstance(node, _Chain):
            return node
        if node.op == "cmp":
            return node.items[0] if len(node.items) == 1 else And(tuple(node.items), node.pos)
        return (And if node.op == "&&" else Or)(tuple(node.items), node.pos)

    def as_arith(self, node: Cond | Arith | _Chain) -> Arith:
        node = self.finish(node)
        if isinstance(node, Compare | And | Or | Not):
            raise self.error("a condition cannot be used as a number here", node.pos)
        return node

    def as_cond(self, node: Cond | Arith) -> Cond:
        if not isinstance(node, Compare | And | Or | Not):
            raise self.error("expected a comparison such as 'x > 1'", node.pos)
        return node

    # -- subscripts -----------------------------------------------------------

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


def _family(op: str) -> str:
    if op in _COMPARE:
        return "cmp"
    return op if op in ("&&", "||") else "arith"


def _right_of(item: Cond) -> Arith:
    assert isinstance(item, Compare)  # comparison chains hold comparisons only
    return item.right


def _negation_allowed_after(operators: list[_Operator]) -> bool:
    """Whether ``!`` may start here: at the start, after ``(``, ``&&``, ``||``
    or another ``!`` (not inside arithmetic, a comparison or a call)."""
    if not operators:
        return True
    top = operators[-1]
    return top.kind == "group" or top.text in ("&&", "||", "!")


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
    >>> parse("(" * 300 + "x > 1" + ")" * 300)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    quarry.errors.QuerySyntaxError: the query nests deeper than 200 levels
    ...
    """
    if len(query) > _CACHED_LENGTH:
        return _Parser(query).parse()
    return _parse(query)


# Trees are immutable: a query asked of many steps or files parses once. Only
# short texts are kept, so hostile megabyte queries cannot fill the memory.
_CACHED_LENGTH = 4096


@functools.lru_cache(maxsize=4096)
def _parse(query: str) -> Cond:
    return _Parser(query).parse()


def parse_variable(text: str) -> Var:
    """A variable as named outside a query (an output column, a histogram
    axis): a bare name, a path, optionally with subscripts.

    Examples
    --------
    >>> parse_variable("Step#0/x[0:10, 5]")
    Var(name='Step#0/x', pos=0, index=((0, 10, None), 5))
    >>> parse_variable("`g1/my var`[2]")  # in backticks, as a query writes it
    Var(name='g1/my var', pos=0, index=(2,))
    """
    stripped = text.strip()
    if stripped.startswith("`") and stripped.find("`", 1) > 1:
        close = stripped.find("`", 1)
        quoted = _nfc(stripped[1:close])
        bracket = stripped[close + 1 :].startswith("[")
        offset = len(text) - len(text.lstrip()) + close + 1
        if not bracket and stripped[close + 1 :].strip():
            raise QuerySyntaxError("unexpected text after the name", text, offset)
        name = quoted
    else:
        written, bracket_text, _ = text.partition("[")
        bracket = bool(bracket_text)
        name = _nfc(written.strip())
        offset = len(written)
    if not bracket:
        return Var(name, 0)
    try:
        parser = _Parser(text[offset:])  # which reads the tokens, and may refuse one
        parser.accept("[")
        index = parser.subscripts()
        if parser.tok.kind != "end":
            raise parser.error(f"unexpected {parser.describe(parser.tok)} after ']'")
    except QuerySyntaxError as exc:
        raise QuerySyntaxError(exc.message, text, exc.position + offset) from None
    return Var(name, 0, index)


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
    node = parser.expression()
    if isinstance(node, Compare | And | Or | Not):
        raise QuerySyntaxError("expected arithmetic, not a condition", text, node.pos)
    return node
