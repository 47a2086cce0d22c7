"""``quarry reorg`` from the shell: its output, where the copy goes, and its errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

from quarry.expr.plan import Interval
from quarry.reorg import open_copy
from stopped import HOOKS

QUARRY = [sys.executable, "-m", "quarry.cli.main"]


def run(*args: str, code: int = 0, env: dict[str, str] | None = None):
    proc = subprocess.run([*QUARRY, *args], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    if code:
        assert "Traceback" not in proc.stderr
        assert proc.stderr.strip().splitlines()[-1].startswith("quarry"), proc.stderr
    return proc


@pytest.fixture
def steps(tmp_path):
    path = str(tmp_path / "run.h5")
    rng = np.random.default_rng(5)
    with h5py.File(path, "w") as f:
        for step in range(3):
            f[f"Step#{step}/energy"] = rng.exponential(0.4, 3000).astype("f4")
            for v in "xyz":
                f[f"Step#{step}/{v}"] = rng.uniform(0, 300, 3000).astype("f4")
    return path


def test_reorg_json_describes_every_step(steps):
    out = json.loads(
        run("reorg", steps, "--vars", "energy,x,y,z", "--bin-size", "0.1,10,10,10", "--json").stdout
    )
    assert out["copy"] == steps + ".qmd"
    assert [t["step"] for t in out["tables"]] == [0, 1, 2]
    assert out["rows"] == 9000
    first = out["tables"][0]["variables"]
    assert [v["path"] for v in first] == [f"/Step#0/{n}" for n in ("energy", "x", "y", "z")]
    assert [v["bin_size"] for v in first] == [0.1, 10.0, 10.0, 10.0]
    # Bins of a size sit on its multiples: 140 < x < 150 is one whole bin of x.
    member = open_copy(steps).member("/Step#1")
    box = {"/Step#1/x": Interval("f64", 140.0, True, 150.0, False)}
    runs = member.runs(box)
    assert runs.boundary_rows == 0
    with h5py.File(steps) as f:
        x = f["Step#1/x"][()]
    assert member.select(box).ids.tolist() == np.flatnonzero((x >= 140) & (x < 150)).tolist()


def test_reorg_text_and_path(steps):
    out = run("reorg", steps, "--vars", "x,y", "--bins", "8", "--path", "Step#2").stdout
    assert out.startswith(f"reorganised {steps}: 2 variable(s) in 1 table(s), 3000 rows in ")
    assert open_copy(steps).members[0].variables == ["/Step#2/x", "/Step#2/y"]


def test_reorg_into_an_index_directory(steps, tmp_path):
    where = tmp_path / "copies"
    where.mkdir()
    out = json.loads(run("reorg", steps, "--vars", "x", "--index", str(where), "--json").stdout)
    assert out["copy"] == str(where / "run.h5.qmd")
    assert not os.path.exists(steps + ".qmd")


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--vars", "nope"], 1, "nope"),
        (["--vars", "x,x"], 2, "--vars: a variable is named twice"),
        (["--vars", ""], 2, "--vars: name at least one variable to reorganise"),
        (["--vars", " , "], 2, "--vars: name at least one variable to reorganise"),
        (["--vars", "x,y", "--bin-size", "1,2,3"], 2, "--bin-size gives 3 values for 2"),
        (["--vars", "x", "--bins", "4", "--bin-size", "1"], 2, "not allowed with"),
        (["--vars", "x", "--bins", "four"], 2, "comma-separated int"),
        (["--vars", "x", "--bins", "0"], 2, "whole numbers of 1 or more"),
        (["--vars", "x,y", "--bin-size", "1,-2"], 2, "bin sizes must be positive numbers"),
        (["--vars", "x,y", "--bin-size", "-1"], 2, "must be positive numbers: -1.0\n"),
        (["--vars", "x", "--bins", "1,2,3"], 2, "--bins gives 3 values for 1 variable: give one"),
        (["--vars", "x", "--bin-size", "nan"], 2, "bin sizes must be positive numbers"),
        (["--vars", "x", "--bin-size", "1e-30"], 1, "more than 16777216 bins"),
        # The first edge as a multiple of the size overflowed (a traceback).
        (["--vars", "x", "--bin-size", "1e-320"], 1, "more than 16777216 bins"),
        (["--vars", "x", "--bin-size", "5e-324"], 1, "more than 16777216 bins"),
        (["--vars", "x", "--part-rows", "0"], 2, "--part-rows: expected 1 or more, got 0"),
        (["--vars", "x", "--part-rows", "-1"], 2, "--part-rows: expected 1 or more, got -1"),
    ],
)
def test_reorg_errors_are_one_line(steps, args, code, message):
    """One line (argparse's own mistakes after its usage lines), no traceback."""
    proc = run("reorg", steps, *args, code=code)
    assert message.rstrip("\n") in proc.stderr.strip().splitlines()[-1]
    if message.endswith("\n"):  # said to the end of the line
        assert proc.stderr.strip().endswith(message.rstrip("\n"))


def test_bins_past_what_the_dtype_holds_make_a_copy_that_answers(tmp_path):
    """Bins of 1e39 over float32 values put the first edge (-1e39) past what
    float32 holds: the copy was written damaged and ``reorg`` ended in a
    traceback. The first bin now starts at the first edge float32 holds (and
    takes every value below, as a first bin does): one bin here."""
    path = str(tmp_path / "s.h5")
    x = np.random.default_rng(0).uniform(-50, 150, 2000).astype("f4")
    with h5py.File(path, "w") as f:
        f["x"] = x
    run("reorg", path, "--vars", "x", "--bin-size", "1e39")
    info = json.loads(run("info", path, "--json").stdout)["reorganised"]
    assert info["state"] == "fresh"
    assert [v["bins"] for t in info["tables"] for v in t["variables"]] == [1]
    assert run("query", path, "x < 0", "--count").stdout.strip() == str(int((x < 0).sum()))


@pytest.mark.parametrize(
    ("x", "binning"),
    [
        # One bin over more than float32 holds: its size was inf in float32, and
        # (v - origin) / size NaN where v - origin overflowed, the NaN bin.
        (np.array([np.nan, 3e38, -3e38, 2.0, 0.5] * 40_000, "f4"), ["--bins", "1,1000"]),
        # One bin of a size float32 rounds to 0: 0 / 0 for every value.
        (np.full(200_000, 5.0, "f4"), ["--bin-size", "1e-50,1"]),
    ],
)
def test_one_bin_holds_every_value_whatever_its_size_in_the_dtype(tmp_path, x, binning):
    """A wrong answer: rows binned as NaN were left out of every range on x."""
    path = str(tmp_path / "s.h5")
    y = np.arange(len(x)) % 1000
    with h5py.File(path, "w") as f:
        f["x"], f["y"] = x, y
    run("reorg", path, "--vars", "x,y", *binning)
    for query, hits in (("x > 1e38 && y == 1", (x > 1e38) & (y == 1)),
                        ("x > 1 && y == 3", (x > 1) & (y == 3))):  # fmt: skip
        proc = run("query", path, query, "--ids", "--json", "--explain")
        got = json.loads(proc.stdout)
        assert got["ids"] == np.flatnonzero(hits).tolist(), query
        assert [p["access"] for p in got["plan"]] == ["mdbin"], got["plan"]


def test_a_derived_variable_is_refused_for_what_it_is(tmp_path):
    """``r`` is the index's (``--derive``): a copy holds stored values, and
    the message said 'no variable r' while info and queries knew it."""
    path = str(tmp_path / "a.h5")
    rng = np.random.default_rng(1)
    with h5py.File(path, "w") as f:
        f["x"], f["y"] = rng.random(1000), rng.random(1000)
    run("index", path, "--derive", "r=sqrt(x**2 + y**2)", "--quiet")
    err = run("reorg", path, "--vars", "r,x", code=1).stderr
    assert err.strip() == (
        f"quarry: error: r is derived by the index (r = sqrt(x**2 + y**2)), not stored in "
        f"{path}: a reorganised copy holds stored variables; reorganise those r is computed from"
    )
    run("reorg", path, "--vars", "x,y")


def test_part_rows_cut_the_parts(steps):
    """README: the rows are cut into parts of --part-rows."""
    out = json.loads(
        run("reorg", steps, "--vars", "x,y", "--part-rows", "1000", "--jobs", "2", "--json").stdout
    )
    assert [t["parts"] for t in out["tables"]] == [3, 3, 3]


def test_info_lists_the_copy_and_whether_it_is_fresh(steps):
    run("reorg", steps, "--vars", "x,y", "--bin-size", "10", "--path", "Step#0")
    info = json.loads(run("info", steps, "--json").stdout)["reorganised"]
    assert info["path"] == steps + ".qmd"
    assert info["state"] == "fresh"  # just written: too recent to trust, so the CRCs tell
    assert info["tables"][0]["variables"] == [
        {"path": "/Step#0/x", "bin_size": 10.0, "bins": 30, "nan_bin": False},
        {"path": "/Step#0/y", "bin_size": 10.0, "bins": 30, "nan_bin": False},
    ]
    with h5py.File(steps, "r+") as f:
        f["Step#0/x"][0] = 1.0
    assert json.loads(run("info", steps, "--json").stdout)["reorganised"]["state"] == "stale"
    text = run("info", steps).stdout
    assert f"reorganised copy: {steps}.qmd (stale): /Step#0/x, /Step#0/y" in text
    assert "  copy stale: " in text and "build the copy again with: quarry reorg" in text


#: ``quarry reorg`` stopped at a chosen point: there it prints "stopped" and
#: waits on stdin, so the test signals it at that point, with no race.
STOPPED_REORG = (
    HOOKS
    + """
from quarry.cli.main import main
from quarry.reorg import build, layout

point, argv = sys.argv[1], sys.argv[2:]

if point == "created":  # the copy's temporary made, its columns allocated
    stop_after(layout.CopyWriter, "create", 1)
elif point == "binning":  # a part read, before it is clustered and written
    import signal

    def interrupted(signum, frame):  # as Python's own handler, saying when
        print("interrupted", flush=True)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupted)
    stop_before(build, "core_binning")
    abort = layout.CopyWriter.abort

    def aborting(self):
        print("aborting", flush=True)
        abort(self)

    layout.CopyWriter.abort = aborting
else:  # the first part clustered and written
    stop_after(build, "_cluster", 1)
sys.exit(main(argv))
"""
)


@pytest.mark.parametrize("point", ["created", "part"])
def test_sigterm_removes_the_copys_temporary_as_an_index_build_does(tmp_path, point):
    """README: a SIGTERM'd build "removes its temporary file, prints `quarry:
    terminated` and exits 143"; a reorganisation left its copy's temporary,
    as large as the copy (a probe found 418 MB behind)."""
    import signal

    path = str(tmp_path / "run.h5")
    rng = np.random.default_rng(2)
    with h5py.File(path, "w") as f:
        f["a"], f["b"] = rng.normal(size=50_003), rng.normal(size=50_003)
    argv = ["reorg", path, "--vars", "a,b", "--part-rows", "4096", "--jobs", "1"]
    proc = subprocess.Popen(
        [sys.executable, "-c", STOPPED_REORG, point, *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "stopped\n"
    assert [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.strip() == "quarry: terminated"
    assert sorted(os.listdir(tmp_path)) == ["run.h5"]


def test_ctrl_c_waits_for_the_parts_being_written(tmp_path):
    """Ctrl-C while parts were clustered closed the copy's file under the
    workers still writing it: the core panicked on the closed descriptor (or
    could have written to another file given its number). Now the running
    part finishes, the rest are dropped, and the old copy stays."""
    import select
    import signal

    path = str(tmp_path / "run.h5")
    rng = np.random.default_rng(4)
    with h5py.File(path, "w") as f:
        f["a"], f["b"] = rng.normal(size=50_003), rng.normal(size=50_003)
    run("reorg", path, "--vars", "a,b", "--bins", "4")
    old = (tmp_path / "run.h5.qmd").read_bytes()
    argv = ["reorg", path, "--vars", "a,b", "--bins", "8", "--part-rows", "4096", "--jobs", "1"]
    proc = subprocess.Popen(
        [sys.executable, "-c", STOPPED_REORG, "binning", *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "stopped\n"
    proc.send_signal(signal.SIGINT)  # the main thread, waiting for the parts
    assert proc.stdout.readline() == "interrupted\n"
    # The copy's file stays open while the part is stopped: nothing more is said.
    assert select.select([proc.stdout], [], [], 0.5)[0] == []
    out, err = proc.communicate("go on\n", timeout=60)  # then the stopped part goes on
    assert out == "aborting\n"
    assert proc.returncode == 130, err
    assert err.strip() == "quarry: interrupted"
    assert sorted(os.listdir(tmp_path)) == ["run.h5", "run.h5.qmd"]
    assert (tmp_path / "run.h5.qmd").read_bytes() == old


def test_a_folders_copies_are_not_taken_for_its_data(tmp_path):
    """A folder or glob once reorganised holds run_k.h5.qmd beside each file:
    they were taken for data files, so the next reorg, query or index of
    the folder failed (or indexed the copies)."""
    rng = np.random.default_rng(8)
    x = {}
    for k in range(2):
        with h5py.File(tmp_path / f"run_{k}.h5", "w") as f:
            f["x"] = x[k] = rng.uniform(0, 100, 1000)
            f["e"] = rng.uniform(0, 1, 1000)
    d = str(tmp_path)
    for _ in range(2):
        run("reorg", d, "--vars", "x,e", "--bins", "4")
    want = sum(int((v < 10).sum()) for v in x.values())
    for where in (d, os.path.join(d, "run_*")):
        assert run("query", where, "x < 10").stdout.strip() == str(want)
    assert "2 file(s)" in run("index", d).stdout
    assert sorted(os.listdir(d)) == [
        f"run_{k}.h5{suffix}" for k in range(2) for suffix in ("", ".qidx", ".qmd")
    ]


@pytest.mark.parametrize("limit", [100_000, 3_000_000])  # at the columns; at the tables
def test_a_copy_with_no_room_is_one_clear_error(tmp_path, limit):
    """The file size limit (as a full disk or a quota) met while the copy's
    columns were allocated, or past them while its offset tables were
    written, gave HDF5's raw error or a traceback; the old copy stays."""
    import resource

    path = str(tmp_path / "run.h5")
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(200_000.0)  # 2.4 MB of columns, 3.2 MB of offset tables
    run("reorg", path, "--vars", "x", "--bins", "2")
    old = (tmp_path / "run.h5.qmd").read_bytes()

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run(
        [sys.executable, "-m", "quarry.cli.main", "reorg", path, "--vars", "x", "--bins", "200000"],
        capture_output=True,
        text=True,
        preexec_fn=limited,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip() == (
        f"quarry: error: cannot write the reorganised copy {path}.qmd: file too large; make "
        "room there, or put the copy elsewhere with --index DIR"
    )
    assert sorted(os.listdir(tmp_path)) == ["run.h5", "run.h5.qmd"]
    assert (tmp_path / "run.h5.qmd").read_bytes() == old
