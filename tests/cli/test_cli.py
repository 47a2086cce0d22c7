"""The command line as a user meets it: stable output forms and one-line errors."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

QUARRY = [sys.executable, "-m", "quarry.cli.main"]


def run(*args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([*QUARRY, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    if code:
        assert "Traceback" not in proc.stderr
    return proc


@pytest.fixture(scope="module")
def run_h5(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("cli") / "run.h5")
    rng = np.random.default_rng(3)
    with h5py.File(path, "w") as f:
        f["Step#0/energy"] = rng.exponential(0.4, 20_000).astype("f4")
        f["Step#0/x"] = rng.uniform(0, 200, 20_000).astype("f4")
        f["Step#0/y"] = rng.uniform(0, 200, 20_000).astype("f4")
        f["Step#0/z"] = rng.uniform(0, 200, 20_000).astype("f4")
        f["Step#0/mesh"] = rng.normal(size=(20, 30))
        f["Step#1/z"] = rng.uniform(0, 200, 20_000).astype("f4")
        f["notes"] = np.zeros(3, dtype="c16")
    run("index", path)
    return path


def columns(path):
    with h5py.File(path) as f:
        return {k: f["Step#0"][k][()] for k in ("energy", "x", "y")}


def test_count_json(run_h5):
    out = json.loads(run("query", run_h5, "energy > 1.3 && x < 100", "--count", "--json").stdout)
    c = columns(run_h5)
    assert out["count"] == int(((c["energy"] > 1.3) & (c["x"] < 100)).sum())
    assert run("query", run_h5, "energy > 1.3").stdout.strip() == str(
        int((c["energy"] > 1.3).sum())
    )


def test_aggregates_in_json(run_h5):
    query = "energy > mean(energy) + 2*std(energy) && x < mean(x*y)/100"
    out = json.loads(run("query", run_h5, query, "--json").stdout)
    c = columns(run_h5)
    e, xy = c["energy"].astype("f8"), c["x"].astype("f8") * c["y"].astype("f8")
    assert [(a["expr"], a["from"]) for a in out["aggregates"]] == [
        ("mean(/Step#0/energy)", "index"),
        ("std(/Step#0/energy)", "index"),
        ("mean((/Step#0/x * /Step#0/y))", "data"),
    ]
    values = [a["value"] for a in out["aggregates"]]
    assert values == pytest.approx([e.mean(), e.std(), xy.mean()], rel=1e-12)
    cut = values[0] + 2 * values[1]
    assert out["count"] == int(((e > cut) & (c["x"] < values[2] / 100)).sum())


def test_ids_to_npy(run_h5, tmp_path):
    out = str(tmp_path / "hits.npy")
    run("query", run_h5, "energy > 1.3", "--ids", "--out", out)
    ids = np.load(out)
    assert ids.dtype == np.int64 and ids.ndim == 1
    np.testing.assert_array_equal(ids, np.flatnonzero(columns(run_h5)["energy"] > 1.3))


@pytest.mark.parametrize("ext", [".npy", ".csv", ".h5"])
def test_values_by_extension(run_h5, tmp_path, ext):
    out = str(tmp_path / f"sel{ext}")
    run("query", run_h5, "1.2 < energy < 1.3", "--values", "x,y,/Step#0/z,energy", "--out", out)
    c = columns(run_h5)
    hits = np.flatnonzero((c["energy"] > 1.2) & (c["energy"] < 1.3))
    if ext == ".npy":
        table = np.load(out)
        got = {k: table[k] for k in ("quarry_row", "x", "energy")}
    elif ext == ".csv":
        with open(out, newline="") as f:
            rows = list(csv.DictReader(f))
        assert list(rows[0]) == ["quarry_row", "x", "y", "z", "energy"]
        got = {k: np.array([float(r[k]) for r in rows]) for k in ("quarry_row", "x", "energy")}
    else:
        with h5py.File(out) as f:
            got = {k: f[k][()] for k in ("quarry_row", "x", "energy")}
            assert f.attrs["query"] == "1.2 < energy < 1.3"
    np.testing.assert_array_equal(got["quarry_row"], hits)
    np.testing.assert_array_equal(got["x"].astype("f4"), c["x"][hits])
    np.testing.assert_array_equal(got["energy"].astype("f4"), c["energy"][hits])


def test_coords_of_a_2d_variable(run_h5, tmp_path):
    out = json.loads(run("query", run_h5, "mesh > 2", "--coords", "--json").stdout)
    with h5py.File(run_h5) as f:
        mesh = f["Step#0/mesh"][()]
    assert out["coords"] == np.argwhere(mesh > 2).tolist()


def test_subarrays_give_table_and_absolute_coords(run_h5):
    query = "mesh[0:10, 0:10] > 1 && mesh[10:20, 20:30] < 0"
    with h5py.File(run_h5) as f:
        mesh = f["Step#0/mesh"][()]
    hits = (mesh[0:10, 0:10] > 1) & (mesh[10:20, 20:30] < 0)
    out = json.loads(run("query", run_h5, query, "--coords", "--json").stdout)
    assert out["coords"] == np.argwhere(hits).tolist()
    absolute = run("query", run_h5, query, "--coords-of", "mesh[10:20, 20:30]").stdout.split("\n")
    assert absolute[:-1] == [f"{i + 10} {j + 20}" for i, j in np.argwhere(hits)]
    bad = run("query", run_h5, "mesh[0:10] > 1 && mesh[0:5] > 1", code=1).stderr
    assert "(10, 30)" in bad and "(5, 30)" in bad


def test_info_json(run_h5):
    info = json.loads(run("info", run_h5, "--json").stdout)
    by_path = {v["path"]: v for v in info["variables"]}
    assert by_path["/Step#0/energy"]["indexed"] and by_path["/Step#0/energy"]["dtype"] == "float32"
    assert "unsupported" in by_path["/notes"] and not by_path["/notes"]["indexed"]
    assert info["index"]["state"] == "ok"
    assert "indexed" in run("info", run_h5).stdout


def test_info_shows_a_variable_stale_behind_an_unmoved_stat(tmp_path):
    """A value changed and the file's times put back: only the CRCs find it.
    `quarry info` still lists the variables: the changed one's index is
    stale (with why), the other's still answers, as queries find them."""
    path = str(tmp_path / "p.h5")
    with h5py.File(path, "w") as f:
        f["x"], f["y"] = np.arange(100.0), np.arange(100.0)
    os.utime(path, ns=(10**18, 10**18))
    run("index", path)
    with h5py.File(path, "r+") as f:
        f["x"][3] = -1.0
    os.utime(path, ns=(10**18, 10**18))
    info = json.loads(run("info", path, "--json").stdout)
    assert info["index"]["state"] == "stale" and "/x block 0 of 1 changed" in info["index"]["error"]
    got = [(v["path"], v["indexed"], v.get("stale", False)) for v in info["variables"]]
    assert got == [("/x", False, True), ("/y", True, False)]
    text = run("info", path).stdout
    assert "index stale: " in text and "index stale" in text.splitlines()[2]
    assert run("query", path, "y > 50").stdout.strip() == "49"


