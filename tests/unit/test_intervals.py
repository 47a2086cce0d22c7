"""Literal -> interval conversion is exact for every dtype and literal."""

from fractions import Fraction

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from quarry.expr.plan import float_interval, int_interval

OPS = ["<", "<=", ">", ">=", "=="]


def exact(op, a, b):
    a, b = Fraction(a), Fraction(b)
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b}[op]


literals = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([2**53 + 1, 2**63, 2**63 - 1, 2**64 - 1, 2**64, -(2**63) - 1, 0.5, -0.5]),
)


@given(st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(OPS), literals)
def test_float_interval_is_exact(x, op, lit):
    iv = float_interval(op, lit)
    assert iv is not None
    assert bool(iv.mask(np.array([x]))[0]) == exact(op, x, lit)


@given(st.sampled_from(["i64", "u64"]), st.data(), st.sampled_from(OPS), literals)
def test_int_interval_is_exact(kind, data, op, lit):
    lo, hi = (-(2**63), 2**63 - 1) if kind == "i64" else (0, 2**64 - 1)
    x = data.draw(st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi])))
    iv = int_interval(op, lit, kind)
    assert iv is not None
    dtype = np.int64 if kind == "i64" else np.uint64
    assert bool(iv.mask(np.array([x], dtype=dtype))[0]) == exact(op, x, lit)


def test_nan_literal_is_unknown_and_infinities_are_exact():
    assert float_interval(">", float("nan")) is None
    assert int_interval(">", float("nan"), "i64") is None
    assert int_interval(">", float("inf"), "i64").empty
    assert not int_interval("<", float("inf"), "i64").empty
    assert float_interval("<=", float("inf")).mask(np.array([np.inf]))[0]


def test_decimal_literals_are_exact_for_big_integers(tmp_path):
    import h5py

    import quarry

    path = str(tmp_path / "big.h5")
    with h5py.File(path, "w") as f:
        f["i"] = np.array([2**53, 2**53 + 1, 2**53 + 2, 2**53 + 3], "i8")
    cases = {
        "i == 9007199254740993.5": [],
        "i < 9007199254740994.9": [0, 1, 2],
        "i >= 9007199254740992.5": [1, 2, 3],
        "i > -(9007199254740992.5)": [0, 1, 2, 3],
        "i == 2**53 + 1": [1],  # integer literal arithmetic folds exactly
        "i > 2**52 + 2**52 + 1": [2, 3],
        "i < 9**9**9": [0, 1, 2, 3],  # too big to fold exactly: +inf, beyond every int64
    }
    with quarry.open(path) as ds:
        for build in (False, True):
            if build:
                ds.build_index()
            for query, expect in cases.items():
                assert ds.query(query).ids().tolist() == expect, query


def test_an_integer_literal_is_exact_against_a_float_variable(tmp_path):
    """README: a decimal literal against a float variable is its nearest
    float64; an integer literal keeps its exact value against any variable."""
    import h5py

    import quarry

    path = str(tmp_path / "f.h5")
    with h5py.File(path, "w") as f:
        f["x"] = np.array([2.0**63, -(2.0**63), 2.0**64, 2.0**53, 1.0])
        f["y"] = f["x"][()].astype("f4")
    cases = {
        "x == 9007199254740993": [],
        "x == 9007199254740993.0": [3],
        "x > 9007199254740993": [0, 2],
        "x >= 9007199254740992": [0, 2, 3],
        "x == 9223372036854775807": [],
        "x > 9223372036854775807": [0, 2],
        "x <= 9223372036854775807": [1, 3, 4],
        "x == 9223372036854775807.0": [0],
        "x == 18446744073709551616": [2],
        "x > 18446744073709551615": [2],
        "x < -9223372036854775808": [],
        "y == 9223372036854775807": [],
        "y == 9223372036854775808": [0],
    }
    with quarry.open(path) as ds:
        for build in (False, True):
            if build:
                ds.build_index()
            for query, expect in cases.items():
                assert ds.query(query).ids().tolist() == expect, (query, build)
