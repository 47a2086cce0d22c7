"""A fresh index gives a reorganisation its variables' ranges: the copy is
the same as one whose ranges were read, and the variables are read once,
not twice. A stale, suspect or damaged index is never trusted for them."""

from __future__ import annotations

import os

import h5py
import numpy as np
import pytest

import quarry
from copy_arrays import copy_arrays
from quarry.index import fresh
from quarry.reorg import build

DTYPES = ["<f4", ">f8", "<i2", "<u4", "<i8"]


@pytest.fixture(autouse=True)
def _times_proof_at_once(monkeypatch):
    # A file indexed just after it was written is trusted at once (on a
    # local disk a tenth of a second later; see quarry.index.fresh).
    monkeypatch.setattr(fresh, "FINE_RACY_NS", 0)


def random_columns(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """Random values of every dtype: NaNs and infinities among the floats,
    negative and huge integers, a constant column."""
    columns = {}
    for k, dtype in enumerate(DTYPES):
        dt = np.dtype(dtype)
        if dt.kind == "f":
            values = rng.normal(rng.uniform(-1e3, 1e3), rng.uniform(0.1, 100), n).astype(dt)
            special = rng.random(n)
            values[special < 0.05] = np.nan
            if k == 1:
                values[special > 0.995] = np.inf  # the ranges need reading: no finite extent
        else:
            info = np.iinfo(dt)
            values = rng.integers(max(info.min, -(10**12)), min(info.max, 10**12), n, dtype=dt)
        columns[f"v{k}"] = values
    columns["flat"] = np.full(n, 3.5, "f4")
    return columns


def reads_counted(monkeypatch) -> dict[str, int]:
    """How many times each variable's values are read by a reorganisation
    (whatever driver reads them: with an index, its recorded listing)."""
    counts: dict[str, int] = {}
    original = build.serial_reader

    def serial_reader(driver):
        read = original(driver)

        def counted(var, start, stop):
            counts[var] = counts.get(var, 0) + 1
            return read(var, start, stop)

        return counted

    monkeypatch.setattr(build, "serial_reader", serial_reader)
    return counts


@pytest.mark.parametrize("seed", range(6))
def test_ranges_from_the_index_make_the_same_copy_as_read_ones(tmp_path, monkeypatch, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5000))
    columns = random_columns(rng, n)
    names = list(columns)
    part_rows = int(rng.integers(1, n + 2))
    paths = [str(tmp_path / f"{kind}.h5") for kind in ("indexed", "plain")]
    for path in paths:
        with h5py.File(path, "w") as f:
            for name, values in columns.items():
                f[name] = values
    indexed, plain = paths
    with quarry.open(indexed) as ds:
        ds.build_index(block_len=int(rng.integers(1, 3000)))
    counts = reads_counted(monkeypatch)
    with quarry.open(indexed) as ds:
        with_index = ds.reorganize(names, bins=int(rng.integers(1, 20)), part_rows=part_rows)
    read_with_index = dict(counts)
    counts.clear()
    with quarry.open(plain) as ds:
        without = ds.reorganize(
            names, bins=with_index.members[0].axes[0].count, part_rows=part_rows
        )
    parts = len(with_index.members[0].parts)
    for var in names:
        # The infinite column's range is read (pass 1), every other one's is not.
        passes = 2 if var == "v1" and np.isinf(columns[var]).any() else 1
        assert read_with_index[f"/{var}"] == passes * parts, var
        assert counts[f"/{var}"] == 2 * parts, var
    assert with_index.members[0].axes == without.members[0].axes
    ours, theirs = copy_arrays(indexed + ".qmd"), copy_arrays(plain + ".qmd")
    assert ours.keys() == theirs.keys()
    for name in ours:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)
    # Answers through the copy are the data's.
    with quarry.open(indexed) as ds:
        low = float(np.nanmedian(columns["v0"]))
        assert ds.query(f"v0 >= {low}").count() == int(np.sum(columns["v0"] >= low))