def test_malformed_query_shows_a_caret_and_exits_2(run_h5):
    err = run("query", run_h5, "energy > > 1", code=2).stderr
    assert "energy > > 1" in err and "\n           ^" in err


def test_unknown_variable_names_its_neighbours(run_h5):
    err = run("query", run_h5, "enrgy > 1", code=1).stderr
    assert "enrgy" in err and "energy" in err and err.count("\n") == 1


def test_a_name_in_every_step_counts_every_step(run_h5):
    with h5py.File(run_h5) as f:
        want = sum(int((f[f"Step#{s}/z"][()] > 1).sum()) for s in (0, 1))
    assert run("query", run_h5, "z > 1").stdout.strip() == str(want)
    assert run("query", run_h5, "/Step#1/z > 100").stdout.strip().isdigit()
    # one variable is needed: the candidates, and how to choose or go per step
    err = run("info", run_h5, "--resolve", "z", code=1).stderr
    assert "/Step#0/z" in err and "/Step#1/z" in err
    assert "--path Step#0" in err and "--per-step" in err and err.count("\n") == 1


def test_shape_mismatch_names_both_shapes(run_h5):
    err = run("query", run_h5, "energy > 1 && mesh > 0", code=1).stderr
    assert "(20000,)" in err and "(20, 30)" in err


@pytest.mark.parametrize(
    ("setup", "words"),
    [("missing", "no such file"), ("text", "cannot tell the format"), ("dtype", "not supported")],
)
def test_bad_inputs_get_one_line(tmp_path, run_h5, setup, words):
    target = str(tmp_path / "f.h5")
    query = "x > 1"
    if setup == "text":
        with open(target, "w") as f:
            f.write("hello")
    elif setup == "dtype":
        target, query = run_h5, "notes > 1"
    err = run("query", target, query, code=1).stderr
    assert words in err and err.count("\n") == 1


def test_stale_index_is_refused(tmp_path):
    path = str(tmp_path / "s.h5")
    with h5py.File(path, "w") as f:
        f["v"] = np.arange(10.0)
    run("index", path)
    with h5py.File(path, "r+") as f:
        f["v"][0] = 100
    err = run("query", path, "v > 1", code=1).stderr
    assert "changed since it was indexed" in err and "quarry index" in err


