"""Every query against the NumPy oracle, on random data, shapes, dtypes, bins and blocks."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import quarry
from generators import DTYPES, NAMES, column, conditions, shapes, write
from oracle import oracle_ids


@st.composite
def scenarios(draw):
    shape = draw(shapes())
    size = int(np.prod(shape))
    names = NAMES[: draw(st.integers(1, 3))]
    data = {n: column(draw, draw(st.sampled_from(DTYPES)), size).reshape(shape) for n in names}
    indexed = [n for n in names if draw(st.booleans())] or [names[0]]
    build = {
        "bins": draw(st.sampled_from([1, 2, 3, 8, 33, 1024])),
        "block_len": draw(st.sampled_from([1, 3, 7, 64, 100, 1 << 20])),
        "precision": draw(st.sampled_from([None, 0, 1, 2, 3])),
    }
    storage = draw(st.sampled_from(["contiguous", "chunked", "gzip"]))
    queries = [draw(conditions(data)) for _ in range(draw(st.integers(1, 6)))]
    return data, indexed, build, storage, queries


@given(scenarios())
def test_queries_match_the_numpy_oracle(scenario):
    data, indexed, build, storage, queries = scenario
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "data.h5")
        write(path, data, storage)
        with quarry.open(path) as ds:
            ds.build_index(indexed, **build)
        with quarry.open(path) as ds:
            for q in queries:
                expect = oracle_ids(q, data)
                sel = ds.query(q)
                assert sel.count() == len(expect), q
                np.testing.assert_array_equal(sel.ids(), expect, err_msg=q)
                # a fresh selection answers count through the fast path too
                assert ds.query(q).count() == len(expect), q
                if len(expect):
                    name = next(iter(data))
                    np.testing.assert_array_equal(
                        sel.values(name), data[name].reshape(-1)[expect], err_msg=q
                    )
                    coords = sel.coords()
                    assert coords.shape == (len(expect), data[name].ndim)
                    np.testing.assert_array_equal(
                        np.ravel_multi_index(tuple(coords.T), data[name].shape), expect
                    )


@given(scenarios())
def test_unindexed_answers_equal_indexed_answers(scenario):
    data, _, build, storage, queries = scenario
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "data.h5")
        write(path, data, storage)
        with quarry.open(path) as ds:
            scanned = [ds.query(q).ids() for q in queries]
            ds.build_index(**build)
            for q, ids in zip(queries, scanned, strict=True):
                np.testing.assert_array_equal(ds.query(q).ids(), ids, err_msg=q)


def test_min_and_max_of_a_nan_are_unknown(tmp_path):
    """``max(a, b) > 1`` reads b: where b is NaN the comparison is unknown."""
    path = str(tmp_path / "nan.h5")
    data = {"a": np.array([2, 0.5, 3, np.nan]), "b": np.array([np.nan, 0.2, 0.1, 5])}
    write(path, data, "contiguous")
    with quarry.open(path) as ds:
        assert ds.query("max(a, b) > 1").ids().tolist() == [2]
        assert ds.query("min(a, b) < 1").ids().tolist() == [1, 2]
        assert ds.query("!(max(a, b) > 1)").ids().tolist() == [1]
        assert ds.query("a > max(1, nan) || b > min(nan, 0)").count() == 0  # folded
        assert oracle_ids("max(a, b) > 1", data).tolist() == [2]


@given(
    st.sampled_from(["f4", "f8"]),
    st.sampled_from(["f4", "f8", "i2", "u8"]),
    st.integers(0, 2**32 - 1),
    st.sampled_from(["min", "max"]),
    st.sampled_from(["<", ">=", "!=", "=="]),
)
def test_min_and_max_match_numpy_with_nans(a_dtype, b_dtype, seed, func, op):
    rng = np.random.default_rng(seed)
    size = 1000
    data = {
        "a": rng.normal(0, 1, size).astype(a_dtype),
        "b": (rng.normal(0, 1, size) * 3).astype(b_dtype),
    }
    data["a"][rng.random(size) < 0.2] = np.nan
    if data["b"].dtype.kind == "f":
        data["b"][rng.random(size) < 0.2] = np.nan
    query = f"{func}(a, b) {op} 0.5 || {func}(b, a*2) {op} b"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "data.h5")
        write(path, data, "chunked")
        with quarry.open(path) as ds:
            ds.build_index(block_len=64)
            np.testing.assert_array_equal(ds.query(query).ids(), oracle_ids(query, data))
            # the aggregate of an expression leaves the rows it makes NaN out
            (agg,) = ds.query(f"a > mean({func}(a, b))").aggregates
            a, b = data["a"].astype("f8"), data["b"].astype("f8")
            want = np.nanmean(np.minimum(a, b) if func == "min" else np.maximum(a, b))
            assert agg.value == pytest.approx(want, rel=1e-12)
