"""The join through a reorganised copy's MDBin groups: the same answers as
without a copy (and as the NumPy reference), never more field bytes than the
hits' bounding box, far fewer for hits in regions apart, counted at the
driver; and the box path wherever a copy cannot serve."""

from __future__ import annotations

import itertools
import os
import tempfile

import h5py
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from interp_cases import assert_close, count_reads, reference, write_field, write_particles

import quarry
from quarry.errors import StaleCopyError
from quarry.formats.hdf5 import HDF5Driver
from quarry.formats.raw import RawDriver

POSITIONS = ["x", "y", "z"]


def _join(particles, field, at, grid, jobs=None, **kw):
    with quarry.open(particles, jobs=jobs) as ds:
        return ds.query("energy > 0.4").interpolate({"bx": field}, at, grid=grid, **kw)


@st.composite
def layouts(draw):
    """A field (rank, shape, dtype, grid) and particles in a few clusters
    (or spread everywhere), some outside the grid, some NaN, and the bins of
    a copy over the positions (and maybe energy too)."""
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(2, 17), min_size=rank, max_size=rank)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    spacing = [float(draw(st.sampled_from([1.0, 0.5, -2.6, 1.04]))) for _ in shape]
    origin = [float(draw(st.sampled_from([0.0, -3.0, 140.0]))) for _ in shape]
    coords = [o + s * np.arange(n) for o, s, n in zip(origin, spacing, shape, strict=True)]
    n = draw(st.integers(1, 3000))
    clusters = draw(st.integers(0, 4))  # 0: spread everywhere
    points = []
    for c in coords:
        lo, hi = min(c[0], c[-1]), max(c[0], c[-1])
        if clusters:
            centres = rng.uniform(lo, hi, clusters)
            p = centres[rng.integers(0, clusters, n)] + rng.normal(0, (hi - lo) / 20, n)
        else:
            p = rng.uniform(lo - 1, hi + 1, n)
        on_nodes = rng.random(n) < 0.1
        p[on_nodes] = rng.choice(c, int(on_nodes.sum()))
        points.append(p)
    if draw(st.booleans()):
        points[0][rng.integers(0, n)] = np.nan
    values = rng.normal(0, 10, shape).astype(draw(st.sampled_from(["<f4", "<f8"])))
    bins = draw(st.integers(1, 12))
    with_energy = draw(st.booleans())
    return values, origin, spacing, coords, points, bins, with_energy, rng.uniform(0, 1, n)


@pytest.mark.parametrize("fmt", ["raw", "hdf5-chunked", "zarr"])
@settings(max_examples=20, deadline=None)
@given(layout=layouts(), outside=st.sampled_from(["nan", "clamp"]))
def test_grouped_reads_give_the_same_answers_and_read_no_more(fmt, layout, outside):
    values, origin, spacing, coords, points, bins, with_energy, energy = layout
    at = POSITIONS[: values.ndim]
    grid = f"origin={','.join(map(repr, origin))} spacing={','.join(map(repr, spacing))}"
    with tempfile.TemporaryDirectory() as folder:
        columns = dict(zip(at, points, strict=True)) | {"energy": energy}
        particles = write_particles(os.path.join(folder, "p.h5"), columns)
        field = write_field(folder, fmt, "bx", values)
        boxed = _join(particles, field, at, grid, outside=outside)
        with quarry.open(particles) as ds:
            ds.reorganize((["energy"] if with_energy else []) + at, bins=bins)
        grouped = _join(particles, field, at, grid, outside=outside)
    keep = energy > 0.4
    expected = reference(values, coords, [p[keep] for p in points], outside)
    assert boxed.read_by == {"bx": "box"} and grouped.read_by == {"bx": "mdbin"}
    assert np.array_equal(grouped["bx"], boxed["bx"], equal_nan=True)
    assert grouped["quarry_row"].tolist() == np.flatnonzero(keep).tolist()
    assert_close(grouped["bx"], expected, values)
    assert grouped.bytes_read["bx"] <= boxed.bytes_read["bx"]


