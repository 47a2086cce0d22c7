"""Any number of threads gives the serial answer, bit for bit."""

from __future__ import annotations

import math
import os
import tempfile
import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import quarry
from generators import DTYPES, NAMES, column, conditions, write
from oracle import oracle_ids
from quarry.cli.main import main
from quarry.index import build, layout
from quarry.parallel import jobs, threads
from quarry.records import replace


@st.composite
def scenarios(draw):
    size = draw(st.sampled_from([0, 1, 99, 1000, 4097]))
    names = NAMES[: draw(st.integers(1, 3))]
    data = {n: column(draw, draw(st.sampled_from(DTYPES)), size) for n in names}
    block_len = draw(st.sampled_from([1, 7, 64, 1000]))
    queries = [draw(conditions(data)) for _ in range(draw(st.integers(1, 4)))]
    return data, block_len, queries


@given(scenarios())
def test_every_thread_count_matches_the_oracle_and_builds_the_same_index(scenario):
    data, block_len, queries = scenario
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "data.h5")
        write(path, data, "chunked")
        built = []
        for n in (1, 2, 3):
            index = os.path.join(tmp, f"{n}.qidx")
            with quarry.open(path, index=index, jobs=n) as ds:
                ds.build_index(block_len=block_len, bins=16)
                for q in queries:
                    expect = oracle_ids(q, data)
                    assert ds.query(q).count() == len(expect), (n, q)
                    np.testing.assert_array_equal(ds.query(q).ids(), expect, err_msg=f"{n}: {q}")
            with open(index, "rb") as f:
                written = f.read()
            _, manifest = layout.read_manifest(index)
            # read_ns: when each build began reading
            manifest = replace(manifest, source=replace(manifest.source, read_ns=None))
            built.append((written[: int.from_bytes(written[-32:-24], "little")], manifest))
        assert built[0] == built[1] == built[2]


def test_histograms_and_aggregates_do_not_depend_on_threads(tmp_path):
    rng = np.random.default_rng(5)
    path = str(tmp_path / "h.h5")
    energy = rng.gamma(2.0, 0.5, 50_000)
    x = rng.normal(0, 1, 50_000)
    write(path, {"energy": energy, "x": x}, "contiguous")
    answers = []
    for n in (1, 3):
        with quarry.open(path, jobs=n) as ds:
            ds.build_index(block_len=4096)
            sel = ds.query("energy > mean(energy) && x*x > 0.5")
            hist = sel.histogram("energy", bins=50)
            answers.append((sel.ids(), hist.counts, hist.edges[0], sel.aggregates[0].value))
    np.testing.assert_array_equal(answers[0][0], answers[1][0])
    np.testing.assert_array_equal(answers[0][1], answers[1][1])
    np.testing.assert_array_equal(answers[0][2], answers[1][2])
    assert answers[0][3] == answers[1][3]
    # and the serial answer is NumPy's
    mean = math.fsum(energy) / len(energy)
    assert answers[0][3] == pytest.approx(mean, rel=4 * np.finfo(np.float64).eps)
    want = np.flatnonzero((energy > mean) & (x * x > 0.5))
    np.testing.assert_array_equal(answers[0][0], want)
    counts, edges = np.histogram(energy[want], bins=50)
    np.testing.assert_array_equal(answers[0][1], counts)
    assert answers[0][2] == pytest.approx(edges[0], rel=1e-15)  # the first edge


def test_the_choice_belongs_to_the_calling_thread():
    before = jobs()
    seen: dict[str, int] = {}
    ready = threading.Barrier(2)

    def worker(name: str, n: int) -> None:
        with threads(n):
            ready.wait()  # both threads have chosen before either looks
            seen[name] = jobs()

    ts = [threading.Thread(target=worker, args=(k, n)) for k, n in (("a", 1), ("b", 3))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert seen == {"a": 1, "b": 3}
    assert jobs() == before  # this thread's choice is untouched


def test_a_dataset_without_jobs_follows_the_caller(tmp_path):
    path = str(tmp_path / "d.h5")
    write(path, {"a": np.arange(10.0)}, "contiguous")
    with quarry.open(path) as ds, threads(2):
        assert ds.jobs is None
        assert ds.query("a > 4").count() == 5
        assert jobs() == 2


def test_negative_jobs_are_refused():
    with pytest.raises(ValueError, match="positive"), threads(-1):
        pass


def test_cli_jobs(tmp_path, capsys):
    path = str(tmp_path / "c.h5")
    write(path, {"a": np.arange(1000.0)}, "contiguous")
    assert main(["index", "-j", "1", "--quiet", path]) == 0
    capsys.readouterr()
    for j in ("1", "2"):
        assert main(["query", "--jobs", j, "--json", path, "a >= 990"]) == 0
        assert '"count": 10' in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["query", "--jobs", "-1", path, "a > 1"])
    assert "expected 0 or more, got -1" in capsys.readouterr().err


