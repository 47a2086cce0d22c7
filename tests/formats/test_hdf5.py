"""The HDF5 driver on the layouts real files have."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

import quarry
from quarry.formats import open_source
from quarry.formats.hdf5 import HDF5Driver


def test_user_block_is_detected_by_content(tmp_path):
    path = str(tmp_path / "with_userblock.dat")  # the extension is no hint
    with h5py.File(path, "w", userblock_size=1024) as f:
        f["x"] = np.arange(5.0)
    with open(path, "r+b") as f:
        f.write(b"a header written by some simulation code")
    drv = open_source(path)
    assert isinstance(drv, HDF5Driver)
    assert drv.read("/x", 1, 3).tolist() == [1.0, 2.0]
    drv.close()


@pytest.mark.parametrize("storage", ["contiguous", "chunked", "gzip"])
def test_big_endian_4d_deep_groups(tmp_path, storage):
    path = str(tmp_path / "be.h5")
    data = np.arange(3 * 4 * 5 * 6, dtype=">f8").reshape(3, 4, 5, 6) - 100
    kw = {} if storage == "contiguous" else {"chunks": (1, 2, 5, 3)}
    if storage == "gzip":
        kw["compression"] = "gzip"
    with h5py.File(path, "w") as f:
        f.create_dataset("a/b/c/d/mesh", data=data, **kw)
        f.create_dataset("a/b/c/d/count", data=np.arange(360, dtype=">u2").reshape(3, 4, 5, 6))
    with quarry.open(path) as ds:
        (var,) = [v for v in ds.variables() if v.name == "mesh"]
        assert var.dtype == np.dtype("f8") and var.shape == (3, 4, 5, 6)
        for build in (False, True):
            if build:
                ds.build_index(block_len=37)
            sel = ds.query("mesh > 150.5 && count != 300")
            flat = data.reshape(-1)
            expect = np.flatnonzero((flat > 150.5) & (np.arange(360) != 300))
            np.testing.assert_array_equal(sel.ids(), expect)
            np.testing.assert_array_equal(sel.values("mesh"), flat[expect])
            np.testing.assert_array_equal(
                sel.coords(),
                np.argwhere(data.reshape(3, 4, 5, 6) > 150.5)[
                    [i for i, c in enumerate(np.flatnonzero(flat > 150.5)) if c != 300]
                ],
            )


def test_unsupported_variables_are_listed_with_the_reason(tmp_path):
    path = str(tmp_path / "odd.h5")
    with h5py.File(path, "w") as f:
        f["cplx"] = np.zeros(4, dtype="c8")
        f["scalar"] = 3.0
        f["five_d"] = np.zeros((1, 1, 1, 1, 2))
        f["text"] = np.array([b"a", b"b"])
        f["ok"] = np.zeros(4, dtype="i1")
    with quarry.open(path) as ds:
        problems = {v.name: v.problem for v in ds.variables()}
        assert problems["ok"] is None
        assert "complex64" in problems["cplx"] and "rank 0" in problems["scalar"]
        assert "rank 5" in problems["five_d"] and "not supported" in problems["text"]
        ds.build_index()  # indexes what it can, skips the rest
        assert list(ds.index.variables) == ["/ok"]
        with pytest.raises(quarry.UnsupportedVariableError, match="complex64"):
            ds.query("cplx > 0")


def test_empty_and_single_element_datasets(tmp_path):
    path = str(tmp_path / "tiny.h5")
    with h5py.File(path, "w") as f:
        f["empty"] = np.zeros(0, dtype="f4")
        f["one"] = np.array([7], dtype="i8")
    with quarry.open(path) as ds:
        ds.build_index()
        assert ds.query("empty > 0").count() == 0
        assert ds.query("empty > 0").ids().tolist() == []
        assert ds.query("one == 7").ids().tolist() == [0]
        assert ds.query("one != 7").count() == 0
