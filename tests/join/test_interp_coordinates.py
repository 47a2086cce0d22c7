"""A field's grid from its own coordinate variables, by each format's
convention (HDF5 dimension scales, a ``coordinates`` attribute, variables
beside the field named like the positions, Zarr dimension names, ADIOS2's
attribute and neighbours), against the independent NumPy reference: evenly
spaced, ascending or descending, and unevenly spaced."""

from __future__ import annotations

import os
import tempfile

import h5py
import numpy as np
import pytest
from coord_files import CONVENTIONS, write_with_coordinates
from hypothesis import given, settings
from hypothesis import strategies as st
from interp_cases import assert_close, reference, write_particles
from test_interp_differential import cases

import quarry
from quarry.errors import JoinArgumentError, JoinError

POSITIONS = ["x", "y", "z"]


def _interpolate(folder, field, points, outside="nan", at=None):
    at = at or POSITIONS[: len(points)]
    particles = write_particles(os.path.join(folder, "p.h5"), dict(zip(at, points, strict=True)))
    with quarry.open(particles) as ds:
        return ds.select_all(at).interpolate({"bx": field}, at, outside=outside)


@pytest.mark.parametrize(("fmt", "convention"), CONVENTIONS)
@settings(max_examples=25, deadline=None)
@given(case=cases(), uneven=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_coordinate_variables_give_the_grid_in_every_format(fmt, convention, case, uneven, seed):
    if fmt == "adios2":
        pytest.importorskip("adios2", reason="adios2 is not installed")
    values, _, _, coords, points, outside = case
    if uneven:  # the same ends, the nodes between them moved
        rng = np.random.default_rng(seed)
        coords = [
            np.concatenate([[c[0]], np.sort(rng.uniform(c[0], c[-1], len(c) - 2)), [c[-1]]])
            if c[0] < c[-1]
            else np.concatenate([[c[0]], -np.sort(-rng.uniform(c[-1], c[0], len(c) - 2)), [c[-1]]])
            for c in coords
        ]
        if any(np.any(np.diff(c) == 0) for c in coords):
            return
    with tempfile.TemporaryDirectory() as folder:
        at = POSITIONS[: values.ndim]
        field = write_with_coordinates(folder, fmt, convention, values, coords, at)
        table = _interpolate(folder, field, points, outside)
    assert_close(table["bx"], reference(values, coords, points, outside), values)


@pytest.mark.parametrize(
    "names",
    [
        ["a0", "a1"],
        np.array([b"a0", b"a1"]),
    ],  # a list of text; of fixed-length bytes, as C writes it
)
def test_each_rule_is_tried_in_turn_and_a_subarray_needs_only_its_kept_axes(tmp_path, names):
    """Scales on axis 0 only do not make a grid, so the attribute does; a
    subarray that drops axis 1 needs no coordinates there."""
    rng = np.random.default_rng(4)
    values = rng.normal(size=(5, 4))
    c0, c1 = np.linspace(10, 20, 5), np.array([0.0, -1.0, -2.0, -3.0])
    path = str(tmp_path / "f.h5")
    with h5py.File(path, "w") as f:
        f["bx"], f["s0"], f["a0"], f["a1"] = values, c0 * 2, c0, c1
        f["s0"].make_scale("s0")
        f["bx"].dims[0].attach_scale(f["s0"])
        f["bx"].attrs["coordinates"] = names
    x, y = rng.uniform(9, 21, 40), rng.uniform(-3.5, 0.5, 40)
    table = _interpolate(str(tmp_path), path, [x, y])
    assert_close(table["bx"], reference(values, [c0, c1], [x, y], "nan"), values)
    part = _interpolate(str(tmp_path), f"{path}[:, 2]", [x])  # scales cover axis 0: enough
    assert_close(part["bx"], reference(values[:, 2], [c0 * 2], [x], "nan"), values)


def test_coordinates_of_the_wrong_length_or_not_monotonic_are_refused(tmp_path):
    path = str(tmp_path / "f.h5")
    with h5py.File(path, "w") as f:
        f["bx"] = np.zeros((3, 4))
        f["bx"].attrs["coordinates"] = "a0 a1"
        f["a0"], f["a1"] = np.arange(3.0), np.arange(5.0)  # a1 is one too long
        f["by"], f["x"] = np.zeros(3), np.array([0.0, 2.0, 1.0])
    with pytest.raises(JoinArgumentError, match="/a1 has 5 points where axis 1 has 4"):
        _interpolate(str(tmp_path), f"{path}:bx", [np.zeros(1), np.zeros(1)])
    with pytest.raises(JoinError, match="not strictly increasing or decreasing"):
        _interpolate(str(tmp_path), f"{path}:by", [np.zeros(1)])