@pytest.mark.parametrize("fmt", ["raw", "hdf5"])
def test_scattered_hits_read_far_less_and_clustered_hits_no_more(tmp_path, monkeypatch, fmt):
    """Counted at the driver: hits in two corners of a 64^3 field read the
    rows around each, not the box between them; hits in one blob read at
    most the box; on one thread every row is read once, consecutive rows in
    one read (on several, each thread's band: see test_interp_workers)."""
    shape = (64, 64, 64)
    values = np.random.default_rng(0).normal(size=shape).astype("<f4")
    field = write_field(str(tmp_path), fmt, "bx", values)
    reads = count_reads(monkeypatch, RawDriver if fmt == "raw" else HDF5Driver)
    rng = np.random.default_rng(1)
    n = 50_000
    corner = rng.integers(0, 2, n).astype(bool)
    scattered = [np.where(corner, rng.uniform(2, 8, n), rng.uniform(52, 60, n)) for _ in "xyz"]
    blob = [rng.normal(32, 4, n) for _ in "xyz"]
    energy = rng.uniform(0, 1, n)
    grid = "origin=0,0,0 spacing=1,1,1"
    for points, bound in ((scattered, 1 / 20), (blob, 1.0)):
        folder = tempfile.mkdtemp(dir=tmp_path)
        columns = dict(zip(POSITIONS, points, strict=True)) | {"energy": energy}
        particles = write_particles(os.path.join(folder, "p.h5"), columns)
        reads.clear()
        boxed = _join(particles, field, POSITIONS, grid, jobs=1)
        box_bytes = sum(b - a for a, b in reads) * 4
        with quarry.open(particles) as ds:
            ds.reorganize(POSITIONS, bins=16)
        reads.clear()
        grouped = _join(particles, field, POSITIONS, grid, jobs=1)
        assert np.array_equal(grouped["bx"], boxed["bx"], equal_nan=True)
        assert sum(b - a for a, b in reads) * 4 == grouped.bytes_read["bx"]
        assert grouped.bytes_read["bx"] <= box_bytes * bound
        assert all(b1 < a2 for (_, b1), (a2, _) in itertools.pairwise(reads))
        assert all((b - a) % 64 == 0 for a, b in reads)  # whole rows of axis 2


def test_a_copy_that_cannot_serve_leaves_the_box_path(tmp_path):
    """A copy without the positions and a field part that picks one index
    or every n-th take the box path, with the same answers; a stale copy is refused, as a
    query refuses it."""
    rng = np.random.default_rng(2)
    n = 500
    columns = {k: rng.uniform(0, 9, n) for k in ("x", "y", "energy")}
    particles = write_particles(str(tmp_path / "p.h5"), columns)
    values = rng.normal(size=(10, 10, 4))
    field = write_field(str(tmp_path), "hdf5", "bx", values)
    grid = "origin=0,0,0 spacing=1,1,1"
    boxed = _join(particles, f"{field}[:, :, 1]", ["x", "y"], grid)
    with quarry.open(particles) as ds:
        ds.reorganize(["energy", "x"], bins=4)
    assert _join(particles, f"{field}[:, :, 1]", ["x", "y"], grid).read_by == {"bx": "box"}
    with quarry.open(particles) as ds:
        ds.reorganize(["x", "y", "energy"], bins=4)
    picked = _join(particles, f"{field}[:, :, 1]", ["x", "y"], grid)
    part = _join(particles, f"{field}[1:, :, :]", ["x", "y", "energy"], grid)
    strided = _join(particles, f"{field}[::2]", ["x", "y", "energy"], grid)
    assert picked.read_by == {"bx": "box"} and part.read_by == {"bx": "mdbin"}
    assert strided.read_by == {"bx": "box"}
    assert np.array_equal(picked["bx"], boxed["bx"], equal_nan=True)
    keep = columns["energy"] > 0.4
    expected = reference(
        values[1:],
        [np.arange(1.0, 10), np.arange(10.0), np.arange(4.0)],
        [columns[k][keep] for k in ("x", "y", "energy")],
        "nan",
    )
    assert_close(part["bx"], expected, values)
    with h5py.File(particles, "a") as f:  # the source changes: its copy is stale
        f["x"][0] = 100.0
    with quarry.open(particles) as ds, pytest.raises(StaleCopyError, match="quarry reorg"):
        ds.select_all(["x"]).interpolate({"bx": field}, ["x", "y", "energy"], grid=grid)
