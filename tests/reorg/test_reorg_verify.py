"""``quarry verify`` checks a file's reorganised copy whole: the source against
the CRC-32s its build recorded, and the copy's own bytes against theirs."""

from __future__ import annotations

import json
import os

import h5py
import numpy as np
import pytest

import quarry
from cli_run import run
from quarry.errors import StaleCopyError
from quarry.index import fresh


@pytest.fixture
def particles(tmp_path):
    """A file of 9,000 rows with a copy over energy and x (3 parts of 4,000
    rows or fewer) and no index."""
    path = str(tmp_path / "p.h5")
    rng = np.random.default_rng(11)
    with h5py.File(path, "w") as f:
        f["energy"] = rng.exponential(0.4, 9000)
        f["x"] = rng.uniform(0, 300, 9000).astype("f4")
    with quarry.open(path) as ds:
        ds.reorganize(["energy", "x"], bin_size=[0.1, 10.0], part_rows=4000)
    return path


def keeping_times(path: str, write) -> None:
    """``write(f)`` on the open file, then its times put back (`touch -r`)."""
    st = os.stat(path)
    with h5py.File(path, "r+") as f:
        write(f)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_a_copy_without_an_index_is_verified(particles):
    out = run("verify", particles).stdout.strip()
    assert out == f"ok {particles}: its reorganised copy {particles}.qmd matches"
    report = json.loads(run("verify", particles, "--json").stdout)["files"][0]
    assert report["ok"] and report["index"] is None
    assert report["copy"] == {
        "path": particles + ".qmd",
        "ok": True,
        "changed": [],
        "damaged": [],
        "unreadable": None,
        "rebuild": f"quarry reorg {particles} --vars /energy,/x --bin-size 0.1,10",
    }


def test_damaged_copy_bytes_exit_1_naming_where(particles):
    with h5py.File(particles + ".qmd", "r+") as f:
        f["m0/columns/1"][4500] = -7.0  # x, in the second part
    proc = run("verify", particles, code=1)
    assert proc.stdout.strip() == (
        f"damaged {particles}: its reorganised copy {particles}.qmd is damaged at "
        f"/x, part 1 (rows 4000 to 7999); build it again with: "
        f"quarry reorg {particles} --vars /energy,/x --bin-size 0.1,10"
    )
    report = json.loads(run("verify", particles, "--json", code=1).stdout)
    assert report["ok"] is False
    assert report["files"][0]["copy"]["damaged"] == ["/x, part 1 (rows 4000 to 7999)"]


def test_a_damaged_row_column_is_named(particles):
    with h5py.File(particles + ".qmd", "r+") as f:
        rows = f["m0/rows"]
        rows[0], rows[1] = rows[1], rows[0]
    with quarry.open(particles) as ds:
        report = ds.verify()
    assert report.copy is not None
    assert report.copy.damaged == ["the row numbers of the table, part 0 (rows 0 to 3999)"]


def test_a_source_changed_behind_its_times_is_named(particles):
    keeping_times(particles, lambda f: f["energy"].__setitem__(8999, 5.0))
    proc = run("verify", particles, code=1)
    assert proc.stdout.strip() == (
        f"changed {particles}: its reorganised copy {particles}.qmd is stale, the file "
        f"changed since: /energy part(s) 2 changed; build it again with: "
        f"quarry reorg {particles} --vars /energy,/x --bin-size 0.1,10"
    )


def test_index_and_copy_are_both_checked(particles):
    run("index", particles, "--quiet", "--block-size", "1000")
    out = run("verify", particles).stdout.strip()
    assert out == (
        f"ok {particles}: 18 blocks of 2 variable(s) match; "
        f"its reorganised copy {particles}.qmd matches"
    )
    with h5py.File(particles + ".qmd", "r+") as f:
        f["m0/columns/0"][0] = -1.0
    out = run("verify", particles, code=1).stdout.strip()
    assert out.startswith(f"damaged {particles}: 18 blocks of 2 variable(s) match; ")
    assert "is damaged at /energy, part 0 (rows 0 to 3999)" in out


