"""Killed builds: SIGTERM cleans up like Ctrl-C, and a later build removes
what a SIGKILLed one left, never a running build's files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import pytest

import quarry
from quarry.index import layout

QUARRY = [sys.executable, "-m", "quarry.cli.main"]

#: A build stopped at a chosen point: it prints its file's path, then waits
#: for a line on stdin (and commits if that line is "commit").
WRITER = """
import sys
from quarry.index import layout
index, stage = sys.argv[1], sys.argv[2]
if stage == "shard":
    w = layout.ShardWriter(index, "abcd0123", 3, 4)
    w.add_all([b"y" * 1000])
else:
    w = layout.IndexWriter(index)
    if stage == "blocks":
        w.add_all([b"x" * 5000] * 3)
print(w.path, flush=True)
if sys.stdin.readline().strip() == "commit":
    w.commit({"format": "quarry-index", "shards": [], "variables": {}})
"""


def start_writer(index: str, stage: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, index, stage],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    path = proc.stdout.readline().strip()  # printed once its file is locked
    assert path and os.path.exists(path), proc.wait()
    return proc, path


def wait_for(condition: Callable[[], bool], proc: subprocess.Popen[bytes], what: str) -> bool:
    """Poll ``condition`` until it holds (True) or ``proc`` ends (False)."""
    deadline = time.monotonic() + 60
    while not condition():
        if proc.poll() is not None:
            return False
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.002)
    return True


@pytest.mark.parametrize("stage", ["created", "blocks", "shard"])
def test_a_killed_writers_file_is_removed_a_live_ones_kept(tmp_path, stage):
    index = str(tmp_path / "run.h5.qidx")
    proc, path = start_writer(index, stage)
    try:
        assert layout.remove_debris(index) == []  # alive: its lock is held
        assert os.path.exists(path)
    finally:
        proc.kill()
        proc.communicate()  # reaped: nothing holds the lock now
    assert os.path.exists(path)
    assert layout.remove_debris(index) == [path]
    assert not os.path.exists(path)


def test_a_live_build_survives_another_build_of_the_same_file(tmp_path):
    data = str(tmp_path / "run.h5")
    with h5py.File(data, "w") as f:
        f["x"] = np.arange(1000.0)
    proc, path = start_writer(data + ".qidx", "blocks")
    with quarry.open(data) as ds:
        ds.build_index()  # removes debris first; must leave the live temporary
        assert ds.query("x > 900").count() == 99
    assert os.path.exists(path)
    proc.communicate("commit\n")
    assert proc.returncode == 0
    assert not os.path.exists(path)
    _, manifest = layout.read_manifest(data + ".qidx")  # the live build published intact
    assert manifest["variables"] == {}


def test_what_is_not_debris_stays(tmp_path):
    index = str(tmp_path / "run.h5.qidx")
    empty = tmp_path / ".run.h5.qidx.abcd1234.tmp"  # a build not yet locked may own it
    empty.touch()
    other = tmp_path / ".other.h5.qidx.abcd1234.tmp"  # another index's
    other.write_bytes(b"QUARRYIX")
    shard = layout.ShardWriter(index, "abcd0123", 1, 1)
    shard.add_all([b"z" * 100])
    shard.close()
    with layout.writing(index) as writer:  # a published index that uses the shard
        name = os.path.basename(shard.path)
        writer.commit({"format": "quarry-index", "shards": [{"name": name, "size": shard.size}]})
    assert layout.remove_debris(index) == []
    assert empty.exists() and other.exists() and os.path.exists(shard.path)


@pytest.fixture
def big(tmp_path):
    path = str(tmp_path / "big.h5")
    rng = np.random.default_rng(1)
    with h5py.File(path, "w") as f:
        for name in "abcd":
            f[name] = rng.normal(size=2_500_000)
    with quarry.open(path) as ds:
        ds.build_index(["a"])
    return path


def temporaries(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.name.endswith(".tmp")]


def start_build(path: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*QUARRY, "index", path, "--block-size", "4096", "--quiet"], stderr=subprocess.PIPE
    )


@pytest.mark.parametrize("written", [16, 17])  # the header alone; a variable's blocks too
def test_a_later_build_removes_what_a_sigkilled_one_left(big, written):
    folder = Path(big).parent
    before = Path(big + ".qidx").read_bytes()
    proc = start_build(big)
    in_time = wait_for(
        lambda: any(p.stat().st_size >= written for p in temporaries(folder)), proc, "the build"
    )
    proc.kill()
    proc.communicate()
    if not in_time:
        pytest.skip("the build finished before it could be killed")
    [left] = temporaries(folder)
    assert Path(big + ".qidx").read_bytes() == before
    subprocess.run([*QUARRY, "index", big, "--vars", "a", "--quiet"], check=True)
    assert temporaries(folder) == []
    with quarry.open(big) as ds, h5py.File(big) as f:
        assert ds.query("a > 1").count() == int((f["a"][()] > 1).sum())
    assert not left.exists()


def test_sigterm_cleans_up_like_ctrl_c(big):
    folder = Path(big).parent
    before = Path(big + ".qidx").read_bytes()
    proc = start_build(big)
    in_time = wait_for(lambda: bool(temporaries(folder)), proc, "the build")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate()
    if not in_time:
        pytest.skip("the build finished before it could be stopped")
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.decode().strip() == "quarry: terminated"
    assert temporaries(folder) == []
    assert Path(big + ".qidx").read_bytes() == before
