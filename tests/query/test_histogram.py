"""Histograms equal NumPy's on the selected values, whichever path answers."""

from __future__ import annotations

import os
import tempfile

import h5py
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import quarry
from oracle import oracle_ids


@st.composite
def cases(draw):
    n = draw(st.sampled_from([0, 1, 50, 333, 1000]))
    dtype = draw(st.sampled_from(["f4", "f8", "i2", "i8"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if dtype[0] == "f":
        e = rng.exponential(1.0, n).astype(dtype)
        e[rng.random(n) < 0.05] = np.nan
        e[rng.random(n) < 0.05] = 1.5  # exactly on an edge
    else:
        e = rng.integers(-30, 30, n).astype(dtype)
    x = rng.uniform(0, 100, n)
    kind = draw(st.sampled_from(["int", "int+range", "edges", "decimal-edges"]))
    if kind == "int":
        bins, rng_ = draw(st.integers(1, 40)), None
    elif kind == "int+range":
        lo = draw(st.floats(-5, 2))
        bins, rng_ = draw(st.integers(1, 40)), (lo, lo + draw(st.floats(0.1, 10)))
    elif kind == "edges":
        bins = sorted(set(draw(st.lists(st.floats(-5, 10), min_size=2, max_size=12))))
        rng_ = None
        if len(bins) < 2:
            bins = [0.0, 1.0]
    else:
        bins, rng_ = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0], None
    where = draw(st.sampled_from([None, "x > 30", "e > 0.5 || x < 10", "!(x > 50)"]))
    block_len = draw(st.sampled_from([7, 100, 1 << 20]))
    return {"e": e, "x": x}, bins, rng_, where, block_len


@given(cases())
def test_histogram_matches_numpy(case):
    data, bins, rng_, where, block_len = case
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "h.h5")
        with h5py.File(path, "w") as f:
            for name, values in data.items():
                f[name] = values
        with quarry.open(path) as ds:
            for build in (False, True):
                if build:
                    ds.build_index(block_len=block_len)
                rows = oracle_ids(where, data) if where else np.arange(len(data["e"]))
                selected = data["e"][rows]
                if selected.dtype.kind == "f":
                    selected = selected[~np.isnan(selected)]
                expect, expect_edges = np.histogram(selected, bins=bins, range=rng_)
                counts, edges = ds.histogram("e", where=where, bins=bins, range=rng_)
                np.testing.assert_array_equal(edges, expect_edges)
                np.testing.assert_array_equal(counts, expect)


def test_index_answers_without_reading_data(tmp_path):
    path = str(tmp_path / "p.h5")
    e = np.random.default_rng(1).exponential(1.0, 100_000).astype("f4")
    with h5py.File(path, "w") as f:
        f["energy"] = e
        f["x"] = np.random.default_rng(2).uniform(0, 200, 100_000)
    with quarry.open(path) as ds:
        ds.build_index(block_len=4096)
        whole = ds.histogram("energy", bins=[0.0, 0.5, 1.0, 1.5, 2.0, 3.0])
        assert whole.path == "index" and whole.values_read == 0
        np.testing.assert_array_equal(whole.counts, np.histogram(e, [0, 0.5, 1, 1.5, 2, 3])[0])
        auto = ds.histogram("energy", bins=100)
        assert auto.path in ("index", "index+data")
        assert auto.values_read < len(e) / 10
        np.testing.assert_array_equal(auto.counts, np.histogram(e, 100)[0])
        sel = ds.query("x > 100").histogram("energy", bins=[0.0, 1.0, 2.0])
        assert sel.path == "index"


def test_2d_3d_and_weighted_use_the_data(tmp_path):
    path = str(tmp_path / "d.h5")
    rng = np.random.default_rng(4)
    cols = {k: rng.normal(size=2000) for k in "xyzw"}
    with h5py.File(path, "w") as f:
        for k, v in cols.items():
            f[k] = v
    with quarry.open(path) as ds:
        ds.build_index()
        h2 = ds.histogram(["x", "y"], where="z > 0", bins=8)
        m = cols["z"] > 0
        expect, ex, ey = np.histogram2d(cols["x"][m], cols["y"][m], bins=8)
        np.testing.assert_array_equal(h2.counts, expect)
        np.testing.assert_array_equal(h2.edges[0], ex)
        np.testing.assert_array_equal(h2.edges[1], ey)
        assert h2.path == "data"
        h3 = ds.histogram(["x", "y", "z"], bins=4)
        np.testing.assert_array_equal(
            h3.counts, np.histogramdd(np.stack([cols[k] for k in "xyz"], 1), bins=4)[0]
        )
        hw = ds.histogram("x", weights="w", bins=5, range=(-2, 2))
        np.testing.assert_allclose(
            hw.counts, np.histogram(cols["x"], bins=5, range=(-2, 2), weights=cols["w"])[0]
        )


@pytest.mark.parametrize("dtype", ["i1", "u1", "?", "i8"])
def test_integer_weights_are_summed_without_wrapping(tmp_path, dtype):
    """NumPy sums int8 weights in int8 (1000 rows of 100 wrap to -88 per
    bin); Quarry sums integer and bool weights in 64 bits."""
    path = str(tmp_path / "w.h5")
    x = np.linspace(0, 1, 1000, endpoint=False)
    w = np.full(1000, 100 if dtype != "?" else True, dtype)
    with h5py.File(path, "w") as f:
        f["x"], f["w"] = x, w
    with quarry.open(path) as ds:
        hw = ds.histogram("x", weights="w", bins=4, range=(0, 1))
    exact = np.histogram(x, bins=4, range=(0, 1), weights=w.astype(np.int64))[0]
    assert hw.counts.tolist() == exact.tolist() == [250 * int(w[0])] * 4


@pytest.mark.parametrize("dtype", ["i8", "u8"])
@pytest.mark.parametrize("edges", [5, [0.0, 0.1, 0.5, 0.55, 1.0]])
def test_64_bit_weights_sum_exactly_or_refuse(tmp_path, dtype, edges):
    """NumPy sums weights in float64 (rounding past 2**53) and casts the sums
    back, which wrapped past 2**63 (three weights of 2**63 summed to 0); each
    bin is the exact sum, checked against Python's integers, or an error."""
    rng = np.random.default_rng(len(dtype) + (edges if isinstance(edges, int) else 0))
    n = 2001  # not a multiple of anything
    x = rng.random(n)
    lo, hi = (-(2**53), 2**53) if dtype == "i8" else (0, 2**54)
    w = rng.integers(lo, hi, n, dtype=dtype)
    w[:5] = [2**53 + 1, 2**53 + 3, 7, 2**52 - 1, 1]
    path = str(tmp_path / "w.h5")
    with h5py.File(path, "w") as f:
        f["x"], f["w"] = x, w
        f["big"] = np.full(n, 2**62 if dtype == "i8" else 2**63, dtype)  # sums past 64 bits
    with quarry.open(path) as ds:
        got = ds.histogram("x", weights="w", bins=edges, range=(0, 1))
        bins_of = np.searchsorted(got.edges, x, side="right") - 1
        bins_of[x == got.edges[-1]] = len(got.edges) - 2
        exact = [sum(int(v) for v in w[bins_of == b]) for b in range(len(got.edges) - 1)]
        assert got.counts.tolist() == exact
        assert got.counts.dtype == np.dtype("i8" if dtype == "i8" else "u8")
        with pytest.raises(quarry.HistogramError, match="past what"):
            ds.histogram("x", weights="big", bins=1, range=(0, 1))


def test_shape_mismatch_in_histogram(tmp_path):
    path = str(tmp_path / "s.h5")
    with h5py.File(path, "w") as f:
        f["a"] = np.zeros(10)
        f["b"] = np.zeros(5)
    with quarry.open(path) as ds, pytest.raises(quarry.ShapeMismatchError):
        ds.query("a > 1").histogram("b")


def test_automatic_bins_over_infinities_is_a_clear_error(tmp_path):
    import subprocess
    import sys

    path = str(tmp_path / "inf.h5")
    with h5py.File(path, "w") as f:
        f["x"] = np.array([1.0, 2.0, np.inf, 3.0])
    with quarry.open(path) as ds:
        for build in (False, True):
            if build:
                ds.build_index()
            with pytest.raises(quarry.HistogramError, match="range"):
                ds.histogram("x")
            assert ds.histogram("x", bins=3, range=(0, 3)).counts.tolist() == [0, 1, 2]
        with pytest.raises(quarry.HistogramError):
            ds.histogram("x", bins=[3, 1, 2])
    proc = subprocess.run(
        [sys.executable, "-m", "quarry.cli.main", "hist", path, "x"], capture_output=True, text=True
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and "--range" in proc.stderr


def test_bad_bins_say_what_to_give(tmp_path):
    """A range given wrong is named as the one given; the data's own
    infinite range asks for one."""
    path = str(tmp_path / "r.h5")
    with h5py.File(path, "w") as f:
        f["x"], f["y"] = np.arange(5.0), np.array([0.0, 1.0, np.inf, 2.0, 3.0])
    with quarry.open(path) as ds:
        with pytest.raises(quarry.QuarryError) as err:
            ds.histogram("x", range=(2.0, 1.0))
        assert str(err.value).endswith("--range takes two finite numbers, the lower first "
                                       "(range=(lo, hi))")  # fmt: skip
        with pytest.raises(quarry.QuarryError, match="give --range/--edges"):
            ds.histogram("y")


@pytest.mark.parametrize("bins", ["auto", "sqrt", "fd", "sturges", "doane", "scott", "rice"])
def test_numpys_bin_estimators_give_numpys_histogram_with_or_without_an_index(tmp_path, bins):
    """A string ``bins`` is NumPy's estimate from the values: on an indexed
    file it gave one bin over [0, 1] (the edges of no data), dropping the rest."""
    path = str(tmp_path / "flat.h5")
    rng = np.random.default_rng(4)
    e = np.concatenate([rng.normal(size=3000), [np.nan] * 5])
    with h5py.File(path, "w") as f:
        f["e"] = e
    finite = e[~np.isnan(e)]
    for indexed in (False, True):
        with quarry.open(path) as ds:
            if indexed:
                ds.build_index()
            for got, values, span in (
                (ds.histogram("e", bins=bins), finite, None),
                (ds.query("e > 0.5").histogram("e", bins=bins), finite[finite > 0.5], None),
                (ds.histogram("e", bins=bins, range=(-1, 2)), finite, (-1, 2)),
            ):
                counts, edges = np.histogram(values, bins=bins, range=span)
                assert np.array_equal(got.edges, edges) and np.array_equal(got.counts, counts)
        with quarry.open_series(path) as series:
            got = series.query("e > 0.5").histogram("e", bins=bins)
            counts, edges = np.histogram(finite[finite > 0.5], bins=bins)
            assert np.array_equal(got.edges, edges) and np.array_equal(got.counts, counts)
