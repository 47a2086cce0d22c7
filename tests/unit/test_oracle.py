"""The test oracle on hand-checked cases: it parses and evaluates on its own,
so these pin what it believes DESIGN.md says."""

from __future__ import annotations

import numpy as np
import pytest

from oracle import oracle_ids

A = np.array([2, 0.5, 3, np.nan])
B = np.array([np.nan, 0.2, 0.1, 5])


@pytest.mark.parametrize(
    ("query", "want"),
    [
        ("max(a, b) > 1", [2]),
        ("min(a, b) < 1", [1, 2]),
        ("!(a > 1)", [1]),  # NOT keeps unknown: row 3 (NaN) stays out
        ("a > 1 || b > 1", [0, 2, 3]),  # true || unknown is true
        ("not (a > 1 and b < 1)", [1, 3]),  # false && unknown is false
        ("1 < a <= 3", [0, 2]),
        ("a > (-5) && -(-a) > 2.5", [2]),
        ("2**-1 < a/1", [0, 2]),
        ("`a` >= 0.5 && /b < 1", [1, 2]),
        ("a > nan || a != nan", []),
        ("sqrt(abs(-a)) * 2 - log10(exp(0)) >= 2", [0, 2]),
    ],
)
def test_semantics_on_small_columns(query, want):
    assert oracle_ids(query, {"a": A, "b": B, "/b": B}).tolist() == want


def test_integers_compare_exactly_with_any_literal():
    x = np.array([2**53, 2**53 + 1, 2**63 - 1], dtype="i8")
    u = np.array([0, 2**64 - 1, 2**63], dtype="u8")
    assert oracle_ids("x == 9007199254740993", {"x": x}).tolist() == [1]
    assert oracle_ids("x < 9.007199254740993e15", {"x": x}).tolist() == [0]  # exact decimal
    assert oracle_ids("u >= 18446744073709551615", {"u": u}).tolist() == [1]
    assert oracle_ids("u > 1e400 || u < -1e400", {"u": u}).tolist() == []
    # arithmetic on a variable is float64: x + 0 rounds 2**53 + 1 to 2**53
    assert oracle_ids("x + 0 == 9007199254740993", {"x": x}).tolist() == [0, 1]
    # arithmetic on integer literals alone is exact: an integer literal
    assert oracle_ids("x == 2**53 + 1", {"x": x}).tolist() == [1]
    assert oracle_ids("x == 2**63 - 1", {"x": x}).tolist() == [2]


def test_floats_compare_with_the_literals_float64():
    f = np.array([0.1, 0.2], dtype="f4")  # float32(0.1) > float64(0.1)
    assert oracle_ids("f > 0.1", {"f": f}).tolist() == [0, 1]
    assert oracle_ids("f > 9007199254740993", {"f": np.array([2.0**53])}).tolist() == []
