"""Every output names a selected variable's column by its name and holds its
values; Quarry's own columns never take a variable's name. Variable names are
drawn to include every name Quarry itself writes; each writer's file is
reopened with its own library and compared with NumPy."""

from __future__ import annotations

import csv
import os
import tempfile

import h5py
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import quarry
from generators import DTYPES, column

netcdf4 = pytest.importorskip("netCDF4", reason="netCDF4 is not installed")
pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed")
pandas = pytest.importorskip("pandas", reason="pandas is not installed")
xarray = pytest.importorskip("xarray", reason="xarray is not installed")

#: Every name Quarry writes, the names it wrote before, and a variable's likely names.
RESERVED = [
    "quarry_row",
    "quarry_row_",
    "quarry_index_0",
    "quarry_index_1",
    "quarry_hit",
    "quarry_found",
    "quarry_group",
    "quarry_file",
    "quarry_step",
    "id",
    "dim_0",
    "hit",
    "found",
    "group",
    "file",
    "step",
    "lat",
]
GROUPS = ["", "g/", "quarry_row/", "a/g/"]
OUTPUTS = [".h5", ".nc", ".parquet", ".csv", ".npy", "pandas", "arrow", "xarray"]


@st.composite
def scenarios(draw):
    leaves = st.one_of(
        st.sampled_from(RESERVED), st.from_regex(r"[a-z][a-z0-9_]{0,5}", fullmatch=True)
    )
    paths = draw(
        st.lists(
            st.tuples(st.sampled_from(GROUPS), leaves).map("".join),
            min_size=1,
            max_size=4,
            unique=True,
        )
    )
    groups = {p.rsplit("/", 1)[0] for p in paths if "/" in p}
    groups |= {g.split("/", 1)[0] for g in groups}
    assume(not groups & set(paths))  # a name is a dataset or a group, not both
    shape = draw(st.sampled_from([(0,), (1,), (37,), (5, 7)]))
    data = {
        p: column(draw, draw(st.sampled_from(DTYPES)), int(np.prod(shape))).reshape(shape)
        for p in paths
    }
    return data, draw(st.sampled_from(OUTPUTS))


def reopen(out: str, kind: str, sel: quarry.Selection, names: list[str]) -> tuple[dict, dict]:
    """Columns (name -> values) and attributes (name -> dict) as each library reads them."""
    if kind == "pandas":
        df = sel.to_pandas(names).reset_index()
        return {c: df[c].to_numpy() for c in df.columns}, {}
    if kind == "arrow":
        table = sel.to_arrow(names)
        return {c: table[c].to_numpy() for c in table.column_names}, {
            f.name: {k.decode(): v.decode() for k, v in (f.metadata or {}).items()}
            for f in table.schema
        }
    if kind == "xarray":
        ds = sel.to_xarray(names)
        return {k: v.values for k, v in ds.variables.items()}, {
            k: dict(v.attrs) for k, v in ds.variables.items()
        }
    sel.extract(out, names)
    if kind == ".h5":
        cols, attrs = {}, {}
        with h5py.File(out) as f:

            def visit(name, obj):
                if isinstance(obj, h5py.Dataset):
                    cols[name], attrs[name] = obj[()], dict(obj.attrs)

            f.visititems(visit)
        return cols, attrs
    if kind == ".nc":
        cols, attrs = {}, {}
        with netcdf4.Dataset(out) as ds:

            def walk(group, prefix):
                for name, var in group.variables.items():
                    var.set_auto_mask(False)  # NetCDF's default fill values are plain values here
                    cols[prefix + name] = var[:]
                    attrs[prefix + name] = {a: var.getncattr(a) for a in var.ncattrs()}
                for name, child in group.groups.items():
                    walk(child, f"{prefix}{name}/")

            walk(ds, "")
        return cols, attrs
    if kind == ".parquet":
        table = pq.read_table(out)
        return {c: table[c].to_numpy() for c in table.column_names}, {
            f.name: {k.decode(): v.decode() for k, v in (f.metadata or {}).items()}
            for f in table.schema
        }
    if kind == ".csv":
        with open(out, newline="") as f:
            rows = list(csv.reader(f))
        header, body = rows[0], rows[1:]
        return {h: [r[k] for r in body] for k, h in enumerate(header)}, {}
    records = np.load(out)
    return {n: records[n] for n in records.dtype.names}, {}


def same(got, want: np.ndarray) -> None:
    if isinstance(got, list):  # CSV text
        parse = int if want.dtype.kind in "iu" else float
        got = np.array([parse(v) for v in got], dtype=want.dtype)
    np.testing.assert_array_equal(np.asarray(got), want)
    assert np.asarray(got).dtype.kind == want.dtype.kind


@given(scenarios())
def test_columns_are_named_by_their_variables_in_every_output(scenario):
    data, kind = scenario
    first, *_ = data
    values = data[first]
    finite = values[np.isfinite(values.astype("f8"))] if values.size else values
    literal = finite.reshape(-1)[len(finite) // 2].item() if finite.size else 0
    mask = values >= literal if values.dtype.kind in "iu" else values.astype("f8") >= float(literal)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "d.h5")
        with h5py.File(path, "w") as f:
            for p, v in data.items():
                f[p] = v
                f[p].attrs["units"] = f"u_{p}"
        out = os.path.join(tmp, "out" + kind if kind.startswith(".") else "unused")
        with quarry.open(path) as ds:
            sel = ds.query(f"`/{first}` >= {literal!r}")
            names = ["/" + p for p in data]
            cols, attrs = reopen(out, kind, sel, names)
        assert sorted(os.listdir(tmp)) == sorted({"d.h5", os.path.basename(out)} - {"unused"})
    bare = [p.rsplit("/", 1)[-1] for p in data]
    groups = {p.split("/", 1)[0] for p in data if "/" in p}
    named = {}
    for p, leaf in zip(data, bare, strict=True):
        # its bare name when unique (and not the group of another's path),
        # else a longer suffix of its own path
        named[p] = max((n for n in cols if ("/" + p).endswith("/" + n)), key=len)
        assert bare.count(leaf) > 1 or leaf in groups or named[p] == leaf
        same(cols[named[p]], data[p][mask])
    assert len(set(named.values())) == len(data)
    own = [n for n in cols if n not in named.values()]
    flat = kind in (".csv", ".npy")
    expect_own = ["quarry_row"] + (
        [] if flat else [f"quarry_index_{k}" for k in range(len(values.shape))]
    )
    own.sort(key=lambda n: expect_own.index(n.rstrip("_")))  # HDF5 lists names alphabetically
    assert [n.rstrip("_") for n in own] == expect_own
    assert [n for n in own if n.split("/")[0] in {x.split("/")[0] for x in named.values()}] == []
    same(cols[own[0]], np.flatnonzero(mask))
    for axis, name in enumerate(own[1:]):
        same(cols[name], np.nonzero(mask)[axis].astype(np.int64))
    if attrs:
        for p, name in named.items():
            assert attrs[name]["units"] == f"u_{p}"
