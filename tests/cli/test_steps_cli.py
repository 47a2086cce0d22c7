"""One file with step groups on the command line: a series of one file for the
total, --per-step, every output, --batch, hist and plot, against NumPy."""

from __future__ import annotations

import csv
import io
import json
import os

import h5py
import numpy as np
import pytest
from test_cli import run

STEP_SIZES = (45, 0, 77, 31)  # none divides the block length; one step is empty
QUERY = "px > 0.05"


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("sim") / "sim.h5")
    rng = np.random.default_rng(21)
    steps = []
    with h5py.File(path, "w") as f:
        for s, n in enumerate(STEP_SIZES):
            px = rng.normal(0, 1, n).astype("f4")
            px[rng.random(n) < 0.1] = np.nan
            cols = {"px": px, "py": rng.normal(0, 1, n), "mesh": rng.normal(size=(n, 2))}
            for name, values in cols.items():
                f[f"Step#{s}/{name}"] = values
            steps.append(cols)
    run("index", path, "--block-size", "16")
    return path, steps


def hits(cols, query=QUERY):
    assert query == QUERY
    return np.flatnonzero(cols["px"] > 0.05)


def test_the_total_with_or_without_a_glob_path(sim):
    path, steps = sim
    total = sum(len(hits(c)) for c in steps)
    assert run("query", path, QUERY).stdout.strip() == str(total)
    assert run("query", path, QUERY, "--path", "Step#*").stdout.strip() == str(total)
    out = json.loads(run("query", path, QUERY, "--json").stdout)
    assert out["count"] == total and out["members"] == len(STEP_SIZES)
    # each bare name, and the variable it meant in every step
    assert out["resolved"] == {"px": [f"/Step#{s}/px" for s in range(len(STEP_SIZES))]}
    out = json.loads(run("query", path, QUERY, "--per-step").stdout)
    assert out["per_step"] == [
        {"file": path, "step": s, "count": len(hits(c))} for s, c in enumerate(steps)
    ]


def test_ids_coords_and_values_per_step(sim):
    path, steps = sim
    out = json.loads(run("query", path, QUERY, "--ids", "--json").stdout)
    assert out["count"] == sum(len(hits(c)) for c in steps)
    assert [r["ids"] for r in out["per_step"]] == [hits(c).tolist() for c in steps]
    out = json.loads(run("query", path, QUERY, "--coords", "--json").stdout)
    assert [r["coords"] for r in out["per_step"]] == [[[i] for i in hits(c)] for c in steps]
    out = json.loads(run("query", path, QUERY, "--values", "px,py", "--json").stdout)
    for r, c in zip(out["per_step"], steps, strict=True):
        assert r["values"]["py"] == c["py"][hits(c)].tolist()
        np.testing.assert_array_equal(np.array(r["values"]["px"], "f4"), c["px"][hits(c)])
    text = run("query", path, QUERY, "--values", "py").stdout
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["quarry_file", "quarry_step", "quarry_row", "py"]
    want = [(path, str(s), str(i), c["py"][i]) for s, c in enumerate(steps) for i in hits(c)]
    assert [tuple(r[:3]) for r in rows[1:]] == [w[:3] for w in want]
    np.testing.assert_array_equal([float(r[3]) for r in rows[1:]], [w[3] for w in want])
    text = run("query", path, QUERY, "--ids").stdout.splitlines()
    assert text[0] == "quarry_file,quarry_step,quarry_row" and len(text) == 1 + len(want)
    text = run("query", path, QUERY, "--coords").stdout.splitlines()
    assert text[0] == "quarry_file,quarry_step,quarry_index_0"
    assert text[1:] == [",".join(w[:3]) for w in want]


def test_values_out_one_group_per_step(sim, tmp_path):
    path, steps = sim
    out = str(tmp_path / "hot.h5")
    line = run("query", path, QUERY, "--values", "px", "--out", out).stdout
    assert line.strip().endswith(f"-> {out}")
    ids_only, coords = str(tmp_path / "ids.h5"), str(tmp_path / "coords.h5")
    run("query", path, QUERY, "--ids", "--out", ids_only)
    run("query", path, QUERY, "--coords", "--out", coords)
    with h5py.File(out) as f, h5py.File(ids_only) as g, h5py.File(coords) as h:
        for s, c in enumerate(steps):
            np.testing.assert_array_equal(f[f"Step#{s}/px"][()], c["px"][hits(c)])
            np.testing.assert_array_equal(g[f"Step#{s}/quarry_row"][()], hits(c))
            assert sorted(g[f"Step#{s}"]) == sorted(h[f"Step#{s}"])  # ids and coordinates
    err = run("query", path, QUERY, "--coords-of", "px", "--out", coords, code=2).stderr
    assert "--coords-of prints" in err


