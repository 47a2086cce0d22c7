"""The format registry: every backend's guess on a file of every format, the
order that settles overlaps (a NetCDF-4 file is an HDF5 file; a described
raw file may be anything), and the messages when nothing matches."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from quarry.errors import SourceError
from quarry.formats import BACKENDS, backend_for, detect, is_store, open_source
from quarry.formats.raw import RawLayout, register

netcdf4 = pytest.importorskip("netCDF4", reason="netCDF4 is not installed")
zarr = pytest.importorskip("zarr", reason="zarr is not installed")
adios2 = pytest.importorskip("adios2", reason="adios2 is not installed")

DATA = np.random.default_rng(7).normal(size=300)


def _hdf5(path: str) -> None:
    with h5py.File(path, "w") as f:
        f["x"] = DATA


def _netcdf(path: str, fmt: str, attributes: int = 0) -> None:
    with netcdf4.Dataset(path, "w", format=fmt) as f:
        for k in range(attributes):  # enough pushes libnetcdf's names past the first 64 KiB
            f.setncattr(f"note_{k:03d}", "n" * 1000)
        f.createDimension("n", DATA.size)
        f.createVariable("x", "f8", ("n",))[:] = DATA


def _zarr(path: str) -> None:
    zarr.open_group(path, mode="w").create_array("x", data=DATA)


def _adios2(path: str) -> None:
    with adios2.Stream(path, "w") as s:
        s.write("x", DATA, list(DATA.shape), [0], list(DATA.shape))


def _raw(path: str) -> None:
    DATA.tofile(path)
    register(path, RawLayout("x", "<f8", DATA.shape))


def _user_block(path: str) -> None:
    """HDF5 behind a 128 KiB user block: its signature is past the first 64 KiB."""
    with h5py.File(path, "w", userblock_size=1 << 17) as f:
        f["x"] = DATA


WRITERS = {
    "a.h5": ("hdf5", _hdf5),
    "blocked.h5": ("hdf5", _user_block),
    "a.nc": ("netcdf", lambda p: _netcdf(p, "NETCDF4")),
    "classic.nc": ("netcdf", lambda p: _netcdf(p, "NETCDF3_CLASSIC")),
    "offset64.nc": ("netcdf", lambda p: _netcdf(p, "NETCDF3_64BIT_OFFSET")),
    "noted.nc": ("netcdf", lambda p: _netcdf(p, "NETCDF4", attributes=80)),
    "s.zarr": ("zarr", _zarr),
    "run.bp": ("adios2", _adios2),
    "a.bin": ("raw", _raw),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("formats")
    written = {}
    for name, (kind, write) in WRITERS.items():
        path = str(folder / name)
        write(path)
        written[name] = (path, kind)
    return written


def test_the_order_settles_overlaps():
    names = [b.name for b in BACKENDS]
    assert names == ["raw", "netcdf", "hdf5", "zarr", "adios2"]


@pytest.mark.parametrize("name", list(WRITERS))
def test_the_first_backend_that_guesses_opens_the_file(files, name):
    path, kind = files[name]
    guesses = {b.name for b in BACKENDS if b.guess_can_open(path)}
    expected = {kind} | ({"hdf5"} if name in ("a.nc", "noted.nc") else set())
    assert guesses == expected  # NetCDF-4 is HDF5 too: order decides
    assert detect(path) == kind == backend_for(path).name
    assert is_store(path) == (kind in ("zarr", "adios2"))
    drv = open_source(path)
    try:
        (info,) = [v for v in drv.variables() if v.name == "x"]
        np.testing.assert_array_equal(drv.read(info.path, 0, DATA.size), DATA)
    finally:
        drv.close()


def test_netcdf4_names_past_the_first_bytes_are_still_found(tmp_path):
    """An older libnetcdf's file: no ``_NCProperties``, a variable tagged
    ``_Netcdf4Dimid`` whose attributes (many of them) lie after 160 KB of data."""
    path = str(tmp_path / "late.nc")
    with h5py.File(path, "w") as f:
        f["big"] = np.zeros(20_000)
        tagged = f.create_dataset("x", data=DATA)
        for k in range(30):
            tagged.attrs[f"note_{k}"] = "n" * 200
        tagged.attrs["_Netcdf4Dimid"] = np.int32(0)
    with open(path, "rb") as f:
        assert f.read().find(b"_Netcdf4") > 1 << 16
    assert detect(path) == "netcdf"
    with h5py.File(path, "a") as f:
        del f["x"].attrs["_Netcdf4Dimid"]
    assert detect(path) == "hdf5"


def test_a_dangling_link_does_not_hide_a_tagged_variable(tmp_path):
    path = str(tmp_path / "linked.h5")
    with h5py.File(path, "w") as f:
        f["a_link"] = h5py.SoftLink("/nowhere")
        f["b"] = DATA
    assert detect(path) == "hdf5"
    with h5py.File(path, "a") as f:
        f["c"] = DATA
        f["c"].attrs["_Netcdf4Coordinates"] = np.int32([0])
    assert detect(path) == "netcdf"


def test_a_description_overrides_the_bytes(files, tmp_path):
    path = str(tmp_path / "described.h5")
    _hdf5(path)
    assert detect(path) == "hdf5"
    with open(path, "rb") as f:
        size = len(f.read())
    register(path, RawLayout("bytes", "u1", (size,)))
    assert detect(path) == "raw"


def test_a_description_elsewhere_is_found_only_when_asked(tmp_path):
    data, elsewhere = tmp_path / "b.bin", tmp_path / "idx"
    elsewhere.mkdir()
    DATA.tofile(data)
    register(str(data), RawLayout("x", "<f8", DATA.shape), str(elsewhere))
    with pytest.raises(SourceError, match="quarry register"):
        detect(str(data))
    assert detect(str(data), (str(elsewhere),)) == "raw"


def test_unknown_files_and_directories_name_every_format_tried(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not data")
    with pytest.raises(SourceError) as caught:
        detect(str(text))
    message = str(caught.value)
    for words in ("HDF5", "NetCDF", "Zarr", "ADIOS2", f"quarry register {text}"):
        assert words in message
    with pytest.raises(SourceError, match=r"directory .*Zarr .*ADIOS2") as caught:
        detect(str(tmp_path))
    assert not is_store(str(tmp_path))
    with pytest.raises(SourceError, match="no such file"):
        detect(str(tmp_path / "missing.h5"))


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_zarr_store_that_is_one_array_is_its_only_variable(tmp_path, zarr_format):
    """``zarr.save`` and dask's ``to_zarr`` write a store whose root is the array:
    opening it said "An array already exists in store" (v3) or "No group found"
    (v2). Its one variable is named after the store, less ``.zarr``."""
    import subprocess
    import sys

    zarr = pytest.importorskip("zarr")
    import quarry

    path = str(tmp_path / "bx.zarr")
    values = np.random.default_rng(5).normal(size=(30, 20)).round(2)
    values[3, 4] = np.nan
    store = zarr.create_array(
        path, shape=values.shape, chunks=(8, 8), dtype="f8", zarr_format=zarr_format
    )
    store[:] = values
    assert detect(path) == "zarr"
    with quarry.open(path) as ds:
        assert [v.path for v in ds.variables()] == ["/bx"]
        want = int((values > 0.5).sum())
        assert ds.query("bx > 0.5").count() == want
        ds.build_index()
    with quarry.open(path) as ds:
        assert ds.query("bx > 0.5").count() == want
    done = subprocess.run(
        [sys.executable, "-m", "quarry.cli.main", "query", path, "bx > 0.5", "--count"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and done.stdout.strip() == str(want), done.stderr
