"""Members of a series plan a query once and bind the plan to their own
variables (quarry.query.planner): the answers stay exact in every member,
whatever dtype each member stores its columns in, and equal to a plan made
from scratch in that member."""

from __future__ import annotations

import os
import tempfile

import h5py
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import quarry
from generators import column, conditions
from oracle import oracle_ids
from quarry.query import planner

#: Each step stores a, b, c in other dtypes: a plan shared across dtypes would be wrong.
STEP_DTYPES = [("f8", "i4", "u1"), ("f4", "i8", "u8"), ("i2", "f8", "f4"), ("f8", "i4", "u1")]
ROWS = 257  # not a multiple of the block length


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_shared_plans_answer_as_plans_made_in_each_member(data):
    steps = [
        {n: column(data.draw, dt, ROWS) for n, dt in zip("abc", dtypes, strict=True)}
        for dtypes in STEP_DTYPES
    ]
    queries = [data.draw(conditions(steps[0])) for _ in range(4)]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "steps.h5")
        with h5py.File(path, "w") as f:
            for s, columns in enumerate(steps):
                for name, values in columns.items():
                    f[f"Step#{s}/{name}"] = values
        with quarry.open(path) as ds:
            ds.build_index(block_len=64, bins=16)
        planner._TEMPLATES.clear()
        with quarry.open_series(path) as series:
            shared = [series.query(q) for q in queries]
            for q, answer in zip(queries, shared, strict=True):
                for s, (member, sel) in enumerate(answer):
                    expected = oracle_ids(q, steps[s])
                    assert np.array_equal(sel.ids(), expected), (q, member)
        for s in range(len(steps)):  # each member on its own, nothing shared
            planner._TEMPLATES.clear()
            with quarry.open(path) as ds:
                for q, answer in zip(queries, shared, strict=True):
                    alone = ds.query_table(q, f"Step#{s}")
                    assert alone.plan == answer.selections[s].plan, (q, s)


def test_steps_share_one_plan_of_a_slice(tmp_path):
    path = tmp_path / "slices.h5"
    with h5py.File(path, "w") as f:
        for s in range(5):
            f[f"Step#{s}/t"] = np.linspace(-1, 1, 100) * (s + 1)
    planner._TEMPLATES.clear()
    with quarry.open_series(str(path)) as series:
        counts = series.query("0.1 <= t < 0.5").counts()
        t = [np.linspace(-1, 1, 100) * (s + 1) for s in range(5)]
        assert counts == [int(np.count_nonzero((x >= 0.1) & (x < 0.5))) for x in t]
    assert [key[0] for key in planner._TEMPLATES] == ["0.1 <= t < 0.5"]
