"""A query answered in runs of blocks (a progress bar's steps, an MPI rank's
share) gives the one-go answer."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

import quarry
from oracle import oracle_ids

QUERIES = [
    "a > 0.5",
    "a > 0.5 && b < 10",
    "!(a <= 0) || b*b > 400",
    "b == 7",
    "a * b > mean(a)",
]


@pytest.mark.parametrize("jobs", [1, 3])
def test_runs_of_blocks_give_the_whole_answer(tmp_path, jobs):
    rng = np.random.default_rng(9)
    a = rng.normal(0, 1, 10_007).astype("f4")
    a[rng.random(a.size) < 0.1] = np.nan
    b = rng.integers(-30, 30, a.size).astype("i2")
    path = str(tmp_path / "p.h5")
    with h5py.File(path, "w") as f:
        f.create_dataset("a", data=a, chunks=(1000,), compression="gzip")
        f["b"] = b
    with quarry.open(path, jobs=jobs) as ds:
        ds.build_index(["a"], block_len=97)
        for q in QUERIES:
            expect = oracle_ids(
                q.replace("mean(a)", repr(float(np.nanmean(a.astype(np.float64))))),
                {"a": a, "b": b},
            )
            steps: list[int] = []
            counted = ds.query(q)
            counted.evaluate(rows=False, progress=steps.append)
            assert counted.count() == len(expect), q
            assert sum(steps) == a.size and len(steps) == -(-104 // (4 * jobs))
            listed = ds.query(q)
            listed.evaluate(rows=True, progress=lambda n: None)
            np.testing.assert_array_equal(listed.ids(), expect, err_msg=q)
            np.testing.assert_array_equal(listed.values("b"), b[expect])
            # a share of a share is their overlap
            part = ds.query(q).share(10, 60).share(50, 80)
            in_part = expect[(expect >= 50 * 97) & (expect < 60 * 97)]
            np.testing.assert_array_equal(part.ids(), in_part, err_msg=q)


def test_shares_with_coordinates_and_subarrays(tmp_path):
    netcdf4 = pytest.importorskip("netCDF4")
    rng = np.random.default_rng(4)
    tas = rng.normal(288, 5, (37, 29))
    lat = np.linspace(-70, 70, 29)
    path = str(tmp_path / "c.nc")
    with netcdf4.Dataset(path, "w") as ds:
        ds.createDimension("time", 37)
        ds.createDimension("lat", 29)
        ds.createVariable("lat", "f8", ("lat",))[:] = lat
        ds.createVariable("tas", "f8", ("time", "lat"))[:] = tas
    expect = np.flatnonzero(((lat[None, :] > 20) & (tas > 290)).reshape(-1))
    with quarry.open(path) as ds:
        ds.build_index(["tas"], block_len=100)
        whole = ds.query("lat > 20 && tas > 290")
        steps: list[int] = []
        whole.evaluate(rows=True, progress=steps.append)
        np.testing.assert_array_equal(whole.ids(), expect)
        part = ds.query("lat > 20 && tas*1.0 > 290").share(3, 7)
        np.testing.assert_array_equal(part.ids(), expect[(expect >= 300) & (expect < 700)])
        sub = ds.query("tas[10:30, 5:25] > 290").share(1, 3)
        view = tas[10:30, 5:25].reshape(-1)
        hits = np.flatnonzero(view > 290)
        np.testing.assert_array_equal(sub.ids(), hits[(hits >= 100) & (hits < 300)])
        scanned = ds.query("tas[10:30, 5:25] * 1.0 > 290").share(1, 3)
        np.testing.assert_array_equal(scanned.ids(), hits[(hits >= 100) & (hits < 300)])
