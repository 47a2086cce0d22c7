"""Extracted files reopen as normal files and equal the selection."""

from __future__ import annotations

import json
import zlib

import h5py
import numpy as np
import pytest

import quarry

netcdf4 = pytest.importorskip("netCDF4", reason="netCDF4 is not installed")
pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed")


@pytest.fixture
def run_h5(tmp_path):
    path = str(tmp_path / "run.h5")
    rng = np.random.default_rng(8)
    with h5py.File(path, "w") as f:
        f["Step#0/energy"] = rng.exponential(0.5, (40, 25)).astype("f4")
        f["Step#0/x"] = rng.uniform(0, 200, (40, 25))
    return path


@pytest.mark.parametrize("ext", [".h5", ".nc", ".parquet"])
def test_extract_reopens_and_records_provenance(run_h5, tmp_path, ext):
    out = str(tmp_path / f"sel{ext}")
    with h5py.File(run_h5) as f:
        energy, x = f["Step#0/energy"][()], f["Step#0/x"][()]
    mask = energy > 1.0
    with quarry.open(run_h5) as ds:
        ds.build_index()
        ds.query("energy > 1.0").extract(out, ["energy", "/Step#0/x"])
    names = ("quarry_row", "quarry_index_0", "quarry_index_1", "energy", "x")
    if ext == ".h5":
        with h5py.File(out) as f:
            got = {k: f[k][()] for k in names}
            meta = dict(f.attrs)
    elif ext == ".nc":
        with netcdf4.Dataset(out) as ds:
            got = {k: ds[k][:].data for k in names}
            meta = {k: ds.getncattr(k) for k in ds.ncattrs()}
    else:
        table = pq.read_table(out)
        assert table.column_names == list(names)
        got = {k: table[k].to_numpy() for k in names}
        meta = json.loads(table.schema.metadata[b"quarry"])
    np.testing.assert_array_equal(got["quarry_row"], np.flatnonzero(mask))
    np.testing.assert_array_equal(got["quarry_index_0"], np.nonzero(mask)[0])
    np.testing.assert_array_equal(got["quarry_index_1"], np.nonzero(mask)[1])
    np.testing.assert_array_equal(got["energy"], energy[mask])
    np.testing.assert_array_equal(got["x"], x[mask])
    with open(run_h5, "rb") as f:
        assert int(meta["source_crc32"]) == zlib.crc32(f.read())
    assert meta["query"] == "energy > 1.0" and meta["quarry_version"]


def test_a_variable_named_id_keeps_its_name_and_values(tmp_path):
    path = str(tmp_path / "ids.h5")
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(10.0)
        f["id"] = np.arange(10) * 1000 + 7
    with quarry.open(path) as ds:
        cols = ds.query("x > 6").columns(["id", "x"])
    assert list(cols) == ["quarry_row", "quarry_index_0", "id", "x"]
    assert cols["quarry_row"].tolist() == [7, 8, 9]
    assert cols["id"].tolist() == [7007, 8007, 9007]


def test_a_variable_named_as_anothers_group_takes_a_longer_name(tmp_path):
    """README: the shortest suffix that tells names apart (`g/r` beside `r/s`
    and `s`): the column `r` could not sit beside the group `r` of `r/s` in an
    HDF5 output."""
    path = str(tmp_path / "groups.h5")
    with h5py.File(path, "w") as f:
        f["s"] = np.arange(6.0)
        f["g/r"] = np.arange(6.0) * 10
        f["r/s"] = np.arange(6.0) * 100
    out = str(tmp_path / "hits.h5")
    with quarry.open(path) as ds:
        sel = ds.query("s > 2")
        sel.extract(out, ["/s", "/g/r", "/r/s"])
    with h5py.File(out) as f:
        assert f["s"][()].tolist() == [3.0, 4.0, 5.0]
        assert f["g/r"][()].tolist() == [30.0, 40.0, 50.0]
        assert f["r/s"][()].tolist() == [300.0, 400.0, 500.0]


def test_columns_over_steps_are_named_from_each_step_group(tmp_path):
    """README: a column is named as the bare name that picks it within its
    step (the context names resolve in), so every step gives the same
    columns: `s` and `r/s`, not `Step#0/s` in one step and `Step#1/s` in
    the next (found by a probe: a Parquet file had a column per step)."""
    path = str(tmp_path / "steps.h5")
    with h5py.File(path, "w") as f:
        for step in range(2):
            f[f"Step#{step}/s"] = np.arange(4.0) + step
            f[f"Step#{step}/r/s"] = np.arange(4.0) + 10 * (step + 1)
    with quarry.open(path) as ds:
        sel = ds.query("s >= 2")
        sel.extract(str(tmp_path / "hits.parquet"), ["s", "r/s"])
        sel.extract(str(tmp_path / "hits.h5"), ["s", "r/s"])
    table = pq.read_table(str(tmp_path / "hits.parquet")).to_pydict()
    assert [k for k in table if not k.startswith("quarry_")] == ["s", "r/s"]
    assert table["s"] == [2.0, 3.0, 2.0, 3.0, 4.0]
    assert table["r/s"] == [12.0, 13.0, 21.0, 22.0, 23.0]
    with h5py.File(str(tmp_path / "hits.h5")) as f:
        assert f["Step#0/s"][()].tolist() == [2.0, 3.0]
        assert f["Step#1/s"][()].tolist() == [2.0, 3.0, 4.0]
        assert f["Step#0/r/s"][()].tolist() == [12.0, 13.0]
        assert f["Step#1/r/s"][()].tolist() == [21.0, 22.0, 23.0]


@pytest.mark.parametrize("ext", [".h5", ".nc"])
def test_step_groups_are_written_in_step_order(tmp_path, ext):
    """Read back, the output's groups come in the members' order (Step#2
    before Step#10), not sorted by name."""
    path = str(tmp_path / "steps.h5")
    with h5py.File(path, "w") as f:
        for step in (1, 2, 10, 100):
            f[f"Step#{step}/s"] = np.arange(3.0)
    out = str(tmp_path / f"hits{ext}")
    with quarry.open(path) as ds:
        ds.query("s >= 1").extract(out, ["s"])
    if ext == ".h5":
        with h5py.File(out) as f:
            assert list(f) == ["Step#1", "Step#2", "Step#10", "Step#100"]
    else:
        netcdf4 = pytest.importorskip("netCDF4")
        with netcdf4.Dataset(out) as nc:
            assert list(nc.groups) == ["Step#1", "Step#2", "Step#10", "Step#100"]


def test_csv_and_npy_keep_the_flat_form(run_h5, tmp_path):
    """README: .csv and .npy hold `quarry_row` then the values, without the
    per-axis indices the other formats add."""
    with quarry.open(run_h5) as ds:
        sel = ds.query("energy > 1.0")
        sel.extract(str(tmp_path / "v.csv"), ["energy"])
        sel.extract(str(tmp_path / "v.npy"), ["energy"])
    with open(tmp_path / "v.csv") as f:
        assert f.readline().strip() == "quarry_row,energy"
    assert np.load(tmp_path / "v.npy").dtype.names == ("quarry_row", "energy")
