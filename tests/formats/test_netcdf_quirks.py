"""NetCDF files with the quirks real archives have, checked against the
netCDF4 library's own CF decoding (masked -> NaN, packed -> physical units)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import quarry

netcdf4 = pytest.importorskip("netCDF4", reason="netCDF4 is not installed")

NT, NLAT, NLON = 9, 12, 16


def write_climate(path: str) -> None:
    """Like make_data.py climate, small: unlimited time, a float with a fill
    value and missing swaths inside zlib chunks, int16 packed positively and
    negatively, a valid_range, and a variable with a zero-length dimension."""
    rng = np.random.default_rng(5)
    with netcdf4.Dataset(path, "w") as ds:
        ds.createDimension("time", None)
        ds.createDimension("lat", NLAT)
        ds.createDimension("lon", NLON)
        ds.createDimension("empty", 0)
        ds.createVariable("lat", "f4", ("lat",))[:] = np.linspace(-82.5, 82.5, NLAT)
        ds.createVariable("lon", "f4", ("lon",))[:] = np.linspace(0, 337.5, NLON)
        tas = ds.createVariable(
            "tas",
            "f4",
            ("time", "lat", "lon"),
            zlib=True,
            fill_value=np.float32(1e20),
            chunksizes=(2, 5, 7),
        )
        psl = ds.createVariable(
            "psl", "i2", ("time", "lat", "lon"), zlib=True, fill_value=np.int16(-32767)
        )
        psl.scale_factor, psl.add_offset = np.float32(2.0), np.float32(100000.0)
        sst = ds.createVariable("sst", "i2", ("time", "lat", "lon"), fill_value=np.int16(-32767))
        sst.scale_factor, sst.add_offset = np.float32(-0.001), np.float32(290.0)
        sst.units = "K"
        rh = ds.createVariable("rh", "i1", ("time", "lat", "lon"))
        rh.valid_range = np.array([0, 100], dtype="i1")
        ds.createVariable("nothing", "f8", ("time", "empty"))
        for t in range(NT):
            field = rng.normal(288, 6, (NLAT, NLON)).astype("f4")
            gap = np.zeros((NLAT, NLON), bool)
            gap[:, (t * 3) % NLON : (t * 3) % NLON + 4] = t % 3 == 1
            tas[t] = np.ma.masked_array(field, mask=gap)
            psl[t] = 101325 + rng.normal(0, 900, (NLAT, NLON))
            land = np.zeros((NLAT, NLON), bool)
            land[3:6, 4:9] = True
            sst[t] = np.ma.masked_array(290 + 5 * rng.standard_normal((NLAT, NLON)), mask=land)
            rh.set_auto_maskandscale(False)
            rh[t] = rng.integers(-20, 127, (NLAT, NLON)).astype("i1")


def decoded(path: str, name: str) -> np.ndarray:
    """The library's missing values, and packing applied in float64 as CF
    defines it (netCDF4 computes it in the attribute's dtype: float32 here)."""
    with netcdf4.Dataset(path) as ds:
        var = ds[name]
        var.set_auto_scale(False)
        values = np.ma.asarray(var[:]).astype("f8")
        values = values * float(getattr(var, "scale_factor", 1.0))
        values = values + float(getattr(var, "add_offset", 0.0))
    return np.ma.filled(values, np.nan)


@pytest.fixture(scope="module")
def climate(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("nc") / "climate.nc")
    write_climate(path)
    return path


@pytest.mark.parametrize("indexed", [False, True])
@pytest.mark.parametrize(
    ("query", "name", "check"),
    [
        ("tas > 290", "tas", lambda v: v > 290),
        ("!(tas > 290)", "tas", lambda v: v <= 290),
        ("psl < 100500", "psl", lambda v: v < 100500),
        ("sst > 295", "sst", lambda v: v > 295),
        ("sst <= 287.5", "sst", lambda v: v <= 287.5),
        ("rh >= 50", "rh", lambda v: v >= 50),
        ("!(rh >= 50)", "rh", lambda v: v < 50),
    ],
)
def test_fill_values_and_packing_are_honoured(climate, indexed, query, name, check):
    values = decoded(climate, name).reshape(-1)
    with np.errstate(invalid="ignore"):
        expect = np.flatnonzero(check(values) & ~np.isnan(values))
    with quarry.open(climate) as ds:
        if indexed:
            ds.build_index(block_len=100)
        sel = ds.query(query)
        np.testing.assert_array_equal(sel.ids(), expect, err_msg=query)
        np.testing.assert_array_equal(sel.values(name), values[expect])


def test_info_shows_decoding_and_missing_counts(climate):
    with quarry.open(climate) as ds:
        ds.build_index()
        info = {v["name"]: v for v in ds.info()["variables"]}
    assert "scale_factor=-0.001" in info["sst"]["decoding"]
    assert info["sst"]["dtype"] == "float64"
    sst = decoded(climate, "sst")
    assert info["sst"]["stats"]["missing"] == int(np.isnan(sst).sum()) > 0
    assert info["nothing"]["shape"] == [NT, 0]
    assert info["tas"]["dims"] == ["time", "lat", "lon"]
    assert info["sst"]["attrs"]["units"] == "K"


def test_zero_length_dimension(climate):
    with quarry.open(climate) as ds:
        assert ds.query("nothing > 0").count() == 0
        ds.build_index()
        assert ds.query("nothing > 0").ids().tolist() == []


def test_netcdf4_file_with_h5_extension_is_read_as_netcdf(climate, tmp_path):
    disguised = str(tmp_path / "climate.h5")
    os.link(climate, disguised)
    from quarry.formats import detect

    assert detect(disguised) == "netcdf"


@pytest.mark.parametrize("indexed", [False, True])
def test_coordinates_broadcast_along_their_dimension(climate, indexed):
    tas = decoded(climate, "tas")
    with netcdf4.Dataset(climate) as ds:
        lat, lon = ds["lat"][:].data, ds["lon"][:].data
    lat3 = np.broadcast_to(lat[None, :, None], tas.shape)
    lon3 = np.broadcast_to(lon[None, None, :], tas.shape)
    with np.errstate(invalid="ignore"):
        expect = np.flatnonzero((lat3 > 20) & (tas > 290) & ~np.isnan(tas))
        arith = np.flatnonzero((tas - lat3 / 10 > 285) & ~np.isnan(tas))
    with quarry.open(climate) as ds:
        if indexed:
            ds.build_index(block_len=50)
        sel = ds.query("lat > 20 && tas > 290")
        np.testing.assert_array_equal(sel.ids(), expect)
        np.testing.assert_array_equal(sel.values("lat"), lat3.reshape(-1)[expect])
        np.testing.assert_array_equal(sel.values("lon"), lon3.reshape(-1)[expect])
        np.testing.assert_array_equal(ds.query("tas - lat / 10 > 285").ids(), arith)
        assert ds.query("lat > 20").count() == int((lat > 20).sum())  # on its own: 1-D
        with pytest.raises(quarry.ShapeMismatchError, match="coordinates"):
            ds.query("tas > 290 && nothing > 0")
        # A slice of a coordinate along a slice of the table (its index, when
        # there is one, is over the coordinate's own rows: it is laid over
        # the table's instead; a probe found it read as the table's).
        half = tas.shape[1] // 2
        with np.errstate(invalid="ignore"):
            cut = (lat3[:, half:] > 20) & (tas[:, half:] > 290) & ~np.isnan(tas[:, half:])
        got = ds.query(f"tas[:, {half}:, :] > 290 && lat[{half}:] > 20").ids()
        np.testing.assert_array_equal(got, np.flatnonzero(cut))


def test_zarr_dimension_names_make_coordinates(tmp_path):
    zarr = pytest.importorskip("zarr", reason="zarr is not installed")
    path = str(tmp_path / "c.zarr")
    root = zarr.open_group(path, mode="w", zarr_format=3)
    field = np.arange(4 * 6, dtype="f8").reshape(4, 6)
    root.create_array("field", data=field, dimension_names=("y", "x"))
    root.create_array("x", data=np.linspace(0, 1, 6), dimension_names=("x",))
    with quarry.open(path) as ds:
        ids = ds.query("x >= 0.5 && field > 3").ids()
    x2 = np.broadcast_to(np.linspace(0, 1, 6)[None, :], field.shape)
    np.testing.assert_array_equal(ids, np.flatnonzero((x2 >= 0.5) & (field > 3)))


def test_unsigned_bytes_read_as_netcdf4_reads_them(tmp_path):
    path = str(tmp_path / "u.nc")
    with netcdf4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("n", 4)
        var = ds.createVariable("x", "i1", ("n",))
        var._Unsigned = "true"
        var.set_auto_maskandscale(False)
        var[:] = np.array([1, 100, -56, -1], dtype="i1")
    with quarry.open(path) as ds:
        (info,) = ds.variables()
        assert info.dtype == np.dtype("u1")
        for build in (False, True):
            if build:
                ds.build_index()
            assert ds.query("x > 150").ids().tolist() == [2, 3]
            assert ds.query("x < 0").count() == 0


@pytest.mark.parametrize("fmt", ["NETCDF4", "NETCDF3_CLASSIC"])
def test_only_a_variables_own_attributes_mark_values_missing_as_xarray_reads_them(tmp_path, fmt):
    """netCDF4's masking also hid values equal to the library's default fill
    (-32767 for short, 65535 for ushort, 9.96921e36 for float) in variables
    that declare none (or only missing_value); xarray keeps them as data."""
    xr = pytest.importorskip("xarray", reason="xarray is not installed")
    path = str(tmp_path / f"fills_{fmt}.nc")
    defaults = netcdf4.default_fillvals
    rng = np.random.default_rng(len(fmt))
    n = 41
    columns = {
        "s": ("i2", {"missing_value": np.int16(7)}, defaults["i2"]),
        "f": ("f4", {}, defaults["f4"]),
        "d": ("f8", {"missing_value": -1.0}, defaults["f8"]),
        "i": ("i4", {}, defaults["i4"]),
        "b": ("i1", {"_Unsigned": "true", "_FillValue": np.int8(-1)}, -2),
    }
    if fmt == "NETCDF4":
        columns["u"] = ("u2", {"missing_value": np.uint16(7)}, defaults["u2"])
    with netcdf4.Dataset(path, "w", format=fmt) as ds:
        ds.createDimension("n", n)
        for name, (dtype, attrs, default) in columns.items():
            fill = attrs.pop("_FillValue", None)
            var = ds.createVariable(name, dtype, ("n",), fill_value=fill)
            var.setncatts(attrs)
            var.set_auto_maskandscale(False)
            values = rng.integers(0, 100, n).astype(dtype)
            values[[3, 17]] = default  # the library's default fill, as data
            values[[5, 30]] = attrs.get("missing_value", values[5]) if attrs else values[5]
            if fill is not None:
                values[[8]] = fill
            var[:] = values
    expected = xr.open_dataset(path).load()
    with quarry.open(path) as ds:
        for name in columns:
            want = expected[name].values.astype("f8")
            got = ds.select_all([name]).values(name).astype("f8")
            np.testing.assert_array_equal(got, want, err_msg=name)
            cut = float(np.nanmedian(want))
            ids = ds.query(f"{name} > {cut!r}").ids()
            np.testing.assert_array_equal(ids, np.flatnonzero(want > cut), err_msg=name)
