"""One conformance suite every format driver passes (zarr's StoreTests pattern).

Each subclass writes the same arrays in its format; the suite checks
detection, the variable listing, reads of arbitrary spans, gathers, and that
queries (scanned and indexed) give the NumPy oracle's answers, so every
format answers identically.
"""

from __future__ import annotations

import os

import h5py
import numpy as np
import pytest

import quarry
from oracle import oracle_ids
from quarry.formats import detect, open_source
from quarry.formats.listing import ListedDriver

netcdf4 = pytest.importorskip("netCDF4", reason="netCDF4 is not installed")
zarr = pytest.importorskip("zarr", reason="zarr is not installed")

SHAPE = (37, 5)  # 185 rows: divides neither the block length nor the chunking


def _arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(42)
    temp = rng.normal(280, 15, SHAPE).astype("f4")
    temp[rng.random(SHAPE) < 0.1] = np.nan
    return {
        "temp": temp,
        "count": rng.integers(-300, 300, SHAPE).astype("i2"),
        "energy": rng.exponential(0.5, SHAPE).astype("f8"),
    }


QUERIES = [
    "temp > 290",
    "!(temp > 290)",
    "count == 7 || count < -250",
    "0.5 < energy <= 1.5 && temp < 270",
    "energy * 2 > temp / 100",
    "count != 0 && !(energy > 0.1)",
]


class FormatTests:
    kind: str
    multi = True  # holds several variables in one file
    concurrent: bool  # whether its driver's reads may run from several threads at once

    def write(self, folder: str, arrays: dict[str, np.ndarray]) -> str:
        raise NotImplementedError

    @pytest.fixture
    def written(self, tmp_path):
        arrays = _arrays() if self.multi else {"temp": _arrays()["temp"]}
        return self.write(str(tmp_path), arrays), arrays

    def queries(self, arrays: dict[str, np.ndarray]) -> list[str]:
        usable = [q for q in QUERIES if all(n in arrays for n in _names(q))]
        return usable or ["temp > 290"]

    def test_detected_by_content(self, written):
        path, _ = written
        assert detect(path) == self.kind

    def test_lists_variables(self, written):
        path, arrays = written
        drv = open_source(path)
        infos = {v.name: v for v in drv.variables()}
        for name, data in arrays.items():
            assert infos[name].shape == data.shape
            assert infos[name].dtype == data.dtype.newbyteorder("=")
            assert infos[name].problem is None
        drv.close()

    def test_reads_any_span_and_gathers(self, written):
        path, arrays = written
        drv = open_source(path)
        rng = np.random.default_rng(1)
        for name, data in arrays.items():
            (info,) = [v for v in drv.variables() if v.name == name]
            flat = data.reshape(-1)
            for _ in range(10):
                a, b = sorted(rng.integers(0, flat.size + 1, 2))
                got = drv.read(info.path, int(a), int(b))
                assert got.flags.c_contiguous and got.flags.aligned
                np.testing.assert_array_equal(got, flat[a:b])
            ids = np.sort(rng.choice(flat.size, 20, replace=False)).astype(np.int64)
            np.testing.assert_array_equal(drv.gather(info.path, ids), flat[ids])
        drv.close()

    def test_declares_whether_reads_may_run_from_several_threads(self, written):
        """The driver's class declares ``concurrent_reads`` itself, as its
        library documents (see the driver); where True, reads from four
        threads at once give what reads one after another give."""
        from concurrent.futures import ThreadPoolExecutor

        path, _ = written
        drv = open_source(path)
        assert type(drv).__dict__.get("concurrent_reads") is self.concurrent
        if self.concurrent:
            (info,) = [v for v in drv.variables() if v.name == "temp"]
            spans = [(a, a + 40) for a in range(0, info.size - 40, 7)] * 4
            alone = [drv.read(info.path, a, b) for a, b in spans]
            with ThreadPoolExecutor(4) as pool:
                together = list(pool.map(lambda span: drv.read(info.path, *span), spans))
            for one, other in zip(alone, together, strict=True):
                np.testing.assert_array_equal(one, other)
        drv.close()

    @pytest.mark.parametrize("indexed", [False, True])
    def test_queries_match_the_oracle(self, written, indexed):
        path, arrays = written
        with quarry.open(path) as ds:
            if indexed:
                ds.build_index(block_len=16, bins=8)
            for q in self.queries(arrays):
                expect = oracle_ids(q, arrays)
                sel = ds.query(q)
                np.testing.assert_array_equal(sel.ids(), expect, err_msg=q)
                assert ds.query(q).count() == len(expect)
                np.testing.assert_array_equal(
                    sel.values("temp"), arrays["temp"].reshape(-1)[expect], err_msg=q
                )

    def test_a_fresh_index_lists_the_file_without_opening_it(self, written, monkeypatch):
        """What opening costs in a long series: with a fresh index the file is
        listed from its manifest and opened only when values are read."""
        from quarry.index import fresh

        path, arrays = written
        # The index is built "long after" the write (no racy window): its stat is trusted.
        monkeypatch.setattr(fresh, "RACY_NS", 0)
        monkeypatch.setattr(fresh, "FINE_RACY_NS", 0)
        with quarry.open(path) as ds:
            ds.build_index(block_len=16, bins=8)
        plain = open_source(path)
        expected = plain.variables()
        with quarry.open(path) as ds:
            assert isinstance(ds.driver, ListedDriver)
            listed = ds.variables()
            assert listed == expected and [v.attrs for v in listed] == [v.attrs for v in expected]
            assert ds.driver.step_context == plain.step_context
            expect = oracle_ids("temp > 290", arrays)
            assert ds.query("temp > 290").count() == len(expect)
            assert not ds.driver.opened  # the index answered alone
            np.testing.assert_array_equal(
                ds.query("temp > 290").values("temp"), arrays["temp"].reshape(-1)[expect]
            )
            assert ds.driver.opened
        plain.close()

    def test_index_in_another_directory_and_staleness(self, written, tmp_path):
        path, _ = written
        elsewhere = tmp_path / "indexes"
        elsewhere.mkdir()
        with quarry.open(path, index=str(elsewhere)) as ds:
            ds.build_index()
            count = ds.query("temp > 290").count()
        assert os.listdir(elsewhere)
        with quarry.open(path, index=str(elsewhere)) as ds:
            assert ds.query("temp > 290").count() == count
        _touch_newest(path)
        with quarry.open(path, index=str(elsewhere)) as ds, pytest.raises(quarry.StaleIndexError):
            ds.query("temp > 290").count()


