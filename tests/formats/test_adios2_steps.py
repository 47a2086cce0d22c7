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
        with pytest.raises(quarry.AmbiguousNameError, match="Step#2"):
            ds.query("energy > 2")


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
