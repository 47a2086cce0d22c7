"""One version number, from one place (the Cargo workspace), everywhere it shows."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib

import h5py
import numpy as np
import pytest

import quarry
from quarry.index.layout import read_manifest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _toml(name: str) -> dict:
    with open(os.path.join(ROOT, name), "rb") as f:
        return tomllib.load(f)


def test_the_version_is_the_cargo_workspaces_and_only_there():
    workspace = _toml("Cargo.toml")["workspace"]["package"]["version"]
    assert quarry.__version__ == workspace
    project = _toml("pyproject.toml")["project"]
    assert "version" not in project and project["dynamic"] == ["version"]
    for crate in ("quarry-core", "quarry-py"):
        package = _toml(f"crates/{crate}/Cargo.toml")["package"]
        assert package["version"] == {"workspace": True}


def test_the_changelog_starts_at_the_current_version():
    with open(os.path.join(ROOT, "CHANGELOG.md"), encoding="utf-8") as f:
        releases = re.findall(r"^## \[?(\d+\.\d+\.\d+)\]?", f.read(), re.MULTILINE)
    assert releases and releases[0] == quarry.__version__


def test_quarry_version_prints_it():
    out = subprocess.run(
        [sys.executable, "-m", "quarry.cli.main", "--version"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out == f"quarry {quarry.__version__}\n"


@pytest.fixture
def run_h5(tmp_path):
    path = str(tmp_path / "run.h5")
    rng = np.random.default_rng(17)
    with h5py.File(path, "w") as f:
        for step in range(2):
            f[f"Step#{step}/energy"] = rng.exponential(0.5, 3000)
            f[f"Step#{step}/id"] = np.arange(3000)
    return path


def test_an_index_records_the_version(run_h5):
    with quarry.open(run_h5) as ds:
        ds.build_index()
        _, manifest = read_manifest(ds.index_path)
    assert manifest.created_by == f"quarry {quarry.__version__}"


def _recorded(path: str) -> str:
    if path.endswith(".parquet"):
        pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed")
        return str(json.loads(pq.read_schema(path).metadata[b"quarry"])["quarry_version"])
    if path.endswith(".nc"):
        netcdf4 = pytest.importorskip("netCDF4", reason="netCDF4 is not installed")
        with netcdf4.Dataset(path) as ds:
            return str(ds.getncattr("quarry_version"))
    with h5py.File(path, "r") as f:
        return str(f.attrs["quarry_version"])


@pytest.mark.parametrize("ext", [".h5", ".nc", ".parquet"])
def test_every_extract_with_metadata_records_the_version(run_h5, tmp_path, ext):
    one = str(tmp_path / f"one{ext}")
    steps = str(tmp_path / f"steps{ext}")
    tracked = str(tmp_path / f"tracked{ext}")
    with quarry.open(run_h5) as ds:
        ds.query("energy > 1", path="Step#0").extract(one, ["energy"])
    with quarry.open_series(run_h5) as series:
        series.query("energy > 1").extract(steps, ["energy"])
        tracks = series.track("energy > 2", at_step=0, id_var="id", names=["energy"])
        tracks.write(tracked, [run_h5])
    for path in (one, steps, tracked):
        assert _recorded(path) == quarry.__version__, path
