"""An open dataset keeps a small table's box per query (:mod:`quarry.query.boxes`):
the query asked again is counted by one core call, not planned again, and every
count equals NumPy's, kept or not."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import h5py
import netCDF4
import numpy as np
import pytest
from tests.query.test_small_box import DTYPES, box, column

import quarry
import quarry.dataset
import quarry.query.boxes
from quarry import _core
from quarry.parallel.runners import Local
from quarry.records import replace


@pytest.fixture
def core_calls(monkeypatch):
    """Calls of ``_core.count_boxes`` and executors made (a query planned
    against the file), counted."""
    calls = {"count_boxes": 0, "executors": 0}
    count_boxes, executor = _core.count_boxes, quarry.dataset.Executor

    def counting_boxes(boxes):
        calls["count_boxes"] += 1
        return count_boxes(boxes)

    class CountingExecutor(executor):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs):
            calls["executors"] += 1
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(_core, "count_boxes", counting_boxes)
    monkeypatch.setattr(quarry.dataset, "Executor", CountingExecutor)
    return calls


def write(path: str, data: dict[str, np.ndarray], **options) -> None:
    with h5py.File(path, "w", alignment_threshold=1, alignment_interval=64) as f:
        for name, values in data.items():
            f.create_dataset(name, data=values, **options)


@pytest.mark.parametrize("n", [1, 63, 64, 1037, 2000, 4093])
@pytest.mark.parametrize("stored", ["mapped", "compressed"])
def test_a_query_asked_again_is_counted_in_one_call_unplanned(tmp_path, core_calls, n, stored):
    rng = np.random.default_rng(n)
    data = {f"v{k}": column(rng, dtype, n) for k, dtype in enumerate(DTYPES)}
    path = str(tmp_path / "t.h5")
    write(path, data, **({"chunks": True, "compression": 1} if stored == "compressed" else {}))
    with quarry.open(path) as ds:
        ds.build_index()
        ds.query(" && ".join(f"{k} > -1000" for k in data)).count()  # proves the index
        for _ in range(10):
            query, mask = box(rng, list(data), data)
            want = int(np.count_nonzero(mask))
            assert ds.query(query).count() == want, query
            before = dict(core_calls)
            again = ds.query(query)
            assert again.count() == want, query
            assert core_calls["executors"] == before["executors"], query
            assert core_calls["count_boxes"] - before["count_boxes"] <= 1, query
            # Rows, when asked, are found as ever; the access says the box.
            np.testing.assert_array_equal(again.ids(), np.flatnonzero(mask))
            assert {a.path for a in again.access()} == {"scan"}


def test_the_work_of_a_kept_count_is_reported(tmp_path):
    path = str(tmp_path / "w.h5")
    write(path, {"e": np.arange(100.0), "x": np.arange(100.0)[::-1].copy()})
    query = "e > 10 && x > 50 && e < 40"
    with quarry.open(path) as ds:
        first = ds.query(query)
        assert first.count() == 29
        again = ds.query(query)
        assert again.count() == 29
        # Each range's column scanned once (``e``'s two ranges are one);
        # nothing read from the file again: the box holds its columns.
        assert first.stats().bytes_read == 1600
        assert again.stats() == replace(first.stats(), bytes_read=0)
        assert again.stats().rows_scanned == 200
        assert [str(a) for a in again.access()] == [str(a) for a in first.access()]
        # An executor made before the count notes it too.
        shaped = ds.query(query)
        assert shaped.shape == (100,)
        assert shaped.count() == 29 and shaped.stats() == again.stats()


def test_fill_values_nan_and_empty_ranges_asked_again(tmp_path, core_calls):
    path = str(tmp_path / "f.nc")
    rng = np.random.default_rng(3)
    t = rng.normal(size=777).astype("f4")
    t[::7] = -999.0
    t[3::11] = np.nan
    x = rng.integers(-50, 50, 777).astype("i2")
    with netCDF4.Dataset(path, "w") as f:
        f.createDimension("n", 777)
        f.createVariable("t", "f4", ("n",), fill_value=-999.0)[:] = t
        f.createVariable("x", "i2", ("n",))[:] = x
    kept_t = np.where(t == -999.0, np.nan, t)
    queries = {
        "t > -1000 && x > -100": int(np.count_nonzero(~np.isnan(kept_t))),
        "t > 0.5 && x < 10": int(np.count_nonzero((kept_t > 0.5) & (x < 10))),
        "t > 2 && t < 1 && x > 0": 0,  # an empty range: nothing scanned
        "x > 40000 && t > 0": 0,  # past the dtype: scanned, none in it
    }
    with quarry.open(path) as ds:
        for _ in range(2):
            for query, want in queries.items():
                assert ds.query(query).count() == want, query
        before = dict(core_calls)
        assert [ds.query(q).count() for q in queries] == list(queries.values())
        assert core_calls["executors"] == before["executors"]
        assert core_calls["count_boxes"] - before["count_boxes"] == 3  # not the empty one


def test_a_context_path_keeps_its_own_box(tmp_path):
    path = str(tmp_path / "p.h5")
    with h5py.File(path, "w") as f:
        for s in range(3):
            f[f"Step#{s}/e"] = np.arange(20.0) + 5 * s
            f[f"Step#{s}/x"] = np.arange(20.0)
    query = "e > 12 && x < 15"
    with quarry.open(path) as ds:
        for _ in range(3):
            assert [ds.query(query, path=f"Step#{s}").count() for s in range(3)] == [2, 7, 12]
        assert len(ds._kept.queries()) == 3


def test_a_rebuilt_index_a_replaced_file_or_a_close_makes_the_box_anew(tmp_path, core_calls):
    path = str(tmp_path / "r.h5")
    write(path, {"e": np.arange(50.0), "x": np.ones(50)})
    query = "e > 10 && x > 0.5"
    ds = quarry.open(path)
    assert ds.query(query).count() == 39
    assert ds.query(query).count() == 39
    ds.build_index()  # another index: planned again
    before = core_calls["executors"]
    assert ds.query(query).count() == 39
    assert core_calls["executors"] == before + 1
    # The file replaced, built again (the build opens the file as it is now).
    write(path + ".new", {"e": np.arange(50.0) * 2, "x": np.ones(50)})
    os.replace(path + ".new", path)
    ds.build_index()
    assert ds.query(query).count() == 44
    assert ds.query(query).count() == 44
    ds.close()
    assert ds._kept.queries() == []


def test_a_runner_and_threads_count_the_same(tmp_path):
    path = str(tmp_path / "j.h5")
    rng = np.random.default_rng(9)
    e, x = rng.exponential(1.0, 3000), rng.uniform(0, 300, 3000)
    write(path, {"e": e, "x": x})
    queries = [f"{lo / 10} < e && e < {lo / 10 + 0.3} && 100 < x && x < 200" for lo in range(10)]
    near = (x > 100) & (x < 200)
    want = [int(np.count_nonzero((e > lo / 10) & (e < lo / 10 + 0.3) & near)) for lo in range(10)]
    with quarry.open(path) as ds:
        assert [ds.query(q, runner=Local(jobs=2)).count() for q in queries] == want
        assert [ds.query(q).count() for q in queries] == want
        with ThreadPoolExecutor(4) as pool:
            got = list(pool.map(lambda q: ds.query(q).count(), queries * 20))
        assert got == want * 20


def test_boxes_of_copied_values_are_kept_within_the_budget(tmp_path, monkeypatch):
    path = str(tmp_path / "c.h5")
    write(path, {"e": np.arange(1000.0), "x": np.arange(1000.0)}, chunks=True, compression=1)
    queries = [f"e > {k} && x < 900" for k in range(5)]
    monkeypatch.setattr(quarry.query.boxes, "KEPT_BYTES", 2 * 16_000)  # two boxes of 2 columns
    with quarry.open(path) as ds:
        for query in queries * 2:
            assert ds.query(query).count() == 899 - int(query.split()[2])
        assert ds._kept.queries() == [(q, None) for q in queries[-2:]]


def test_a_table_too_large_for_a_box_is_planned_each_time(tmp_path, core_calls):
    path = str(tmp_path / "big.h5")
    e = np.linspace(0, 1, 40_000)
    write(path, {"e": e, "x": e[::-1].copy()})  # 80,000 values: past 65,536
    with quarry.open(path) as ds:
        ds.build_index()
        for _ in range(3):
            before = core_calls["executors"]
            assert ds.query("e > 0.25 && x > 0.5").count() == 10_000
            assert core_calls["executors"] == before + 1
        assert ds._kept.queries() == []
