"""The CLI over many files and steps: --per-step JSON, --plot, index per file."""

from __future__ import annotations

import json
import os

import h5py
import numpy as np
import pytest
from test_cli import run

STEPS = (0, 2, 10)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("runs")
    rng = np.random.default_rng(12)
    truth = {}
    for k in (1, 2, 10):
        path = str(d / f"run_{k}.h5")
        with h5py.File(path, "w") as f:
            for s in STEPS:
                n = 199 - k - s
                e = rng.exponential(1.0, n)
                f[f"Step#{s}/energy"] = e
                f[f"Step#{s}/x"] = rng.normal(size=n)
                truth[(path, s)] = e
    out = run("index", *sorted(truth_files(truth)), "--block-size", "64").stdout
    assert out.count("indexed 6 variable(s)") == 3
    return str(d), truth


def truth_files(truth):
    return {f for f, _ in truth}


def ordered(truth):
    return sorted(truth, key=lambda fs: (int(os.path.basename(fs[0])[4:-3]), fs[1]))


def test_per_step_json_shape(runs):
    _, truth = runs
    files = sorted(truth_files(truth))  # the shell's order: run_1, run_10, run_2
    out = json.loads(run("query", *files, "energy > 1.2", "--per-step").stdout)
    assert list(out) == ["count", "per_step"]
    want = [
        {"file": f, "step": s, "count": int((truth[(f, s)] > 1.2).sum())} for f, s in ordered(truth)
    ]
    assert out["per_step"] == want
    assert all(list(r) == ["file", "step", "count"] for r in out["per_step"])
    assert out["count"] == sum(r["count"] for r in want)


def test_a_quoted_glob_and_a_directory(runs):
    d, truth = runs
    total = sum(int((e > 1.2).sum()) for e in truth.values())
    assert run("query", os.path.join(d, "run_*.h5"), "energy > 1.2").stdout.strip() == str(total)
    out = json.loads(run("query", d, "energy > 1.2", "--json").stdout)
    assert out["count"] == total and out["members"] == 9
    assert [os.path.basename(f) for f in out["files"]] == ["run_1.h5", "run_2.h5", "run_10.h5"]


def test_one_file_per_step_with_and_without_a_path(runs):
    d, truth = runs
    one = os.path.join(d, "run_2.h5")
    out = json.loads(run("query", one, "energy > 1", "--per-step").stdout)
    assert [r["step"] for r in out["per_step"]] == list(STEPS)
    assert out["count"] == sum(int((truth[(one, s)] > 1).sum()) for s in STEPS)
    out = json.loads(run("query", one, "energy > 1", "--per-step", "--path", "Step#1*").stdout)
    assert out == {
        "count": int((truth[(one, 10)] > 1).sum()),
        "per_step": [{"file": one, "step": 10, "count": int((truth[(one, 10)] > 1).sum())}],
    }
    # README: --json reports what each name resolved to, with --per-step too
    out = json.loads(run("query", one, "energy > 1", "--per-step", "--json").stdout)
    assert out["resolved"] == {"energy": [f"/Step#{s}/energy" for s in STEPS]}
    # without --per-step the same steps give the total
    total = sum(int((truth[(one, s)] > 1).sum()) for s in STEPS)
    assert run("query", one, "energy > 1").stdout.strip() == str(total)


def test_a_file_without_steps_has_a_null_step(tmp_path):
    path = str(tmp_path / "flat.h5")
    with h5py.File(path, "w") as f:
        f["v"] = np.arange(50.0)
    out = json.loads(run("query", path, "v >= 45", "--per-step").stdout)
    assert out == {"count": 5, "per_step": [{"file": path, "step": None, "count": 5}]}
    assert run("query", path, "v >= 45").stdout.strip() == "5"


def test_plot_counts_per_step(runs, tmp_path):
    import matplotlib.image

    d, _ = runs
    png = str(tmp_path / "counts.png")
    out = run("query", os.path.join(d, "run_*.h5"), "energy > 1.2", "--plot", png).stdout
    assert out.strip().endswith(f"-> {png}")
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert matplotlib.image.imread(png).shape == (480, 640, 4)
    out = json.loads(
        run(
            "query", os.path.join(d, "run_1.h5"), "energy > 1.2", "--plot", png, "--per-step"
        ).stdout
    )
    assert len(out["per_step"]) == 3
    err = run("query", d, "energy > 1", "--plot", str(tmp_path / "c.gif"), code=2).stderr
    assert ".png or .svg" in err


def test_errors_name_the_file_and_step(runs):
    d, _ = runs
    err = run("query", d, "enrgy > 1", "--per-step", code=1).stderr
    assert "run_1.h5, step 0: no variable 'enrgy'" in err and "energy" in err
    assert err.count("\n") == 1
    err = run("query", d, "energy > > 1", code=2).stderr
    assert "energy > > 1" in err and "^" in err
    err = run("query", d, "energy > 1", "--ids", "--save", "s.qsel", code=2).stderr
    assert "--save keeps the rows of one table" in err and "--path Step#N" in err
    err = run("query", os.path.join(d, "nothing_*.h5"), "energy > 1", code=1).stderr
    assert "no files match" in err
    err = run("query", os.path.join(d, "run_1.h5"), code=2).stderr
    assert "give the data file(s) and then a query" in err


