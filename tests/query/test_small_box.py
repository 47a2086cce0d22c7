"""An AND of ranges over a small table (a step of a long series) is scanned in one
pass over its columns instead of through the index: the same answers as NumPy and
as the index path, for every dtype, NaN, fill values, empty ranges and row counts
that are no multiple of 64; a larger table, or one of several blocks, keeps the
index's plan."""

from __future__ import annotations

import operator

import h5py
import netCDF4
import numpy as np
import pytest

import quarry
from quarry.query.execute import SMALL_BOX_VALUES

DTYPES = ["i1", "u1", "i2", "u4", "i8", ">i8", "u8", "f4", "f8", ">f4"]
LOWER = {">": operator.gt, ">=": operator.ge}
UPPER = {"<": operator.lt, "<=": operator.le}


def column(rng: np.random.Generator, dtype: str, n: int) -> np.ndarray:
    kind = np.dtype(dtype)
    if kind.kind == "f":
        values = rng.integers(-20, 20, n).astype(kind) / 2
        values[rng.random(n) < 0.1] = np.nan
        return values
    info = np.iinfo(kind)
    native = kind.newbyteorder("=")
    edges = np.array([info.min, info.max, info.max - 1], dtype=native)
    values = rng.integers(max(info.min, -20), min(info.max, 20), n, endpoint=True).astype(native)
    return np.where(rng.random(n) < 0.05, rng.choice(edges, n), values).astype(kind)


def box(rng: np.random.Generator, names: list[str], data: dict[str, np.ndarray]):
    """A random AND of two or three ranges, as text and as NumPy's mask."""
    text, mask = [], np.ones(len(next(iter(data.values()))), dtype=bool)
    for name in rng.choice(names, int(rng.integers(2, 4)), replace=False):
        # The bounds are small integers: float64's rounding of the extremes
        # (2**63 - 1) leaves them on the same side.
        values = data[name].astype(np.float64)
        lo, hi = sorted(int(v) for v in rng.integers(-22, 22, 2))
        lower, upper = rng.choice(list(LOWER)), rng.choice(list(UPPER))
        text.append(f"{name} {lower} {lo} && {name} {upper} {hi}")
        with np.errstate(invalid="ignore"):
            mask &= LOWER[lower](values, lo) & UPPER[upper](values, hi)
    return " && ".join(text), mask


@pytest.mark.parametrize("n", [1, 63, 1037, 4093])
def test_a_small_box_equals_numpy_and_the_index(tmp_path, n):
    rng = np.random.default_rng(n)
    data = {f"v{k}": column(rng, dtype, n) for k, dtype in enumerate(DTYPES)}
    paths = {}
    for label, block_len in (("one block", None), ("blocks of 16", 16)):
        paths[label] = str(tmp_path / f"{label}.h5")
        with h5py.File(paths[label], "w") as f:
            for name, values in data.items():
                f[name] = values
        with quarry.open(paths[label]) as ds:
            ds.build_index(**({} if block_len is None else {"block_len": block_len}))
    names = list(data)
    with quarry.open(paths["one block"]) as small, quarry.open(paths["blocks of 16"]) as blocks:
        # An index not yet proven against its just-written file is read through
        # the index path, which checks it: a first AND over every column does.
        everything = " && ".join(f"{name} > -1000" for name in names)
        with np.errstate(invalid="ignore"):
            above = np.all([v.astype(np.float64) > -1000 for v in data.values()], axis=0)
        assert small.query(everything).count() == np.count_nonzero(above)
        for _ in range(25):
            query, mask = box(rng, names, data)
            sel = small.query(query)
            assert sel.count() == np.count_nonzero(mask), query
            np.testing.assert_array_equal(sel.ids(), np.flatnonzero(mask), err_msg=query)
            # Scanned in one pass: each range is noted as a scan, with no estimate
            # (the index was not weighed).
            assert {(a.path, a.estimate) for a in sel.access()} == {("scan", None)}
            # Several blocks: the index's plan, the same rows.
            other = blocks.query(query)
            np.testing.assert_array_equal(other.ids(), np.flatnonzero(mask), err_msg=query)
            if n > 16:
                assert any(a.estimate is not None for a in other.access()), query


def test_fill_values_and_empty_ranges_in_a_small_box(tmp_path):
    """NetCDF's fill values are missing in the box as through the index; a range
    that holds nothing (``x > 3 && x < 2``) empties the AND."""
    rng = np.random.default_rng(5)
    n = 777
    path = str(tmp_path / "filled.nc")
    t = rng.integers(-10, 10, n).astype("f4")
    k = rng.integers(-10, 10, n).astype("i2")
    t[rng.random(n) < 0.2], k[rng.random(n) < 0.2] = -999, -32767
    with netCDF4.Dataset(path, "w") as f:
        f.createDimension("row", n)
        f.createVariable("t", "f4", ("row",), fill_value=-999.0)[:] = t
        f.createVariable("k", "i2", ("row",), fill_value=-32767)[:] = k
    present = (t != -999) & (k != -32767)
    with quarry.open(path) as ds:
        ds.build_index()
        sel = ds.query("t > -1000 && k > -40000")  # the first proves the index
        np.testing.assert_array_equal(sel.ids(), np.flatnonzero(present))
        for query, mask in (
            ("t > -1000 && k > -40000", present),
            ("t < 3 && k >= -5", (t < 3) & (k >= -5)),
        ):
            sel = ds.query(query)
            np.testing.assert_array_equal(sel.ids(), np.flatnonzero(present & mask))
            assert {(a.path, a.estimate) for a in sel.access()} == {("scan", None)}
        assert ds.query("t > 3 && t < 2 && k > 0").count() == 0


def test_a_larger_table_keeps_the_index(tmp_path):
    assert SMALL_BOX_VALUES == 65_536  # as the README says
    n = SMALL_BOX_VALUES // 2 + 1  # two ranges: just past the box's reach
    rng = np.random.default_rng(3)
    e, x = rng.exponential(1.0, n), rng.uniform(0, 300, n)
    path = str(tmp_path / "big.h5")
    with h5py.File(path, "w") as f:
        f["e"], f["x"] = e, x
    with quarry.open(path) as ds:
        ds.build_index()
        sel = ds.query("1.2 < e < 1.3 && 140 < x < 150")
        want = np.flatnonzero((e > 1.2) & (e < 1.3) & (x > 140) & (x < 150))
        np.testing.assert_array_equal(sel.ids(), want)
        assert all(a.estimate is not None for a in sel.access())