def test_outputs_a_series_cannot_give_are_refused(sim, tmp_path):
    path, _ = sim
    err = run("query", path, QUERY, "--save", str(tmp_path / "s.qsel"), code=2).stderr
    assert "--path Step#N" in err and err.count("\n") == 1
    err = run("query", path, QUERY, "--ids", "--out", str(tmp_path / "h.npy"), code=2).stderr
    assert "one group per step" in err
    # one step is one table: --save and .npy work there
    run("query", path, QUERY, "--path", "Step#2", "--ids", "--out", str(tmp_path / "h.npy"))
    assert np.load(tmp_path / "h.npy").tolist() == hits(sim[1][2]).tolist()


def test_batch_over_the_steps(sim, tmp_path):
    path, steps = sim
    batch = tmp_path / "q.txt"
    batch.write_text("px > 0.05\npy < 0\n")
    lines = [json.loads(x) for x in run("query", path, "--batch", str(batch)).stdout.splitlines()]
    assert [x["count"] for x in lines] == [
        sum(len(hits(c)) for c in steps),
        sum(int((c["py"] < 0).sum()) for c in steps),
    ]
    out = run("query", path, "--batch", str(batch), "--per-step").stdout.splitlines()
    assert [r["count"] for r in json.loads(out[1])["per_step"]] == [
        int((c["py"] < 0).sum()) for c in steps
    ]


def test_hist_and_plot_over_the_steps(sim, tmp_path):
    path, steps = sim
    px = np.concatenate([c["px"] for c in steps])
    px = px[~np.isnan(px)]
    out = json.loads(run("hist", path, "px", "--bins", "9", "--json").stdout)
    counts, edges = np.histogram(px, bins=9)
    assert out["counts"] == counts.tolist() and out["path"] == "index"
    np.testing.assert_array_equal(np.array(out["edges"], "f4"), edges)
    out = json.loads(run("hist", path, "py", "--where", QUERY, "--bins", "5", "--json").stdout)
    py = np.concatenate([c["py"][hits(c)] for c in steps])
    assert out["counts"] == np.histogram(py, bins=5)[0].tolist()
    png = str(tmp_path / "p.png")
    text = run("plot", path, "px", "py", "--where", QUERY, "--png", png).stdout
    assert text.startswith(f"{sum(len(hits(c)) for c in steps):,} selected rows")
    assert os.path.getsize(png) > 0


def test_a_glob_of_files_gives_ids_per_member(sim, tmp_path):
    path, steps = sim
    other = str(tmp_path / "sim.h5")
    with h5py.File(path) as src, h5py.File(other, "w") as dst:
        for s in range(len(STEP_SIZES)):
            src.copy(f"Step#{s}", dst)
    out = json.loads(run("query", path, other, QUERY, "--ids", "--json").stdout)
    assert [(r["file"], r["step"]) for r in out["per_step"]] == [
        (f, s) for f in (path, other) for s in range(len(STEP_SIZES))
    ]
    assert [r["ids"] for r in out["per_step"]] == [hits(c).tolist() for c in steps] * 2


def test_a_variable_named_id_keeps_its_values_over_steps(tmp_path):
    path = str(tmp_path / "ids.h5")
    with h5py.File(path, "w") as f:
        for s in range(2):
            f[f"Step#{s}/e"] = np.array([1.0, 9.0, 8.0])
            f[f"Step#{s}/id"] = np.array([10, 20, 30]) + 100 * s
    rows = list(csv.reader(io.StringIO(run("query", path, "e > 5", "--values", "e,id").stdout)))
    assert rows[0] == ["quarry_file", "quarry_step", "quarry_row", "e", "id"]
    assert [r[1:3] + r[4:] for r in rows[1:]] == [
        ["0", "1", "20"],
        ["0", "2", "30"],
        ["1", "1", "120"],
        ["1", "2", "130"],
    ]
