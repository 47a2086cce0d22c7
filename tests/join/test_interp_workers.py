"""The join on several threads (quarry.join.workers): in every format, with
and without a reorganised copy, on 1, 2 and 4 threads, the same answers bit
for bit as on one thread and as the NumPy reference; a driver that must not
be entered twice never is, while one that may be is; each thread reads only
its band's region."""

from __future__ import annotations

import itertools
import os
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from interp_cases import FORMATS, assert_close, reference, write_field, write_particles

import quarry
import quarry.join.workers as workers
from quarry.formats.base import reads_concurrently
from quarry.formats.raw import RawDriver

POSITIONS = ("x", "y", "z")
THREADS = (1, 2, 4)


@pytest.fixture
def small_bands(monkeypatch):
    """Bands of a few particles, so that small test data is shared out;
    yields the number of bands of each join spread over threads."""
    monkeypatch.setattr(workers, "MIN_PER_BAND", 8)
    shared = []
    original = workers.bands

    def counted(cells, jobs):
        parts = original(cells, jobs)
        if parts is not None:
            shared.append(len(parts))
        return parts

    monkeypatch.setattr(workers, "bands", counted)
    return shared


def _particles(folder, rng, coords, n, clusters=3):
    points = []
    for c in coords:
        lo, hi = min(c[0], c[-1]), max(c[0], c[-1])
        centres = rng.uniform(lo, hi, clusters)
        p = centres[rng.integers(0, clusters, n)] + rng.normal(0, (hi - lo) / 10, n)
        p[rng.random(n) < 0.1] = rng.choice(c)  # on grid lines
        points.append(p)
    points[0][rng.integers(0, n)] = np.nan
    energy = rng.uniform(0, 1, n)
    columns = dict(zip(POSITIONS, points, strict=False)) | {"energy": energy}
    return write_particles(os.path.join(folder, "p.h5"), columns), points, energy > 0.3


def _joins(particles, field, at, grid, outside="nan"):
    """The join on each of THREADS threads: {threads: table}."""
    tables = {}
    for jobs in THREADS:
        with quarry.open(particles, jobs=jobs) as ds:
            tables[jobs] = ds.query("energy > 0.3").interpolate(
                {"bx": field}, at, grid=grid, outside=outside
            )
    return tables


def _assert_same(tables, expected, values, read_by):
    one = tables[1]
    for jobs, table in tables.items():
        assert table.read_by == {"bx": read_by}, jobs
        assert table["quarry_row"].tolist() == one["quarry_row"].tolist()
        assert table["bx"].tobytes() == one["bx"].tobytes(), f"{jobs} threads differ"
    assert_close(one["bx"], expected, values)


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_on_1_2_4_threads_with_and_without_a_copy(tmp_path, small_bands, fmt):
    if fmt == "adios2":
        pytest.importorskip("adios2", reason="adios2 is not installed")
    rng = np.random.default_rng(sum(map(ord, fmt)))
    shape = (13, 9, 6)
    values = rng.normal(0, 10, shape).astype("<f4")
    origin, spacing = (-3.0, 140.0, 0.0), (1.04, -2.6, 0.5)
    coords = [o + s * np.arange(n) for o, s, n in zip(origin, spacing, shape, strict=True)]
    grid = f"origin={','.join(map(repr, origin))} spacing={','.join(map(repr, spacing))}"
    particles, points, keep = _particles(str(tmp_path), rng, coords, 2000)
    field = write_field(str(tmp_path), fmt, "bx", values)
    expected = reference(values, coords, [p[keep] for p in points], "nan")
    _assert_same(_joins(particles, field, POSITIONS, grid), expected, values, "box")
    with quarry.open(particles) as ds:
        ds.reorganize(list(POSITIONS), bins=5)
    _assert_same(_joins(particles, field, POSITIONS, grid), expected, values, "mdbin")
    assert set(small_bands) == {2, 4}  # each join on 2 and 4 threads was shared out


