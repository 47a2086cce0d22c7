"""``Selection.interpolate`` against an independent NumPy reference, for
random grids, spacings and origins, points on grid lines, on the last cell's
far edge and outside, 1-D to 3-D fields of float32 and float64, in every
format Quarry reads."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from interp_cases import FORMATS, assert_close, reference, write_field, write_particles

import quarry

POSITIONS = ("x", "y", "z")


@st.composite
def cases(draw):
    """A field (rank, shape, dtype, grid) and particles placed to hit its
    edge cases: inside, exactly on nodes, on the far edge, outside, NaN."""
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(2, 7), min_size=rank, max_size=rank)))
    dtype = draw(st.sampled_from(["<f4", "<f8"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    origin = [float(draw(st.sampled_from([0.0, -3.5, 140.0, 1e-3]))) for _ in shape]
    spacing = [float(draw(st.sampled_from([1.0, 2.6, 1.04, 0.1, -0.5, 7.0]))) for _ in shape]
    values = rng.normal(0, 10, shape).astype(dtype)
    coords = [o + s * np.arange(n) for o, s, n in zip(origin, spacing, shape, strict=True)]
    n = 200
    points = []
    for c in coords:
        lo, hi = min(c[0], c[-1]), max(c[0], c[-1])
        p = rng.uniform(lo, hi, n)
        kind = rng.integers(0, 6, n)
        p[kind == 1] = rng.choice(c, int((kind == 1).sum()))  # on a grid line
        p[kind == 2] = c[-1]  # the last node (the far edge when spacing > 0)
        p[kind == 3] = c[0]
        out = kind == 4
        p[out] = np.where(rng.random(int(out.sum())) < 0.5, lo, hi) + rng.choice(
            [-1, 1], int(out.sum())
        ) * rng.uniform(0, 2 * abs(hi - lo), int(out.sum()))
        points.append(p)
    if draw(st.booleans()):
        points[0][rng.integers(0, n)] = np.nan
    outside = draw(st.sampled_from(["nan", "clamp"]))
    return values, origin, spacing, coords, points, outside


def _check(fmt: str, case, folder: str) -> None:
    values, origin, spacing, coords, points, outside = case
    rank = values.ndim
    rng = np.random.default_rng(1)
    energy = rng.uniform(0, 2, len(points[0]))
    columns = {POSITIONS[k]: points[k] for k in range(rank)} | {"energy": energy}
    particles = write_particles(os.path.join(folder, "p.h5"), columns)
    field = write_field(folder, fmt, "bx", values)
    grid = "origin=" + ",".join(map(repr, origin)) + " spacing=" + ",".join(map(repr, spacing))
    with quarry.open(particles) as ds:
        table = ds.query("energy > 0.5").interpolate(
            {"bx": field}, POSITIONS[:rank], grid=grid, outside=outside, values=["energy"]
        )
    keep = energy > 0.5
    expected = reference(values, coords, [p[keep] for p in points], outside)
    assert list(table.columns) == ["quarry_row", "energy", "bx"]
    assert table["quarry_row"].tolist() == np.flatnonzero(keep).tolist()
    assert table["energy"].tolist() == energy[keep].tolist()
    got = table["bx"]
    assert got.dtype == np.float64
    assert_close(got, expected, values)


@pytest.mark.parametrize("fmt", FORMATS)
@given(case=cases())
def test_interpolation_equals_the_numpy_reference_in_every_format(fmt, case):
    if fmt == "adios2":
        pytest.importorskip("adios2", reason="adios2 is not installed")
    with tempfile.TemporaryDirectory() as folder:
        _check(fmt, case, folder)


@given(case=cases(), data=st.data())
def test_coordinate_variables_uneven_and_decreasing_give_the_grid(case, data):
    """A NetCDF field's CF coordinate variables are its grid (no --grid):
    unevenly spaced, and decreasing along some axes."""
    values, _, _, _, points, outside = case
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    coords = []
    for n in values.shape:
        c = np.cumsum(rng.uniform(0.1, 3.0, n)) - 5.0
        coords.append(c[::-1] if data.draw(st.booleans()) else c)
    # the points again, now over these coordinates
    points = [
        np.concatenate([rng.uniform(c.min() - 1, c.max() + 1, 150), c, [c[0], c[-1]]])
        for c in coords
    ]
    size = min(len(p) for p in points)
    points = [p[:size] for p in points]
    with tempfile.TemporaryDirectory() as folder:
        columns = {POSITIONS[k]: p for k, p in enumerate(points)}
        particles = write_particles(os.path.join(folder, "p.h5"), columns)
        field = write_field(folder, "netcdf", "bx", values, coords)
        with quarry.open(particles) as ds:
            table = ds.select_all(list(columns)).interpolate(
                {"bx": field}, list(columns), outside=outside
            )
    expected = reference(values, coords, points, outside)
    assert_close(table["bx"], expected, values)


@pytest.mark.parametrize(
    ("subscripts", "picked"),
    [
        ("[:, 3, 2]", (slice(None), 3, 2)),
        ("[1:6:2, :, 4]", (slice(1, 6, 2), slice(None), 4)),
        ("[2, 1:, ::3]", (2, slice(1, None), slice(None, None, 3))),
        ("[-1]", (-1,)),
    ],
)
@pytest.mark.parametrize("fmt", ["raw", "hdf5-chunked", "netcdf", "zarr"])
def test_a_subarray_is_a_field_on_the_part_of_the_grid_it_keeps(tmp_path, fmt, subscripts, picked):
    rng = np.random.default_rng(3)
    values = rng.normal(0, 1, (7, 6, 8)).astype("<f4")
    origin, spacing = (10.0, -2.0, 0.5), (2.6, 1.3, 1.04)
    coords = [o + s * np.arange(n) for o, s, n in zip(origin, spacing, values.shape, strict=True)]
    part = values[picked]
    kept = [
        c[p]
        for c, p in zip(coords, picked + (slice(None),) * (3 - len(picked)), strict=True)
        if isinstance(p, slice)
    ]
    points = [rng.uniform(c.min() - 0.5, c.max() + 0.5, 300) for c in kept]
    columns = {POSITIONS[k]: p for k, p in enumerate(points)}
    particles = write_particles(str(tmp_path / "p.h5"), columns)
    field = write_field(str(tmp_path), fmt, "bx", values)
    grid = f"origin={','.join(map(str, origin))} spacing={','.join(map(str, spacing))}"
    with quarry.open(particles) as ds:
        table = ds.select_all(list(columns)).interpolate(
            {"bx": field + subscripts}, list(columns), grid=grid
        )
    assert_close(table["bx"], reference(part, kept, points, "nan"), values)
