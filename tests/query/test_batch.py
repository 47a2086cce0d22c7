"""Many small queries against one open file or series, against NumPy."""

from __future__ import annotations

import itertools

import h5py
import numpy as np
import pytest

import quarry
from oracle import oracle_ids
from quarry.query.batch import parse_batch


@pytest.fixture(scope="module")
def beam(tmp_path_factory):
    """Two H5Part files of three steps; t is the longitudinal coordinate."""
    d = tmp_path_factory.mktemp("batch")
    rng = np.random.default_rng(77)
    truth = {}
    for k in (1, 2):
        path = str(d / f"beam_{k}.h5")
        with h5py.File(path, "w") as f:
            for s in range(3):
                n = 301 - 13 * s - k
                cols = {"t": rng.normal(0, 1, n), "x": rng.normal(0, 1, n).astype("f4")}
                cols["t"][rng.random(n) < 0.03] = np.nan
                for name, v in cols.items():
                    f[f"Step#{s}/{name}"] = v
                truth[(path, s)] = cols
        with quarry.open(path) as ds:
            ds.build_index(block_len=100)
    return str(d), truth


def slices(n=40):
    edges = np.linspace(-3, 3, n + 1).tolist()
    return [f"{a!r} <= t < {b!r}" for a, b in itertools.pairwise(edges)] + [
        "t < -3 || t >= 3",
        "!(t < 0) && x > 0.5",
    ]


def test_query_many_matches_numpy_in_each_step(beam):
    d, truth = beam
    path = f"{d}/beam_1.h5"
    queries = slices()
    with quarry.open(path) as ds:
        for s in range(3):
            got = ds.query_many(queries, path=f"Step#{s}")
            assert got == [len(oracle_ids(q, truth[(path, s)])) for q in queries]
        # the slices partition the non-missing rows
        cols = truth[(path, 2)]
        assert sum(ds.query_many(queries[:-1], path="Step#2")) == int(np.sum(~np.isnan(cols["t"])))


def test_the_index_is_opened_once(beam, monkeypatch):
    d, _ = beam
    import quarry.index.store as store

    opened = []
    real = store.IndexStore.__init__

    def counting(self, *args):
        opened.append(args)
        real(self, *args)

    monkeypatch.setattr(store.IndexStore, "__init__", counting)
    with quarry.open(f"{d}/beam_2.h5") as ds:
        ds.query_many(slices(), path="Step#1")
    assert len(opened) == 1


def test_series_query_many_matches_numpy(beam):
    d, truth = beam
    queries = slices(10)
    with quarry.open_series(f"{d}/beam_*.h5") as series:
        answers = series.query_many(queries)
        for q, sel in zip(queries, answers, strict=True):
            want = [len(oracle_ids(q, truth[(m.file, m.step)])) for m in series.members]
            assert sel.counts() == want and sel.count() == sum(want)


def test_a_syntax_error_names_the_query_before_any_runs(beam):
    d, _ = beam
    with quarry.open(f"{d}/beam_1.h5") as ds:
        with pytest.raises(quarry.QuerySyntaxError, match="query 3: ") as err:
            ds.query_many(["t > 0", "x < 1", "t >> 1"], path="Step#0")
        assert err.value.query == "t >> 1" and "\n  t >> 1\n     ^" in str(err.value)
        with pytest.raises(quarry.BatchQueryError, match=r"query 2 \(u > 1\): no variable 'u'"):
            ds.query_many(["t > 0", "u > 1"], path="Step#0")
    with quarry.open_series(f"{d}/beam_*.h5") as series:
        with pytest.raises(quarry.BatchQueryError, match=r"query 1 .*beam_1.h5, step 0") as err:
            series.query_many(["u > 1"])
        assert isinstance(err.value.error, quarry.SeriesMemberError)


def test_parse_batch_skips_blanks_and_comments_only():
    text = "# header\n\n  t > 1\n#t < 0\n/Step#0/t < 2 # not a comment\n\t\n"
    assert parse_batch(text) == [(3, "t > 1"), (5, "/Step#0/t < 2 # not a comment")]


@pytest.mark.parametrize("indexed", [False, True])
def test_slices_of_an_aggregate_over_an_empty_or_all_nan_step_count_zero(tmp_path, indexed):
    """mean(t) of an empty (or all-NaN) step is NaN, so every slice around it
    selects nothing; the batch of them raised a bare ValueError instead."""
    path = str(tmp_path / "e.h5")
    t = np.linspace(-3, 3, 50)
    with h5py.File(path, "w") as f:
        f["Step#0/t"], f["Step#1/t"], f["Step#2/t"] = t, np.zeros(0), np.array([np.nan])
    queries = [f"mean(t) + {a} <= t && t < mean(t) + {a + 0.1}" for a in (0.1, 0.2, -0.5)]
    with quarry.open_series(path) as series:
        if indexed:
            series.build_indexes()
        got = [sel.counts() for sel in series.query_many(queries)]
    for step, values in enumerate((t, np.zeros(0), np.array([np.nan]))):
        mean = values.mean() if values.size else np.nan
        for k, a in enumerate((0.1, 0.2, -0.5)):
            want = int(np.count_nonzero((mean + a <= values) & (values < mean + a + 0.1)))
            assert got[k][step] == want, (step, queries[k])
