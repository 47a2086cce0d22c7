"""Everyday details of the command: version, pipes, help, argument order,
name suggestions, exact integers, skipped builds, pictures' ticks and titles."""

from __future__ import annotations

import json
import os
import subprocess

import h5py
import numpy as np
import pytest

import quarry
from cli_run import QUARRY, run


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """Two steps of ``px`` (float) and ``id`` (int64 past 2**53), indexed."""
    path = str(tmp_path_factory.mktemp("details") / "sim.h5")
    rng = np.random.default_rng(11)
    with h5py.File(path, "w") as f:
        for step in range(2):
            f[f"Step#{step}/px"] = rng.normal(size=100_000)
            ids = np.arange(100_000, dtype=np.int64) + 2_000_003 + step
            ids[7] = 2**62 + 1  # float64 cannot hold it
            f[f"Step#{step}/id"] = ids
    run("index", path, "--quiet")
    return path


def test_version():
    assert run("--version").stdout == f"quarry {quarry.__version__}\n"


def test_a_reader_that_leaves_early_ends_the_command_quietly(sim):
    proc = subprocess.Popen(
        [*QUARRY, "query", sim, "px > -10", "--ids", "--path", "Step#0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().strip() == b"0"  # like head -1
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    # Python's documented convention for a closed pipe: quiet, status 1.
    assert proc.wait(timeout=120) == 1
    assert err == ""


def test_out_help_lists_every_format_each_output_takes():
    from quarry.outputs.writers import FORMATS

    text = " ".join(run("query", "--help").stdout.split())
    assert "--ids and --coords to .npy" in text
    values = text[text.index("--values to") :]
    assert all(ext in values for ext in FORMATS)


def test_swapped_arguments_are_explained(sim):
    err = run("query", "px > 1", sim, code=2).stderr
    assert err == f"quarry: error: the query comes after the file(s): quarry query {sim} 'px > 1'\n"


def test_a_wrong_case_name_suggests_the_right_one(sim):
    err = run("query", sim, "Px > 1", "--path", "Step#0", code=1).stderr
    assert "did you mean px" in err


def test_info_prints_integer_extremes_exactly(sim):
    out = run("info", sim).stdout
    line = next(x for x in out.splitlines() if "/Step#0/id" in x)
    with h5py.File(sim) as f:
        ids = f["Step#0/id"][()]
    assert f"min {ids.min()}  max {ids.max()}" in line  # 2000003 and 2**62 + 1
    assert "e+" not in line.split("mean")[0]


def test_an_up_to_date_index_is_skipped_unless_forced(sim):
    index = sim + ".qidx"
    before = os.stat(index).st_mtime_ns
    out = run("index", sim).stdout
    assert out == f"skipped {sim}: its index {index} is up to date (--force rebuilds it)\n"
    report = json.loads(run("index", sim, "--json").stdout)
    assert report["status"] == "up to date" and report["index"] == index
    assert os.stat(index).st_mtime_ns == before
    assert run("index", sim, "--force", "--quiet").stdout.startswith("indexed 4 variable(s)")
    assert os.stat(index).st_mtime_ns != before
    # other options than the index's: rebuilt
    assert run("index", sim, "--bins", "64", "--quiet").stdout.startswith("indexed")


def test_the_per_step_plot_has_whole_step_ticks(monkeypatch, tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib.figure

    from quarry.outputs.plots import draw_counts

    ticks = []

    def keep_ticks(fig, path, *args, **kwargs):
        ticks.extend(fig.axes[0].get_xticks().tolist())

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep_ticks)
    for steps in (3, 200):
        ticks.clear()
        records = [{"file": "a.h5", "step": s, "count": s % 7} for s in range(steps)]
        draw_counts(records, str(tmp_path / "c.png"), "x > 1")
        assert ticks and all(float(t).is_integer() for t in ticks), ticks


def test_hist_with_path_names_the_step(sim, tmp_path):
    pytest.importorskip("matplotlib")
    png = str(tmp_path / "h.png")
    out = run("hist", sim, "px", "--path", "Step#1", "--png", png).stdout
    assert out.startswith("histogram of /Step#1/px (100000 rows)")
