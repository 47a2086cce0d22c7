import h5py
import numpy as np
import pytest

import quarry

pandas = pytest.importorskip("pandas", reason="pandas is not installed")
pyarrow = pytest.importorskip("pyarrow", reason="pyarrow is not installed")
xarray = pytest.importorskip("xarray", reason="xarray is not installed")


@pytest.fixture
def mesh(tmp_path):
    path = str(tmp_path / "m.h5")
    rng = np.random.default_rng(2)
    data = {"t": rng.normal(size=(6, 7)), "q": rng.integers(0, 9, (6, 7)).astype("i4")}
    with h5py.File(path, "w") as f:
        for k, v in data.items():
            f[k] = v
    return path, data


def test_selection_to_pandas_arrow_xarray(mesh):
    path, data = mesh
    mask = data["t"] > 0.3
    ids = np.flatnonzero(mask)
    rows, cols = np.nonzero(mask)
    with quarry.open(path) as ds:
        ds.build_index(block_len=5)
        sel = ds.query("t > 0.3")
        df = sel.to_pandas(["t", "q"])
        np.testing.assert_array_equal(df.index.to_numpy(), ids)
        np.testing.assert_array_equal(df["t"].to_numpy(), data["t"][mask])
        assert df.index.name == "quarry_row"
        np.testing.assert_array_equal(df["quarry_index_0"].to_numpy(), rows)
        table = sel.to_arrow(["q"])
        assert table.column_names == ["quarry_row", "quarry_index_0", "quarry_index_1", "q"]
        np.testing.assert_array_equal(table["q"].to_numpy(), data["q"][mask])
        xr = sel.to_xarray(["t"])
        np.testing.assert_array_equal(xr["t"].values, data["t"][mask])
        np.testing.assert_array_equal(xr["quarry_index_1"].values, cols)
        assert xr["t"].dims == ("quarry_hit",)
        assert xr.attrs["query"] == "t > 0.3"
