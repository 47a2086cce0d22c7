"""CF attributes read the same way in every format (README: Zarr's "CF attributes
decoded the same way"; packing "in float64, exactly as CF's scale_factor is
applied"), checked against NumPy on the stored values: a float32 scale_factor,
``_Unsigned`` bytes, attributes written as one-element lists, an int64 fill value
of a raw file; and attributes that cannot describe values are one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import quarry
from quarry.errors import SourceError

netcdf4 = pytest.importorskip("netCDF4", reason="netCDF4 is not installed")
zarr = pytest.importorskip("zarr", reason="zarr is not installed")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "quarry.cli.main", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def write_nc(path: str, stored: np.ndarray, attrs: dict, fmt: str = "NETCDF4") -> str:
    with netcdf4.Dataset(path, "w", format=fmt) as ds:
        ds.createDimension("n", len(stored))
        var = ds.createVariable("t", stored.dtype, ("n",), fill_value=attrs.get("_FillValue"))
        var.set_auto_maskandscale(False)
        for key, value in attrs.items():
            if key != "_FillValue":  # netCDF4 takes it when the variable is made
                var.setncattr(key, value)
        var[:] = stored
    return path


def write_zarr(path: str, stored: np.ndarray, attrs: dict) -> str:
    root = zarr.open_group(path, mode="w", zarr_format=2)
    arr = root.create_array("t", shape=stored.shape, dtype=stored.dtype, chunks=(5,))
    arr[:] = stored
    arr.attrs.update({k: v.item() if isinstance(v, np.generic) else v for k, v in attrs.items()})
    return path


def test_a_float32_scale_factor_unpacks_in_float64_in_netcdf_as_in_zarr(tmp_path):
    """netCDF4 unpacked in the attribute's float32: 30000 * 0.01 gave 300.0,
    so t >= 300 found a row that CF's float64 (299.99999329447746) does not."""
    rng = np.random.default_rng(4)
    stored = rng.integers(-32000, 32000, 23).astype("i2")
    stored[:3] = [12345, 30000, 1]
    attrs = {"scale_factor": np.float32(0.01), "add_offset": np.float32(0.5)}
    physical = stored.astype("f8") * float(np.float32(0.01)) + float(np.float32(0.5))
    for path in (
        write_nc(str(tmp_path / "p.nc"), stored, attrs),
        write_nc(str(tmp_path / "p3.nc"), stored, attrs, "NETCDF3_CLASSIC"),
        write_zarr(str(tmp_path / "p.zarr"), stored, attrs),
    ):
        with quarry.open(path) as ds:
            for literal in (300.5, float(physical[0]), 0.0, float(physical[5])):
                for op, numpy_op in ((">=", np.greater_equal), ("==", np.equal)):
                    got = ds.query(f"t {op} {literal!r}").ids()
                    want = np.flatnonzero(numpy_op(physical, literal))
                    np.testing.assert_array_equal(got, want, err_msg=f"{path}: t {op} {literal}")
            np.testing.assert_array_equal(ds.query("t > -1e9").values("t"), physical)


def test_unsigned_bytes_read_alike_in_netcdf_and_zarr(tmp_path):
    stored = np.array([-1, 1, -128, 100, 7, -2], "i1")
    unsigned = stored.view("u1").astype(np.int64)
    for attrs, missing in (
        ({"_Unsigned": "true"}, np.zeros(6, bool)),
        ({"_Unsigned": "true", "_FillValue": np.int8(-2)}, unsigned == 254),
    ):
        for path in (
            write_nc(str(tmp_path / f"u{len(attrs)}.nc"), stored, attrs, "NETCDF3_64BIT_OFFSET"),
            write_zarr(str(tmp_path / f"u{len(attrs)}.zarr"), stored, attrs),
        ):
            with quarry.open(path) as ds:
                assert ds.variable("t").dtype.kind in "uf", path  # not int8
                want = np.flatnonzero(~missing & (unsigned > 100))
                np.testing.assert_array_equal(ds.query("t > 100").ids(), want)
                np.testing.assert_array_equal(ds.query("t > 100").values("t"), unsigned[want])
                assert "_Unsigned=true" in ds.variable("t").decoding