def test_debug_shows_the_traceback(tmp_path):
    proc = subprocess.run(
        [*QUARRY, "--debug", "query", str(tmp_path / "nope.h5"), "x > 1"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0 and "Traceback" in proc.stderr


def test_demo_writes_a_picture(tmp_path):
    out = run("demo", "--dir", str(tmp_path), "--rows", "50000").stdout
    picture = tmp_path / "energy_hist.png"
    assert picture.exists() and str(picture) in out
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert _png_size(tmp_path / "hot_particles.png") == (640, 480)
    assert os.path.exists(tmp_path / "particles.h5.qidx")


def test_register_raw_binary_then_query(tmp_path):
    data = np.arange(4 * 5 * 6, dtype="<f4").reshape(4, 5, 6)
    path = str(tmp_path / "bx.bin")
    data.tofile(path)
    out = run("register", path, "--dtype", "<f4", "--shape", "4,5,6").stdout
    assert "bx.bin.qraw.json" in out
    run("index", path)
    got = json.loads(run("query", path, "bx >= 100", "--count", "--json").stdout)
    assert got["count"] == int((data >= 100).sum())
    assert "/bx" in run("info", path).stdout


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["--dtype", "<f4", "--shape", "4,x"], 2, "--shape"),
        (["--dtype", "<q9", "--shape", "4"], 2, "unknown dtype"),
        (["--dtype", "<f8", "--shape", "1000"], 1, "needs 8000"),
    ],
)
def test_register_errors(tmp_path, args, code, words):
    path = str(tmp_path / "small.bin")
    np.zeros(10, dtype="<f4").tofile(path)
    err = run("register", path, *args, code=code).stderr
    assert words in err


def _png_size(path) -> tuple[int, int]:
    with open(path, "rb") as f:
        data = f.read(24)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_hist_json_and_pictures(run_h5, tmp_path):
    c = columns(run_h5)
    out = json.loads(
        run("hist", run_h5, "energy", "--where", "x > 100", "--bins", "20", "--json").stdout
    )
    expect, edges = np.histogram(c["energy"][c["x"] > 100], bins=20)
    assert out["counts"] == expect.tolist()
    np.testing.assert_array_equal(np.array(out["edges"], dtype="f4"), edges)
    assert out["path"] == "data"  # the selection's own min and max need its values
    ranged = json.loads(
        run(
            "hist",
            run_h5,
            "energy",
            "--where",
            "x > 100",
            "--bins",
            "30",
            "--range",
            "0,3",
            "--json",
        ).stdout
    )
    expect, _ = np.histogram(c["energy"][c["x"] > 100], bins=30, range=(0, 3))
    assert ranged["counts"] == expect.tolist() and ranged["path"].startswith("index")
    # A range starting negative is taken as written, without `--range=`.
    negative = json.loads(run("hist", run_h5, "x", "--range", "-50,150", "--json").stdout)
    assert negative["counts"] == np.histogram(c["x"], bins=10, range=(-50, 150))[0].tolist()
    png, svg = tmp_path / "h.png", tmp_path / "h.svg"
    run("hist", run_h5, "energy", "--bins", "50", "--log", "--png", str(png), "--svg", str(svg))
    assert _png_size(png) == (640, 480)
    assert svg.read_text().lstrip().startswith("<?xml")
    two = json.loads(run("hist", run_h5, "x,y", "--bins", "5", "--json").stdout)
    assert len(two["counts"]) == 5 and len(two["counts"][0]) == 5 and len(two["edges"]) == 2
    run("hist", run_h5, "x,y", "--bins", "5", "--log", "--png", str(png))
    assert _png_size(png) == (640, 480)
    text = run("hist", run_h5, "energy", "--edges", "0,0.5,1,5").stdout
    assert text.count("\n") == 3 and "[1, 5]" in text


def test_hist_errors(run_h5):
    assert "one to three" in run("hist", run_h5, "x,y,z,energy", code=2).stderr
    assert "numbers" in run("hist", run_h5, "energy", "--edges", "a,b", code=2).stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["energy", "--bins", "0"], "--bins: expected 1 or more, got 0"),
        (["energy", "--range", "10,0"], "--range takes two finite numbers, the lower first"),
        (["energy", "--range", "0,inf"], "--range takes two finite numbers, the lower first"),
        (["energy", "--edges", "1,0.5,2"], "--edges takes two or more numbers in increasing"),
        (["energy", "--edges", "1"], "--edges takes two or more numbers in increasing"),
        (["energy", "--edges", "0,1,1,2"], "in increasing order, none repeated: 0,1,1,2"),
        (["energy", "--range", "-1e308,1e308"], "is wider than a float64 holds"),
        (["x,y", "--edges", "0,1"], "--edges is for a 1-D histogram"),
        (["x,y", "--range", "0,1;5,2"], "--range takes two finite numbers, the lower first"),
    ],
)
def test_hist_options_of_the_wrong_form_exit_2_in_their_own_words(run_h5, args, said):
    """They exited 1 with NumPy's wording ('`bins` must be positive, when an
    integer'), where the README's rule for an argument of the wrong form is 2."""
    err = run("hist", run_h5, *args, code=2).stderr
    assert said in err.strip().splitlines()[-1] and "Traceback" not in err
    assert "Warning" not in err


