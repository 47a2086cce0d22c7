"""The file's listing in its index's manifest (quarry.formats.listing): used
only while the index is fresh and trusted, never in place of a changed file."""

from __future__ import annotations

import os
import time

import h5py
import numpy as np
import pytest

import quarry
from quarry.errors import CorruptIndexError
from quarry.formats.listing import ListedDriver
from quarry.index import fresh
from quarry.index.layout import read_manifest
from quarry.index.manifest import Manifest


@pytest.fixture(autouse=True)
def long_after_the_write(monkeypatch):
    """Indexes here are built "long after" their file was written (no racy
    window), so their stat is trusted and the listing is used."""
    monkeypatch.setattr(fresh, "RACY_NS", 0)
    monkeypatch.setattr(fresh, "FINE_RACY_NS", 0)


def _write(path, **extra):
    with h5py.File(path, "w") as f:
        f["Step#0/x"] = np.arange(50.0)
        f["Step#1/x"] = np.arange(50.0) * 2
        f["Step#1/x"].attrs["units"] = "m"
        for name, values in extra.items():
            f[name] = values


def test_a_listed_open_answers_as_a_plain_one(tmp_path):
    path = str(tmp_path / "run.h5")
    _write(path)
    with quarry.open(path) as ds:
        ds.build_index(block_len=16)
        plain = [ds.query("x > 30").counts(), ds.info()]
    with quarry.open(path) as ds:
        assert isinstance(ds.driver, ListedDriver)
        assert [ds.query("x > 30").counts(), ds.info()] == plain
        assert not ds.driver.opened
    with quarry.open_series(path) as series:  # members found from the listing
        assert [m.group for m in series.members] == ["/Step#0", "/Step#1"]
        assert series.query("x > 30").counts() == plain[0]


def test_a_changed_file_is_opened_and_refused_never_listed(tmp_path):
    path = str(tmp_path / "run.h5")
    _write(path)
    with quarry.open(path) as ds:
        ds.build_index(block_len=16)
    with h5py.File(path, "r+") as f:
        f["late"] = np.ones(3)  # a variable the listing does not have
    with quarry.open(path) as ds:
        assert not isinstance(ds.driver, ListedDriver)
        assert "/late" in [v.path for v in ds.variables()]
        with pytest.raises(quarry.StaleIndexError):
            ds.query("x > 30", path="Step#1").count()


def test_a_file_a_listing_cannot_describe_is_opened_each_time(tmp_path):
    path = str(tmp_path / "run.h5")
    compound = np.zeros(4, dtype=[("a", "<f4"), ("b", "<i2")])
    _write(path, pairs=compound)
    with quarry.open(path) as ds:
        ds.build_index(["Step#0/x"], block_len=16)
        problem = next(v for v in ds.variables() if v.path == "/pairs")
    assert problem.problem is not None
    assert read_manifest(path + ".qidx")[1].listing is None
    with quarry.open(path) as ds:
        assert not isinstance(ds.driver, ListedDriver)
        assert ds.query("x > 30", path="Step#0").count() == 19


def test_string_datasets_are_listed_as_unsupported_and_the_index_reads_back(tmp_path):
    """A variable-length string dataset reads as objects ('|O'), a dtype text
    the listing's reader refused: every build of such a file published an
    index that read as damaged, and ``quarry index --force`` could not mend it."""
    path = str(tmp_path / "run.h5")
    _write(path, label=["a", "bb", "c"], raw=np.array([b"ab", b"cd"]), note=[b"x", b"yz"])
    with quarry.open(path) as ds:
        ds.build_index(block_len=16)
        counts = ds.query("x > 30").counts()
    with quarry.open(path) as ds:
        assert isinstance(ds.driver, ListedDriver)
        assert ds.query("x > 30").counts() == counts == [19, 34]
        problems = {v.path: v.problem for v in ds.variables()}
        assert problems["/label"] and problems["/raw"] and problems["/Step#0/x"] is None
    run = tmp_path / "insitu.h5"
    with quarry.InSituIndexer(str(run)) as ix, h5py.File(run, "w") as f:
        f["meta"] = ["code v1"]
        for step in range(2):
            f[f"Step#{step}/x"] = np.arange(10.0)
            ix.add(step, {"x": np.arange(10.0)})
    with quarry.open(str(run)) as ds:
        assert ds.index is not None and ds.query("x > 3").counts() == [6, 6]


def test_a_damaged_listing_is_a_damaged_index(tmp_path):
    path = str(tmp_path / "run.h5")
    _write(path)
    with quarry.open(path) as ds:
        doc = ds.build_index(block_len=16).to_json()
    doc["listing"]["variables"][0]["shape"] = ["five"]
    with pytest.raises(CorruptIndexError, match="listing is malformed"):
        Manifest.from_json(doc)
    del doc["listing"]["backend"]
    with pytest.raises(CorruptIndexError, match="listing is malformed"):
        Manifest.from_json(doc)


