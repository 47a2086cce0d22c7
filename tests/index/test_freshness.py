"""A changed source is refused even when its size and modification time are
put back: ctime, inode and racily clean timestamps lead to CRC checks, and
``verify`` checks everything. Every count is compared with NumPy."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import h5py
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import quarry
from quarry.errors import StaleIndexError
from quarry.formats.base import file_system, fingerprint
from quarry.formats.sources import expand_sources
from quarry.index import fresh, layout, verify

QUARRY = [sys.executable, "-m", "quarry.cli.main"]
BLOCK = 1000


def run(*args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([*QUARRY, *args], capture_output=True, text=True)
    assert proc.returncode == code, proc.stderr
    return proc


def write(path: str, columns: dict[str, np.ndarray]) -> None:
    with h5py.File(path, "w") as f:
        for name, values in columns.items():
            f[name] = values


def columns(rng: np.random.Generator, n: int = 10_500) -> dict[str, np.ndarray]:
    px = rng.random(n) * 0.5
    px[rng.choice(n, 10, replace=False)] = 0.9
    return {
        "px": px,
        "py": rng.normal(size=n).astype("f4"),
        "n": rng.integers(-1000, 1000, n).astype("i4"),
    }


def overwrite_keeping_times(path: str, name: str, rows: slice, value: float) -> None:
    """Change values in place, then put the modification time back (`touch -r`)."""
    st = os.stat(path)
    with h5py.File(path, "r+") as f:
        f[name][rows] = value
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (st.st_size, st.st_mtime_ns)


def racy_window(monkeypatch: pytest.MonkeyPatch, ns: int) -> None:
    """Set the racy window for coarse and for fine timestamps alike."""
    monkeypatch.setattr(fresh, "RACY_NS", ns)
    monkeypatch.setattr(fresh, "FINE_RACY_NS", ns)


@pytest.fixture(autouse=True)
def moments_after_the_write(monkeypatch):
    """Every index here is built, and queried, moments after its file was
    written, however loaded the machine: a window of 1,000 s makes that so.
    Tests that mean "long after" set the window to 0."""
    racy_window(monkeypatch, 10**12)


@pytest.fixture
def mod(tmp_path):
    path = str(tmp_path / "mod.h5")
    data = columns(np.random.default_rng(11))
    write(path, data)
    with quarry.open(path) as ds:
        ds.build_index(block_len=BLOCK)
    return path, data


def test_touch_r_after_overwriting_values_is_refused(mod):
    path, data = mod
    overwrite_keeping_times(path, "px", slice(2000, 3000), 0.75)
    with quarry.open(path) as ds, pytest.raises(StaleIndexError) as err:
        ds.query("px > 0.5").count()
    message = str(err.value)
    assert path in message and "/px block 2 of 11 changed" in message
    assert f"quarry index {path}" in message
    err_line = run("query", path, "px > 0.5", "--count", code=1).stderr
    assert err_line.count("\n") == 1 and "/px block 2 of 11 changed" in err_line
    # a column the change did not touch still answers, from the index
    with quarry.open(path) as ds:
        assert ds.query("n > 500").count() == int((data["n"] > 500).sum())
    run("index", path, "--quiet", "--block-size", str(BLOCK))
    with h5py.File(path) as f:
        expected = int((f["px"][()] > 0.5).sum())
    assert expected == 1000 + int((data["px"][np.r_[:2000, 3000:10_500]] > 0.5).sum())
    assert json.loads(run("query", path, "px > 0.5", "--json").stdout)["count"] == expected


def test_moved_times_over_unchanged_values_answer_and_are_recorded(mod, monkeypatch):
    path, data = mod
    overwrite_keeping_times(path, "px", slice(0, 10), data["px"][:10])  # the same values
    checked = path + ".qidx" + fresh.CHECKED_SUFFIX
    with quarry.open(path) as ds:
        assert not ds.index.trusted
        assert ds.query("px > 0.4").count() == int((data["px"] > 0.4).sum())
    # ctime moved just now: too recent to be recorded as proof ...
    assert not os.path.exists(checked)
    # ... unless the clock says it is old enough (as it is a few seconds later)
    racy_window(monkeypatch, 0)
    with quarry.open(path) as ds:
        assert ds.query("px > 0.4 && n < 0").count() == int(
            ((data["px"] > 0.4) & (data["n"] < 0)).sum()
        )
    # The columns checked, and the listing found as recorded by the walk of the file.
    assert json.loads(Path(checked).read_text())["variables"] == [fresh.LISTING, "/n", "/px"]
    assert expand_sources(path[:-3] + "*") == [path]  # not a data file
    with quarry.open(path) as ds:
        store = ds.index
        assert not store.trusted  # /py has not been checked at these times
        store.check(["/px", "/n"])  # nothing left to read for these
        assert ds.query("py > 0").count() == int((data["py"] > 0).sum())
    with quarry.open(path) as ds:
        assert ds.index.trusted  # every column checked: the open is a stat again


def test_a_racily_clean_stat_is_not_trusted(mod, monkeypatch):
    """A file system with coarse timestamps: a write in the same tick as the
    build leaves size, mtime, ctime and inode as recorded."""
    path, data = mod
    _, manifest = layout.read_manifest(path + ".qidx")
    recorded = manifest.source.stamp
    with h5py.File(path, "r+") as f:
        f["n"][5000:5010] = 7777
    monkeypatch.setattr(fresh, "fingerprint", lambda _: dict(recorded))
    # built moments after the file was written: the times are not proof
    assert not fresh.trusted(recorded, manifest.source.read_ns)
    with quarry.open(path) as ds, pytest.raises(StaleIndexError, match="/n block 5 of 11"):
        ds.query("n == 7777").count()
    # had the build been long after the write, the stat would be trusted and
    # only verify would see the change (the README says so)
    racy_window(monkeypatch, -(10**12))
    with quarry.open(path) as ds:
        assert ds.index.trusted
        assert ds.query("n == 7777").count() == int((data["n"] == 7777).sum())
        assert ds.verify().changed == {"/n": [5]}


@pytest.mark.parametrize("same_values", [True, False])
def test_a_file_replaced_by_a_rename(mod, tmp_path, same_values):
    path, data = mod
    copy = str(tmp_path / "copy.h5")
    shutil.copyfile(path, copy)
    if not same_values:
        with h5py.File(copy, "r+") as f:
            f["py"][10_400] = 99.0
    st = os.stat(path)
    os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(copy, path)
    assert os.stat(path).st_ino != st.st_ino and os.stat(path).st_mtime_ns == st.st_mtime_ns
    with quarry.open(path) as ds:
        if same_values:
            assert ds.query("py > 1").count() == int((data["py"] > 1).sum())
        else:
            with pytest.raises(StaleIndexError, match="/py block 10 of 11"):
                ds.query("py > 1").count()


def test_an_open_file_replaced_since_is_indexed_and_reorganised_as_it_is_now(mod, tmp_path):
    """A dataset opened before its file was replaced (a run written again)
    builds its index and its copy from the new file, not from what the open
    file held: either, stamped with the new file's stat, would pass for
    fresh with old values."""
    path, data = mod
    new = columns(np.random.default_rng(12))
    with quarry.open(path) as ds:
        assert ds.query("py > 1").count() == int((data["py"] > 1).sum())
        write(str(tmp_path / "new.h5"), new)
        os.replace(tmp_path / "new.h5", path)
        ds.build_index(block_len=BLOCK)
        assert ds.query("py > 1").count() == int((new["py"] > 1).sum())
        ds.reorganize(["py", "n"], bins=4)
        want = int(np.count_nonzero((new["py"] > 1) & (new["n"] < 0)))
        assert ds.query("py > 1 && n < 0").count() == want
    with quarry.open(path) as ds:
        assert ds.query("py > 1 && n < 0").count() == want
        assert ds.verify().ok


def test_size_or_mtime_moved_is_refused_at_once(mod):
    path, _ = mod
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    with quarry.open(path) as ds, pytest.raises(StaleIndexError, match="modification time"):
        _ = ds.index


@pytest.mark.parametrize("dtype", ["f8", "f4", "i1", "i2", "u4", "i8", "u8"])
@pytest.mark.parametrize("block_len", [64, 333])
def test_verify_names_exactly_the_changed_blocks(tmp_path, dtype, block_len):
    rng = np.random.default_rng(block_len)
    n = 2000  # 333 does not divide it
    original = {
        "a": rng.integers(0, 100, n).astype(dtype),
        "b": (rng.normal(size=n) * 50).astype(dtype),
    }
    if dtype.startswith("f"):
        original["b"][rng.random(n) < 0.1] = np.nan
    path = str(tmp_path / "v.h5")
    write(path, original)
    with quarry.open(path) as ds:
        ds.build_index(block_len=block_len)
        assert ds.verify().ok
    changed = {k: v.copy() for k, v in original.items()}
    for _ in range(3):
        name = str(rng.choice(["a", "b"]))
        row = int(rng.integers(0, n))
        changed[name][row] = changed[name][row] + 1 if changed[name][row] == 0 else 0
    with h5py.File(path, "r+") as f:
        for name, values in changed.items():
            f[name][...] = values
    expected = {}
    for name in original:
        differs = original[name].view(f"u{original[name].itemsize}") != changed[name].view(
            f"u{changed[name].itemsize}"
        )
        blocks = sorted({int(r) // block_len for r in np.flatnonzero(differs)})
        if blocks:
            expected[f"/{name}"] = blocks
    with quarry.open(path) as ds:
        report = ds.verify()
    assert report.changed == expected and report.ok == (not expected)
    assert report.blocks == 2 * -(-n // block_len)


def test_verify_on_the_command_line(mod):
    path, _ = mod
    out = run("verify", path).stdout
    assert out.startswith(f"ok {path}: 33 blocks of 3 variable(s) match")
    assert json.loads(run("verify", path, "--json").stdout)["ok"] is True
    overwrite_keeping_times(path, "py", slice(0, 1), 123.0)
    overwrite_keeping_times(path, "n", slice(1500, 4100), 5)
    proc = run("verify", path, code=1)
    assert proc.stdout.strip() == (
        f"changed {path}: /n blocks 1, 2, 3, 4 of 11; /py block 0 of 11; "
        f"rebuild the index with: quarry index {path}"
    )
    report = json.loads(run("verify", path, "--json", code=1).stdout)
    assert report["files"][0]["changed"] == {"/py": [0], "/n": [1, 2, 3, 4]}


def test_verify_accepts_moved_times_again(mod, monkeypatch):
    """``touch`` moves mtime: refused until verify finds every value unchanged."""
    path, data = mod
    os.utime(path)
    with quarry.open(path) as ds, pytest.raises(StaleIndexError):
        ds.query("px > 0.5").count()
    racy_window(monkeypatch, 0)
    with quarry.open(path) as ds:
        assert ds.verify().ok
        assert ds.index.trusted
        assert ds.query("px > 0.5").count() == int((data["px"] > 0.5).sum())


def test_verify_reports_variables_it_cannot_compare(mod):
    path, _ = mod
    with h5py.File(path, "r+") as f:
        del f["py"]
        f["py"] = np.zeros(7)
    with quarry.open(path) as ds:
        report = ds.verify()
    assert report.problems == {"/py": "was float32 of shape (10500,), is float64 of shape (7,)"}


def test_verify_a_series_and_an_index_elsewhere(tmp_path):
    rng = np.random.default_rng(3)
    idx = tmp_path / "indexes"
    paths = []
    for k in (1, 2, 3):
        path = str(tmp_path / f"run_{k}.h5")
        write(path, columns(rng, 3000))
        paths.append(path)
    pattern = str(tmp_path / "run_*.h5")
    run("index", pattern, "--index", str(idx), "--quiet", "--block-size", "500")
    assert not list(tmp_path.glob("*.qidx"))
    assert run("verify", pattern, "--index", str(idx)).stdout.count("\nok ") == 2
    overwrite_keeping_times(paths[1], "px", slice(600, 601), -1.0)
    proc = run("verify", pattern, "--index", str(idx), code=1)
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("ok ") and lines[2].startswith("ok ")
    assert lines[1].startswith(f"changed {paths[1]}: /px block 1 of 6")
    with quarry.open_series(pattern, index=str(idx)) as series:
        assert [r.ok for r in series.verify()] == [True, False, True]
        with pytest.raises(quarry.SeriesMemberError, match=r"run_2\.h5.*/px block 1 of 6"):
            series.query("px > 0.5").count()
    err = run("query", paths[1], "px > 0.5", "--index", str(idx), code=1).stderr
    assert "/px block 1 of 6 changed" in err


def test_an_unwritable_index_directory_still_answers(mod, monkeypatch):
    path, data = mod
    overwrite_keeping_times(path, "px", slice(0, 1), data["px"][:1])
    racy_window(monkeypatch, 0)

    def refuse(path: str, data: bytes) -> None:
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(layout, "replace_atomically", refuse)
    with quarry.open(path) as ds:
        assert ds.query("px > 0.2").count() == int((data["px"] > 0.2).sum())
        assert ds.verify().ok
    assert not os.path.exists(path + ".qidx.checked")


def test_derived_variables_are_checked_through_their_values(tmp_path):
    rng = np.random.default_rng(4)
    path = str(tmp_path / "beam.h5")
    x, y = rng.normal(size=3000), rng.normal(size=3000)
    write(path, {"x": x, "y": y})
    with quarry.open(path) as ds:
        ds.build_index(["x"], derive=["r=sqrt(x**2 + y**2)"], block_len=1000)
    overwrite_keeping_times(path, "y", slice(2500, 2501), 50.0)  # y itself is not indexed
    with quarry.open(path) as ds:
        assert ds.query("x > 0").count() == int((x > 0).sum())
        assert ds.query("y > 10").count() == 1  # not indexed: read as it is now
        with pytest.raises(StaleIndexError, match="/r block 2 of 3"):
            ds.query("r > 2").count()
        assert ds.verify().changed == {"/r": [2]}


def _without_new_fields(index_path: str) -> None:
    """Rewrite an index's manifest as Quarry wrote it before ctime, inode and
    the build's reading time were recorded (same format version)."""
    data = Path(index_path).read_bytes()
    offset, length, _, version, end = struct.unpack("<QQII8s", data[-32:])
    manifest = json.loads(data[offset : offset + length])
    for key in ("ctime_ns", "ino", "read_ns"):
        del manifest["source"][key]
    body = json.dumps(manifest).encode()
    trailer = struct.pack("<QQII8s", offset, len(body), zlib.crc32(body), version, end)
    Path(index_path).write_bytes(data[:offset] + body + trailer)


