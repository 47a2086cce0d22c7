"""Issue 3's workloads on the standard data sets (``make_data.py beam --steps 8``
and ``particles --steps 4``, small): the halo per step with a derived radius
and aggregates, the sliced core as a batch, subarrays and tracking, each
against NumPy. Skipped where ../shared is absent (a user's clone)."""

from __future__ import annotations

import math

import h5py
import numpy as np
import pytest

import quarry
from generators import make_data, needs_make_data

pytestmark = needs_make_data


@pytest.fixture(scope="module")
def beam(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("shared") / "beam.h5")
    make_data("beam", path, "--n", "30011", "--steps", "8")
    with quarry.open(path) as ds:
        ds.build_index(derive=["r=sqrt(x**2 + y**2)"], block_len=4096)
    return path


@pytest.fixture(scope="module")
def particles(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("shared") / "particles.h5")
    make_data("particles", path, "--n", "20011", "--steps", "4")
    with quarry.open(path) as ds:
        ds.build_index(block_len=4096)
    return path


def test_halo_per_step(beam):
    with quarry.open_series(beam) as series:
        sel = series.query("r > 4*sqrt(std(x)**2 + std(y)**2)")
        counts = sel.counts()
        sources = {a.source for _, s in sel for a in s.aggregates}
    assert sources == {"index"}
    with h5py.File(beam) as f:
        for step, count in enumerate(counts):
            x, y = f[f"Step#{step}/x"][()], f[f"Step#{step}/y"][()]
            cut = 4 * np.sqrt(x.std() ** 2 + y.std() ** 2)
            assert count == int(np.sum(np.sqrt(x**2 + y**2) > cut)), step
    assert counts[-1] > counts[0] > 0  # the halo grows along the beam


def test_sliced_core_batch(beam):
    with quarry.open_series(beam) as series:
        means = [s.aggregates[0].value for _, s in series.query("t > mean(t)")]
        with h5py.File(beam) as f:
            d = float(f["Step#0/t"][()].std()) / 100
        bounds = [((k - 200) * d, (k - 199) * d) for k in range(400)]
        queries = [f"mean(t) + {lo!r} <= t && t < mean(t) + {hi!r}" for lo, hi in bounds]
        answers = series.query_many(queries)
    with h5py.File(beam) as f:
        for step in range(8):
            t = f[f"Step#{step}/t"][()].astype(np.float64)
            # The slices' centre from NumPy, not from Quarry's mean(t): a
            # correctly rounded mean, which Quarry's must equal to an ulp or so.
            mean = math.fsum(t) / len(t)
            assert means[step] == pytest.approx(mean, rel=4 * np.finfo(np.float64).eps), step
            want = [int(np.sum((t >= mean + lo) & (t < mean + hi))) for lo, hi in bounds]
            assert [a.counts()[step] for a in answers] == want, step


def test_subarray_of_a_step(beam):
    with quarry.open(beam) as ds, h5py.File(beam) as f:
        x = f["Step#3/x"][()]
        sel = ds.query("x[1000:20000:3] > 1e-4 && x[1001:20001:3] < 0", path="Step#3")
        want = np.flatnonzero((x[1000:20000:3] > 1e-4) & (x[1001:20001:3] < 0))
        np.testing.assert_array_equal(sel.ids(), want)


def test_particles_per_step_and_tracking(particles):
    with quarry.open_series(particles) as series:
        counts = series.query("energy > 1").counts()
        tracks = series.track("energy > 2", 1, "id", ["energy"])
    with h5py.File(particles) as f:
        assert counts == [int(np.sum(f[f"Step#{s}/energy"][()] > 1)) for s in range(4)]
        e1, id1 = f["Step#1/energy"][()], f["Step#1/id"][()]
        np.testing.assert_array_equal(tracks.ids, id1[e1 > 2])
        for s, step in enumerate(tracks.steps):
            ids, energy = f[f"Step#{s}/id"][()], f[f"Step#{s}/energy"][()]
            where = {int(i): k for k, i in enumerate(ids)}
            rows = np.array([where.get(int(i), -1) for i in tracks.ids])
            np.testing.assert_array_equal(step.rows, rows)
            np.testing.assert_array_equal(step.values["energy"], energy[rows].astype("f8"))