def test_verify_accepts_a_touched_copy_again(particles, monkeypatch):
    """``touch`` moves the times: the copy is refused until verify finds it whole."""
    monkeypatch.setattr(fresh, "RACY_NS", 0)
    monkeypatch.setattr(fresh, "FINE_RACY_NS", 0)
    st = os.stat(particles)
    os.utime(particles, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    query = "0.1 < energy < 0.5 && 100 < x < 200"
    with quarry.open(particles) as ds, pytest.raises(StaleCopyError, match="size or modification"):
        ds.query(query).count()
    # Put mtime back: only ctime moved, so the copy is checked by CRC, then recorded.
    os.utime(particles, ns=(st.st_atime_ns, st.st_mtime_ns))
    with quarry.open(particles) as ds:
        assert ds.verify().ok
    assert os.path.exists(particles + ".qmd.checked")
    with h5py.File(particles, "r") as f:
        e, x = f["energy"][:], f["x"][:]
    with quarry.open(particles) as ds:
        assert ds.query(query).count() == int(((e > 0.1) & (e < 0.5) & (x > 100) & (x < 200)).sum())


def test_a_file_with_neither_is_refused(tmp_path):
    path = str(tmp_path / "bare.h5")
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(5.0)
    proc = run("verify", path, code=1)
    assert "has no index" in proc.stdout and "and no reorganised copy" in proc.stdout


@pytest.mark.parametrize("after", ["gone", "shorter"])
def test_a_variable_gone_or_resized_is_named(particles, after):
    with h5py.File(particles, "r+") as f:
        del f["x"]
        if after == "shorter":
            f["x"] = np.zeros(100, "f4")
    proc = run("verify", particles, code=1)
    said = "/x is no longer in the file" if after == "gone" else "/x holds 100 values, not 9000"
    assert f"is stale, the file changed since: {said}; build it again with" in proc.stdout


def test_info_reads_no_columns_a_query_and_verify_do(tmp_path):
    """The README: `info` reads the manifest and offset tables, not the
    columns, so damaged column bytes show only to a query and to verify."""
    path = str(tmp_path / "big.h5")
    rng = np.random.default_rng(2)
    with h5py.File(path, "w") as f:
        f["energy"] = rng.exponential(0.4, 400_000)
        f["x"] = rng.uniform(0, 300, 400_000)
    with quarry.open(path) as ds:
        ds.reorganize(["energy", "x"], bin_size=[0.05, 5.0])
    query = "0.1 < energy < 0.13 && 100 < x < 102"
    assert ": mdbin (" in run("query", path, query, "--explain").stderr
    with h5py.File(path + ".qmd", "r+") as f:
        f["m0/columns/0"][:] = -1.0
    info = json.loads(run("info", path, "--json").stdout)
    assert info["reorganised"]["state"] == "fresh"
    err = run("query", path, query, code=1).stderr
    assert "is damaged: /energy" in err and "build it again with: quarry reorg" in err
    assert "is damaged at /energy, part 0" in run("verify", path, code=1).stdout


def _overwrite(copy: str, dataset: str, at: int, data: bytes) -> None:
    """Bytes of the copy's HDF5 dataset overwritten in place, as a bad disk would."""
    with h5py.File(copy, "r") as f:
        offset = f[dataset].id.get_offset()
    with open(copy, "r+b") as f:
        f.seek(offset + at)
        f.write(data)


def test_damaged_block_checksums_are_found(particles):
    """The per-block CRCs a query checks are verified too: the columns
    whole, their damaged checksums would make queries refuse the copy."""
    _overwrite(particles + ".qmd", "m0/block_crc32", 0, b"\xff\xff\xff\xff")
    proc = run("verify", particles, code=1)
    assert "is damaged at the block checksums of /energy, part 0 (rows 0 to 3999); " in (
        proc.stdout
    )


@pytest.mark.parametrize("damaged", ["quarry_reorg", "m0/table_starts"])
def test_an_unreadable_manifest_or_table_is_said_once(particles, damaged):
    _overwrite(particles + ".qmd", damaged, 8, b"\x11" * 8)
    out = run("verify", particles, code=1).stdout.strip()
    assert out.startswith(f"damaged {particles}: the ")
    assert out.count("build it again with") == 1 and "is damaged at the " not in out
    report = json.loads(run("verify", particles, "--json", code=1).stdout)["files"][0]
    assert report["copy"]["unreadable"] in out
