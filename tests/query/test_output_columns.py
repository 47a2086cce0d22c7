"""Outputs keep variables' names, values and attributes: the cases a new user
hit (an ``id`` variable, a coordinate, steps in Parquet, CF metadata), a
writer that fails, and track outputs."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

import quarry
from quarry.outputs import OutputError

netcdf4 = pytest.importorskip("netCDF4", reason="netCDF4 is not installed")
pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed")
xarray = pytest.importorskip("xarray", reason="xarray is not installed")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "quarry.cli.main", *args], capture_output=True, text=True
    )


@pytest.fixture
def flat(tmp_path):
    path = str(tmp_path / "flat.h5")
    rng = np.random.default_rng(11)
    e = rng.uniform(0, 10, 500)
    ids = rng.permutation(500).astype(np.int64) * 7 + 1
    with h5py.File(path, "w") as f:
        f["e"], f["id"], f["px"] = e, ids, rng.normal(size=500).astype("f4")
        f["e"].attrs["units"] = "GeV"
    return path, e, ids


@pytest.mark.parametrize("ext", [".h5", ".nc", ".parquet", ".csv", ".npy"])
def test_an_id_variable_keeps_its_name_and_values(flat, tmp_path, ext):
    path, e, ids = flat
    out = str(tmp_path / f"o{ext}")
    done = cli("query", path, "e > 8", "--values", "e,id,px", "--out", out)
    assert done.returncode == 0, done.stderr
    hits = np.flatnonzero(e > 8)
    if ext == ".h5":
        with h5py.File(out) as f:
            got = {k: f[k][()] for k in f}
            assert f["e"].attrs["units"] == "GeV"
    elif ext == ".nc":
        with netcdf4.Dataset(out) as ds:
            got = {k: v[:] for k, v in ds.variables.items()}
            assert ds["e"].units == "GeV"
    elif ext == ".parquet":
        table = pq.read_table(out)
        got = {k: table[k].to_numpy() for k in table.column_names}
        assert table.schema.field("e").metadata[b"units"] == b"GeV"
    elif ext == ".csv":
        with open(out, newline="") as f:
            rows = list(csv.reader(f))
        assert rows[0] == ["quarry_row", "e", "id", "px"]
        got = {k: np.array([float(r[i]) for r in rows[1:]]) for i, k in enumerate(rows[0])}
    else:
        table = np.load(out)
        got = {k: table[k] for k in table.dtype.names}
    np.testing.assert_array_equal(got["id"], ids[hits])
    np.testing.assert_array_equal(got["quarry_row"], hits)
    np.testing.assert_array_equal(got["e"], e[hits])
    assert sorted(os.listdir(tmp_path)) == sorted(["flat.h5", f"o{ext}"])


def test_the_cli_prints_the_same_columns(flat):
    path, e, ids = flat
    lines = cli("query", path, "e > 9.5", "--values", "id,e").stdout.splitlines()
    assert lines[0] == "quarry_row,id,e"
    hits = np.flatnonzero(e > 9.5)
    assert [int(line.split(",")[1]) for line in lines[1:]] == ids[hits].tolist()


@pytest.fixture
def climate(tmp_path):
    """A CF file: packed temperatures with missing values, and a coordinate."""
    path = str(tmp_path / "clim.nc")
    rng = np.random.default_rng(5)
    tas = rng.uniform(280, 320, (3, 4, 5))
    missing = rng.random(tas.shape) < 0.2
    lat = np.array([-30.0, 0.0, 25.0, 50.0], dtype="f4")
    with netcdf4.Dataset(path, "w") as ds:
        for dim, n in zip(("time", "lat", "lon"), tas.shape, strict=True):
            ds.createDimension(dim, n)
        v = ds.createVariable("lat", "f4", ("lat",))
        v[:] = lat
        v.units, v.standard_name = "degrees_north", "latitude"
        v = ds.createVariable("tas", "i2", ("time", "lat", "lon"), fill_value=-32767)
        v.scale_factor, v.add_offset = 0.01, 300.0
        v.valid_range = np.array([-3000, 3000], dtype="i2")
        v.units, v.long_name, v.standard_name = "K", "air temperature", "air_temperature"
        v.coordinates = "lat"
        v.cell_methods = "time: mean"
        v[:] = np.ma.masked_array(tas, missing)
    with netcdf4.Dataset(path) as ds:
        stored = ds["tas"][:].filled(np.nan)  # the packed values as the library decodes them
    return path, stored, lat


@pytest.mark.parametrize("ext", [".nc", ".h5", ".parquet"])
def test_a_coordinate_and_cf_attributes_survive_an_extract(climate, tmp_path, ext):
    path, tas, lat = climate
    out = str(tmp_path / f"g{ext}")
    # ``|| tas > 1000`` joins tas to the table and keeps rows where tas is missing
    done = cli("query", path, "lat > 20 || tas > 1000", "--values", "tas,lat", "--out", out)
    assert done.returncode == 0, done.stderr
    mask = np.broadcast_to((lat > 20)[None, :, None], tas.shape)
    where = np.nonzero(mask)
    dims = ("time", "lat", "lon")
    kept = {"units": "K", "long_name": "air temperature", "standard_name": "air_temperature"}
    if ext == ".nc":
        with xarray.open_dataset(out) as ds:  # CF decoding: NaN where missing
            got = {k: ds[k].values for k in ("tas", "lat", "quarry_index_lat")}
            attrs = dict(ds["tas"].attrs)
            assert ds["tas"].encoding["_FillValue"] != ds["tas"].encoding["_FillValue"]  # NaN
            assert ds["lat"].attrs["standard_name"] == "latitude"
            assert list(ds.coords) == ["quarry_row", *(f"quarry_index_{d}" for d in dims)]
        with netcdf4.Dataset(out) as ds:
            assert ds["tas"][:].mask.tolist() == np.isnan(tas[mask]).tolist()
    elif ext == ".h5":
        with h5py.File(out) as f:
            got = {k: f[k][()] for k in ("tas", "lat", "quarry_index_lat")}
            attrs = {k: v for k, v in f["tas"].attrs.items() if k != "_FillValue"}
            assert np.isnan(f["tas"].attrs["_FillValue"])
    else:
        table = pq.read_table(out)
        got = {k: table[k].to_numpy() for k in ("tas", "lat", "quarry_index_lat")}
        meta = table.schema.field("tas").metadata
        attrs = {k.decode(): v.decode() for k, v in meta.items()}
    np.testing.assert_array_equal(got["tas"], tas[mask])
    np.testing.assert_array_equal(got["lat"], lat[where[1]])
    np.testing.assert_array_equal(got["quarry_index_lat"], where[1])
    assert {k: attrs[k] for k in kept} == kept and attrs["cell_methods"] == "time: mean"
    # What described the stored, packed values (or other variables) is not carried over.
    assert not {"scale_factor", "add_offset", "valid_range", "coordinates"} & set(attrs)


def test_to_xarray_names_the_coordinate_by_its_name(climate):
    path, tas, lat = climate
    with quarry.open(path) as ds:
        sel = ds.query("lat > 20 && tas > 300")
        xr = sel.to_xarray(["tas", "lat"])
        arrow = sel.to_arrow(["tas"])
    mask = (tas > 300) & (lat > 20)[None, :, None]
    np.testing.assert_array_equal(xr["lat"].values, lat[np.nonzero(mask)[1]])
    np.testing.assert_array_equal(xr["tas"].values, tas[mask])
    np.testing.assert_array_equal(xr["quarry_index_lat"].values, np.nonzero(mask)[1])
    assert xr["tas"].attrs["units"] == "K" and "scale_factor" not in xr["tas"].attrs
    assert arrow.schema.field("tas").metadata[b"long_name"] == b"air temperature"


@pytest.fixture
def steps(tmp_path):
    """Three steps, each with an id variable, an energy and a variable named
    like one of the columns Quarry adds to a Parquet table of steps."""
    path = str(tmp_path / "sim.h5")
    rng = np.random.default_rng(9)
    truth = {}
    with h5py.File(path, "w") as f:
        for s in range(3):
            n = 40 + 5 * s
            ids = rng.permutation(60)[:n].astype(np.int64)
            e = rng.uniform(0, 10, n)
            step_var = np.full(n, 100 + s, dtype="i4")
            f[f"Step#{s}/id"], f[f"Step#{s}/e"], f[f"Step#{s}/quarry_step"] = ids, e, step_var
            f[f"Step#{s}/e"].attrs["units"] = "MeV"
            truth[s] = (ids, e)
    return path, truth


@pytest.mark.parametrize("ext", [".h5", ".nc", ".parquet"])
def test_steps_keep_the_id_column_whole(steps, tmp_path, ext):
    path, truth = steps
    out = str(tmp_path / f"hot{ext}")
    with quarry.open_series(path) as series:
        series.query("e > 6").extract(out, ["e", "id", "quarry_step"])
    for s, (ids, e) in truth.items():
        hits = np.flatnonzero(e > 6)
        if ext == ".h5":
            with h5py.File(out) as f:
                got = {k: f[f"Step#{s}/{k}"][()] for k in ("id", "e", "quarry_row", "quarry_step")}
                assert f[f"Step#{s}/e"].attrs["units"] == "MeV"
        elif ext == ".nc":
            with netcdf4.Dataset(out) as ds:
                g = ds[f"Step#{s}"]
                got = {k: g[k][:] for k in ("id", "e", "quarry_row", "quarry_step")}
        else:
            table = pq.read_table(out)
            assert table.schema.field("id").type == "int64"  # not float, no NaN padding
            assert table.schema.field("e").metadata[b"units"] == b"MeV"
            rows = table.filter(table["quarry_step_"].to_numpy() == s)
            got = {k: rows[k].to_numpy() for k in ("id", "e", "quarry_row", "quarry_step")}
        np.testing.assert_array_equal(got["id"], ids[hits])
        np.testing.assert_array_equal(got["e"], e[hits])
        np.testing.assert_array_equal(got["quarry_row"], hits)
        np.testing.assert_array_equal(got["quarry_step"], np.full(len(hits), 100 + s))


@pytest.mark.parametrize("ext", [".h5", ".nc", ".parquet"])
def test_track_outputs_name_ids_and_rows_as_queries_do(steps, tmp_path, ext):
    path, truth = steps
    out = str(tmp_path / f"tracks{ext}")
    with quarry.open_series(path) as series:
        tracks = series.track("e > 7", 0, "id", ["e"])
    tracks.write(out, [path])
    ids0, e0 = truth[0]
    tracked = ids0[e0 > 7]
    for s, (ids, e) in truth.items():
        where = {int(i): k for k, i in enumerate(ids)}
        rows = np.array([where.get(int(i), -1) for i in tracked])
        if ext == ".h5":
            with h5py.File(out) as f:
                got = {k: f[f"Step#{s}/{k}"][()] for k in ("id", "e", "quarry_row", "quarry_found")}
        elif ext == ".nc":
            with netcdf4.Dataset(out) as ds:
                g = ds[f"Step#{s}"]
                got = {k: g[k][:].filled(np.nan) for k in ("id", "e", "quarry_row")}
                got["quarry_found"] = g["quarry_found"][:].astype(bool)
        else:
            table = pq.read_table(out)
            part = table.filter(table["quarry_step"].to_numpy() == s)
            got = {k: part[k].to_numpy() for k in ("id", "e", "quarry_row", "quarry_found")}
        np.testing.assert_array_equal(got["id"], tracked)
        np.testing.assert_array_equal(got["quarry_row"], rows)
        np.testing.assert_array_equal(got["quarry_found"], rows >= 0)
        np.testing.assert_array_equal(got["e"], np.where(rows >= 0, e[rows], np.nan))


def test_a_failed_write_leaves_nothing_behind(flat, tmp_path, monkeypatch):
    from quarry.outputs import writers

    path, _, _ = flat
    out = str(tmp_path / "o.h5")
    with open(out, "wb") as f:
        f.write(b"the previous output")

    def fail(*args: object) -> None:
        raise ValueError("the disk filled up")

    monkeypatch.setattr(writers, "_h5_columns", fail)
    failed = pytest.raises(OutputError, match=r"cannot write .*o\.h5: the disk")
    with quarry.open(path) as ds, failed:
        ds.query("e > 8").extract(out, ["e"])
    assert sorted(os.listdir(tmp_path)) == ["flat.h5", "o.h5"]
    with open(out, "rb") as f:
        assert f.read() == b"the previous output"


def test_provenance_stays_on_the_file(flat, tmp_path):
    path, _, _ = flat
    out = str(tmp_path / "o.parquet")
    with quarry.open(path) as ds:
        ds.query("e > 8").extract(out, ["id"])
    meta = json.loads(pq.read_table(out).schema.metadata[b"quarry"])
    assert meta["query"] == "e > 8" and meta["source"] == os.path.abspath(path)
    assert "path" not in meta


def test_the_step_a_path_picked_stays_on_the_file(steps, tmp_path):
    """``--path Step#1`` picks one step: its rows carry no ``quarry_step``, and the
    file did not say which step they came from (a query's extract, or a join's)."""
    path = steps[0]
    out = str(tmp_path / "one.h5")
    done = cli("query", path, "e > 0", "--values", "e", "--path", "Step#1", "--out", out)
    assert done.returncode == 0, done.stderr
    with h5py.File(out) as f:
        assert f.attrs["path"] == "Step#1" and "quarry_step" not in f
    joined = str(tmp_path / "joined.h5")
    field = str(tmp_path / "f.h5")
    with h5py.File(field, "w") as f:
        f["F"] = np.arange(4.0)
    done = cli(
        "interp",
        path,
        "--field",
        f"F={field}",
        "--at",
        "e",
        "--grid",
        "origin=0 spacing=1",
        "--path",
        "Step#1",
        "--out",
        joined,
    )
    assert done.returncode == 0, done.stderr
    with h5py.File(joined) as f:
        assert f.attrs["path"] == "Step#1"


@pytest.mark.parametrize("ext", [".nc", ".h5", ".parquet"])
def test_an_attribute_in_another_encoding_survives_an_extract(tmp_path, ext):
    """Legacy files hold byte strings in Latin-1 (``b"\\xb0C"`` for °C): h5py gives
    them back as text with a lone surrogate, which every UTF-8 writer refused
    (exit 1), and ``info --json`` printed as such, which is not strict JSON. The
    byte that is not UTF-8 becomes U+FFFD, as h5py decodes a fixed-length string."""
    path = str(tmp_path / "lat1.h5")
    with h5py.File(path, "w") as f:
        f["temp"] = np.arange(10.0)
        f["temp"].attrs["units"] = b"\xb0C"
    out = str(tmp_path / f"o{ext}")
    done = cli("query", path, "temp > 5", "--values", "temp", "--out", out)
    assert done.returncode == 0, done.stderr
    if ext == ".parquet":
        units = pq.read_table(out).schema.field("temp").metadata[b"units"].decode()
    elif ext == ".nc":
        with netcdf4.Dataset(out) as ds:
            units = ds["temp"].units
    else:
        with h5py.File(out) as f:
            units = f["temp"].attrs["units"]
    assert units == "\ufffdC"
    info = cli("info", path, "--json")
    assert info.returncode == 0, info.stderr
    info.stdout.encode("utf-8")  # no lone surrogate
    assert '"units": "\ufffdC"' in json.dumps(json.loads(info.stdout), ensure_ascii=False)
