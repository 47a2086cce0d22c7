"""Long OR / AND chains of ranges on one variable, which the planner unites and
intersects into a few disjoint ranges, against the NumPy oracle."""

from __future__ import annotations

import os
import tempfile

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import quarry
from generators import DTYPES, column, literal, write
from oracle import oracle_ids


@st.composite
def chains(draw):
    size = draw(st.sampled_from([1, 7, 64, 65, 300]))
    data = {
        "a": column(draw, draw(st.sampled_from(DTYPES)), size),
        "b": column(draw, "f8", size),
    }
    n = draw(st.integers(1, 40))
    terms = []
    for _ in range(n):
        name = "a" if draw(st.integers(0, 5)) else "b"
        op = draw(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]))
        lit = literal(draw, data[name])
        terms.append(f"{name} {op} ({lit})")
    shape = draw(st.sampled_from(["or", "and", "or of ands", "and of ors", "not"]))
    if shape == "or":
        query = " || ".join(terms)
    elif shape == "and":
        query = " && ".join(terms)
    else:
        cut = max(1, n // 2)
        inner, outer = (" && ", " || ") if shape == "or of ands" else (" || ", " && ")
        parts = [f"({inner.join(terms[:cut])})", f"({inner.join(terms[cut:] or terms[:1])})"]
        query = outer.join(parts)
        if shape == "not":
            query = f"!({' || '.join(terms)}) || !({' && '.join(terms)})"
    block_len = draw(st.sampled_from([3, 64, 1 << 20]))
    return data, query, block_len


@settings(max_examples=150, deadline=None)
@given(chains())
def test_range_chains_match_the_numpy_oracle(case):
    data, query, block_len = case
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "data.h5")
        write(path, data, "contiguous")
        with quarry.open(path) as ds:
            ds.build_index(["a"], bins=8, block_len=block_len)
            expect = oracle_ids(query, data)
            assert ds.query(query).count() == len(expect), query
            np.testing.assert_array_equal(ds.query(query).ids(), expect, err_msg=query)


def test_a_3000_term_chain_plans_into_few_ranges():
    from quarry.expr.plan import OrNode, RangeLeaf

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "x.h5")
        x = np.arange(-50, 4000, dtype=np.int64)
        write(path, {"x": x}, "contiguous")
        with quarry.open(path) as ds:
            ds.build_index()
            q_and = " && ".join(f"x != {i}" for i in range(3000))
            plan = ds.query(q_and).plan
            assert isinstance(plan, OrNode) and len(plan.items) == 2
            assert ds.query(q_and).count() == np.count_nonzero((x < 0) | (x >= 3000))
            q_or = " || ".join(f"x == {i}" for i in range(3000))
            assert isinstance(ds.query(q_or).plan, RangeLeaf)
            assert ds.query(q_or).count() == 3000
