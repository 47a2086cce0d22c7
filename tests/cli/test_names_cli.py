"""--path on the commands that take names, and info --resolve."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
from test_cli import run


@pytest.fixture(scope="module")
def steps_h5(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("names") / "steps.h5")
    rng = np.random.default_rng(5)
    with h5py.File(path, "w") as f:
        for s in range(2):
            f[f"Step#{s}/x"] = rng.uniform(0, 10, 300).astype("f4")
            f[f"Step#{s}/energy"] = rng.exponential(1.0, 300)
        f["Step#1/sub/y"] = np.arange(300, dtype="i4")
    run("index", path, "--block-size", "64", "--vars", "/Step#0/x,/Step#1/x")
    return path


def column(path, name):
    with h5py.File(path) as f:
        return f[name][()]


def test_query_with_path(steps_h5):
    x = column(steps_h5, "Step#1/x")
    out = json.loads(run("query", steps_h5, "x > 5", "--path", "Step#1", "--json").stdout)
    assert out["count"] == int((x > 5).sum())
    ids = json.loads(
        run("query", steps_h5, "x > 5", "--path", "/Step#1", "--ids", "--json").stdout
    )["ids"]
    assert ids == np.flatnonzero(x > 5).tolist()


def test_hist_and_plot_with_path(steps_h5, tmp_path):
    e, x = column(steps_h5, "Step#0/energy"), column(steps_h5, "Step#0/x")
    out = json.loads(
        run(
            "hist",
            steps_h5,
            "energy",
            "--where",
            "x < 5",
            "--edges",
            "0,1,20",
            "--path",
            "Step#0",
            "--json",
        ).stdout
    )
    assert out["counts"] == np.histogram(e[x < 5], bins=[0, 1, 20])[0].tolist()
    png = str(tmp_path / "o.png")
    run("plot", steps_h5, "x", "energy", "--where", "x < 5", "--path", "Step#0", "--png", png)
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_a_glob_path_that_names_several_steps_counts_them_all(steps_h5):
    want = sum(int((column(steps_h5, f"Step#{s}/x") > 5).sum()) for s in (0, 1))
    assert run("query", steps_h5, "x > 5", "--path", "Step#*").stdout.strip() == str(want)


def test_info_resolve(steps_h5):
    line = run("info", steps_h5, "--resolve", "x", "--path", "Step#1").stdout.strip()
    assert line == "x under Step#1 -> /Step#1/x  (300,)  float32  indexed"
    line = run("info", steps_h5, "--resolve", "y").stdout.strip()
    assert line == "y -> /Step#1/sub/y  (300,)  int32  not indexed"
    got = json.loads(
        run("info", steps_h5, "--resolve", "energy", "--path", "Step#0", "--json").stdout
    )
    assert got == {
        "name": "energy",
        "path": "Step#0",
        "variable": "/Step#0/energy",
        "shape": [300],
        "dtype": "float64",
        "indexed": False,
        "index": "ok",
    }


def test_a_spelling_in_backticks_means_in_info_what_it_means_in_a_query(tmp_path):
    """The spelling an ambiguity offers (`` `ga/my var` ``) resolves the same
    in `quarry info --resolve` as in a query."""
    path = str(tmp_path / "amb.h5")
    with h5py.File(path, "w") as f:
        f["ga/my var"], f["gb/my var"] = np.arange(4.0), np.arange(4.0) * 2
    err = run("query", path, "`my var` > 1", code=1).stderr
    assert "/ga/my var (write `ga/my var`)" in err
    line = run("info", path, "--resolve", "`ga/my var`").stdout.strip()
    assert line == "`ga/my var` -> /ga/my var  (4,)  float64  not indexed"
    assert run("query", path, "`ga/my var` > 1").stdout.strip() == "2"


def test_a_backtick_in_a_name_is_written_twice_in_backticks(tmp_path):
    """README: backticks hold anything else; a name holding a backtick had no
    spelling at all. Two backticks stand for one, as SQL doubles a quote, and the
    spelling an ambiguity offers is written so."""
    path = str(tmp_path / "tick.h5")
    with h5py.File(path, "w") as f:
        f["ga/a`b"], f["gb/a`b"] = np.arange(10.0), np.arange(10.0) * 2
    assert run("query", path, "`ga/a``b` > 5").stdout.strip() == "4"
    err = run("query", path, "`a``b` > 5", code=1).stderr
    assert "/ga/a`b (write `ga/a``b`)" in err, err
    assert run("query", path, "`gb/a``b` > 5").stdout.strip() == str(
        int((np.arange(10) * 2 > 5).sum())
    )


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["x"], ["matches 2 variables", "/Step#0/x", "/Step#1/x"]),
        (["enrgy", "--path", "Step#0"], ["no variable 'enrgy'", "under path 'Step#0'", "energy"]),
        (["x", "--path", "Step#9"], ["no group matches path 'Step#9'", "Step#0"]),
    ],
)
def test_info_resolve_errors(steps_h5, args, words):
    err = run("info", steps_h5, "--resolve", *args, code=1).stderr
    assert all(w in err for w in words), err
    assert err.count("\n") == 1


def test_info_with_path_lists_only_that_group(steps_h5):
    info = json.loads(run("info", steps_h5, "--path", "Step#1", "--json").stdout)
    assert [v["path"] for v in info["variables"]] == [
        "/Step#1/energy",
        "/Step#1/sub/y",
        "/Step#1/x",
    ]


@pytest.fixture(scope="module")
def openpmd_like(tmp_path_factory):
    """Warp's layout: a field component and two records' components all named x."""
    path = str(tmp_path_factory.mktemp("pmd") / "data00000100.h5")
    rng = np.random.default_rng(3)
    with h5py.File(path, "w") as f:
        f["data/100/fields/E/x"] = rng.normal(0, 1, (4, 5, 6))
        for record in ("position", "momentum"):
            f[f"data/100/particles/electrons/{record}/x"] = rng.normal(0, 1, 120)
    return path


def test_a_bare_name_in_unrelated_subtrees_is_an_error_naming_each_spelling(openpmd_like):
    err = run("query", openpmd_like, "x > 0", "--count", code=1).stderr
    assert "'x' matches 3 variables in separate groups" in err
    assert "/data/100/fields/E/x (write E.x)" in err
    assert "/data/100/particles/electrons/position/x (write position.x)" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_json_says_where_each_name_resolved(openpmd_like):
    x = column(openpmd_like, "data/100/particles/electrons/position/x")
    out = json.loads(
        run("query", openpmd_like, "position.x > 0.5 && momentum.x < 9", "--json").stdout
    )
    assert out["resolved"] == {
        "position.x": "/data/100/particles/electrons/position/x",
        "momentum.x": "/data/100/particles/electrons/momentum/x",
    }
    assert out["count"] == int((x > 0.5).sum())
    info = json.loads(run("info", openpmd_like, "--resolve", "E.x", "--json").stdout)
    assert info["variable"] == "/data/100/fields/E/x"


def test_hist_with_a_path_held_by_every_step_bins_them_all(tmp_path):
    """--path electrons names a group in every step: query and plot took it,
    hist failed on its title (the names resolved once more, as one variable)."""
    path = str(tmp_path / "s.h5")
    with h5py.File(path, "w") as f:
        for s in range(3):
            f[f"Step#{s}/electrons/x"] = np.arange(10.0) + s
            f[f"Step#{s}/ions/x"] = -np.arange(4.0)
    electrons = np.concatenate([np.arange(10.0) + s for s in range(3)])
    for args in (["x", "--path", "electrons"], ["electrons.x", "--path", "Step#*"]):
        doc = json.loads(run("hist", path, *args, "--bins", "2", "--json").stdout)
        counts, edges = np.histogram(electrons, bins=2)
        assert doc["counts"] == counts.tolist() and doc["edges"] == edges.tolist()
    png = tmp_path / "h.png"
    run("hist", path, "x", "--path", "electrons", "--png", str(png))
    assert png.stat().st_size > 0


def test_the_hint_of_an_ambiguous_name_over_nested_steps_works_as_written(tmp_path):
    """A name in every step group suggests how to ask every step. With the
    groups nested (data/0, as openPMD's without its attributes), --per-step
    alone finds no steps: it suggested itself again."""
    import shlex

    path = str(tmp_path / "s.h5")
    with h5py.File(path, "w") as f:
        for s in range(3):
            f[f"data/{s}/e/x"] = np.arange(10.0) + s
    failed = run("query", path, "e.x > 6", "--per-step", code=1)
    hint = failed.stderr.rsplit("or ask every step with ", 1)[1].strip()
    doc = json.loads(run("query", path, "e.x > 6", *shlex.split(hint), "--json").stdout)
    assert [s["count"] for s in doc["per_step"]] == [3, 4, 5]
