"""The catalog: files found by content, what each holds, its index and copy
with their freshness, rescans, restarts and schema migrations."""

from __future__ import annotations

import os
import sqlite3

import h5py
import netCDF4
import numpy as np
import pytest
import zarr

import quarry
from quarry.formats.raw import RawLayout, register
from quarry.service.catalog import SCHEMA_VERSION, Catalog
from quarry.service.config import ServiceError


def _files(root: str) -> None:
    """One file of each format, named so that no extension gives it away,
    and things that are not data."""
    with h5py.File(os.path.join(root, "particles.dat"), "w") as f:
        f["energy"] = np.arange(10.0)
        f["energy"].attrs["units"] = "MeV"
    with netCDF4.Dataset(os.path.join(root, "climate.bin"), "w") as nc:
        nc.createDimension("t", 4)
        nc.createVariable("tas", "f4", ("t",))[:] = [1, 2, 3, 4]
    group = zarr.open_group(os.path.join(root, "store"), mode="w")
    group.create_array("a", shape=(6,), dtype="i4")[:] = np.arange(6)
    os.makedirs(os.path.join(root, "raw"))
    np.arange(8, dtype="<f4").tofile(os.path.join(root, "raw", "bx.raw"))
    register(os.path.join(root, "raw", "bx.raw"), RawLayout("bx", "<f4", (8,), "C", 0, None))
    with open(os.path.join(root, "notes.txt"), "w") as f:
        f.write("not data")
    with open(os.path.join(root, ".hidden.h5"), "wb") as f:
        f.write(b"hidden")


def test_every_format_is_found_by_content_with_its_size_time_and_variables(tmp_path):
    root = str(tmp_path / "root")
    os.makedirs(root)
    _files(root)
    catalog = Catalog(str(tmp_path / "c.sqlite"))
    catalog.rescan((root,))
    found = {e.path: e for e in catalog.entries()}
    formats = {p: e.format for p, e in found.items()}
    assert formats == {
        "particles.dat": "hdf5",
        "climate.bin": "netcdf",
        "store": "zarr",
        "raw/bx.raw": "raw",
    }
    st = os.stat(os.path.join(root, "particles.dat"))
    particles = found["particles.dat"]
    assert (particles.size, particles.mtime_ns) == (st.st_size, st.st_mtime_ns)
    with quarry.open(os.path.join(root, "particles.dat")) as ds:
        assert particles.variables == ds.info()["variables"]
    summary = particles.summary()
    assert summary == {
        "path": "particles.dat",
        "format": "hdf5",
        "size": st.st_size,
        "mtime": st.st_mtime_ns / 1e9,
        "indexed": False,
        "fresh": False,
    }
    assert particles.variables[0]["attrs"]["units"] == "MeV"
    assert "/tas" in [v["path"] for v in found["climate.bin"].variables]
    assert [v["path"] for v in found["store"].variables] == ["/a"]
    catalog.close()


def test_an_index_is_fresh_then_stale_when_the_file_changes_and_a_copy_is_listed(tmp_path):
    root = str(tmp_path)
    path = os.path.join(root, "p.h5")
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(100.0)
    catalog = Catalog(os.path.join(root, ".catalog.sqlite"))
    catalog.rescan((root,))
    assert catalog.get("p.h5").index["state"] == "none"
    with quarry.open(path) as ds:
        ds.build_index()
        ds.reorganize(["x"], bin_size=10.0)
    assert catalog.rescan((root,))["changed"] == 1
    entry = catalog.get("p.h5")
    assert (entry.indexed, entry.fresh) == (True, True)
    assert entry.copy is not None and entry.copy["path"] == path + ".qmd"
    assert entry.variables[0]["indexed"] is True
    with h5py.File(path, "r+") as f:
        f["x"][3] = -1.0
        f["y"] = np.zeros(100)
    catalog.rescan((root,))
    entry = catalog.get("p.h5")
    assert (entry.index["state"], entry.indexed, entry.fresh) == ("stale", True, False)
    assert "has changed since it was indexed" in entry.index["error"]
    assert entry.copy is not None and entry.copy["state"] == "stale"
    assert [v["path"] for v in entry.variables] == ["/x", "/y"]
    catalog.close()


def test_a_variable_changed_behind_an_unmoved_stat_makes_the_entry_stale(tmp_path):
    """Same size and times, other values: the catalog says stale (as queries
    and quarry info find it by the CRCs), not fresh."""
    root = str(tmp_path)
    path = os.path.join(root, "p.h5")
    with h5py.File(path, "w") as f:
        f["x"], f["y"] = np.arange(100.0), np.arange(100.0)
    os.utime(path, ns=(10**18, 10**18))
    with quarry.open(path) as ds:
        ds.build_index()
    catalog = Catalog(os.path.join(root, ".catalog.sqlite"))
    catalog.rescan((root,))
    assert catalog.get("p.h5").fresh
    with h5py.File(path, "r+") as f:
        f["x"][3] = -1.0
    os.utime(path, ns=(10**18, 10**18))
    catalog.rescan((root,))
    entry = catalog.get("p.h5")
    assert (entry.index["state"], entry.fresh) == ("stale", False)
    assert "/x block 0 of 1 changed" in entry.index["error"]
    assert [(v["path"], v["indexed"]) for v in entry.variables] == [("/x", False), ("/y", True)]
    catalog.close()