def test_plot_overlay(run_h5, tmp_path):
    png = tmp_path / "halo.png"
    out = run("plot", run_h5, "x", "y", "--where", "energy > 2", "--png", str(png)).stdout
    assert "selected rows" in out and _png_size(png) == (640, 480)
    assert "--png" in run("plot", run_h5, "x", "y", "--where", "energy > 2", code=2).stderr


def _terminal() -> tuple[int, int]:
    """A pseudo-terminal of 80x24 (a fresh one reports 0 columns, and tqdm
    draws nothing in no width)."""
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    return leader, follower


def test_progress_bar_only_on_a_terminal(tmp_path):
    path = str(tmp_path / "p.h5")
    with h5py.File(path, "w") as f:
        f["v"] = np.arange(3_000_000, dtype="f4")
    quiet = run("index", path).stderr
    assert quiet == ""  # not a terminal: no bar
    _, shown = _shown_on_terminal("index", path, "--force")
    assert b"indexing" in shown and b"rows" in shown
    _, silent = _shown_on_terminal("index", path, "--force", "--quiet")
    assert b"indexing" not in silent


def _shown_on_terminal(*args: str) -> tuple[bytes, bytes]:
    """(stdout, what reached the terminal on stderr) of one quarry command."""
    leader, follower = _terminal()
    proc = subprocess.run(
        [*QUARRY, *args], stderr=follower, stdout=subprocess.PIPE, timeout=120, check=True
    )
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    return proc.stdout, shown


def test_query_progress_bar_only_on_a_terminal(tmp_path):
    path = str(tmp_path / "q.h5")
    v = np.arange(3_000_000, dtype="f4")
    with h5py.File(path, "w") as f:
        f["v"], f["w"] = v, v[::-1]
    run("index", path, "--block-size", "65536", "--vars", "v")
    query = "v > 1000 && w*w > 4e12"
    expect = int(np.count_nonzero((v > 1000) & (v[::-1].astype(np.float64) ** 2 > 4e12)))
    assert run("query", path, query).stderr == ""  # a pipe: no bar
    out, shown = _shown_on_terminal("query", path, query)
    assert int(out) == expect and b"querying" in shown and b"rows" in shown
    out, shown = _shown_on_terminal("query", path, query, "--ids", "--json")
    assert (
        json.loads(out)["ids"]
        == np.flatnonzero((v > 1000) & (v[::-1].astype(np.float64) ** 2 > 4e12)).tolist()
    )
    out, shown = _shown_on_terminal("query", path, query, "--quiet")
    assert int(out) == expect and b"querying" not in shown


@pytest.mark.parametrize("command", ["query", "track"])
def test_the_usage_line_shows_files_then_one_query(command):
    """argparse wrote 'FILE... QUERY [FILE... QUERY ...]', which reads as
    several file-and-query pairs (and 'a.h5 "x > 1" b.h5 "x > 2"' failed)."""
    usage = run(command, "--help").stdout.split("\n\n")[0]
    assert usage.rstrip().endswith("FILE... QUERY") and "[FILE..." not in usage


def test_plot_draws_the_grey_background_on_sparse_data(tmp_path):
    """328 rows over 200x200 bins: every bin held 1, the least of the log
    scale, drawn white on white, so the 'all rows' background was invisible."""
    from matplotlib.image import imread

    path = str(tmp_path / "sparse.h5")
    rng = np.random.default_rng(8)
    with h5py.File(path, "w") as f:
        f["x"], f["y"] = rng.random(328), rng.random(328)
    png = tmp_path / "p.png"
    run("plot", path, "x", "y", "--where", "x > 2", "--png", str(png))  # nothing selected
    inside = imread(png)[60:420, 90:560, :3]  # the axes' area, frame and labels left out
    grey = (np.ptp(inside, axis=-1) < 0.02) & (inside[..., 0] > 0.2) & (inside[..., 0] < 0.95)
    assert grey.sum() > 800  # the rows' bins (1,521 pixels; 86 when they were white)