def test_index_many_files_skips_up_to_date_ones(tmp_path):
    rng = np.random.default_rng(3)
    for k in (1, 2):
        with h5py.File(tmp_path / f"run_{k}.h5", "w") as f:
            f["Step#0/x"] = rng.normal(size=100)
    idx = str(tmp_path / "ix")
    pattern = str(tmp_path / "run_*.h5")
    out = json.loads(run("index", pattern, "--index", idx, "--block-size", "32", "--json").stdout)
    assert [r["status"] for r in out["indexes"]] == ["built", "built"]
    assert out["built"] == 2 and out["up_to_date"] == 0
    assert sorted(os.listdir(idx)) == ["run_1.h5.qidx", "run_2.h5.qidx"]
    with h5py.File(tmp_path / "run_3.h5", "w") as f:
        f["Step#0/x"] = rng.normal(size=100)
    out = run("index", pattern, "--index", idx, "--block-size", "32").stdout
    assert "skipped " + str(tmp_path / "run_1.h5") in out and "up to date" in out
    assert "indexed 1 variable(s) of " + str(tmp_path / "run_3.h5") in out
    assert out.strip().endswith("3 file(s): 1 indexed, 2 up to date")
    out = json.loads(run("index", pattern, "--index", idx, "--force", "--json").stdout)
    assert out["built"] == 3
    got = json.loads(run("query", pattern, "x > 0", "--index", idx, "--per-step").stdout)
    assert [r["step"] for r in got["per_step"]] == [0, 0, 0]


def test_index_many_files_with_a_derived_variable(tmp_path):
    rng = np.random.default_rng(4)
    xs = {}
    for k in (1, 2):
        xs[k] = rng.normal(size=90)
        with h5py.File(tmp_path / f"run_{k}.h5", "w") as f:
            f["Step#0/x"] = xs[k]
    pattern = str(tmp_path / "run_*.h5")
    out = json.loads(run("index", pattern, "--derive", "a=abs(x)", "--json").stdout)
    assert all("/Step#0/a" in r["variables"] for r in out["indexes"])
    got = json.loads(run("query", pattern, "a > 1", "--per-step").stdout)
    assert [r["count"] for r in got["per_step"]] == [int((np.abs(xs[k]) > 1).sum()) for k in (1, 2)]


def test_extract_one_group_per_step(runs, tmp_path):
    d, truth = runs
    out = str(tmp_path / "hot.h5")
    text = run(
        "query", os.path.join(d, "run_*.h5"), "energy > 2", "--values", "energy,x", "--out", out
    ).stdout
    assert text.strip().endswith(f"-> {out}")
    with h5py.File(out) as f:
        assert f.attrs["query"] == "energy > 2" and "source2_crc32" in f.attrs
        for path, step in ordered(truth):
            g = f[f"{os.path.basename(path)}/Step#{step}"]
            e = truth[(path, step)]
            np.testing.assert_array_equal(g["quarry_row"][()], np.flatnonzero(e > 2))
            np.testing.assert_array_equal(g["energy"][()], e[e > 2])
            assert g.attrs["step"] == step and g.attrs["file"] == path
    err = run(
        "query", d, "energy > 1", "--values", "x", "--out", str(tmp_path / "a.csv"), code=2
    ).stderr
    assert "one group per step" in err


def test_extract_steps_to_netcdf_groups_and_a_parquet_table(runs, tmp_path):
    import netCDF4
    import pyarrow.parquet

    d, truth = runs
    pattern = os.path.join(d, "run_*.h5")
    nc, pq = str(tmp_path / "hot.nc"), str(tmp_path / "hot.parquet")
    for out in (nc, pq):
        run("query", pattern, "energy > 2", "--values", "energy,x", "--out", out)
    table = pyarrow.parquet.read_table(pq)
    meta = json.loads(table.schema.metadata[b"quarry"])
    assert meta["query"] == "energy > 2" and "source2_crc32" in meta
    with netCDF4.Dataset(nc) as ds:
        assert ds.getncattr("query") == "energy > 2"
        for path, step in ordered(truth):
            e = truth[(path, step)]
            g = ds[os.path.basename(path)][f"Step#{step}"]
            np.testing.assert_array_equal(g["quarry_row"][:], np.flatnonzero(e > 2))
            np.testing.assert_array_equal(g["energy"][:], e[e > 2])
            assert g.getncattr("step") == step and g.getncattr("file") == path
            rows = table.filter(
                (table["quarry_file"].to_numpy(zero_copy_only=False) == path)
                & (table["quarry_step"].to_numpy() == step)
            )
            np.testing.assert_array_equal(rows["quarry_row"].to_numpy(), np.flatnonzero(e > 2))
            np.testing.assert_array_equal(rows["energy"].to_numpy(), e[e > 2])
    assert table.num_rows == sum(int((e > 2).sum()) for e in truth.values())


@pytest.mark.parametrize("per_step", [False, True])
def test_json_over_steps_lists_each_members_aggregates(tmp_path, per_step):
    """The README: '--json lists each value and which path gave it'; over a
    file's steps the JSON had no aggregates at all."""
    path = str(tmp_path / "e.h5")
    rng = np.random.default_rng(2)
    steps = [rng.random(40) * 2, rng.random(30) * 3]
    with h5py.File(path, "w") as f:
        for k, values in enumerate(steps):
            f[f"Step#{k}/energy"] = values
    more = ["--per-step"] if per_step else []
    doc = json.loads(run("query", path, "energy > mean(energy)", "--json", *more).stdout)
    listed = [(a["file"], a["step"], a["expr"], a["from"]) for a in doc["aggregates"]]
    assert listed == [(path, k, f"mean(/Step#{k}/energy)", "data") for k in (0, 1)]
    assert [a["value"] for a in doc["aggregates"]] == pytest.approx([v.mean() for v in steps])
    assert doc["count"] == sum(int((v > v.mean()).sum()) for v in steps)
