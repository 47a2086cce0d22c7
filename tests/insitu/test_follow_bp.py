"""``quarry index --follow run.bp``: a writer process and a follower process
on one BP5 run, synchronised through their pipes; queries during the run
answer for the steps indexed and equal NumPy; a killed follower resumes."""

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from bp_writer import step_values

from oracle import oracle_ids
from quarry.errors import SourceError
from quarry.insitu.follow_bp import follow_bp

QUERY = "energy > 1 && id < 2000"
CLI = [sys.executable, "-m", "quarry.cli.main"]
WRITER = os.path.join(os.path.dirname(__file__), "bp_writer.py")


_STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _end_processes():
    """Every process a test started ends with it, its pipes closed."""
    yield
    while _STARTED:
        process = _STARTED.pop()
        if process.poll() is None:
            process.kill()
        process.communicate()


def spawn(command, **kwargs):
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, **kwargs)
    _STARTED.append(process)
    return process


class Writer:
    def __init__(self, path, *mode):
        self.process = spawn([sys.executable, WRITER, path, *mode], stdin=subprocess.PIPE)

    def do(self, command):
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().strip()

    def close(self):
        assert self.do("close") == "closed"
        self.process.wait()


def start_follower(path, *extra):
    return spawn(
        [*CLI, "index", "--follow", path, "--json", "--block-size", "1000", *extra],
        stderr=subprocess.PIPE,
    )


def next_line(follower):
    line = follower.stdout.readline()
    assert line, follower.stderr.read()
    return json.loads(line)


