"""Saved selections come back with the same rows, and refuse a changed source."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

import quarry


@pytest.fixture
def data(tmp_path):
    path = str(tmp_path / "d.h5")
    rng = np.random.default_rng(6)
    cols = {"e": rng.exponential(1.0, (30, 40)), "x": rng.uniform(0, 1, (30, 40))}
    with h5py.File(path, "w") as f:
        for k, v in cols.items():
            f[k] = v
    return path, cols


@pytest.mark.parametrize("indexed", [False, True])
def test_save_load_fetch_more_variables(data, tmp_path, indexed):
    path, cols = data
    saved = str(tmp_path / "hot.qsel")
    with quarry.open(path) as ds:
        if indexed:
            ds.build_index(block_len=77)
        sel = ds.query("e > 2")
        sel.save(saved)
        ids = sel.ids()
    with quarry.open(path) as ds:
        again = ds.load_selection(saved)
        assert again.query == "e > 2" and again.count() == len(ids)
        np.testing.assert_array_equal(again.ids(), ids)
        np.testing.assert_array_equal(again.values("x"), cols["x"].reshape(-1)[ids])
        np.testing.assert_array_equal(again.coords(), np.argwhere(cols["e"] > 2))


def test_changed_source_or_damaged_file_is_refused(data, tmp_path):
    path, _ = data
    saved = tmp_path / "s.qsel"
    with quarry.open(path) as ds:
        ds.query("e > 1").save(str(saved))
    good = saved.read_bytes()
    saved.write_bytes(good[:-3])
    with quarry.open(path) as ds, pytest.raises(quarry.SelectionFileError, match="damaged"):
        ds.load_selection(str(saved))
    Path(tmp_path / "other.qsel").write_bytes(b"hello")
    with quarry.open(path) as ds, pytest.raises(quarry.SelectionFileError, match="not a saved"):
        ds.load_selection(str(tmp_path / "other.qsel"))
    saved.write_bytes(good)
    with h5py.File(path, "r+") as f:
        f["e"][0, 0] = 99.0
    with quarry.open(path) as ds, pytest.raises(quarry.StaleSelectionError, match="e > 1"):
        ds.load_selection(str(saved))


def test_a_selection_loaded_with_another_file_says_so_and_a_moved_file_still_loads(data, tmp_path):
    """A copy of the file (or another run) was said to have 'changed since the
    selection was saved'. A file moved (same inode) is the same file."""
    import shutil

    path, _ = data
    saved = str(tmp_path / "s.qsel")
    with quarry.open(path) as ds:
        sel = ds.query("e > 1")
        sel.save(saved)
        want = sel.ids().tolist()
    other = str(tmp_path / "copy.h5")
    shutil.copy2(path, other)
    with quarry.open(other) as ds, pytest.raises(quarry.StaleSelectionError) as refused:
        ds.load_selection(saved)
    assert str(refused.value).startswith(f"the selection in {saved} was saved from {path}, not")
    moved = str(tmp_path / "moved.h5")
    Path(path).rename(moved)
    with quarry.open(moved) as ds:
        assert ds.load_selection(saved).ids().tolist() == want


def test_cli_save(data, tmp_path):
    path, cols = data
    saved = str(tmp_path / "c.qsel")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "quarry.cli.main",
            "query",
            path,
            "e > 2",
            "--json",
            "--save",
            saved,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(out)["saved"] == saved
    with quarry.open(path) as ds:
        assert ds.load_selection(saved).count() == int((cols["e"] > 2).sum())


def test_loaded_selection_after_the_index_is_rebuilt_with_other_blocks(data, tmp_path):
    path, cols = data
    saved = str(tmp_path / "r.qsel")
    with quarry.open(path) as ds:
        ds.build_index()
        ds.query("e > 2").save(saved)
        ds.build_index(block_len=4)
    with quarry.open(path) as ds:
        again = ds.load_selection(saved)
        counts, _ = again.histogram("x", bins=[0, 0.5, 1])
        picked = cols["x"][cols["e"] > 2]
        assert counts.tolist() == np.histogram(picked, bins=[0, 0.5, 1])[0].tolist()


def test_cli_load_fetches_values_in_the_saved_context(tmp_path, capsys):
    from quarry.cli.main import main

    path = str(tmp_path / "steps.h5")
    rng = np.random.default_rng(3)
    steps = {s: (rng.exponential(1.0, 777), rng.normal(0, 1, 777)) for s in range(2)}
    with h5py.File(path, "w") as f:
        for s, (e, x) in steps.items():
            f[f"Step#{s}/e"], f[f"Step#{s}/x"] = e, x
    saved = str(tmp_path / "hot.qsel")
    assert main(["query", path, "e > 2", "--path", "Step#1", "--save", saved]) == 0
    capsys.readouterr()
    assert main(["query", path, "--load", saved, "--values", "x,e", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    e, x = steps[1]
    hits = np.flatnonzero(e > 2)
    assert got["query"] == "e > 2" and got["count"] == len(hits)
    np.testing.assert_array_equal(got["values"]["x"], x[hits])
    np.testing.assert_array_equal(got["values"]["e"], e[hits])
    out = str(tmp_path / "hot.h5")
    assert main(["query", path, "--load", saved, "--values", "x", "--out", out]) == 0
    with h5py.File(out) as f:
        np.testing.assert_array_equal(f["x"][()], x[hits])
    assert main(["query", path, path, "--load", saved, "--ids"]) == 2
    assert "--load takes one file" in capsys.readouterr().err
    with h5py.File(path, "r+") as f:
        f["Step#0/e"][0] = 5.0
    assert main(["query", path, "--load", saved, "--ids"]) == 1
    assert "has changed since the selection" in capsys.readouterr().err
