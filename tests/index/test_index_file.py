"""The index on disk: round trip, staleness, corruption at every byte (killed
builds: test_debris.py)."""

from __future__ import annotations

import os
from pathlib import Path

import h5py
import numpy as np
import pytest

import quarry
from quarry.errors import CorruptIndexError, IndexMissingError, StaleIndexError
from quarry.index import layout


@pytest.fixture
def small(tmp_path):
    path = str(tmp_path / "small.h5")
    rng = np.random.default_rng(7)
    with h5py.File(path, "w") as f:
        f["x"] = rng.normal(size=500)
        f["n"] = rng.integers(-50, 50, 500).astype("i2")
    return path


def test_round_trip_records_provenance(small):
    with quarry.open(small) as ds:
        manifest = ds.build_index(bins=16, precision=0, block_len=100)
    _, read_back = layout.read(small + ".qidx")
    assert read_back == manifest
    entry = manifest.variables["/x"]
    assert entry.key == "f64" and entry.dtype == "<f8" and entry.shape == (500,)
    assert len(entry.spans) == 5 and len(entry.crcs) == 5
    assert len(layout.decode_edges(entry)) == 15
    assert manifest.variables["/n"].key == "i64"
    assert manifest.source.stamp["size"] == os.path.getsize(small)


def test_index_permissions_follow_the_umask(small):
    old = os.umask(0o022)
    try:
        with quarry.open(small) as ds:
            ds.build_index()
    finally:
        os.umask(old)
    assert os.stat(small + ".qidx").st_mode & 0o777 == 0o644


def test_index_elsewhere_for_read_only_data(small, tmp_path):
    elsewhere = str(tmp_path / "idx" / "small.qidx")
    os.makedirs(os.path.dirname(elsewhere))
    with quarry.open(small, index=elsewhere) as ds:
        ds.build_index()
        assert ds.query("x > 0").count() == int((h5py.File(small)["x"][()] > 0).sum())
    assert os.path.exists(elsewhere) and not os.path.exists(small + ".qidx")


def test_changed_source_is_refused(small):
    with quarry.open(small) as ds:
        ds.build_index()
    with h5py.File(small, "r+") as f:
        f["x"][0] = 1e9
    with quarry.open(small) as ds, pytest.raises(StaleIndexError, match="quarry index"):
        ds.query("x > 0").count()


def test_missing_index_says_how_to_build(small):
    with quarry.open(small) as ds, pytest.raises(IndexMissingError, match="quarry index"):
        _ = ds.index


