"""The renderers of quarry.cli.render give, from library results, exactly the
JSON the command prints (so another front end prints the same), and the
count path imports no more than it needs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest

import quarry
from quarry.cli import render

QUARRY = [sys.executable, "-m", "quarry.cli.main"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Random float32 and int64 columns with NaNs, a size no block divides."""
    path = str(tmp_path_factory.mktemp("render") / "run.h5")
    rng = np.random.default_rng(19)
    energy = rng.exponential(0.5, 7_919).astype("f4")
    energy[rng.integers(0, energy.size, 40)] = np.nan
    with h5py.File(path, "w") as f:
        f["energy"] = energy
        f["n"] = rng.integers(-50, 50, energy.size)
    subprocess.run([*QUARRY, "index", path, "--block-size", "1000"], check=True)
    return path, {"energy": energy, "n": f_read(path, "n")}


def f_read(path, name):
    with h5py.File(path) as f:
        return f[name][()]


def cli_json(*args):
    done = subprocess.run([*QUARRY, *args, "--json"], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def without_time(result):
    return {k: v for k, v in result.items() if k != "elapsed_ms"}


@pytest.mark.parametrize("query", ["energy > 1.3", "n < -20 && energy <= 0.2", "!(energy > 1)"])
def test_count_result_is_what_the_command_prints(data, query):
    path, columns = data
    with np.errstate(invalid="ignore"):
        expected = {
            "energy > 1.3": columns["energy"] > 1.3,
            "n < -20 && energy <= 0.2": (columns["n"] < -20) & (columns["energy"] <= 0.2),
            "!(energy > 1)": columns["energy"] <= 1,  # NaN: unknown, never returned
        }[query]
    with quarry.open(path) as ds:
        sel = ds.query(query)
        rendered = render.query_result(sel, query, path, sel.count(), 0.0)
    printed = cli_json("query", path, query)
    assert without_time(printed) == without_time(rendered)
    assert printed["count"] == int(expected.sum())


def test_hits_and_series_results_are_what_the_command_prints(data, tmp_path):
    path, columns = data
    query = "n >= 45"
    with quarry.open(path) as ds:
        sel = ds.query(query)
        ids = sel.ids()
        rendered = render.query_result(sel, query, path, len(ids), 0.0, hits={"ids": ids.tolist()})
    assert without_time(cli_json("query", path, query, "--ids")) == without_time(rendered)
    assert rendered["ids"] == np.flatnonzero(columns["n"] >= 45).tolist()
    other = str(tmp_path / "copy.h5")
    shutil.copyfile(path, other)  # unindexed: scanned
    with quarry.open_series([path, other]) as series:
        answer = series.query(query)
        per_step = answer.per_step()
        rendered = render.series_result(query, answer, per_step, 0.0)
    printed = cli_json("query", path, other, query)
    assert without_time(printed) == without_time(rendered)
    assert printed["count"] == 2 * int((columns["n"] >= 45).sum())


def test_histogram_and_info_results_are_what_the_command_prints(data):
    path, columns = data
    with quarry.open(path) as ds:
        hist = ds.histogram("n", where="energy > 0.5", bins=7)
        info = render.info_result(ds.info(), None)
    printed = cli_json("hist", path, "n", "--where", "energy > 0.5", "--bins", "7")
    assert printed == render.histogram_result(["n"], "energy > 0.5", hist)
    with np.errstate(invalid="ignore"):
        counts, _ = np.histogram(columns["n"][columns["energy"] > 0.5], bins=7)
    assert printed["counts"] == counts.tolist()
    assert cli_json("info", path) == info


def test_a_count_imports_no_command_it_does_not_run(data):
    """A count's process imports neither plotting, tables, other formats'
    libraries nor the CLI's series, batch and progress-bar code, nor the
    modules of other commands."""
    path, _ = data
    script = (
        "import sys\n"
        "from quarry.cli.main import main\n"
        f"code = main(['query', {path!r}, 'energy > 1.3', '--count'])\n"
        "print(sorted(sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    loaded = set(eval(done.stdout.splitlines()[-1]))
    heavy = {
        "matplotlib",
        "pandas",
        "pyarrow",
        "netCDF4",
        "zarr",
        "tqdm",
        "quarry.batch",
        "quarry.outputs.plots",
        "quarry.cli.commands.query_series",
        *(f"quarry.cli.commands.{c}" for c in ("index", "hist", "plot", "info", "demo")),
    }
    assert loaded & heavy == set()