def test_an_index_from_before_ctime_was_recorded_is_read_and_checked(mod, monkeypatch):
    path, data = mod
    _without_new_fields(path + ".qidx")
    racy_window(monkeypatch, 0)
    with quarry.open(path) as ds:
        assert not ds.index.trusted
        assert ds.query("px > 0.5").count() == int((data["px"] > 0.5).sum())
    record = json.loads(Path(path + ".qidx" + fresh.CHECKED_SUFFIX).read_text())
    assert record["variables"] == [fresh.LISTING, "/px"]  # recorded once checked
    overwrite_keeping_times(path, "px", slice(0, 1000), 0.75)
    with quarry.open(path) as ds, pytest.raises(StaleIndexError, match="/px block 0 of 11"):
        ds.query("px > 0.5").count()


def test_a_trusted_open_reads_nothing_but_a_stat(mod, monkeypatch):
    path, data = mod
    racy_window(monkeypatch, 0)  # as if built well after the file was written

    def no_reading(*args: object) -> None:
        raise AssertionError("the source was read to check it")

    monkeypatch.setattr(quarry.Dataset, "_read_source", no_reading)
    with quarry.open(path) as ds:
        assert ds.index.trusted
        assert ds.query("px > 0.5 && n > 0").count() == int(
            ((data["px"] > 0.5) & (data["n"] > 0)).sum()
        )
        assert ds.verify().ok  # verify reads through the driver, never through the check
    assert not os.path.exists(path + ".qidx" + fresh.CHECKED_SUFFIX)


