"""ADIOS2 steps are a time series: step s of a variable is /Step#<s>/<name>."""

from __future__ import annotations

import os

import numpy as np
import pytest

import quarry

adios2 = pytest.importorskip("adios2", reason="adios2 is not installed")


@pytest.fixture
def run_bp(tmp_path):
    path = os.path.join(tmp_path, "run.bp")
    rng = np.random.default_rng(3)
    steps = []
    with adios2.Stream(path, "w") as stream:
        for i, _ in enumerate(stream.steps(3)):
            energy = rng.exponential(1.0 + i, 500)
            flag = rng.integers(-5, 100, 500).astype("i4")
            stream.write("particles/energy", energy, [500], [0], [500])
            stream.write("particles/flag", flag, [500], [0], [500])
            if i == 0:
                stream.write_attribute("_FillValue", np.array([-5], dtype="i4"), "particles/flag")
                stream.write_attribute("units", "MeV", "particles/energy")
            steps.append((energy, flag))
    return path, steps


def test_each_step_is_a_variable(run_bp):
    path, steps = run_bp
    with quarry.open(path) as ds:
        ds.build_index(block_len=64)
        for s, (energy, _) in enumerate(steps):
            got = ds.query(f"/Step#{s}/particles/energy > 2").ids()
            np.testing.assert_array_equal(got, np.flatnonzero(energy > 2))
        # a bare name is in every step: the query runs in each
        assert ds.query("energy > 2").count() == sum(int((e > 2).sum()) for e, _ in steps)


def test_cf_fill_value_attribute_marks_missing(run_bp):
    path, steps = run_bp
    _, flag = steps[1]
    with quarry.open(path) as ds:
        (info,) = [v for v in ds.variables() if v.path == "/Step#1/particles/flag"]
        assert info.dtype == np.dtype("f8") and "_FillValue" in (info.decoding or "")
        (energy,) = [v for v in ds.variables() if v.path == "/Step#0/particles/energy"]
        assert energy.attrs["units"] == "MeV"
        got = ds.query("!(/Step#1/particles/flag > 50)").ids()
    np.testing.assert_array_equal(got, np.flatnonzero((flag <= 50) & (flag != -5)))


def test_per_writer_blocks_read_as_one_array_per_step(tmp_path):
    path = os.path.join(tmp_path, "local.bp")
    adios = adios2.Adios()
    io = adios.declare_io("writers")
    var = io.define_variable("pos", np.zeros(3), [], [], [3])
    engine = io.open(path, adios2.bindings.Mode.Write)
    rng = np.random.default_rng(9)
    steps = []
    for step in range(2):
        engine.begin_step()
        pieces = [rng.normal(size=n) for n in (3 + step, 0, 7)]  # three writers, one empty
        for piece in pieces:
            var.set_selection([[], [len(piece)]])
            engine.put(var, piece, adios2.bindings.Mode.Sync)
        engine.end_step()
        steps.append(np.concatenate(pieces))
    engine.close()
    with quarry.open(path) as ds:
        shapes = {v.path: v.shape for v in ds.variables()}
        assert shapes == {"/Step#0/pos": (10,), "/Step#1/pos": (11,)}
        for build in (False, True):
            if build:
                ds.build_index(block_len=4)
            for s, values in enumerate(steps):
                sel = ds.query(f"/Step#{s}/pos > 0")
                np.testing.assert_array_equal(sel.ids(), np.flatnonzero(values > 0))
                np.testing.assert_array_equal(sel.values(f"/Step#{s}/pos"), values[values > 0])


def test_reading_leaves_no_profiling_file_behind(tmp_path):
    """ADIOS2's BP5 reader writes /tmp/<name>_<pid>_profiling.json on close;
    Quarry's reads remove it (the name is unique to this test)."""
    path = os.path.join(tmp_path, f"quarry-{os.getpid()}-{id(tmp_path)}.bp")
    with adios2.Stream(path, "w") as stream:
        for _ in stream.steps(1):
            stream.write("energy", np.arange(10.0), [10], [0], [10])
    debris = os.path.join("/tmp", f"{os.path.basename(path)}_{os.getpid():x}_profiling.json")
    with quarry.open(path) as ds:
        assert ds.query("energy > 4").count() == 5
    assert not os.path.exists(debris)
    listed = sorted(os.listdir(tmp_path))
    assert listed == [os.path.basename(path)]


def test_a_local_array_the_bindings_list_no_blocks_of_is_unsupported_not_a_crash(tmp_path):
    """The bindings' all_blocks_info lists nothing for a uint8 local array
    holding a byte above 127: every command on the file (info, a query of
    another variable, index) was an IndexError traceback."""
    from adios2 import bindings

    path = str(tmp_path / "u8.bp")
    adios = bindings.ADIOS()  # kept: its IO and engine live inside it
    io = adios.DeclareIO("w")
    io.SetEngine("BP5")
    engine = io.Open(path, bindings.Mode.Write)
    flag, energy = np.array([0, 1, 200, 0, 1], np.uint8), np.arange(5.0)
    local = io.DefineVariable("flag", flag, [], [], [5], False)
    shaped = io.DefineVariable("energy", energy, [5], [0], [5], False)
    engine.BeginStep()
    engine.Put(local, flag, bindings.Mode.Sync)
    engine.Put(shaped, energy, bindings.Mode.Sync)
    engine.EndStep()
    engine.Close()
    with quarry.open(path) as ds:
        assert ds.query("energy > 1").count() == 3
        flag_info = next(v for v in ds.variables() if v.path == "/Step#0/flag")
        if flag_info.problem is not None:  # as the bindings are today
            assert "lists no blocks" in flag_info.problem
            with pytest.raises(quarry.QuarryError, match="lists no blocks"):
                ds.query("flag == 1").count()
        else:  # bindings that list its blocks: read as any local array
            assert ds.query("flag == 1").count() == 2
        ds.build_index()
        assert ds.query("energy > 1").count() == 3