DTYPES = ["<f8", ">f8", "<f4", ">i4", "<u2", "|i1", "<f2", "|b1"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_contiguous_values_are_read_through_one_map_without_hdf5(tmp_path, dtype):
    """A listed contiguous dataset reads as h5py reads it (every dtype, bool and
    float16 widened as a plain open widens them), without opening the file; a
    chunked and compressed one is read through the file, as before."""
    rng = np.random.default_rng(7)
    path = str(tmp_path / "run.h5")
    raw = rng.normal(0, 50, 1003)
    raw[::17] = np.nan if np.dtype(dtype).kind == "f" else 0
    values = raw.astype(dtype) if np.dtype(dtype).kind != "b" else raw > 0
    with h5py.File(path, "w") as f:
        f.create_dataset("Step#0/v", data=values)
        f.create_dataset("Step#0/packed", data=values, chunks=(100,), compression="gzip")
    with quarry.open(path) as ds:
        ds.build_index(block_len=64)
        plain = ds.driver
        want = {n: plain.read(f"/Step#0/{n}", 0, 1003) for n in ("v", "packed")}
    listing = read_manifest(path + ".qidx")[1].listing
    assert listing is not None and set(listing.contiguous) == {"/Step#0/v"}
    positions = np.sort(rng.choice(1003, 40, replace=False)).astype(np.int64)
    with quarry.open(path) as ds:
        driver = ds.driver
        assert isinstance(driver, ListedDriver)
        got = driver.read("/Step#0/v", 5, 900)
        assert got.dtype == want["v"].dtype and got.dtype.isnative
        np.testing.assert_array_equal(got, want["v"][5:900])
        np.testing.assert_array_equal(driver.gather("/Step#0/v", positions), want["v"][positions])
        median = float(np.nanmedian(want["v"].astype(float)))
        count = ds.query(f"v > {median}", path="Step#0").count()
        assert count == int(np.count_nonzero(want["v"] > median))
        assert not driver.opened
        np.testing.assert_array_equal(driver.read("/Step#0/packed", 0, 1003), want["packed"])
        assert driver.opened


def test_an_index_listing_no_offsets_reads_through_the_file(tmp_path):
    """An index from before offsets were listed answers by opening the file,
    and a rebuild from its listing finds and records them."""
    path = str(tmp_path / "run.h5")
    _write(path)
    with quarry.open(path) as ds:
        manifest = ds.build_index(block_len=16)
    assert manifest.listing is not None
    assert set(manifest.listing.contiguous) == {"/Step#0/x", "/Step#1/x"}
    doc = manifest.to_json()
    del doc["listing"]["contiguous"]
    old = Manifest.from_json(doc, manifest.edges_area()).listing
    assert old is not None and not old.contiguous
    driver = ListedDriver(path, old, lambda: quarry.formats.open_source(path))
    np.testing.assert_array_equal(driver.gather("/Step#1/x", np.array([3, 9])), [6.0, 18.0])
    assert driver.opened
    where = manifest.listing.contiguous["/Step#1/x"]
    assert driver.contiguous(["/Step#1/x"]) == {"/Step#1/x": where}
    driver.close()


def test_a_listing_past_the_end_of_its_file_reads_through_the_file(tmp_path):
    path = str(tmp_path / "run.h5")
    _write(path)
    with quarry.open(path) as ds:
        listing = ds.build_index(block_len=16).listing
    assert listing is not None
    beyond = {p: (10**12, dtype) for p, (_, dtype) in listing.contiguous.items()}
    moved = type(listing)(listing.backend, listing.step_context, listing.variables, beyond)
    driver = ListedDriver(path, moved, lambda: quarry.formats.open_source(path))
    assert driver.read("/Step#1/x", 0, 3).tolist() == [0.0, 2.0, 4.0]
    driver.close()


@pytest.mark.parametrize("bad", [[-1, "<f8"], ["8", "<f8"], [8, "double"], [8]])
def test_a_damaged_offset_is_a_damaged_index(tmp_path, bad):
    path = str(tmp_path / "run.h5")
    _write(path)
    with quarry.open(path) as ds:
        doc = ds.build_index(block_len=16).to_json()
    doc["listing"]["contiguous"]["/Step#0/x"] = bad
    with pytest.raises(CorruptIndexError, match="listing is malformed"):
        Manifest.from_json(doc)


def test_a_file_indexed_as_it_was_written_is_walked_once_then_listed(tmp_path):
    """README (What a changed source does): an index whose file's times are
    not safely older than its build (a file indexed as it was written) is
    not proven fresh by the stat: the first open walks the file, and
    finding the listing as recorded says so beside the index, so the next
    open at that stat is listed. A write after that moves the stat, and the
    file is walked (and refused) again."""
    path = str(tmp_path / "run.h5")
    _write(path)
    soon = time.time_ns() + 300_000_000
    os.utime(path, ns=(soon, soon))  # times after the build's start: racy
    with quarry.open(path) as ds:
        ds.build_index(block_len=16)
    time.sleep(0.4)  # the times are now safely older than a later reading
    with quarry.open(path) as ds:
        assert not isinstance(ds.driver, ListedDriver)
        want = ds.query("x > 30", path="Step#1").count()
    with quarry.open(path) as ds:
        assert isinstance(ds.driver, ListedDriver)
        assert ds.query("x > 30", path="Step#1").count() == want == 34
    with h5py.File(path, "r+") as f:
        f["late"] = np.ones(3)
    with quarry.open(path) as ds:
        assert not isinstance(ds.driver, ListedDriver)
        with pytest.raises(quarry.StaleIndexError):
            ds.query("x > 30", path="Step#1").count()
