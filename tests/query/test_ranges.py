"""Batches of ranges: re-planned in their literals and counted together
(quarry.query.ranges), against NumPy and against each query planned alone."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import h5py
import numpy as np
import pytest

import quarry
from oracle import oracle_ids
from quarry.expr.keys import key_kind
from quarry.query import ranges
from quarry.query.execute import IMPORT_COST, Executor
from quarry.query.ranges import Intervals, Shapes

DTYPES = ["f8", "f4", "i4", "u2", "i8"]


def make_column(rng: np.random.Generator, dtype: str, n: int) -> np.ndarray:
    if dtype.startswith("f"):
        v = rng.normal(5, 3, n).round(rng.integers(0, 3)).astype(dtype)
        v[rng.random(n) < 0.05] = np.nan
        v[rng.random(n) < 0.01] = np.inf
        return v
    return rng.integers(0 if dtype.startswith("u") else -20, 20, n).astype(dtype)


def random_queries(rng: np.random.Generator, k: int) -> list[str]:
    """Ranges of x written many ways, float and integer literals mixed, a
    few that are not ranges, and numbers landing on stored values."""

    def number() -> str:
        v = rng.choice([rng.normal(5, 4), float(rng.integers(-3, 12)), rng.integers(-3, 12)])
        return repr(float(v)) if isinstance(v, float) else str(int(v))

    forms = [
        "{a} <= x && x < {b}",
        "{a} < x && x <= {b}",
        "x > {a}",
        "x <= {a}",
        "x == {a}",
        "{a} <= x < {b}",
        "-{a} <= x",
        "mean(x) + {a} <= x && x < mean(x) + {b}",
        "x >= min(x) + {a} && x < max(x) - {b}",
        "x > {a} * 2 - {b} / 4",
        "x < {a} && x > {b} && x != {a}",
        "x > {a} || x < {b}",
        "x * 2 > {a}",
    ]
    return [rng.choice(forms).format(a=number(), b=number()) for _ in range(k)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("indexed", [True, False])
def test_a_batch_counts_as_each_query_alone_and_as_numpy(tmp_path, dtype, indexed):
    rng = np.random.default_rng(sum(map(ord, dtype)) + indexed)
    n = 1009  # not a multiple of the block length
    x = make_column(rng, dtype, n)
    path = str(tmp_path / "r.h5")
    with h5py.File(path, "w") as f:
        f["x"] = x
    queries = random_queries(rng, 300)
    with quarry.open(path) as ds:
        if indexed:
            ds.build_index(block_len=128, bins=16)
        batch = ds.query_many(queries)
        alone = [ds.query(q).count() for q in queries]
    assert batch == alone
    for q, got in zip(queries, batch, strict=True):
        if "(" not in q:  # the oracle has no aggregates
            assert got == len(oracle_ids(q, {"x": x})), q


def test_slices_around_the_mean_equal_exact_counts_from_sorted_values(tmp_path):
    rng = np.random.default_rng(15)
    path = str(tmp_path / "beam.h5")
    steps = [rng.normal(1e-9, 2e-12, 20_000 + 7 * s) for s in range(3)]
    with h5py.File(path, "w") as f:
        for s, t in enumerate(steps):
            f[f"Step#{s}/t"] = t
    width = float(steps[0].std()) / 100
    edges = [float(v) for v in np.arange(-200, 201) * width]
    queries = [f"mean(t) + {a!r} <= t && t < mean(t) + {b!r}" for a, b in itertools.pairwise(edges)]
    with quarry.open_series(path) as series:
        series.build_indexes()
        answers = series.query_many(queries)
        for s, t in enumerate(steps):
            mean = series.query("t < mean(t)").selections[s].aggregates[0].value
            cuts = np.searchsorted(np.sort(t), mean + np.array(edges), side="left")
            assert [a.counts()[s] for a in answers] == np.diff(cuts).tolist()
        # Rows of a counted query are planned when asked for, and agree.
        picked = answers[200]
        assert [len(ids) for ids in picked.ids()] == picked.counts()


def test_shapes_group_queries_that_differ_only_in_numbers():
    shapes = Shapes(["x < 1.5", "x < -2.5", "x < 3", "y < 1.0", "x < 1e300 * 10.0"])
    assert [(g.first, g.rest, g.alone) for g in shapes.groups] == [
        (0, [0, 1], [2]),  # a first query of floats is re-planned with the others
        (3, [3], []),
        (4, [4], []),
    ]
    assert shapes.groups[0].matrix.tolist() == [[1.5], [-2.5]]
    assert Shapes(["x < 1", "x < 2.5"]).groups[0].rest == [1]


def test_the_cheaper_access_path_is_chosen(tmp_path):
    path = str(tmp_path / "c.h5")
    x = np.random.default_rng(3).normal(0, 1, 100_000)
    with h5py.File(path, "w") as f:
        f["x"] = x
    with quarry.open(path) as ds:
        ds.build_index()
        info = ds.variable("x")
        table = ds.query("x > 0").table
        ex = Executor(ds.driver, ds._open_store(), table)

        def intervals(edges: np.ndarray) -> Intervals:
            k = len(edges) - 1
            ones = np.ones(k, bool)
            return Intervals(edges[:-1], ones, edges[1:], ~ones, ~ones)

        one = ex.estimate(info, intervals(np.array([0.5, 0.75])))
        many = ex.estimate(info, intervals(np.linspace(-2, 2, 401)))
        assert key_kind(info.dtype) == "f64"
        assert one is not None and one.choice == "index" and one.candidates < 10_000
        assert many is not None and many.choice == "scan"
        for iv in (intervals(np.array([0.5, 0.75])), intervals(np.linspace(-2, 2, 401))):
            want = [
                int(np.count_nonzero((x >= a) & (x < b)))
                for a, b in itertools.pairwise(np.r_[iv.lo, iv.hi[-1:]])
            ]
            assert ex.count_ranges(info, iv).tolist() == want


def test_a_failure_in_a_batch_names_the_query_file_and_step(tmp_path):
    path = str(tmp_path / "s.h5")
    with h5py.File(path, "w") as f:
        f["Step#0/t"], f["Step#1/t"] = np.arange(5.0), np.arange(6.0)
    with quarry.open_series(path) as series:
        with pytest.raises(quarry.BatchQueryError, match=r"query 2 .*step 0") as err:
            series.query_many(["t < 1.5", "mean(u) < t", "t < 2.5"])
        assert isinstance(err.value.error, quarry.SeriesMemberError)


@pytest.mark.parametrize("bins, path", [(2, "scan"), (None, "index")])
def test_one_range_takes_the_cheaper_path_and_says_so(tmp_path, bins, path):
    """Two bins without decimal edges: the boundary bin holds half the rows.
    The range holds few rows, so its ids cost the index little to list too."""
    rng = np.random.default_rng(8)
    x = rng.normal(0, 1, 50_000)
    x[rng.random(len(x)) < 0.02] = np.nan
    file = str(tmp_path / "one.h5")
    with h5py.File(file, "w") as f:
        f["x"] = x
    query = "x > 0.123 && x <= 0.3"
    want = oracle_ids(query, {"x": x})
    with quarry.open(file) as ds:
        ds.build_index(bins=bins, precision=0 if bins else None)
        counted, listed = ds.query(query), ds.query(query)
        assert counted.count() == len(want)
        assert listed.ids().tolist() == want.tolist()
        for sel in (counted, listed):
            (access,) = sel.access()
            assert (access.condition, access.path) == ("0.123 < /x <= 0.3", path)
            assert access.estimate is not None and access.estimate.choice == path
            scanned = sel.stats().rows_scanned
            assert scanned == (len(x) if path == "scan" else 0)
    run = subprocess.run(
        [sys.executable, "-m", "quarry.cli.main", "query", file, query, "--explain"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert run.stdout.strip() == str(len(want))
    assert f"plan: 0.123 < /x <= 0.3: {path} (index: " in run.stderr
    run = subprocess.run(
        [sys.executable, "-m", "quarry.cli.main", "query", file, query, "--explain", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    (plan,) = json.loads(run.stdout)["plan"]
    # A fresh command has not imported NumPy, which a scan needs.
    assert plan["access"] == path and plan["scan_cost"] == 8192 + len(x) + IMPORT_COST


def test_a_batch_plans_once_per_step_and_counts_each_column_in_one_pass(tmp_path, monkeypatch):
    """The README: queries differing only in their numbers are planned once per
    step, and ranges of one variable are counted together (here by one scan)."""
    from quarry.query.planner import Planner

    path = str(tmp_path / "b.h5")
    rng = np.random.default_rng(4)
    steps = [rng.normal(0, 1, 5_000) for _ in range(3)]
    with h5py.File(path, "w") as f:
        for s, t in enumerate(steps):
            f[f"Step#{s}/t"] = t
    edges = [float(v) for v in np.linspace(-2, 2, 401)]
    queries = [f"mean(t) + {a!r} <= t && t < mean(t) + {b!r}" for a, b in itertools.pairwise(edges)]
    planned, shaped, passes = [], [], []
    real_plan, real_scan, real_bound = Planner._plan, Executor._scan_counts, ranges._bound
    monkeypatch.setattr(Planner, "_plan", lambda self, *a: planned.append(a) or real_plan(self, *a))
    monkeypatch.setattr(ranges, "_bound", lambda *a: shaped.append(a) or real_bound(*a))
    monkeypatch.setattr(
        Executor, "_scan_counts", lambda self, *a: passes.append(a) or real_scan(self, *a)
    )
    with quarry.open_series(path) as series:
        series.build_indexes()
        counts = [answer.counts() for answer in series.query_many(queries)]
        # One shape of floats: planned in its literals alone, once per step.
        assert not planned and len(shaped) == len(steps) and len(passes) == len(steps)
        again = [answer.counts() for answer in series.query_many(queries)]
    assert again == counts and len(shaped) == len(steps)  # the batch is not planned again
    for s, t in enumerate(steps):
        assert sum(c[s] for c in counts) == int(np.count_nonzero(np.abs(t - t.mean()) < 2))


def test_a_shape_planned_in_steps_of_other_dtypes_and_variables_counts_as_numpy(tmp_path):
    """Each step plans the batch's shapes against its own variables: a step
    whose t is float32 or integer (planned query by query) or whose t is a
    root variable gives each query's own count, as NumPy does."""
    rng = np.random.default_rng(21)
    path = str(tmp_path / "mixed.h5")
    steps = [
        rng.normal(0, 1, 3001),
        rng.normal(0, 1, 2999).astype("f4"),
        rng.integers(-3, 4, 3000).astype("i4"),
        rng.normal(0.5, 2, 3003),
    ]
    steps[0][::13] = np.nan
    with h5py.File(path, "w") as f:
        for s, t in enumerate(steps):
            f[f"Step#{s}/t"] = t
    edges = [float(v) for v in np.linspace(-2.5, 2.5, 41)]
    queries = [f"mean(t) + {a!r} <= t && t < mean(t) + {b!r}" for a, b in itertools.pairwise(edges)]
    queries += ["t > 0.25", "t > 1", "t < 0.5 * 3.0", "t < -0.5 * 3.0"]
    with quarry.open_series(path) as series:
        series.build_indexes(block_len=512)
        batch = [answer.counts() for answer in series.query_many(queries)]
        alone = [series.query(q).counts() for q in queries]
        assert batch == alone
    for s, t in enumerate(steps):
        mean = np.float64(np.nanmean(t.astype("f8"))) if t.dtype.kind == "f" else t.mean()
        for q, counts in zip(queries[-4:], batch[-4:], strict=True):
            assert counts[s] == len(oracle_ids(q, {"t": t})), (q, s)
        assert sum(c[s] for c in batch[:-4]) == int(
            np.count_nonzero((t >= mean - 2.5) & (t < mean + 2.5))
        )


def test_a_mistake_in_a_shape_of_floats_names_its_first_query_and_step(tmp_path):
    path = str(tmp_path / "s.h5")
    with h5py.File(path, "w") as f:
        f["Step#0/t"], f["Step#1/u"] = np.arange(5.0), np.arange(6.0)
    with quarry.open_series(path) as series:
        with pytest.raises(quarry.BatchQueryError, match=r"query 2 .*step 0"):
            series.query_many(["t < 1.5", "mean(u) + 0.5 < t", "mean(u) + 1.5 < t"])
        with pytest.raises(quarry.BatchQueryError, match=r"query 1 .*step 1") as err:
            series.query_many(["mean(t) + 0.5 < t", "mean(t) + 1.5 < t"])
        assert isinstance(err.value.error, quarry.SeriesMemberError)