def test_attributes_written_as_lists_decode(tmp_path):
    """NetCDF attributes are arrays, and converters keep them so in Zarr:
    a one-element scale_factor list raised a TypeError."""
    path = write_zarr(
        str(tmp_path / "l.zarr"),
        np.array([1, 2, 3, -9], "i2"),
        {"scale_factor": [0.5], "add_offset": [10.0], "missing_value": [-9]},
    )
    with quarry.open(path) as ds:
        assert ds.query("t > 0").values("t").tolist() == [10.5, 11.0, 11.5]


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        ({"valid_range": [0]}, "/t's valid_range is [0]; it takes two numbers"),
        ({"valid_min": "0"}, "/t's valid_min is '0', not a number"),
        ({"scale_factor": "half"}, "/t's scale_factor is 'half', not a number"),
    ],
)
def test_attributes_that_describe_no_values_are_one_line_errors(tmp_path, attrs, message):
    path = write_zarr(str(tmp_path / "bad.zarr"), np.array([1, 2, 3], "i2"), attrs)
    with quarry.open(path) as ds, pytest.raises(SourceError, match=message.replace("[", r"\[")):
        ds.query("t > 0").ids()
    run = cli("query", path, "t > 0", "--quiet")
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert message in run.stderr.strip().splitlines()[-1]


def test_what_netcdf4_cannot_decode_is_a_one_line_error(tmp_path):
    """An _Unsigned byte with valid_max and a value past it: netCDF4's own
    masking raised a TypeError, printed as a 66-line traceback."""
    path = write_nc(
        str(tmp_path / "u.nc"),
        np.array([1, -56, 5], "i1"),
        {"_Unsigned": "true", "valid_max": np.int8(16)},
        "NETCDF3_64BIT_OFFSET",
    )
    with quarry.open(path) as ds:
        try:
            got = ds.query("t > 0").ids().tolist()
        except SourceError as exc:
            assert str(exc).startswith(f"cannot read /t of {path}: ")
        else:
            assert got == [0, 2]  # 200 > valid_max: missing
    run = cli("query", path, "t > 0", "--quiet")
    assert "Traceback" not in run.stderr and run.returncode in (0, 1)


def test_a_raw_int64_fill_value_is_kept_exactly(tmp_path):
    """--fill-value was parsed as a float: 2**53 + 1 became 2**53, so the
    present value 2**53 read as missing."""
    path = str(tmp_path / "k.bin")
    values = np.array([2**53, 2**53 + 1, 5, 2**53 + 1], "<i8")
    values.tofile(path)
    run = cli("register", path, "--dtype", "<i8", "--shape", "4", "--fill-value", str(2**53 + 1))
    assert run.returncode == 0, run.stderr
    with open(path + ".qraw.json") as f:
        assert json.load(f)["fill_value"] == 2**53 + 1
    with quarry.open(path) as ds:
        assert ds.query("k > 0").ids().tolist() == [0, 2]
        assert ds.query("k > 0").values("k").tolist() == [2.0**53, 5.0]
    os.remove(path + ".qraw.json")
    for bad in ("0.5", "1e400", str(2**63)):
        run = cli("register", path, "--dtype", "<i8", "--shape", "4", "--fill-value", bad)
        assert run.returncode == 2 and "is not a value of <i8" in run.stderr


def test_packed_unsigned_bytes_with_a_valid_range_keep_values_past_127(tmp_path):
    """A packed _Unsigned byte with valid_*: with netCDF4's scaling off, its
    valid range was compared with the bytes read as signed, so every value
    from 128 up read as missing in NetCDF (not in Zarr)."""
    rng = np.random.default_rng(12)
    stored = rng.integers(-128, 128, 41).astype("i1")
    unsigned = stored.view("u1").astype(np.int64)
    attrs = {
        "_Unsigned": "true",
        "scale_factor": np.float32(0.5),
        "valid_min": np.int8(10),
        "valid_max": np.int8(-6),  # 250 read unsigned
        "_FillValue": np.int8(-1),  # 255
    }
    present = (unsigned >= 10) & (unsigned <= 250)
    physical = unsigned * float(np.float32(0.5))
    for path in (
        write_nc(str(tmp_path / "pu.nc"), stored, attrs, "NETCDF3_64BIT_OFFSET"),
        write_nc(str(tmp_path / "pu4.nc"), stored, attrs),
        write_zarr(str(tmp_path / "pu.zarr"), stored, attrs),
    ):
        with quarry.open(path) as ds:
            sel = ds.query("t > 60")
            want = np.flatnonzero(present & (physical > 60))
            assert want.size and (unsigned[want] >= 128).any()
            np.testing.assert_array_equal(sel.ids(), want, err_msg=path)
            np.testing.assert_array_equal(sel.values("t"), physical[want], err_msg=path)
            assert ds.query("t < 200").count() == int((present & (physical < 200)).sum())


