"""The standard data sets of ../shared/bench/make_data.py (climate: NetCDF-4 with
fill values and int16 packing, one with a negative scale factor; field: raw
float32 meshes), queried and checked against the netCDF4 library's decoding
and NumPy. Skipped where the shared generator is absent (a user's clone)."""

from __future__ import annotations

import numpy as np
import pytest

import quarry
from generators import make_data, needs_make_data

netcdf4 = pytest.importorskip("netCDF4", reason="netCDF4 is not installed")
pytestmark = needs_make_data


@pytest.fixture(scope="module")
def climate(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("shared") / "climate.nc")
    make_data("climate", path, "--nt", "15", "--nlat", "18", "--nlon", "36")
    return path


@pytest.mark.parametrize(
    ("query", "name", "check"),
    [
        ("tas > 290", "tas", lambda v: v > 290),
        ("psl < 97000", "psl", lambda v: v < 97000),
        ("sst > 300", "sst", lambda v: v > 300),
        ("!(sst > 300)", "sst", lambda v: v <= 300),
    ],
)
def test_climate_fill_values_and_packing(climate, query, name, check):
    with netcdf4.Dataset(climate) as ds:
        values = np.ma.filled(np.ma.asarray(ds[name][:]).astype("f8"), np.nan).reshape(-1)
    with np.errstate(invalid="ignore"):
        expect = np.flatnonzero(check(values) & ~np.isnan(values))
    assert np.isnan(values).any() or name == "psl"
    with quarry.open(climate) as ds:
        for build in (False, True):
            if build:
                ds.build_index(block_len=1000)
            np.testing.assert_array_equal(ds.query(query).ids(), expect, err_msg=query)


def test_storm_query_with_latitude(climate):
    with netcdf4.Dataset(climate) as ds:
        psl = np.ma.filled(np.ma.asarray(ds["psl"][:]).astype("f8"), np.nan)
        lat = ds["lat"][:].data
    with np.errstate(invalid="ignore"):
        mask = (psl < 98000) & (lat[None, :, None] > 20)
    with quarry.open(climate) as ds:
        ds.build_index()
        assert ds.query("psl < 98000 && lat > 20").count() == int(mask.sum())


def test_field_meshes_as_registered_raw_binary(tmp_path):
    make_data("field", str(tmp_path), "--mesh", "16")
    from quarry.formats.raw import RawLayout, register

    for name in ("bx", "by", "bz"):
        path = str(tmp_path / f"{name}.bin")
        register(path, RawLayout(name, "<f4", (16, 16, 16)))
        values = np.fromfile(path, dtype="<f4").astype("f8")
        with quarry.open(path) as ds:
            ds.build_index(block_len=500)
            ids = ds.query(f"{name} > 0.05 || {name} < -0.5").ids()
        np.testing.assert_array_equal(ids, np.flatnonzero((values > 0.05) | (values < -0.5)))
