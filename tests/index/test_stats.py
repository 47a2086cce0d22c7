import h5py
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import quarry


@given(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=0, max_size=300),
    st.integers(1, 50),
    st.sampled_from(["f4", "f8", "i4"]),
    st.floats(0, 1),
)
def test_index_statistics_match_numpy(tmp_path_factory, values, block_len, dtype, nan_share):
    data = np.array(values, dtype=np.float64)
    if dtype != "i4":
        data[: int(len(data) * nan_share)] = np.nan
    data = data.astype(dtype)
    path = str(tmp_path_factory.mktemp("stats") / "s.h5")
    with h5py.File(path, "w") as f:
        f["v"] = data
    with quarry.open(path) as ds:
        ds.build_index(block_len=block_len)
        info = {v["path"]: v for v in ds.info()["variables"]}["/v"]
    stats = info["stats"]
    valid = data[~np.isnan(data.astype(np.float64))]
    assert stats["count"] == len(valid) and stats["missing"] == len(data) - len(valid)
    if len(valid) == 0:
        assert stats["mean"] is None
        return
    assert stats["min"] == valid.min() and stats["max"] == valid.max()
    wide = valid.astype(np.float64)
    assert stats["mean"] == pytest.approx(wide.mean(), rel=1e-9, abs=1e-9)
    assert stats["std"] == pytest.approx(wide.std(), rel=1e-7, abs=1e-6)


def test_stable_for_a_large_offset(tmp_path):
    data = 1e9 + np.random.default_rng(0).normal(0, 1e-3, 100_000)
    path = str(tmp_path / "offset.h5")
    with h5py.File(path, "w") as f:
        f["v"] = data
    with quarry.open(path) as ds:
        ds.build_index(block_len=4096)
        stats = ds.info()["variables"][0]["stats"]
    assert stats["std"] == pytest.approx(data.std(), rel=1e-6)


@pytest.mark.parametrize(
    ("values", "total"),
    [([-np.inf], -np.inf), ([np.inf, 1.0], np.inf), ([2.0, -np.inf, 1.0], -np.inf)],
)
def test_block_sums_with_infinities_are_infinite(tmp_path, values, total):
    # A block whose first value is infinite used to store a NaN sum.
    path = str(tmp_path / "inf.h5")
    with h5py.File(path, "w") as f:
        f["v"] = np.array(values)
    with quarry.open(path) as ds:
        ds.build_index()
        ((count, block_sum, _, _, _),) = ds.index.column("/v").stats()
        assert count == len(values) and block_sum == total
        assert ds.query("v >= mean(v)").aggregates[0].value == total