def write_particles(path: str, energy: np.ndarray) -> None:
    with h5py.File(path, "w") as f:
        f["energy"] = energy
        f["x"] = np.linspace(0.0, 10.0, len(energy))


def test_a_file_written_after_indexing_has_its_ranges_read(tmp_path, monkeypatch):
    """A stale index's statistics would put new values outside the copy's
    recorded range: they are never used."""
    path = str(tmp_path / "p.h5")
    write_particles(path, np.arange(100.0, dtype="f4"))
    with quarry.open(path) as ds:
        ds.build_index()
    with h5py.File(path, "r+") as f:
        f["energy"][5] = 1e6  # beyond the indexed maximum
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    with quarry.open(path) as ds:
        manifest = ds.reorganize(["energy", "x"], bins=4)
    assert manifest.members[0].axes[0].high == 1e6


def test_a_touched_file_is_not_trusted_for_ranges(tmp_path, monkeypatch):
    """A file whose inode or ctime moved (its mtime put back) is only
    suspect: the index answers after checking CRCs, and the ranges are read."""
    path = str(tmp_path / "p.h5")
    write_particles(path, np.arange(100.0, dtype="f4"))
    with quarry.open(path) as ds:
        ds.build_index()
    st = os.stat(path)
    with h5py.File(path, "r+") as f:
        f["energy"][5] = 1e6
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # size and mtime as indexed
    counts = reads_counted(monkeypatch)
    with quarry.open(path) as ds:
        manifest = ds.reorganize(["energy", "x"], bins=4)
    assert manifest.members[0].axes[0].high == 1e6
    assert counts["/energy"] == 2  # pass 1 and pass 2: one part


def damage(index_path: str) -> None:
    """Overwrite the middle of an index file: its blocks' headers and bitmaps."""
    size = os.path.getsize(index_path)
    with open(index_path, "r+b") as f:
        f.seek(size // 8)
        f.write(b"\xff" * (size // 2))


def replace_with_a_folder(index_path: str) -> None:
    """Where the index should be, something that is not one."""
    os.remove(index_path)
    os.mkdir(index_path)


@pytest.mark.parametrize("spoil", [damage, replace_with_a_folder])
def test_an_index_that_cannot_be_read_leaves_the_ranges_to_be_read(tmp_path, monkeypatch, spoil):
    path = str(tmp_path / "p.h5")
    write_particles(path, np.arange(100.0, dtype="f4"))
    with quarry.open(path) as ds:
        ds.build_index()
        index_path = ds.index_path
    spoil(index_path)
    counts = reads_counted(monkeypatch)
    with quarry.open(path) as ds:
        manifest = ds.reorganize(["energy", "x"], bins=4)
    assert (manifest.members[0].axes[0].low, manifest.members[0].axes[0].high) == (0.0, 99.0)
    assert counts["/energy"] == 2  # pass 1 and pass 2: one part


def test_a_raw_file_described_again_has_its_ranges_read(tmp_path, monkeypatch):
    """A raw file's description (quarry register) can change how it reads
    without the file's stat moving: -9999 missing when it was indexed is a
    value once registered again without it. The index is then stale, and
    the copy's ranges are read."""
    from quarry.formats.raw import RawLayout, register

    values = np.linspace(0, 10, 1000).astype("<f4")
    values[::10] = -9999.0
    path = str(tmp_path / "e.bin")
    values.tofile(path)
    register(path, RawLayout("e", "<f4", (1000,), fill_value=-9999.0))
    with quarry.open(path) as ds:
        ds.build_index()
    register(path, RawLayout("e", "<f4", (1000,)))
    counts = reads_counted(monkeypatch)
    with quarry.open(path) as ds:
        manifest = ds.reorganize(["e"], bins=4)
    assert manifest.members[0].axes[0].low == -9999.0
    assert counts["/e"] == 2  # pass 1 and pass 2: one part