@settings(max_examples=200, deadline=None)
@given(
    block=st.binary(min_size=4, max_size=4096),
    at=st.integers(0, 4095),
    flip=st.integers(1, 2**32 - 1),
)
def test_crc32_catches_every_change_within_32_bits(block, at, flip):
    at = at % (len(block) - 3)
    changed = bytearray(block)
    window = int.from_bytes(changed[at : at + 4], "little") ^ flip
    changed[at : at + 4] = window.to_bytes(4, "little")
    values = {"/v": np.frombuffer(block, "u1"), "/w": np.frombuffer(bytes(changed), "u1")}
    crcs = verify.source_crcs(lambda p, a, b: values[p][a:b], [("/v", 4096), ("/w", 4096)], 4096)
    assert crcs["/v"] != crcs["/w"]


def test_fine_local_timestamps_shorten_the_racy_window(tmp_path, monkeypatch):
    """Sub-second times on a local file system come from this machine's clock:
    a tenth of a second makes them proof; anything else waits two seconds."""
    monkeypatch.setattr(fresh, "RACY_NS", 2 * 10**9)
    monkeypatch.setattr(fresh, "FINE_RACY_NS", 10**8)
    path = tmp_path / "f.bin"
    path.write_bytes(b"12345678")
    stamp = fingerprint(str(path))
    local = file_system(str(path)) in ("ext4", "xfs", "btrfs", "tmpfs", "overlay", "zfs", "f2fs")
    assert stamp["fine_times"] == int(local and stamp["mtime_ns"] % 10**9 != 0)
    written = max(stamp["mtime_ns"], stamp["ctime_ns"])
    assert fresh.trusted(stamp, written + 3 * 10**9)
    assert fresh.trusted(stamp, written + 2 * 10**8) == bool(stamp["fine_times"])
    assert not fresh.trusted({**stamp, "fine_times": 0}, written + 2 * 10**8)
    assert not fresh.trusted({**stamp, "fine_times": 1}, written + 5 * 10**7)


