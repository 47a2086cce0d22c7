"""``quarry index --follow 'run_*.h5'``: a file is indexed once complete
(still for --settle seconds, and openable: HDF5 refuses a file its writer
holds open), each with the index ``quarry index`` builds."""

import json
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest
from h5_writer import step_values
from insitu_cases import assert_same_index

import quarry
from oracle import oracle_ids
from quarry.insitu.follow_files import follow_files

CLI = [sys.executable, "-m", "quarry.cli.main"]
WRITER = os.path.join(os.path.dirname(__file__), "h5_writer.py")


@pytest.fixture
def processes():
    started = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate()


def test_a_file_is_indexed_once_its_writer_closes_it(tmp_path, processes):
    writer = subprocess.Popen(
        [sys.executable, WRITER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    processes.append(writer)

    def do(command):
        writer.stdin.write(command + "\n")
        writer.stdin.flush()
        return writer.stdout.readline().strip()

    assert do("open 0") == "opened 0"
    assert do("close") == "closed 0"
    pattern = str(tmp_path / "run_*.h5")
    follower = subprocess.Popen(
        [
            *CLI,
            "index",
            "--follow",
            pattern,
            "--json",
            "--settle",
            "0.1",
            "--idle-timeout",
            "60",
            "--block-size",
            "1000",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    processes.append(follower)

    def line():
        text = follower.stdout.readline()
        assert text, follower.stderr.read()
        return json.loads(text)

    def next_not_waiting():
        """The next line that is not a wait for run_1.h5 (the writer may be
        caught before its first flush, when the file is not HDF5 yet)."""
        while "waiting" in (found := line()):
            assert found["file"].endswith("run_1.h5")
            waits.append(found["waiting"])
        return found

    waits = []
    assert line()["file"].endswith("run_0.h5")
    assert do("open 1") == "opened 1"
    while not any("cannot open" in w for w in waits):  # refused: its writer holds it
        waits.append(line()["waiting"])
    assert not os.path.exists(tmp_path / "run_1.h5.qidx")
    assert do("close") == "closed 1"
    assert next_not_waiting()["file"].endswith("run_1.h5")
    follower.kill()  # rather than wait out its idle timeout (the stop is tested below)
    for k in range(2):
        file = str(tmp_path / f"run_{k}.h5")
        with quarry.open(file, index=str(tmp_path / f"after_{k}.qidx")) as ds:
            ds.build_index(block_len=1000)
        assert_same_index(file + ".qidx", str(tmp_path / f"after_{k}.qidx"))
    with quarry.open_series(pattern) as series:
        counts = [r["count"] for r in series.query("energy > 1.5 && id < 1000").per_step()]
    assert counts == [
        len(oracle_ids("energy > 1.5 && id < 1000", step_values(k))) for k in range(2)
    ]


def test_files_already_indexed_are_passed_over(tmp_path):
    for k in range(3):
        with h5py.File(tmp_path / f"run_{k}.h5", "w") as f:
            f["x"] = np.arange(50.0) * k
    pattern = str(tmp_path / "run_*.h5")
    first = follow_files(pattern, idle_timeout=0.1, settle=0)
    assert [os.path.basename(f) for f in first.indexed] == ["run_0.h5", "run_1.h5", "run_2.h5"]
    with h5py.File(tmp_path / "run_3.h5", "w") as f:
        f["x"] = np.arange(50.0)
    again = follow_files(pattern, idle_timeout=0.1, settle=0)
    assert [os.path.basename(f) for f in again.indexed] == ["run_3.h5"]
    assert len(again.up_to_date) == 3


def test_the_command_stops_after_the_idle_timeout_and_says_what_it_did(tmp_path):
    with h5py.File(tmp_path / "run_0.h5", "w") as f:
        f["x"] = np.arange(50.0)
    pattern = str(tmp_path / "run_*.h5")
    done = subprocess.run(
        [*CLI, "index", "--follow", pattern, "--json", "--settle", "0", "--idle-timeout", "0.2"],
        capture_output=True,
        text=True,
        check=True,
    )
    *published, report = [json.loads(line) for line in done.stdout.splitlines()]
    assert [p["file"] for p in published] == [str(tmp_path / "run_0.h5")]
    assert report["done"] and report["indexed"] == [str(tmp_path / "run_0.h5")]


def _rewrite(path, values):
    with h5py.File(path, "w") as f:
        f["x"] = values


def test_a_file_written_again_after_its_index_is_indexed_again(tmp_path):
    """A writer that paused longer than --settle (no HDF5 lock told the
    follower it still held the file) and wrote again: the file's index is
    built again, and the index left behind answers for what the file holds."""
    path = str(tmp_path / "run_0.h5")
    _rewrite(path, np.arange(50.0))
    later = np.arange(50.0) * 3
    published = []

    def wrote_again(file, index):
        published.append(file)
        if len(published) == 1:
            _rewrite(file, later)

    report = follow_files(
        str(tmp_path / "run_*.h5"), idle_timeout=0.3, settle=0.05, published=wrote_again
    )
    assert published == [path, path] and report.indexed == [path] and report.stale == []
    with quarry.open(path) as ds:
        assert ds.query("x > 100").count() == int((later > 100).sum())


def test_a_file_that_moved_after_its_index_and_did_not_settle_again_is_reported(
    tmp_path, monkeypatch, capsys
):
    path = str(tmp_path / "run_0.h5")
    _rewrite(path, np.arange(50.0))

    def restarted(file, index):  # the writer starts the file again: it does not open yet
        with open(file, "wb") as f:
            f.write(b"not yet an HDF5 file")

    report = follow_files(
        str(tmp_path / "run_*.h5"), idle_timeout=0.2, settle=0, published=restarted
    )
    assert report.indexed == [path] and report.stale == [path]
    assert report.to_json()["stale"] == [path]
    from quarry.cli.main import main

    monkeypatch.setattr("quarry.insitu.follow_files.follow_files", lambda *a, **k: report)
    assert main(["index", "--follow", str(tmp_path / "run_*.h5")]) == 1
    assert "index is stale" in capsys.readouterr().err


def test_a_file_that_never_became_complete_is_named_and_the_command_exits_1(
    tmp_path, monkeypatch, capsys
):
    """A matching file that never opens (or never holds still) while the
    follower runs was left out of the report, and the command exited 0."""
    done, never = str(tmp_path / "run_0.h5"), str(tmp_path / "run_1.h5")
    _rewrite(done, np.arange(50.0))
    with open(never, "wb") as f:
        f.write(b"not yet an HDF5 file")
    report = follow_files(str(tmp_path / "run_*.h5"), idle_timeout=0.2, settle=0)
    assert report.indexed == [done] and report.incomplete == [never] and report.stale == []
    assert report.to_json()["incomplete"] == [never]
    from quarry.cli.main import main

    monkeypatch.setattr("quarry.insitu.follow_files.follow_files", lambda *a, **k: report)
    assert main(["index", "--follow", str(tmp_path / "run_*.h5")]) == 1
    assert (
        f"never became complete (still for --settle 2 s, and open) while the follower ran ({never})"
        in capsys.readouterr().err
    )


def test_files_finished_before_the_follower_started_are_indexed_whatever_the_idle_timeout(
    tmp_path,
):
    """--idle-timeout shorter than --settle: a file already still for --settle
    seconds when first seen is complete at once, and the follower never stops
    before a file first seen moving could have settled."""
    for k in range(2):
        _rewrite(str(tmp_path / f"run_{k}.h5"), np.arange(50.0) + k)
        old = os.stat(tmp_path / f"run_{k}.h5").st_mtime - 60
        os.utime(tmp_path / f"run_{k}.h5", (old, old))
    pattern = str(tmp_path / "run_*.h5")
    report = follow_files(pattern, idle_timeout=0.01, settle=1)
    assert [os.path.basename(f) for f in report.indexed] == ["run_0.h5", "run_1.h5"]
    _rewrite(str(tmp_path / "run_2.h5"), np.arange(50.0))  # just written: settles first
    report = follow_files(pattern, idle_timeout=0.01, settle=0.2)
    assert [os.path.basename(f) for f in report.indexed] == ["run_2.h5"]