def _names(query: str) -> set[str]:
    from quarry.expr import parse
    from quarry.expr.ast import variables

    return {v.name for v in variables(parse(query))}


def _touch_newest(path: str) -> None:
    target = path
    if os.path.isdir(path):
        files = [os.path.join(r, n) for r, _, ns in os.walk(path) for n in ns]
        target = max(files, key=os.path.getmtime)
    st = os.stat(target)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))


class TestHDF5(FormatTests):
    kind = "hdf5"
    concurrent = True

    def write(self, folder, arrays):
        path = os.path.join(folder, "data.h5")
        with h5py.File(path, "w") as f:
            for name, data in arrays.items():
                f.create_dataset(f"grp/{name}", data=data, chunks=(8, 5), compression="gzip")
        return path


class _NetCDF(FormatTests):
    kind = "netcdf"
    concurrent = False
    nc_format = "NETCDF4"

    def write(self, folder, arrays):
        path = os.path.join(folder, "data.nc")
        with netcdf4.Dataset(path, "w", format=self.nc_format) as ds:
            ds.createDimension("time", None)  # unlimited
            ds.createDimension("x", SHAPE[1])
            for name, data in arrays.items():
                var = ds.createVariable(name, data.dtype, ("time", "x"), fill_value=False)
                var.set_auto_maskandscale(False)
                var[:] = data
        return path


class TestNetCDF4(_NetCDF):
    nc_format = "NETCDF4"


class TestNetCDFClassic(_NetCDF):
    nc_format = "NETCDF3_CLASSIC"


class TestNetCDF64BitOffset(_NetCDF):
    nc_format = "NETCDF3_64BIT_OFFSET"


class _Zarr(FormatTests):
    kind = "zarr"
    concurrent = True
    zarr_format = 3

    def write(self, folder, arrays):
        path = os.path.join(folder, "data.zarr")
        root = zarr.open_group(path, mode="w", zarr_format=self.zarr_format)
        for name, data in arrays.items():
            arr = root.create_array(
                f"grp/{name}", shape=data.shape, dtype=data.dtype, chunks=(8, 3)
            )
            arr[:] = data
        return path


class TestZarrV2(_Zarr):
    zarr_format = 2


class TestZarrV3(_Zarr):
    zarr_format = 3


class _Raw(FormatTests):
    kind = "raw"
    concurrent = True
    multi = False
    order = "C"
    byteorder = "<"

    def write(self, folder, arrays):
        from quarry.formats.raw import RawLayout, register

        path = os.path.join(folder, "temp.bin")
        data = arrays["temp"].astype(self.byteorder + "f4")
        header = b"HDR!" * 4
        with open(path, "wb") as f:
            f.write(header)
            f.write(np.asarray(data, order=self.order).tobytes(order=self.order))
        register(path, RawLayout("temp", self.byteorder + "f4", SHAPE, self.order, len(header)))
        return path


class TestRawC(_Raw):
    pass


class TestRawFortranBigEndian(_Raw):
    order = "F"
    byteorder = ">"


class _ADIOS2(FormatTests):
    kind = "adios2"
    concurrent = False
    engine = "BP5"

    def write(self, folder, arrays):
        adios2 = pytest.importorskip("adios2", reason="adios2 is not installed")
        path = os.path.join(folder, "data.bp")
        io = adios2.Adios().declare_io("conformance")
        io.set_engine(self.engine)
        with adios2.Stream(io, path, "w") as stream:
            for _ in stream.steps(1):
                for name, data in arrays.items():
                    shape = list(data.shape)
                    stream.write(name, np.ascontiguousarray(data), shape, [0] * len(shape), shape)
        return path


class TestADIOS2BP5(_ADIOS2):
    engine = "BP5"


class TestADIOS2BP4(_ADIOS2):
    engine = "BP4"
