import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quarry.errors import QuerySyntaxError
from quarry.expr import parse
from quarry.expr.ast import And, BinOp, Compare, Neg, Not, Num, Or, Var


def test_precedence_and_chains():
    node = parse("a > 1 || b < 2 && !(c == 3)")
    assert isinstance(node, Or)
    assert isinstance(node.items[1], And)
    assert isinstance(node.items[1].items[1], Not)
    chain = parse("0 <= x < 5")
    assert isinstance(chain, And) and [c.op for c in chain.items] == ["<=", "<"]
    power = parse("-x**2 < 1").left
    assert isinstance(power, Neg) and isinstance(power.operand, BinOp)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", 1),
        ("1.5", 1.5),
        (".5", 0.5),
        ("5.", 5.0),
        ("1e3", 1000.0),
        ("2.5E-3", 0.0025),
        ("inf", float("inf")),
    ],
)
def test_number_notations(text, value):
    node = parse(f"x > {text}")
    assert isinstance(node, Compare) and node.right == Num(value, node.right.pos)


def test_names_paths_and_backticks():
    assert parse("/Step#0/energy > 1").left == Var("/Step#0/energy", 0)
    assert parse("/data/100/particles/electrons/momentum/z > 0").left.name.endswith("/z")
    assert parse("`Step#1/my var` > 0").left.name == "Step#1/my var"
    assert isinstance(parse("x / 2 > 1").left, BinOp)
    assert isinstance(parse("x/y > 1").left, BinOp)
    assert parse("energy > 1 and not x < 2 or y >= 0") is not None


@pytest.mark.parametrize(
    ("query", "caret", "words"),
    [
        ("energy >", 8, "value was expected"),
        ("energy > > 1", 9, "expected a value"),
        ("x = 1", 2, "=="),
        ("x > 1 & y < 2", 6, "&&"),
        ("(x > 1", 6, "expected ')'"),
        ("x > 1)", 5, "unmatched"),
        ("x", 0, "comparison"),
        ("x > 1 y", 6, "expected an operator"),
        ("1x > 1", 0, "malformed number"),
        ("foo(x) > 1", 0, "unknown function"),
        ("sqrt(x, y) > 1", 0, "takes 1"),
        ("x > `y", 4, "unclosed backtick"),
        ("x $ 1", 2, "unexpected character"),
        ("", 0, "empty query"),
        ("(x > 1) + 2 > 1", 3, "cannot be used as a number"),
    ],
)
def test_errors_point_at_the_bad_token(query, caret, words):
    with pytest.raises(QuerySyntaxError) as info:
        parse(query)
    err = info.value
    assert err.position == caret
    assert words in err.message
    lines = str(err).splitlines()
    assert lines[1] == "  " + query
    assert lines[2] == "  " + " " * caret + "^"


@given(
    whole=st.integers(0, 10**20),
    fraction=st.text("0123456789", max_size=25),
    exponent=st.one_of(st.none(), st.integers(-400, 400)),
)
def test_a_literal_is_exact_only_where_its_decimal_value_is_the_float(whole, fraction, exponent):
    """The integer check that spares most literals the decimal module agrees
    with Decimal: it never calls a rounded literal exact, and a literal's
    exact stand-in is Decimal's whichever way it is found."""
    from decimal import Decimal

    from quarry.expr.parser import _plainly_exact, exact_literal

    text = f"{whole}.{fraction}" + (f"e{exponent}" if exponent is not None else "")
    value = float(text)
    if not math.isfinite(value):
        return
    if _plainly_exact(text, value):
        assert Decimal(text) == value
    if abs(exponent or 0) <= 10 and len(str(whole)) + len(fraction) <= 30:
        assert _plainly_exact(text, value) == (Decimal(text) == value)
    assert (exact_literal(text, value) is None) == (Decimal(text) == value)
