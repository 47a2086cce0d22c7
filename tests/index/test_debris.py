"""Killed builds: SIGTERM cleans up like Ctrl-C, and a later build removes
what a SIGKILLed one left, never a running build's files.

Each build is stopped at a known point (its temporary file just created, two
variables' blocks written, the manifest written but not yet renamed) by a
hook that waits on a pipe, and killed there: no timer races the build."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

import quarry
from quarry.index import layout
from quarry.index.manifest import Manifest, Shard, SourceRecord
from stopped import HOOKS

QUARRY = [sys.executable, "-m", "quarry.cli.main"]

#: A build stopped at a chosen point: it prints its file's path, then waits
#: for a line on stdin (and commits if that line is "commit").
WRITER = """
import sys
from quarry.index import layout
from quarry.index.manifest import Manifest, SourceRecord
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
    w.commit(Manifest(layout.VERSION, "test", SourceRecord("run.h5", {}), 1, (), (), {}))
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
    assert manifest.variables == {}


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
        shards = (Shard(name, shard.size),)
        writer.commit(
            Manifest(layout.VERSION, "test", SourceRecord("run.h5", {}), 1, (), shards, {})
        )
    assert layout.remove_debris(index) == []
    assert empty.exists() and other.exists() and os.path.exists(shard.path)


#: ``quarry index`` stopped at a chosen point of its build: there it prints
#: "stopped" and waits on stdin, so the test kills it at that point, no race.
STOPPED_BUILD = (
    HOOKS
    + """
from quarry.cli.main import main
from quarry.index import layout

point, argv = sys.argv[1], sys.argv[2:]
# Ctrl-C raises KeyboardInterrupt, as in a terminal: a test runner started in the
# background has SIGINT ignored, and a process inherits that.
signal.signal(signal.SIGINT, signal.default_int_handler)

if point == "created":  # the temporary file locked, its header written
    stop_after(layout.IndexWriter, "__init__", 1)
elif point == "blocks":  # two variables' blocks written, on the writer thread
    stop_after(layout.BlockWriter, "add_all", 2)
elif point == "publishing":  # the manifest written and synced, not yet renamed
    stop_before(layout, "_publish")
sys.exit(main(argv))
"""
)

#: Where a build is stopped, each leaving a different temporary file.
POINTS = ["created", "blocks", "publishing"]
ROWS, BLOCK_LEN = 50_003, 4096


@pytest.fixture
def indexed(tmp_path):
    """A file of four variables whose index holds one of them."""
    path = str(tmp_path / "run.h5")
    rng = np.random.default_rng(1)
    with h5py.File(path, "w") as f:
        for name in "abcd":
            f[name] = rng.normal(size=ROWS)
    with quarry.open(path) as ds:
        ds.build_index(["a"])
    return path


def temporaries(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.name.endswith(".tmp")]


def stopped_build(path: str, point: str) -> subprocess.Popen[str]:
    """``quarry index`` of every variable of ``path``, stopped at ``point``."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            STOPPED_BUILD,
            point,
            "index",
            path,
            "--block-size",
            str(BLOCK_LEN),
            "--quiet",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line != "stopped\n":
        _, err = proc.communicate()
        pytest.fail(f"the build did not stop at {point}: {line!r} {err}")
    return proc


@pytest.mark.parametrize("point", POINTS)
def test_a_later_build_removes_what_a_sigkilled_one_left(indexed, point):
    folder = Path(indexed).parent
    before = Path(indexed + ".qidx").read_bytes()
    proc = stopped_build(indexed, point)
    proc.kill()
    proc.communicate()  # reaped
    assert proc.returncode == -signal.SIGKILL
    [left] = temporaries(folder)
    assert left.stat().st_size >= 16  # locked, so a later build may remove it
    assert Path(indexed + ".qidx").read_bytes() == before  # killed before the rename
    with quarry.open(indexed) as ds, h5py.File(indexed) as f:
        assert ds.query("a > 1").count() == int((f["a"][()] > 1).sum())  # the old index answers
    subprocess.run([*QUARRY, "index", indexed, "--quiet"], check=True)
    assert temporaries(folder) == []
    _, manifest = layout.read_manifest(indexed + ".qidx")
    assert sorted(manifest.variables) == ["/a", "/b", "/c", "/d"]
    with quarry.open(indexed) as ds, h5py.File(indexed) as f:
        for name in "abcd":
            assert ds.query(f"{name} > 1").count() == int((f[name][()] > 1).sum())


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize(
    ("signum", "said"),
    [(signal.SIGTERM, "quarry: terminated"), (signal.SIGINT, "quarry: interrupted")],
    ids=["sigterm", "ctrl-c"],
)
def test_a_stopped_build_removes_its_temporary_and_keeps_the_old_index(
    indexed, point, signum, said
):
    folder = Path(indexed).parent
    before = Path(indexed + ".qidx").read_bytes()
    proc = stopped_build(indexed, point)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    assert err.strip() == said
    assert temporaries(folder) == []
    assert Path(indexed + ".qidx").read_bytes() == before


#: ``quarry index`` whose call into the core holds the main thread in C for
#: 60 s, deaf to signals as a long core call is (pthread_mutex_timedlock is
#: never interrupted by one): it prints "held" as the hold begins.
HELD_IN_THE_CORE = """
import ctypes
import sys
import time

from quarry import _core
from quarry.cli.main import main

libc = ctypes.CDLL(None)


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


build_blocks = _core.build_blocks


def held(*args):
    mutex = ctypes.create_string_buffer(64)  # zeros: a default mutex, unlocked
    libc.pthread_mutex_lock(mutex)
    print("held", flush=True)
    libc.pthread_mutex_timedlock(mutex, ctypes.byref(Timespec(int(time.time()) + 60, 0)))
    return build_blocks(*args)


_core.build_blocks = held
sys.exit(main(sys.argv[1:]))
"""


def test_sigterm_stops_a_build_inside_one_long_call_to_the_core(tmp_path):
    """Python runs a signal's handler between bytecodes, so SIGTERM waited for
    a build's call into the Rust core to end (82 s in a probe, when a fine
    --precision made one call minutes long). It ends the build at once now.
    A call held 60 s in C stands in for the long one."""
    import time

    path = str(tmp_path / "run.h5")
    with h5py.File(path, "w") as f:
        f["n"] = np.arange(1000.0)
    proc = subprocess.Popen(
        [sys.executable, "-c", HELD_IN_THE_CORE, "index", path, "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    assert temporaries(tmp_path), "the build wrote no temporary file"
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.strip() == "quarry: terminated"
    assert time.monotonic() - sent < 30  # the held call would take 60 s
    assert temporaries(tmp_path) == [] and not os.path.exists(path + ".qidx")