@settings(max_examples=25, deadline=None)
@given(
    rank=st.integers(1, 3),
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 600),
    bins=st.integers(1, 6),
    outside=st.sampled_from(["nan", "clamp"]),
)
def test_random_layouts_answer_alike_on_any_number_of_threads(rank, seed, n, bins, outside):
    """Any rank, cluster layout and bins, few or many hits (a band of one
    cell index, bands of one particle): the same bits on 1, 2 and 4 threads."""
    import tempfile

    rng = np.random.default_rng(seed)
    shape = tuple(int(k) for k in rng.integers(2, 12, rank))
    values = rng.normal(0, 10, shape)
    coords = [np.arange(float(k)) for k in shape]
    grid = f"origin={','.join(['0'] * rank)} spacing={','.join(['1'] * rank)}"
    at = POSITIONS[:rank]
    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as patch:
        patch.setattr(workers, "MIN_PER_BAND", 1)
        particles, points, keep = _particles(folder, rng, coords, n, int(rng.integers(1, 4)))
        field = write_field(folder, "raw", "bx", values)
        expected = reference(values, coords, [p[keep] for p in points[:rank]], outside)
        _assert_same(_joins(particles, field, at, grid, outside), expected, values, "box")
        with quarry.open(particles) as ds:
            ds.reorganize(list(at), bins=bins)
        _assert_same(_joins(particles, field, at, grid, outside), expected, values, "mdbin")


def test_groups_fewer_than_threads_and_hits_in_one_cell(tmp_path, small_bands):
    """One MDBin group for four threads is cut into bands all the same; hits
    all in one cell index along axis 0 make one band, run on the caller's
    thread alone."""
    rng = np.random.default_rng(5)
    values = rng.normal(size=(8, 8, 8))
    coords = [np.arange(8.0)] * 3
    grid = "origin=0,0,0 spacing=1,1,1"
    field = write_field(str(tmp_path), "raw", "bx", values)
    n = 500
    points = [rng.uniform(0, 7, n), rng.uniform(0, 7, n), rng.uniform(0, 7, n)]
    columns = dict(zip(POSITIONS, points, strict=True)) | {"energy": rng.uniform(0, 1, n)}
    particles = write_particles(str(tmp_path / "p.h5"), columns)
    keep = columns["energy"] > 0.3
    with quarry.open(particles) as ds:
        ds.reorganize(list(POSITIONS), bins=1)
    expected = reference(values, coords, [p[keep] for p in points], "nan")
    _assert_same(_joins(particles, field, POSITIONS, grid), expected, values, "mdbin")

    points[0] = rng.uniform(3.1, 3.9, n)  # every particle in cell 3 along axis 0
    columns["x"] = points[0]
    folder = tmp_path / "one-cell"
    folder.mkdir()
    particles = write_particles(str(folder / "p.h5"), columns)
    threads = set()
    original = RawDriver.read

    def noted(self, var, start, stop):
        threads.add(threading.get_ident())
        return original(self, var, start, stop)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RawDriver, "read", noted)
        tables = _joins(particles, field, POSITIONS, grid)
    assert threads == {threading.get_ident()}
    expected = reference(values, coords, [p[keep] for p in points], "nan")
    _assert_same(tables, expected, values, "box")


def _busy_field(tmp_path):
    """Particles sparse over a 24^3 field, in groups apart, so that each
    band makes many reads (a run of rows per index along axis 0 per group)."""
    rng = np.random.default_rng(7)
    values = rng.normal(size=(24, 24, 24)).astype("<f4")
    field = write_field(str(tmp_path), "raw", "bx", values)
    n = 600
    columns = {k: rng.uniform(0, 23, n) for k in POSITIONS} | {"energy": rng.uniform(0, 1, n)}
    particles = write_particles(str(tmp_path / "p.h5"), columns)
    with quarry.open(particles) as ds:
        ds.reorganize(list(POSITIONS), bins=12)
    return particles, field


def test_a_driver_that_may_not_be_entered_twice_never_is(tmp_path, small_bands, monkeypatch):
    """Counted inside the driver: with ``concurrent_reads`` False, no read
    starts while another is under way, though the reads come from several
    threads. Each read holds the driver a while with the GIL released, as
    netCDF4's C calls do, so that reads not kept apart would overlap."""
    import hashlib

    particles, field = _busy_field(tmp_path)
    inside, most, threads, calls = [0], [0], set(), [0]
    count = threading.Lock()
    original = RawDriver.read
    work = bytes(1 << 18)

    def watched(self, var, start, stop):
        with count:
            inside[0] += 1
            calls[0] += 1
            most[0] = max(most[0], inside[0])
            threads.add(threading.current_thread())
        try:
            hashlib.sha256(work).digest()  # releases the GIL
            return original(self, var, start, stop)
        finally:
            with count:
                inside[0] -= 1

    monkeypatch.setattr(RawDriver, "concurrent_reads", False)
    monkeypatch.setattr(RawDriver, "read", watched)
    assert not reads_concurrently(RawDriver)
    tables = _joins(particles, field, POSITIONS, "origin=0,0,0 spacing=1,1,1")
    assert len(threads) >= 4 and calls[0] > 100  # many reads, from the bands' threads
    assert most == [1]
    assert tables[4]["bx"].tobytes() == tables[1]["bx"].tobytes()


