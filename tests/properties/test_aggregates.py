"""Aggregates inside conditions against NumPy: the values (from the index and
from a pass over the data) and the rows of conditions that use them."""

from __future__ import annotations

import math
import os
import tempfile
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import quarry
from generators import DTYPES, column, shapes, write
from oracle import oracle_ids

FUNCS = ["mean", "std", "rms", "min", "max", "sum", "count"]


EPS = float(np.finfo(np.float64).eps)


def numpy_aggregate(func: str, values: np.ndarray) -> float | int:
    """The aggregate as NumPy computes it over the non-missing values."""
    v = values.reshape(-1)
    if v.dtype.kind == "f":
        v = v[~np.isnan(v)]
    if func == "count":
        return len(v)
    if func == "sum":
        with np.errstate(all="ignore"):
            return float(np.sum(v.astype(np.float64)))
    if len(v) == 0:
        return math.nan
    if func in ("min", "max"):
        return getattr(v, func)().item()
    wide = v.astype(np.float64)
    with np.errstate(all="ignore"):
        return float(
            {"mean": np.mean, "std": np.std, "rms": lambda w: np.sqrt(np.mean(w * w))}[func](wide)
        )


def assert_aggregate(got: float | int, func: str, values: np.ndarray, what: str) -> None:
    """``got`` against the exact aggregate of the non-missing values (Python
    ints and Fractions, rounded once), within the error float64 summation
    can make in any order: n * eps * sum(|v|) for sums and means, relative
    n * eps for sums of squares. Counts, minima and maxima are exact."""
    v = values.reshape(-1)
    if v.dtype.kind == "f":
        v = v[~np.isnan(v)]
    n = len(v)
    python = v.tolist()  # exact: Python ints for integers, floats for floats
    if func == "count":
        assert got == n and type(got) is int, (what, got, n)
        return
    if func in ("min", "max"):
        want = (min if func == "min" else max)(python) if n else math.nan
        if n == 0:
            assert math.isnan(got), (what, got)
        else:
            assert got == want and type(got) is type(want), (what, got, want)
        return
    if not all(math.isfinite(x) for x in python):  # infinities: IEEE's answer, exactly
        want = numpy_aggregate(func, values)
        assert got == want or (math.isnan(got) and math.isnan(want)), (what, got, want)
        return
    if n == 0:
        assert (got == 0.0) if func == "sum" else math.isnan(got), (what, got)
        return
    exact = [Fraction(x) for x in python]
    total, squares = sum(exact), sum(x * x for x in exact)
    magnitude = float(sum(abs(x) for x in exact))
    if func == "sum":
        want, allowed = float(total), n * EPS * magnitude
    elif func == "mean":
        want, allowed = float(total / n), EPS * (magnitude + abs(float(total / n)))
    elif func == "rms":
        want = math.sqrt(float(squares / n))
        allowed = 2 * n * EPS * want
    else:  # std: compare variances, whose error scales with the mean square
        variance = float(squares / n - (total / n) ** 2)
        assert abs(float(got) ** 2 - variance) <= 4 * n * EPS * float(squares / n), (
            what,
            got,
            math.sqrt(variance),
        )
        return
    assert abs(float(got) - want) <= allowed, (what, got, want, allowed)


@st.composite
def scenarios(draw):
    shape = draw(shapes())
    size = int(np.prod(shape))
    dtypes = draw(st.lists(st.sampled_from(DTYPES), min_size=2, max_size=2))
    data = {n: column(draw, dt, size).reshape(shape) for n, dt in zip("ab", dtypes, strict=True)}
    # Keep magnitudes where float64 sums of squares do not overflow, so the
    # comparison with NumPy is about the method, not about overflow.
    for n, v in data.items():
        if v.dtype.kind == "f":
            wide = v.astype(np.float64)
            data[n] = np.where(np.isfinite(wide) & (np.abs(wide) > 1e100), 1.5, wide).astype(
                v.dtype
            )
    block_len = draw(st.sampled_from([1, 7, 64, 1000]))
    indexed = draw(st.booleans())
    func = draw(st.sampled_from(FUNCS))
    op = draw(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]))
    return data, block_len, indexed, func, op


@given(scenarios())
def test_aggregates_match_numpy(scenario):
    data, block_len, indexed, func, op = scenario
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "data.h5")
        write(path, data, "contiguous")
        with quarry.open(path) as ds:
            if indexed:
                ds.build_index(block_len=block_len)
            sel = ds.query(f"a {op} {func}(a)")
            expr_sel = ds.query(f"b*a {op} {func}(b*a)")
            (over_a,) = sel.aggregates
            (over_ba,) = expr_sel.aggregates
            assert over_a.source == ("index" if indexed else "data")
            assert over_ba.source == "data"  # an expression always takes a pass
            assert_aggregate(over_a.value, func, data["a"], func)
            with np.errstate(all="ignore"):
                ba = data["b"].astype(np.float64) * data["a"].astype(np.float64)
            assert_aggregate(over_ba.value, func, ba, f"{func}(b*a)")
            # Each condition is exact given its aggregate's value.
            for got, template in ((sel, "a {} {}"), (expr_sel, "b*a {} {}")):
                value = got.aggregates[0].value
                literal = _exact_literal(value)
                expect = oracle_ids(template.format(op, literal), data)
                np.testing.assert_array_equal(got.ids(), expect, err_msg=template)


def _exact_literal(value: int | float) -> str:
    """``value`` written so the literal's exact value is the aggregate's: a
    float64's full decimal expansion (its shortest repr, read exactly, is
    another number, which integer columns would compare against).

    >>> _exact_literal(-7.921435773090242e18), _exact_literal(0.5), _exact_literal(float("nan"))
    ('-7921435773090241536', '0.5', 'nan')
    """
    if isinstance(value, int) or not math.isfinite(value):
        return str(value) if isinstance(value, int) else repr(float(value))
    return format(Decimal(value), "f")


def test_aggregate_errors_and_report(tmp_path):
    path = str(tmp_path / "d.h5")
    write(path, {"a": np.arange(10.0), "m": np.zeros((2, 3))}, "contiguous")
    with quarry.open(path) as ds:
        with pytest.raises(quarry.QuerySyntaxError, match="needs a variable"):
            ds.query("a > mean(3)")
        with pytest.raises(quarry.QuarryError, match="compares no variable"):
            ds.query("mean(a) > 1")
        with pytest.raises(quarry.ShapeMismatchError, match="one shape"):
            ds.query("a > mean(a*m)")
        with pytest.raises(quarry.QuerySyntaxError, match="takes 1 argument"):
            ds.query("a > std(a, a)")
        # min and max of two values stay row by row
        assert ds.query("max(a, 3) > 5").count() == 4
        # an aggregate over another shape does not join the table
        assert ds.query("a >= max(m) + 9").ids().tolist() == [9]
        assert ds.query("a > mean(a)").aggregates[0].to_dict() == {
            "expr": "mean(/group/a)",
            "value": 4.5,
            "from": "data",
        }