def test_a_zarr_v3_fill_value_as_xarray_writes_it_masks_its_values(tmp_path):
    """xarray writes a float _FillValue to Zarr v3 as the base64 of its
    little-endian float64 ('AAAAAAAA+H8=' is NaN): it was refused as 'not a
    number' on every read of the variable."""
    path = str(tmp_path / "xr.zarr")
    root = zarr.open_group(path, mode="w", zarr_format=3)
    rng = np.random.default_rng(5)
    k = rng.normal(size=37)
    k[[3, 20]] = -1e30
    t = rng.normal(size=37).astype("f4")
    t[7] = np.nan
    for name, values, fill in (("k", k, "6oygOVk+KcY="), ("t", t, "AAAAAAAA+H8=")):
        arr = root.create_array(name, shape=values.shape, dtype=values.dtype, chunks=(10,))
        arr[:] = values
        arr.attrs.update({"_FillValue": fill, "_ARRAY_DIMENSIONS": ["x"]})
    with quarry.open(path) as ds:
        assert ds.query("k < 0").ids().tolist() == np.flatnonzero((k < 0) & (k != -1e30)).tolist()
        assert ds.query("t < 0").ids().tolist() == np.flatnonzero(t < 0).tolist()
        assert ds.variable("k").decoding == "_FillValue=-1e+30"
    run = cli("info", path)
    assert run.returncode == 0 and "_FillValue=-1e+30" in run.stdout


@pytest.mark.parametrize(
    ("dtype", "text", "marker"),
    [("<f8", "-1e30", -1e30), ("<f4", "-inf", -np.inf), ("<i2", "-9999.0", -9999)],
)
def test_register_takes_negative_and_integral_float_fill_values(tmp_path, dtype, text, marker):
    """``--fill-value -1e30`` was refused by argparse ('expected one argument'),
    and ``-9999.0`` for an integer dtype as not an integer."""
    path = str(tmp_path / "f.bin")
    values = np.array([1, marker, 3, marker, 5], dtype)
    values.tofile(path)
    run = cli("register", path, "--dtype", dtype, "--shape", "5", "--fill-value", text)
    assert run.returncode == 0, run.stderr
    with quarry.open(path) as ds:
        assert ds.query("f > -1").ids().tolist() == [0, 2, 4]
        assert ds.query("f < 2").ids().tolist() == [0]


