"""``--bin-size`` puts edges on the size's decimal multiples, as a query types
them (README: "a range between multiples reads whole bins"): in float64
``0.3 / 0.1`` is ``2.9999999999999996``, so the formula alone left 0.3, 0.6,
0.7, 1.2, 1.4 and 1.9 inside bins of 0.1. Every value's bin, in NumPy and in
the core, is the number of edges at or below it."""

from __future__ import annotations

import decimal
import json
import subprocess
import sys

import h5py
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quarry import _core
from quarry.reorg.binning import Axis, Extent, make_axis
from quarry.reorg.build import core_binning

SIZES = [0.1, 0.05, 0.2, 2.5, 10.0, 0.001, 0.3, 1e-5, 7.0, 0.125]


def nudged(values: np.ndarray) -> np.ndarray:
    """Each value and its neighbours one and two steps of its dtype away."""
    up = np.nextafter(values, values.dtype.type(np.inf))
    down = np.nextafter(values, values.dtype.type(-np.inf))
    return np.concatenate(
        [
            values,
            up,
            down,
            np.nextafter(up, up.dtype.type(np.inf)),
            np.nextafter(down, down.dtype.type(-np.inf)),
        ]
    )


@pytest.mark.parametrize("dtype", ["f4", "f8"])
@pytest.mark.parametrize("size", SIZES)
def test_every_typed_multiple_is_an_edge_and_bins_count_the_edges(dtype, size):
    low, high = -37 * size, 401 * size
    axis = make_axis("/v", np.dtype(dtype), Extent(low, high, True, low, high), size, None)
    assert axis.decimal
    edges = axis.edges()
    first = round(axis.origin / size)
    typed = [float(decimal.Decimal(repr(size)) * (first + c)) for c in range(1, axis.count)]
    # A typed multiple as a query reads it (float64), the edge the least value at or above it.
    assert np.all(edges.astype(np.float64) >= typed)
    assert np.all(np.nextafter(edges, edges.dtype.type(-np.inf)).astype(np.float64) < typed)
    values = nudged(np.concatenate([edges, np.array(typed, dtype)]))
    values = np.concatenate([values, np.array([np.nan, np.inf, -np.inf, low, high], dtype)])
    want = np.clip(np.searchsorted(edges, values, side="right"), 0, axis.count - 1)
    want[np.isnan(values)] = axis.count
    assert axis.assign(values).tolist() == want.tolist()
    floats, float_axes, _ = core_binning([values], [axis])
    keys = np.zeros(len(values), np.uint64)
    _core.add_bins(floats, float_axes, keys)
    assert keys.tolist() == want.tolist()


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["f4", "f8"]),
    st.sampled_from(SIZES),
    st.integers(-(10**6), 10**6),
    st.integers(1, 5000),
    st.data(),
)
def test_numpy_and_the_core_agree_with_the_edges_on_random_values(dtype, size, at, bins, data):
    low = at * size
    high = low + bins * size
    drawn = data.draw(st.lists(st.floats(low - size, high + size), min_size=1, max_size=200))
    steps = data.draw(st.lists(st.integers(at - 1, at + bins + 1), max_size=50))
    typed = [float(decimal.Decimal(repr(size)) * k) for k in steps]
    values = nudged(np.array(drawn + typed, dtype))
    try:
        axis = make_axis("/v", np.dtype(dtype), Extent(low, high, False, low, high), size, None)
    except Exception:  # bins too small for the dtype, or too many: refused before binning
        return
    edges = axis.edges()
    want = np.clip(np.searchsorted(edges, values, side="right"), 0, axis.count - 1)
    assert axis.assign(values).tolist() == want.tolist()
    floats, float_axes, _ = core_binning([values], [axis])
    keys = np.zeros(len(values), np.uint64)
    _core.add_bins(floats, float_axes, keys)
    assert keys.tolist() == want.tolist()


def test_bins_too_narrow_for_the_dtype_keep_the_formulas_edges():
    """float32 near 1e6 has steps of 0.0625: multiples of 0.01 cannot each be
    an edge, so the axis keeps the formula's (still exact, and monotone)."""
    axis = make_axis("/v", np.dtype("f4"), Extent(1e6, 1e6 + 1, False, 1e6, 1e6 + 1), 0.01, None)
    assert not axis.decimal
    assert "decimal" not in axis.to_json()


def test_a_copy_made_before_decimal_edges_keeps_the_formulas():
    doc = Axis("/v", "<f8", 0.0, 2.0, 0.0, 0.1, 21, False).to_json()
    old = Axis.from_json(doc)
    assert not old.decimal and old.edges()[2] == 0.30000000000000004
    new = Axis.from_json({**doc, "decimal": True})
    assert new.decimal and new.edges()[2] == 0.3


@pytest.mark.parametrize("dtype", ["f4", "f8"])
def test_a_range_between_multiples_reads_whole_bins(tmp_path, dtype):
    path = str(tmp_path / "a.h5")
    rng = np.random.default_rng(0)
    energy, x = (rng.random(200_000) * 2).astype(dtype), (rng.random(200_000) * 300).astype(dtype)
    with h5py.File(path, "w") as f:
        f["energy"], f["x"] = energy, x
    quarry = [sys.executable, "-m", "quarry.cli.main"]
    subprocess.run([*quarry, "reorg", path, "--vars", "energy,x", "--bin-size", "0.1,10"],
                   check=True, capture_output=True)  # fmt: skip
    for lo, hi in ((0.2, 0.3), (0.6, 0.8), (1.2, 1.4), (0.7, 1.9)):
        query = f"{lo} <= energy < {hi} && 140 <= x < 150"
        done = subprocess.run([*quarry, "query", path, query, "--explain", "--json"],
                              check=True, capture_output=True, text=True)  # fmt: skip
        answer = json.loads(done.stdout)
        (plan,) = answer["plan"]
        assert plan["access"] == "mdbin" and plan["candidates"] == 0, plan
        want = (energy >= lo) & (energy < hi) & (x >= 140) & (x < 150)
        assert answer["count"] == int(want.sum())