def test_a_rescan_adds_new_files_and_drops_removed_ones_and_a_restart_keeps_all(tmp_path):
    root = str(tmp_path / "data")
    os.makedirs(os.path.join(root, "run"))
    for name in ("a.h5", "run/b.h5"):
        with h5py.File(os.path.join(root, name), "w") as f:
            f["e"] = np.arange(3.0)
    db = str(tmp_path / "c.sqlite")
    catalog = Catalog(db)
    assert catalog.rescan((root,)) == {
        "added": 2,
        "changed": 0,
        "removed": 0,
        "hidden": 0,
        "datasets": 2,
    }
    os.remove(os.path.join(root, "a.h5"))
    with h5py.File(os.path.join(root, "run", "c.h5"), "w") as f:
        f["e"] = np.arange(4.0)
    assert catalog.rescan((root,)) == {
        "added": 1,
        "changed": 0,
        "removed": 1,
        "hidden": 0,
        "datasets": 2,
    }
    before = catalog.entries()
    catalog.close()
    again = Catalog(db)  # a restart: the entries come back without a scan
    assert again.entries() == before
    assert [e.path for e in again.entries()] == ["run/b.h5", "run/c.h5"]
    with pytest.raises(ServiceError, match=r"no dataset 'a\.h5'"):
        again.get("a.h5")
    again.close()


def test_symlinks_out_of_the_root_are_not_catalogued(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    with h5py.File(outside / "secret.h5", "w") as f:
        f["x"] = np.arange(3.0)
    root = tmp_path / "root"
    root.mkdir()
    (root / "link.h5").symlink_to(outside / "secret.h5")
    (root / "dir").symlink_to(outside, target_is_directory=True)
    with h5py.File(root / "inside.h5", "w") as f:
        f["x"] = np.arange(3.0)
    (root / "alias.h5").symlink_to(root / "inside.h5")
    catalog = Catalog(":memory:")
    catalog.rescan((os.path.realpath(root),))
    assert [e.path for e in catalog.entries()] == ["alias.h5", "inside.h5"]
    catalog.close()


def test_an_older_catalog_is_migrated_with_its_rows_kept(tmp_path):
    db = str(tmp_path / "old.sqlite")
    from quarry.service.catalog import MIGRATIONS

    old = sqlite3.connect(db)
    old.executescript(MIGRATIONS[0])
    old.execute(
        "INSERT INTO datasets VALUES (?,?,?,?,?,?,?,?,?)",
        ("a.h5", "/r", "/r/a.h5", "hdf5", 5, 7, "{}", "[]", '{"state": "none", "watch": {}}'),
    )
    old.execute("PRAGMA user_version = 1")
    old.commit()
    old.close()
    catalog = Catalog(db)
    (entry,) = catalog.entries()
    assert (entry.path, entry.size, entry.copy) == ("a.h5", 5, None)
    catalog.close()
    check = sqlite3.connect(db)
    assert check.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert check.execute("SELECT count(*) FROM jobs").fetchone()[0] == 0
    check.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    check.commit()
    check.close()
    with pytest.raises(ServiceError, match="newer than this quarry's"):
        Catalog(db)


def test_a_path_under_two_roots_is_the_first_roots_and_the_other_is_said_hidden(tmp_path, caplog):
    """serve runA runB with run/p.h5 in both served runA's, with no word of
    runB's: the rescan now counts it hidden and the log names it, once."""
    import logging

    roots = []
    for name, n in (("runA", 10), ("runB", 100)):
        (tmp_path / name / "run").mkdir(parents=True)
        with h5py.File(tmp_path / name / "run" / "p.h5", "w") as f:
            f["x"] = np.arange(float(n))
        roots.append(os.path.realpath(tmp_path / name))
    catalog = Catalog(":memory:")
    with caplog.at_level(logging.WARNING, logger="quarry.service.catalog"):
        assert catalog.rescan(tuple(roots))["hidden"] == 1
        assert catalog.rescan(tuple(roots))["hidden"] == 1
    assert catalog.get("run/p.h5").real == os.path.join(roots[0], "run", "p.h5")
    said = [r.getMessage() for r in caplog.records]
    hidden = os.path.join(roots[1], "run", "p.h5")
    assert said == [
        f"{hidden} is not served: {os.path.join(roots[0], 'run', 'p.h5')} has its path "
        "under an earlier root"
    ]
    catalog.close()