def query(path, text=QUERY, *extra):
    done = subprocess.run(
        [*CLI, "query", path, text, "--per-step", *extra], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def served_count(path):
    """The data service's per-step count of ``QUERY`` over the run at ``path``."""
    from quarry.service.answers import OpenFiles, count
    from quarry.service.catalog import Catalog

    root = os.path.dirname(os.path.realpath(path))
    catalog, files = Catalog(":memory:"), OpenFiles((root,))
    try:
        catalog.rescan((root,))
        found = count(files, catalog.get(os.path.basename(path)), QUERY, None, per_step=True)
    finally:
        files.close()
        catalog.close()
    return {**found, "per_step": [{**s, "file": path} for s in found["per_step"]]}


def expected(steps):
    return [len(oracle_ids(QUERY, step_values(s))) for s in range(steps)]


def test_queries_during_the_run_answer_for_the_steps_indexed(tmp_path):
    path = str(tmp_path / "run.bp")
    writer = Writer(path)
    assert writer.do("step") == "ended 0"
    assert writer.do("step") == "ended 1"
    follower = start_follower(path)
    assert next_line(follower)["step"] == 0
    assert next_line(follower) == {"file": path, "step": 1, "steps_indexed": 2}
    answer = query(path)
    assert answer["steps_indexed"] == 2 and answer["writer_closed"] is False
    assert [r["count"] for r in answer["per_step"]] == expected(2)
    assert served_count(path) == answer  # the service's answer says the same
    # A step begun and not ended is never read: neither indexed nor answered for.
    assert writer.do("half") == "half 2"
    answer = query(path)
    assert answer["steps_indexed"] == 2 and len(answer["per_step"]) == 2
    assert writer.do("end") == "ended 2"
    assert next_line(follower)["step"] == 2
    assert [r["count"] for r in query(path)["per_step"]] == expected(3)
    writer.close()
    report = next_line(follower)
    assert report["done"] and report["closed"] and report["indexed_now"] == [0, 1, 2]
    assert follower.wait() == 0
    answer = query(path)
    assert answer["writer_closed"] is True and answer["steps_indexed"] == 3
    assert [r["count"] for r in answer["per_step"]] == expected(3)
    done = subprocess.run([*CLI, "query", path, QUERY, "--json"], capture_output=True, text=True)
    result = json.loads(done.stdout)
    assert result["count"] == sum(expected(3)) and result["steps_indexed"] == 3


def test_a_killed_follower_resumes_without_indexing_again(tmp_path):
    path = str(tmp_path / "run.bp")
    writer = Writer(path)
    follower = start_follower(path)
    for step in range(3):
        assert writer.do("step") == f"ended {step}"
        assert next_line(follower)["step"] == step
    os.kill(follower.pid, signal.SIGKILL)
    follower.wait()
    assert query(path)["steps_indexed"] == 3
    for step in range(3, 5):
        assert writer.do("step") == f"ended {step}"
    writer.close()
    again = start_follower(path)
    lines = [next_line(again) for _ in range(3)]
    assert [line.get("step") for line in lines[:2]] == [3, 4]
    assert lines[2]["indexed_now"] == [3, 4] and lines[2]["steps_indexed"] == 5
    assert again.wait() == 0
    answer = query(path)
    assert [r["count"] for r in answer["per_step"]] == expected(5)
    shards = [n for n in os.listdir(tmp_path) if n.endswith(".qshard")]
    assert len(shards) == 5  # one per step, those of the killed run kept
    # Followed again once closed: nothing to do.
    third = start_follower(path)
    assert next_line(third)["indexed_now"] == [] and third.wait() == 0


def test_it_stops_after_the_idle_timeout_and_says_so(tmp_path):
    path = str(tmp_path / "run.bp")
    writer = Writer(path)
    assert writer.do("step") == "ended 0"
    follower = start_follower(path, "--idle-timeout", "0.5")
    assert next_line(follower)["step"] == 0
    report = next_line(follower)
    assert report["closed"] is False and report["steps_indexed"] == 1
    assert follower.wait() == 0
    assert writer.do("step") == "ended 1"
    answer = query(path)  # the writer still has the run: the steps indexed
    assert answer["writer_closed"] is False and len(answer["per_step"]) == 1
    writer.close()
    # The follower stopped before the writer closed the run: once closed, a
    # query answers for every step, scanning the one the index lacks (it
    # answered for step 0 alone, saying the writer had not closed the run).
    answer = query(path)
    assert answer["writer_closed"] is True and answer["steps_indexed"] == 1
    assert [r["count"] for r in answer["per_step"]] == expected(2)
    # quarry index rebuilds.
    built = subprocess.run([*CLI, "index", path, "--json"], capture_output=True, text=True)
    result = json.loads(built.stdout)
    assert "status" not in result and len(result["variables"]) == 4  # built: 2 steps
    assert [r["count"] for r in query(path)["per_step"]] == expected(2)


def test_a_run_rewritten_after_it_was_followed_is_refused(tmp_path):
    path = str(tmp_path / "run.bp")
    writer = Writer(path)
    assert writer.do("step") == "ended 0"
    writer.close()
    follower = start_follower(path)
    assert next_line(follower)["step"] == 0
    assert follower.wait() == 0
    import adios2

    with adios2.Stream(path, "w") as s:
        s.begin_step()
        s.write("energy", np.full(2_500, 9.0), [2_500], [0], [2_500])
        s.write("id", np.arange(2_500, dtype=np.int32), [2_500], [0], [2_500])
        s.end_step()
    done = subprocess.run([*CLI, "query", path, QUERY, "--count"], capture_output=True, text=True)
    assert done.returncode == 1
    assert "has changed since it was followed (md.0 was rewritten" in done.stderr


@pytest.mark.parametrize("args", [["a.bp", "b.bp"], ["run.h5", "--vars", "x"]])
def test_follow_usage_errors(tmp_path, args):
    done = subprocess.run(
        [*CLI, "index", "--follow", *args], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 2 and done.stderr.startswith("quarry: error:")


def test_arrays_without_a_global_shape_are_refused(tmp_path):
    import adios2

    path = str(tmp_path / "run.bp")
    with adios2.Stream(path, "w") as s:
        s.begin_step()
        s.write("energy", np.arange(5.0), [], [], [5])  # a per-writer block
        s.end_step()
    done = subprocess.run(
        [*CLI, "index", "--follow", path, "--idle-timeout", "5"], capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "--follow indexes global arrays" in done.stderr
    assert not os.path.exists(path + ".qidx")


def test_steps_already_waiting_are_published_together(tmp_path, monkeypatch):
    """A run of five ended steps followed afterwards: two manifests (four
    steps at most in one, the writer's close in the last), not five."""
    from quarry.index.options import BuildOptions
    from quarry.insitu import follow_bp

    path = str(tmp_path / "run.bp")
    writer = Writer(path)
    for step in range(5):
        assert writer.do("step") == f"ended {step}"
    writer.close()
    commits = []
    real = follow_bp._commit
    monkeypatch.setattr(follow_bp, "_commit", lambda *a: commits.append(1) or real(*a))
    published = []
    report = follow_bp.follow_bp(
        path, options=BuildOptions(block_len=1000), published=published.append
    )
    assert len(commits) == 2 and published == [0, 1, 2, 3, 4] and report.closed
    assert [r["count"] for r in query(path)["per_step"]] == expected(5)


def test_a_run_whose_sizes_change_from_step_to_step(tmp_path):
    """Particle counts that change each step, and a variable ``x`` at even
    steps only: each step indexed with its own shape under its own number,
    counts equal to NumPy's on the values adios2 reads."""
    import adios2

    path = str(tmp_path / "run.bp")
    writer = Writer(path, "varying")
    follower = start_follower(path)
    for step in range(4):
        assert writer.do("step") == f"ended {step}"
        assert next_line(follower)["step"] == step
    writer.close()
    assert next_line(follower)["closed"] and follower.wait() == 0
    with adios2.Stream(path, "r") as stream:
        read = [{n: stream.read(n) for n in stream.available_variables()} for _ in stream.steps()]
    assert [sorted(r) for r in read] == [sorted(step_values(s, True)) for s in range(4)]
    assert [r["energy"].size for r in read] == [2_500, 2_517, 2_534, 2_551]
    answer = query(path)
    assert answer["writer_closed"] is True and answer["steps_indexed"] == 4
    assert [r["count"] for r in answer["per_step"]] == [len(oracle_ids(QUERY, r)) for r in read]
    for step in (0, 2):
        (row,) = query(path, "x > 0.5", "--path", f"Step#{step}")["per_step"]
        assert row["count"] == int((read[step]["x"] > 0.5).sum())


def test_no_run_within_the_idle_timeout_is_said_plainly(tmp_path):
    path = str(tmp_path / "never.bp")
    with pytest.raises(SourceError) as err:
        follow_bp(path, idle_timeout=0.5)
    assert str(err.value).startswith(f"no BP5 run at {path} within 0.5 s")
    assert "\x1b" not in str(err.value) and "iostream" not in str(err.value)


def test_a_step_is_published_at_once_and_each_manifest_is_its_json(tmp_path, monkeypatch):
    """The writer ending a step to its index being published: ADIOS2 looks
    for the step every POLL_SECS, not every second (its default, which made
    half a second the median wait); no step waits a second for it. Every
    manifest published is the JSON of the manifest it reads as, byte for
    byte (each variable's text kept from one publish to the next), and a
    manifest this follower published is never read again to find its shards."""
    import threading
    import time

    from quarry.index import layout
    from quarry.index.options import BuildOptions
    from quarry.insitu import follow_bp as follow

    monkeypatch.setattr(follow, "MAX_BATCH_STEPS", 1)
    reads = []
    real_shards_of = layout._shards_of
    monkeypatch.setattr(layout, "_shards_of", lambda p: reads.append(p) or real_shards_of(p))
    path = str(tmp_path / "run.bp")
    index = path + ".qidx"
    writer = Writer(path)
    published: dict[int, float] = {}
    bodies: list[bool] = []
    ready = threading.Condition()

    def on_published(step):
        _, read = layout.read_manifest(index)
        with open(index, "rb") as f:
            data = f.read()
        offset, length = (int.from_bytes(data[k : k + 8], "little") for k in (-32, -24))
        body = data[offset : offset + length]
        bodies.append(body == json.dumps(read.to_json(), separators=(",", ":")).encode())
        with ready:
            published[step] = time.monotonic()
            ready.notify_all()

    options = BuildOptions(block_len=1000)
    thread = threading.Thread(
        target=follow.follow_bp,
        args=(path,),
        kwargs={"options": options, "idle_timeout": 30, "published": on_published},
    )
    assert writer.do("step") == "ended 0"  # the run exists before the follower opens it
    ended = {0: time.monotonic()}
    thread.start()
    for step in range(1, 7):
        with ready:
            assert ready.wait_for(lambda s=step: s - 1 in published, timeout=30)
        assert writer.do("step") == f"ended {step}"
        ended[step] = time.monotonic()
    writer.close()
    thread.join()
    waits = [published[s] - ended[s] for s in range(1, 7)]
    assert max(waits) < 0.6, waits
    assert bodies == [True] * len(bodies) and len(bodies) == 7
    assert len(reads) == 1  # at the first publish only: nothing published by this follower yet
    assert [r["count"] for r in query(path)["per_step"]] == expected(7)


def test_a_step_of_no_rows_is_followed(tmp_path):
    """A global array of 0 elements at a step: ADIOS2's Python stream divides
    by the step's size to read it, and the follower died with a traceback on
    that step (and on it again at every restart)."""
    import adios2

    path = str(tmp_path / "run.bp")
    sizes = [5, 0, 3]
    with adios2.Stream(path, "w") as stream:
        for n in sizes:
            stream.begin_step()
            stream.write("energy", np.arange(n, dtype=np.float64), [n], [0], [n])
            stream.end_step()
    report = follow_bp(path, idle_timeout=5)
    assert report.closed and report.indexed_now == [0, 1, 2]
    answer = query(path, "energy >= 0")
    assert [r["count"] for r in answer["per_step"]] == sizes
