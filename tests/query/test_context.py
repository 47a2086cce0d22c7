"""Queries with a context path: bare names resolve under one step group."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

import quarry
from oracle import oracle_ids


@pytest.fixture(scope="module")
def steps_h5(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("ctx") / "steps.h5")
    rng = np.random.default_rng(11)
    data = {}
    with h5py.File(path, "w") as f:
        for s in range(3):
            cols = {
                "x": rng.normal(0, 1, 250).astype("f4"),
                "energy": rng.exponential(1.0 + s, 250),
            }
            for k, v in cols.items():
                f[f"Step#{s}/{k}"] = v
            data[s] = cols
        f["x"] = np.arange(250.0)  # a root variable: shortest for a bare x
    with quarry.open(path) as ds:
        ds.build_index(block_len=64)
    return path, data


@pytest.mark.parametrize("step", [0, 1, 2])
@pytest.mark.parametrize("query", ["energy > 1.5 && x < 0.2", "!(x > 0) || energy < 0.1"])
def test_query_in_a_step_matches_numpy(steps_h5, step, query):
    path, data = steps_h5
    with quarry.open(path) as ds:
        sel = ds.query(query, path=f"Step#{step}")
        want = oracle_ids(query, data[step])
        np.testing.assert_array_equal(sel.ids(), want)
        assert sel.count() == len(want)
        np.testing.assert_array_equal(sel.values("energy"), data[step]["energy"][want])
        assert sel.path == f"Step#{step}"
        counts, _ = sel.histogram("x", bins=[-5, 0, 5])
        assert counts.sum() == len(want)


def test_without_context_the_shortest_path_wins(steps_h5):
    path, data = steps_h5
    with quarry.open(path) as ds:
        assert ds.query("x >= 100").count() == 150  # the root /x
        assert ds.variable("x").path == "/x"
        assert ds.variable("x", "Step#2").path == "/Step#2/x"
        # names only the steps hold, or a context naming every step: each step
        sel = ds.query("energy > 1")
        assert sel.counts() == [int((data[s]["energy"] > 1).sum()) for s in range(3)]
        sel = ds.query("x > 1", path="Step#*")
        assert [m.group for m in sel.members] == ["/Step#0", "/Step#1", "/Step#2"]
        assert sel.count() == sum(int((data[s]["x"] > 1).sum()) for s in range(3))


def test_histogram_in_context(steps_h5):
    path, data = steps_h5
    with quarry.open(path) as ds:
        h = ds.histogram("energy", where="x > 0", bins=[0, 1, 2, 50], path="Step#1")
    e, x = data[1]["energy"], data[1]["x"]
    np.testing.assert_array_equal(h.counts, np.histogram(e[x > 0], bins=[0, 1, 2, 50])[0])


def test_the_plan_cache_keeps_contexts_apart(steps_h5):
    path, data = steps_h5
    with quarry.open(path) as ds:
        for _ in range(2):
            for s in range(3):
                got = ds.query("energy > 2", path=f"Step#{s}").count()
                assert got == int((data[s]["energy"] > 2).sum())


@pytest.mark.parametrize("step", [0, 2])
def test_aggregates_and_subarrays_resolve_in_the_context(steps_h5, step):
    path, data = steps_h5
    x = data[step]["x"].astype("f8")
    with quarry.open(path) as ds:
        got = ds.query("x > mean(x) + std(x)", path=f"Step#{step}").ids()
        np.testing.assert_array_equal(got, np.flatnonzero(x > x.mean() + x.std()))
        got = ds.query("x[10:200] > 0.5", path=f"Step#{step}").ids()
        np.testing.assert_array_equal(got, np.flatnonzero(x[10:200] > 0.5))
