"""README: quarry hist takes a data set of many files (a glob, a list, a
directory), as query, track and index do, with edges shared by the files and
counts summed; it took one file ("no such file: run_*.h5")."""

from __future__ import annotations

import json
import subprocess
import sys

import h5py
import numpy as np
import pytest


@pytest.mark.parametrize("how", ["glob", "list", "directory"])
def test_hist_over_many_files_matches_numpy(tmp_path, how):
    rng = np.random.default_rng(len(how))
    runs = [rng.normal(0, 1, n) for n in (1000, 1, 777)]
    runs[2][::5] = np.nan
    all_w = [rng.integers(0, 5, len(e)) for e in runs]
    for k, (e, w) in enumerate(zip(runs, all_w, strict=True)):
        with h5py.File(tmp_path / f"run_{k}.h5", "w") as f:
            f["e"], f["w"] = e, w
    given = {
        "glob": [str(tmp_path / "run_*.h5")],
        "list": [str(tmp_path / f"run_{k}.h5") for k in range(3)],
        "directory": [str(tmp_path)],
    }[how]
    cli = [sys.executable, "-m", "quarry.cli.main", "hist", *given, "e", "--json"]
    for extra, weights in (([], None), (["--weight", "w", "--where", "e > -1"], "w")):
        run = subprocess.run([*cli, "--bins", "7", *extra], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        got = json.loads(run.stdout)
        e = np.concatenate(runs)
        keep = ~np.isnan(e) & ((e > -1) if weights else True)
        w = np.concatenate(all_w)[keep] if weights else None
        counts, edges = np.histogram(e[keep], bins=7, weights=w)
        assert got["counts"] == counts.astype(np.int64).tolist()
        np.testing.assert_array_equal(got["edges"], edges)


def test_one_file_whose_name_looks_like_many_is_one_file(tmp_path):
    """A Zarr store is a directory and ``run[1].h5`` has glob characters: hist
    took either as a series of one file, where a root variable beside step
    groups counted once per step."""
    zarr = pytest.importorskip("zarr", reason="zarr is not installed")
    rng = np.random.default_rng(3)
    mass = rng.normal(0, 1, 101)
    h5 = tmp_path / "run[1].h5"
    with h5py.File(h5, "w") as f:
        f["mass"] = mass
        for step in range(3):
            f[f"Step#{step}/e"] = rng.normal(size=10)
    store = zarr.open_group(str(tmp_path / "run.zarr"), mode="w")
    store.create_array("mass", data=mass)
    for step in range(3):
        store.create_array(f"Step#{step}/e", data=rng.normal(size=10))
    counts, edges = np.histogram(mass, bins=5)
    for given in (h5, tmp_path / "run.zarr"):
        cli = [sys.executable, "-m", "quarry.cli.main", "hist", str(given), "mass", "--bins", "5"]
        run = subprocess.run([*cli, "--json"], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["counts"] == counts.tolist(), given
        np.testing.assert_array_equal(json.loads(run.stdout)["edges"], edges)
