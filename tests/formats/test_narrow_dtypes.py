"""bool and float16 variables are indexed and queried: read as uint8 (0, 1)
and float32, both exact, and compared against NumPy on the stored values."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

import quarry
from oracle import oracle_ids

QUERIES = [
    "flag == 1",
    "flag != 1",
    "flag > 0 && half < 0.25",
    "half >= -0.5",
    "-1.5 < half <= 0.0999755859375",  # a float16 value exactly, and its neighbour
    "!(half > 1) || flag == 0",
    "half * 2 > 1",
]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("layout", ["contiguous", "chunked"])
@pytest.mark.parametrize("indexed", [True, False])
def test_bool_and_float16_answer_as_numpy(tmp_path, seed, layout, indexed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5_000))  # rarely a multiple of the block length
    flag = rng.random(n) < rng.random()
    half = (rng.normal(size=n) * rng.choice([0.5, 4.0, 3e4])).astype(np.float16)
    half[rng.random(n) < 0.05] = np.nan
    half[rng.random(n) < 0.01] = np.inf
    path = str(tmp_path / "narrow.h5")
    chunks = (max(1, n // 7),) if layout == "chunked" else None
    with h5py.File(path, "w") as f:
        f.create_dataset("flag", data=flag, chunks=chunks)
        f.create_dataset("half", data=half, chunks=chunks)
    columns = {"flag": flag.astype(np.uint8), "half": half.astype(np.float32)}
    with quarry.open(path) as ds:
        if indexed:
            ds.build_index(block_len=int(rng.integers(1, 700)))
        assert ds.variable("flag").dtype == np.uint8
        assert ds.variable("half").dtype == np.float32
        for query in QUERIES:
            expect = oracle_ids(query, columns)
            sel = ds.query(query)
            np.testing.assert_array_equal(sel.ids(), expect, err_msg=query)
            assert sel.count() == len(expect), query
            np.testing.assert_array_equal(sel.values("half"), half[expect].astype(np.float32))
            np.testing.assert_array_equal(sel.values("flag"), flag[expect].astype(np.uint8))
        info = {v["path"]: v for v in ds.info()["variables"]}
        assert info["/flag"]["decoding"] == "bool read as uint8"
        assert info["/half"]["decoding"] == "float16 read as float32"