def test_a_zarr_v3_store_xarray_wrote_reads_as_xarray_reads_it(tmp_path):
    xr = pytest.importorskip("xarray", reason="xarray is not installed")
    rng = np.random.default_rng(9)
    k = rng.normal(size=29)
    k[[0, 11]] = -1e30
    t = rng.normal(size=29).astype("f4")
    t[5] = np.nan
    data = xr.Dataset({"k": ("x", k), "t": ("x", t)})
    data["k"].encoding["_FillValue"] = -1e30
    path = str(tmp_path / "written.zarr")
    data.to_zarr(path, zarr_format=3, consolidated=False)
    expected = xr.open_zarr(path, consolidated=False).load()
    with quarry.open(path) as ds:
        for query, name, cut in (("k > -0.5", "k", -0.5), ("t > -0.5", "t", -0.5)):
            want = np.flatnonzero(expected[name].values > cut)
            np.testing.assert_array_equal(ds.query(query).ids(), want)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_zarr_store_xarray_wrote_reads_as_xarray_reads_it_whatever_its_format(
    tmp_path, zarr_format
):
    """xarray writes a variable's _FillValue to a v2 array's fill_value (not
    its attributes) and reads it back as _FillValue: Quarry read -999 and a
    packed -1 (9.5 unpacked) as data."""
    xr = pytest.importorskip("xarray", reason="xarray is not installed")
    rng = np.random.default_rng(zarr_format)
    n = 53
    t = rng.normal(size=n).astype("f4")
    t[[2, 9]] = np.nan
    p = rng.uniform(9, 13, n).round(1)
    p[[4, 30]] = np.nan
    q = rng.integers(-5, 5, n).astype("i4")  # no fill: every value is data
    data = xr.Dataset({"t": ("n", t), "p": ("n", p), "q": ("n", q)})
    data["t"].encoding["_FillValue"] = -999.0
    data["p"].encoding.update(
        {"dtype": "i2", "_FillValue": np.int16(-1), "scale_factor": 0.5, "add_offset": 10.0}
    )
    path = str(tmp_path / f"v{zarr_format}.zarr")
    data.to_zarr(path, zarr_format=zarr_format, consolidated=False)
    expected = xr.open_zarr(path, consolidated=False).load()
    with quarry.open(path) as ds:
        for name, query, cut in (("t", "t < 0.5", 0.5), ("p", "p < 11", 11), ("q", "q < 0", 0)):
            values = expected[name].values.astype("f8")
            want = np.flatnonzero(values < cut)
            np.testing.assert_array_equal(ds.query(query).ids(), want, err_msg=name)
            np.testing.assert_array_equal(ds.select_all([name]).values(name), values)
    # A v2 array of no xarray layout keeps its fill_value as the value of
    # unwritten chunks only: its zeros are data.
    plain = zarr.open_array(
        str(tmp_path / "plain.zarr"), mode="w", shape=(6,), dtype="i4", fill_value=0, zarr_format=2
    )
    plain[:3] = [0, 4, 0]
    with quarry.open(str(tmp_path / "plain.zarr")) as ds:
        assert ds.query("plain == 0").ids().tolist() == [0, 2, 3, 4, 5]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dtype", "<f4", "--offset=-4"], "are not negative (got offset -4"),
        (["--dtype", "<f4", "--shape=-10"], "are not negative (got offset 0, shape (-10,))"),
        (["--dtype", "<f4", "--shape", "4294967296,4294967296"], "needs 73786976294838206464"),
        (["--dtype", "<f4", "--fill-value", "1e40"], "--fill-value 1e40 is not a value of <f4"),
    ],
)
def test_register_refuses_a_description_no_file_has(tmp_path, args, message):
    """Each was registered (exit 0), and every later command on the file was a
    traceback (a negative offset or size, a byte count past 64 bits), or
    1e40 as a float32 fill marked every +inf missing."""
    path = str(tmp_path / "r.bin")
    np.arange(10, dtype="<f4").tofile(path)
    shape = [] if any(a.startswith("--shape") for a in args) else ["--shape", "10"]
    run = cli("register", path, *shape, *args)
    assert run.returncode in (1, 2) and "Traceback" not in run.stderr
    assert message in run.stderr
    assert not os.path.exists(path + ".qraw.json")


def test_plain_hdf5_attributes_named_like_cf_change_no_values(tmp_path):
    """README: a plain HDF5 file's _FillValue, missing_value and valid_*
    attributes are kept as attributes, as h5py reads the values."""
    import h5py

    path = str(tmp_path / "plain.h5")
    fi = np.array([1, -999, 3, -999], "i4")
    vr = np.arange(7.0)
    with h5py.File(path, "w") as f:
        f["fi"], f["vr"] = fi, vr
        f["fi"].attrs["_FillValue"] = np.int32(-999)
        f["vr"].attrs["valid_range"] = [2.0, 5.0]
    with quarry.open(path) as ds:
        assert ds.variable("fi").dtype == np.dtype("i4")
        assert ds.query("fi < 0").ids().tolist() == [1, 3]
        assert ds.query("vr > 0").count() == 6
        assert ds.variable("fi").attrs["_FillValue"] == -999
