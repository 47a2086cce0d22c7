"""The file's listing in its index's manifest (quarry.formats.listing): used
only while the index is fresh and trusted, never in place of a changed file."""

from __future__ import annotations

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