def test_every_damaged_byte_is_an_error_or_harmless(small):
    with quarry.open(small) as ds:
        ds.build_index(bins=8, block_len=128)
    idx = small + ".qidx"
    pristine = Path(idx).read_bytes()
    st = os.stat(small)
    truth = {}
    with quarry.open(small) as ds:
        for q in ("x > 0.3", "n == 7", "x < -1 || n > 40"):
            truth[q] = ds.query(q).ids()
    step = max(1, len(pristine) // 1500)
    for at in range(0, len(pristine), step):
        bad = bytearray(pristine)
        bad[at] ^= 0x41
        Path(idx).write_bytes(bad)
        os.utime(small, ns=(st.st_atime_ns, st.st_mtime_ns))
        for q, ids in truth.items():
            try:
                with quarry.open(small) as ds:
                    got = ds.query(q).ids()
            except CorruptIndexError:
                continue
            np.testing.assert_array_equal(got, ids, err_msg=f"byte {at} flipped, {q}")


@pytest.mark.parametrize("keep", [0, 15, 100, -40, -31, -1])
def test_truncated_index_is_detected(small, keep, tmp_path):
    """...with the command that rebuilds it, --index included."""
    elsewhere = tmp_path / "idx"
    elsewhere.mkdir()
    with quarry.open(small, index=str(elsewhere)) as ds:
        ds.build_index()
    idx = str(elsewhere / "small.h5.qidx")
    data = Path(idx).read_bytes()
    Path(idx).write_bytes(data[:keep])
    with quarry.open(small, index=str(elsewhere)) as ds, pytest.raises(CorruptIndexError) as err:
        ds.query("x > 0").count()
    assert str(err.value).endswith(f"rebuild it with: quarry index {small} --index {idx}")


def test_failed_build_keeps_the_old_index(small, tmp_path):
    with quarry.open(small) as ds:
        ds.build_index(["x"])
    before = Path(small + ".qidx").read_bytes()
    with h5py.File(small, "a") as f:
        f["c"] = np.zeros(500, dtype="c8")
    with quarry.open(small) as ds, pytest.raises(quarry.UnsupportedVariableError):
        ds.build_index(["x", "c"])
    assert Path(small + ".qidx").read_bytes() == before
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_a_slow_disk_holds_the_indexing_back(tmp_path, monkeypatch):
    """Finished blocks wait for the writer thread a few spans at most: on a
    disk slower than the indexing the memory stays bounded."""
    import threading
    import time

    import h5py

    import quarry
    from quarry.index import build, layout

    path = str(tmp_path / "slow.h5")
    with h5py.File(path, "w") as f:
        f["x"] = np.random.default_rng(1).normal(size=40 * 256)
    monkeypatch.setattr(build, "READ_SPAN", 256)
    produced, written, ahead = [0], [0], []
    lock = threading.Lock()
    add_all = layout.BlockWriter.add_all

    def slow_add_all(self, blobs):
        time.sleep(0.01)
        with lock:
            written[0] += 1
        return add_all(self, blobs)

    def progress(_rows: int) -> None:
        with lock:
            produced[0] += 1
            ahead.append(produced[0] - written[0])

    monkeypatch.setattr(layout.BlockWriter, "add_all", slow_add_all)
    with quarry.open(path) as ds:
        ds.build_index(block_len=64, progress=progress)
        assert ds.query("x > 0.5").count() == int((ds.query("x > -inf").values("x") > 0.5).sum())
    assert len(ahead) == 40
    assert max(ahead) <= build.MAX_WRITES_IN_FLIGHT + 1


@pytest.mark.parametrize("dtype", ["<f8", "<f4", "<i8", "<u2", ">i4"])
@pytest.mark.parametrize("size", [1, 1000, 65_536, 65_537, 300_001])
def test_edges_from_a_whole_read_are_the_sampled_ones(tmp_path, dtype, size):
    """A variable the build reads whole gets its edges from that read: the same
    edges as the 64 sampled reads every rank of a sharded build takes."""
    import h5py

    from quarry.formats.hdf5 import HDF5Driver
    from quarry.index.build import edges_of
    from quarry.index.options import BuildOptions

    rng = np.random.default_rng(size)
    values = (rng.normal(size=size) * 1000).astype(dtype)
    if np.dtype(dtype).kind == "f":
        values[rng.random(size) < 0.05] = np.nan
    path = str(tmp_path / "v.h5")
    with h5py.File(path, "w") as f:
        f["v"] = values
    drv = HDF5Driver(path)
    try:
        (var,) = drv.variables()
        opts = BuildOptions()
        sampled = edges_of(drv, var, opts)
        whole = edges_of(drv, var, opts, whole=drv.read(var.path, 0, var.size))
        assert sampled.dtype == whole.dtype and np.array_equal(sampled, whole)
    finally:
        drv.close()


def test_a_small_variable_is_read_once(tmp_path, monkeypatch):
    """Each variable that fits one read is read once, edges included (64 small
    sample reads per variable were most of a small step's build)."""
    import h5py

    import quarry
    from quarry.formats.hdf5 import HDF5Driver

    rng = np.random.default_rng(3)
    path = str(tmp_path / "steps.h5")
    with h5py.File(path, "w") as f:
        for step in range(3):
            f[f"Step#{step}/x"] = rng.normal(size=100_000)
            f[f"Step#{step}/y"] = rng.normal(size=100_000)
    reads: list[tuple[str, int, int]] = []
    read = HDF5Driver.read

    def counted(self, path, start, stop):
        reads.append((path, start, stop))
        return read(self, path, start, stop)

    monkeypatch.setattr(HDF5Driver, "read", counted)
    with quarry.open(path) as ds:
        ds.build_index()
    assert sorted(reads) == sorted((f"/Step#{s}/{v}", 0, 100_000) for s in range(3) for v in "xy")
    monkeypatch.setattr(HDF5Driver, "read", read)
    with quarry.open(path) as ds, h5py.File(path) as f:
        x = f["Step#2/x"][:]
        assert ds.query("/Step#2/x > 0.3").count() == int((x > 0.3).sum())


def test_index_file_crc32_is_zlibs_over_any_section(small):
    """The manifest's checksum is taken in the core, over the mapped bytes:
    the same number as zlib's over the bytes read, and a section past the
    end is an error, not a short read."""
    import zlib

    from quarry import _core

    with quarry.open(small) as ds:
        ds.build_index()
        index_path = ds.index_path
    index = _core.IndexFile(index_path)
    size = len(index)
    rng = np.random.default_rng(7)
    offsets = rng.integers(0, size, 20)
    sections = [(0, 0), (0, size), (size - 1, 1), (size, 0)]
    sections += [(int(o), int(rng.integers(0, size - o + 1))) for o in offsets]
    for offset, length in sections:
        assert index.crc32(offset, length) == zlib.crc32(index.read(offset, length))
    with pytest.raises(_core.CorruptBlockError):
        index.crc32(size - 1, 2)


def test_verify_finds_a_damaged_bitmap_and_the_command_given_mends_it(tmp_path):
    """README: a bitmap damaged in the index: a query decoding it is refused with a
    command that really rebuilds (`--force`: the file is unchanged, so a
    plain `quarry index` skips it), and `verify` reports the damage, where it
    used to say ok (it compared only the source with the index's CRCs)."""
    import shlex
    import subprocess
    import sys

    path = str(tmp_path / "d.h5")
    rng = np.random.default_rng(1)
    with h5py.File(path, "w") as f:
        f["x"] = rng.normal(size=200_000)
    with quarry.open(path) as ds:
        ds.build_index(block_len=65536)
    idx = path + ".qidx"
    bad = bytearray(Path(idx).read_bytes())
    bad[len(bad) // 2] ^= 0xFF  # among the bitmaps: they are most of the file
    Path(idx).write_bytes(bad)
    with quarry.open(path) as ds:
        report = ds.verify()
        assert not report.ok and list(report.damaged) == ["/x"]
        assert report.summary().endswith(f"rebuild it with: quarry index {path} --force")
        with pytest.raises(CorruptIndexError) as err:
            # Some range decodes the damaged bitmap: narrow ones, whose ids
            # the index gives (a dense range's ids come from a scan).
            for lo in np.arange(-6, 6, 0.05):
                ds.query(f"{lo:.6f} < x < {lo + 0.1:.6f}").ids()
    command = str(err.value).rsplit("rebuild it with: ", 1)[1]
    assert command.endswith(" --force")
    subprocess.run([sys.executable, "-m", "quarry.cli.main", *shlex.split(command)[1:]], check=True)
    with h5py.File(path) as f:
        x = f["x"][()]
    with quarry.open(path) as ds:
        assert ds.verify().ok
        assert ds.query("x > 0.123456").count() == int((x > 0.123456).sum())