def test_a_driver_that_may_be_entered_twice_is(tmp_path, small_bands, monkeypatch):
    """The control: with ``concurrent_reads`` (raw's), two bands' threads
    are inside the driver at once: each one's first read waits for the
    other's at a barrier, which a join reading one band at a time would break."""
    particles, field = _busy_field(tmp_path)
    met = threading.Barrier(2, timeout=60)
    waited = set()
    original = RawDriver.read

    def meeting(self, var, start, stop):
        me = threading.get_ident()
        if me not in waited and len(waited) < 2:
            waited.add(me)
            met.wait()
        return original(self, var, start, stop)

    monkeypatch.setattr(RawDriver, "read", meeting)
    with quarry.open(particles, jobs=2) as ds:
        table = ds.query("energy > 0.3").interpolate(
            {"bx": field}, POSITIONS, grid="origin=0,0,0 spacing=1,1,1"
        )
    assert len(waited) == 2 and not met.broken
    assert table.read_by == {"bx": "mdbin"}


def test_each_thread_reads_its_band_once_and_bands_share_one_row_of_nodes(
    tmp_path, small_bands, monkeypatch
):
    """Counted at the driver, per thread: each band's rows once, ascending,
    whole rows of axis 2; rows read by two threads lie on one index of
    axis 0 per pair of neighbouring bands; the bytes counted are the
    bytes reported."""
    particles, field = _busy_field(tmp_path)
    reads = {}
    original = RawDriver.read

    def noted(self, var, start, stop):
        reads.setdefault(threading.current_thread(), []).append((start, stop))
        return original(self, var, start, stop)

    monkeypatch.setattr(RawDriver, "read", noted)
    with quarry.open(particles, jobs=2) as ds:
        table = ds.query("energy > 0.3").interpolate(
            {"bx": field}, POSITIONS, grid="origin=0,0,0 spacing=1,1,1"
        )
    assert len(reads) == 2
    rows_of = {}
    for thread, spans in reads.items():
        assert all(b1 < a2 for (_, b1), (a2, _) in itertools.pairwise(spans))
        assert all(a % 24 == 0 and (b - a) % 24 == 0 for a, b in spans)
        rows_of[thread] = {r for a, b in spans for r in range(a // 24, b // 24)}
    first, second = rows_of.values()
    assert len({row // 24 for row in first & second}) <= 1  # rows (i, j): i = row // 24
    assert table.bytes_read["bx"] == 4 * sum(b - a for s in reads.values() for a, b in s)


def test_fewer_than_131072_particles_run_on_the_calling_thread():
    """The README's threshold: at most one band per 65,536 particles, so two
    threads share 131,072 particles, not 131,071."""
    assert workers.bands(np.arange(131_071) // 1000, 2) is None
    assert [len(p) for p in workers.bands(np.arange(131_072) // 1000, 2)] == [65_000, 66_072]
    assert workers.bands(np.arange(131_072) // 1000, 1) is None
    assert len(workers.bands(np.arange(300_000) // 1000, 8)) == 4


def test_a_failing_band_fails_the_join_with_its_own_error(tmp_path, small_bands, monkeypatch):
    """A read that fails on a band's thread is raised on the caller's, as
    itself, once every band's thread has ended."""
    from quarry.errors import SourceError

    particles, field = _busy_field(tmp_path)
    caller = threading.current_thread()
    band_threads = set()
    original = RawDriver.read

    def failing(self, var, start, stop):
        if threading.current_thread() is not caller:
            band_threads.add(threading.current_thread())
            raise SourceError(f"cannot read {self.path}: the disk went away")
        return original(self, var, start, stop)

    monkeypatch.setattr(RawDriver, "read", failing)
    with quarry.open(particles, jobs=4) as ds:
        selection = ds.query("energy > 0.3")
        with pytest.raises(SourceError, match="the disk went away"):
            selection.interpolate({"bx": field}, POSITIONS, grid="origin=0,0,0 spacing=1,1,1")
    assert len(band_threads) == 3
    assert not any(t.is_alive() for t in band_threads)
