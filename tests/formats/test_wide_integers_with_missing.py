"""64-bit integer variables that declare missing values (``_FillValue``) are read
as float64 with NaN where missing, as xarray reads them. Where every present value
fits float64 exactly (|v| <= 2**53) the answers are exact, checked against NumPy on
the stored integers; a present value beyond 2**53 is an error naming the variable
and the value, never a rounded comparison (``k == 2**53 + 1`` found nothing)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import quarry
from quarry.errors import InexactDecodingError

netcdf4 = pytest.importorskip("netCDF4", reason="netCDF4 is not installed")
zarr = pytest.importorskip("zarr", reason="zarr is not installed")

#: NetCDF's default int64 fill: itself beyond 2**53, and never a present value.
NC_FILL_INT64 = np.int64(-9223372036854775806)


def write_netcdf(path: str, values: np.ndarray, fill: np.generic) -> str:
    with netcdf4.Dataset(path, "w") as ds:
        ds.createDimension("n", len(values))
        var = ds.createVariable("k", values.dtype, ("n",), fill_value=fill)
        var.set_auto_maskandscale(False)
        var[:] = values
    return path


def write_zarr(path: str, values: np.ndarray, fill: np.generic) -> str:
    root = zarr.open_group(path, mode="w", zarr_format=3)
    arr = root.create_array("k", shape=values.shape, dtype=values.dtype, chunks=(7,))
    arr[:] = values
    arr.attrs["_FillValue"] = int(fill)
    return path


WRITERS = {"netcdf": (write_netcdf, "k.nc"), "zarr": (write_zarr, "k.zarr")}


def random_values(rng: np.random.Generator, dtype: str, fill: np.generic, n: int) -> np.ndarray:
    """Integers within float64's exact range, with the fill value at random rows."""
    limit = 2**53
    lo = 0 if dtype == "u8" else -limit
    values = rng.integers(lo, limit, n, dtype=dtype, endpoint=True)
    values[:4] = [limit, limit - 1, lo, lo + 1] if dtype == "i8" else [limit, limit - 1, 0, 1]
    values[rng.random(n) < 0.2] = fill
    return values


@pytest.mark.parametrize("fmt", sorted(WRITERS))
@pytest.mark.parametrize(
    ("dtype", "fill"),
    [("i8", NC_FILL_INT64), ("i8", np.int64(3)), ("u8", np.uint64(2**64 - 2))],
)
def test_present_values_within_2_53_compare_exactly(tmp_path, fmt, dtype, fill):
    rng = np.random.default_rng(abs(hash((fmt, dtype, int(fill)))) % 2**32)
    values = random_values(rng, dtype, fill, 61)  # 61 rows: not a multiple of the chunk
    writer, name = WRITERS[fmt]
    path = writer(str(tmp_path / name), values, fill)
    present = values != fill
    ds = quarry.open(path)
    assert ds.variable("k").dtype == np.float64
    picks = [int(v) for v in rng.choice(values[present], 6)] + [2**53, 2**53 - 1, 0]
    for literal in picks:
        for op, numpy_op in (("==", np.equal), (">", np.greater), ("<=", np.less_equal)):
            expected = np.flatnonzero(present & numpy_op(values, literal))
            got = ds.query(f"k {op} {literal}").ids()
            np.testing.assert_array_equal(got, expected, err_msg=f"k {op} {literal}")
    got_values = ds.query("k >= 0").values("k")
    expected_rows = present & (values >= 0)
    np.testing.assert_array_equal(got_values, values[expected_rows].astype("f8"))
    # A missing row is unknown, never returned by a negation either.
    np.testing.assert_array_equal(
        ds.query("!(k > 1)").ids(), np.flatnonzero(present & ~(values > 1))
    )


@pytest.mark.parametrize("fmt", sorted(WRITERS))
@pytest.mark.parametrize("dtype", ["i8", "u8"])
def test_a_present_value_beyond_2_53_is_an_error_not_a_rounded_answer(tmp_path, fmt, dtype):
    fill = np.int64(3) if dtype == "i8" else np.uint64(3)
    values = np.array([2**53, 2**53 + 1, 3, 7], dtype)
    writer, name = WRITERS[fmt]
    path = writer(str(tmp_path / name), values, fill)
    with pytest.raises(InexactDecodingError, match=r"/k holds 9007199254740993, beyond 2\*\*53"):
        quarry.open(path).query("k == 9007199254740993").ids()
    with pytest.raises(InexactDecodingError):
        quarry.open(path).build_index()
    cli = [sys.executable, "-m", "quarry.cli.main"]
    for args in (["query", path, "k == 9007199254740993"], ["index", path]):
        run = subprocess.run(cli + args, capture_output=True, text=True, timeout=120)
        assert run.returncode == 1, run.stderr
        assert "Traceback" not in run.stderr
        assert "/k holds 9007199254740993, beyond 2**53" in run.stderr
        assert "declares no missing values" in run.stderr


def test_the_same_integers_without_missing_values_stay_int64(tmp_path):
    path = str(tmp_path / "j.nc")
    values = np.array([2**53, 2**53 + 1, 2**62 + 1, 2**62], "i8")
    with netcdf4.Dataset(path, "w") as ds:
        ds.createDimension("n", len(values))
        ds.createVariable("j", "i8", ("n",))[:] = values
    ds_ = quarry.open(path)
    assert ds_.variable("j").dtype == np.int64
    assert ds_.query("j == 9007199254740993").ids().tolist() == [1]
    assert ds_.query("j > 4611686018427387904").ids().tolist() == [2]
