"""README: a variable of fewer than 16 x 1024 rows gets one equal-weight bin per 16
rows, so a small step's index is not many times its data."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

import quarry


@pytest.mark.parametrize(("rows", "bins"), [(2_000, 125), (20_000, 1024), (17, 1)])
def test_a_small_variable_gets_a_bin_per_16_rows(tmp_path, rows, bins):
    path = str(tmp_path / "s.h5")
    values = np.random.default_rng(rows).uniform(0, 300, rows)
    with h5py.File(path, "w") as f:
        f["x"] = values
    with quarry.open(path) as ds:
        ds.build_index(precision=0)  # the equal-weight bins alone
        # Answers stay exact: every range end between edges is checked.
        for cut in (0.5, 17.3, 150.01, 299.9):
            assert ds.query(f"x > {cut}").count() == int(np.count_nonzero(values > cut))
    run = subprocess.run(
        [sys.executable, "-m", "quarry.cli.main", "info", path, "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    (variable,) = json.loads(run.stdout)["variables"]
    assert variable["bins"] == bins


def test_many_small_steps_index_to_a_few_times_their_bytes(tmp_path):
    """720 steps of 2,000 made an index of 10.9 times their bytes at one
    bin per 1 or 2 rows; with decimal edges (the default) it is now 3.5."""
    path = str(tmp_path / "steps.h5")
    rng = np.random.default_rng(3)
    with h5py.File(path, "w") as f:
        for step in range(40):
            f[f"Step#{step}/x"] = rng.uniform(0, 300, 2_000).astype("f4")
    with quarry.open(path) as ds:
        ds.build_index()
    assert os.path.getsize(path + ".qidx") < 5 * 40 * 2_000 * 4