def test_a_thread_that_ran_alone_still_gets_every_core_back():
    """One thread runs the core's work where it is called (its own pool of
    one); asking for every core afterwards still gets every core."""
    every = jobs()

    def work(out: list[int]) -> None:
        with threads(1) as alone:
            out.append(alone)
        out.append(jobs())
        with threads(None) as back:
            out.append(back)

    seen: list[int] = []
    worker = threading.Thread(target=work, args=(seen,))
    worker.start()
    worker.join()
    assert seen == [1, every, every]


def test_small_variables_built_side_by_side_give_the_serial_index(tmp_path, monkeypatch):
    """Steps of fewer blocks than threads are built side by side: the index's
    bytes, its answers and the rows reported are those of one thread, with a
    variable of many blocks (built by all threads together) among them."""
    import h5py

    rng = np.random.default_rng(33)
    path = str(tmp_path / "steps.h5")
    steps = {f"/Step#{s}/{v}": rng.normal(0, 1 + s, 700 + 13 * s) for s in range(9) for v in "xt"}
    steps["/Step#4/t"] = steps["/Step#4/t"].astype("f4")
    steps["/Step#3/big"] = rng.integers(-50, 50, 20_000).astype("i8")
    with h5py.File(path, "w") as f:
        for name, values in steps.items():
            f[name] = values
    built, reported, alone = [], [], []
    real_alone = build._alone
    monkeypatch.setattr(build, "_alone", lambda *a: alone.append(a[1].path) or real_alone(*a))
    for n in (1, 2, 3):
        index = str(tmp_path / f"{n}.qidx")
        rows: list[int] = []
        with quarry.open(path, index=index, jobs=n) as ds:
            ds.build_index(
                block_len=1024, bins=32, derive=["r=sqrt(x**2 + t**2)"], progress=rows.append
            )
            for name, values in steps.items():
                assert ds.query(f"{name} > 0.5").count() == int(np.count_nonzero(values > 0.5))
            x, t = steps["/Step#5/x"], steps["/Step#5/t"]
            want = int(np.count_nonzero(np.sqrt(x**2 + t**2) > 2.0))
            assert ds.query("/Step#5/r > 2.0").count() == want
        with open(index, "rb") as f:
            written = f.read()
        _, manifest = layout.read_manifest(index)
        manifest = replace(manifest, source=replace(manifest.source, read_ns=None))
        built.append((written[: int.from_bytes(written[-32:-24], "little")], manifest))
        reported.append(sum(rows))
    assert built[0] == built[1] == built[2]
    assert len(alone) == 2 * (len(steps) - 1 + 9)  # all but /Step#3/big, at 2 and 3 threads
    assert (
        reported[0]
        == reported[1]
        == reported[2]
        == sum(v.size for v in steps.values()) + sum(steps[f"/Step#{s}/x"].size for s in range(9))
    )


def test_a_failure_building_small_variables_side_by_side_leaves_no_index(tmp_path, monkeypatch):
    import h5py

    from quarry.errors import SourceError
    from quarry.formats.hdf5 import HDF5Driver

    path = str(tmp_path / "fail.h5")
    with h5py.File(path, "w") as f:
        for s in range(6):
            f[f"Step#{s}/x"] = np.arange(100.0) + s
    real_read = HDF5Driver.read

    def read(self, var, start, stop):
        if var == "/Step#3/x":
            raise SourceError(f"cannot read {var}")
        return real_read(self, var, start, stop)

    monkeypatch.setattr(HDF5Driver, "read", read)
    with quarry.open(path, jobs=2) as ds, pytest.raises(SourceError, match="Step#3"):
        ds.build_index(block_len=64)
    assert not os.path.exists(path + ".qidx")
    assert [p for p in os.listdir(tmp_path) if p != "fail.h5"] == []
    monkeypatch.setattr(HDF5Driver, "read", real_read)
    with quarry.open(path, jobs=2) as ds:  # and a build that reads works as one thread's
        ds.build_index(block_len=64)
        assert ds.query("x > 50").counts() == [49 + s for s in range(6)]


def test_small_variables_of_a_netcdf_file_build_side_by_side_reading_one_at_a_time(
    tmp_path, monkeypatch
):
    """netCDF4's library must not be entered by two threads at once (it can
    crash the process): variables built side by side read through it one at
    a time, and answer as NumPy does."""
    nc4 = pytest.importorskip("netCDF4")
    from quarry.formats.netcdf import NetCDFDriver

    rng = np.random.default_rng(12)
    path = str(tmp_path / "many.nc")
    columns = {f"v{k}": rng.normal(0, 1 + k, 3000) for k in range(12)}
    with nc4.Dataset(path, "w") as nc:
        nc.createDimension("n", 3000)
        for name, values in columns.items():
            nc.createVariable(name, "f8", ("n",))[:] = values
    inside, most, lock = [0], [0], threading.Lock()
    real_read = NetCDFDriver.read

    def read(self, var, start, stop):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        try:
            return real_read(self, var, start, stop)
        finally:
            with lock:
                inside[0] -= 1

    monkeypatch.setattr(NetCDFDriver, "read", read)
    for _ in range(3):
        with quarry.open(path, jobs=2) as ds:
            ds.build_index(block_len=4096, bins=32)
            for name, values in columns.items():
                assert ds.query(f"{name} > 0.7").count() == int(np.count_nonzero(values > 0.7))
    assert most[0] == 1