@pytest.mark.parametrize(
    ("fs_type", "fine"), [("nfs4", 0), ("lustre", 0), ("gpfs", 0), ("ext4", 1)]
)
def test_network_file_systems_keep_the_two_second_window(tmp_path, monkeypatch, fs_type, fine):
    from quarry.formats import base

    path = tmp_path / "f.bin"
    path.write_bytes(b"12345678")
    os.utime(path, ns=(10**18 + 123, 10**18 + 123))  # sub-second digits, whatever the disk
    if os.stat(path).st_ctime_ns % 10**9 == 0:
        pytest.skip("this file system keeps whole-second times")
    monkeypatch.setattr(base, "_mounts", lambda: (("/", fs_type),))
    base._file_system_of.cache_clear()
    try:
        assert fingerprint(str(path))["fine_times"] == fine
    finally:
        base._file_system_of.cache_clear()


@pytest.mark.parametrize(
    "elsewhere, again",
    [(False, "<f4"), (True, "<f4"), (False, ">f4")],  # without the fill value; byte order
)
def test_a_raw_file_described_again_otherwise_has_a_stale_index(tmp_path, elsewhere, again):
    """README: a raw file's index records the description it was read by;
    described again otherwise, the index is stale and says so. The same
    description written again leaves it fresh."""
    from quarry.formats.raw import RawLayout, register

    values = np.linspace(0, 10, 3000).astype("<f4")
    values[::10] = -9999.0
    path = str(tmp_path / "e.bin")
    values.tofile(path)
    index_dir = str(tmp_path / "idx") if elsewhere else None
    if index_dir:
        os.mkdir(index_dir)
    described = RawLayout("e", "<f4", (3000,), fill_value=-9999.0)
    register(path, described, index_dir)
    run("index", path, *(["--index", index_dir] if index_dir else []))
    register(path, described, index_dir)  # the same words again
    with quarry.open(path, index=index_dir) as ds:
        assert ds.query("e < 0").count() == 0  # -9999 is missing
    register(path, RawLayout("e", again, (3000,)), index_dir)
    with quarry.open(path, index=index_dir) as ds, pytest.raises(StaleIndexError) as caught:
        ds.query("e < 0").count()
    assert "description" in str(caught.value) and "quarry index" in str(caught.value)
    done = run(
        "query", path, "e < 0", "--count", *(["--index", index_dir] if index_dir else []), code=1
    )
    assert "description" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    run("index", path, "--force", *(["--index", index_dir] if index_dir else []))
    with quarry.open(path, index=index_dir) as ds:
        now = values.view(again)  # the same bytes, read as now described
        assert ds.query("e < 0").count() == int(np.sum(now < 0))


def test_verify_after_a_step_was_appended_does_not_hide_it(tmp_path, monkeypatch):
    """Verify finds the indexed columns unchanged in a file that gained a
    step and a variable; the next open must still see them (walking the
    file, not answering from the index's listing of it), or the new step's
    hits would silently be left out and the new variable be unknown."""
    racy_window(monkeypatch, 0)
    path = str(tmp_path / "run.h5")
    rng = np.random.default_rng(9)
    energy = [rng.exponential(1, 3000) for _ in range(3)]
    with h5py.File(path, "w") as f:
        for s in range(2):
            f[f"Step#{s}/energy"] = energy[s]
    run("index", path, "--quiet")
    with h5py.File(path, "a") as f:
        f["Step#2/energy"] = energy[2]
        f["newvar"] = np.arange(10.0)
    with quarry.open(path) as ds:
        assert ds.verify().ok
    with quarry.open_series(path) as series:
        counts = [part.count() for part in series.query("energy > 1").selections]
    assert counts == [int((e > 1).sum()) for e in energy]
    with quarry.open(path) as ds:
        assert ds.query("newvar > 4.5").count() == 5
