"""What a black-box probe of ``quarry interp`` found, each pinned: rows of
several files told apart, CF ``coordinates`` paired by dimension, usage
errors instead of tracebacks or late library failures, subscripted names in
``--at``, and raw fields described in ``QUARRY_INDEX_PATH``."""

from __future__ import annotations

import csv
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pyarrow.parquet as pq
import pytest
from interp_cases import write_field, write_particles

import quarry
from quarry.errors import JoinArgumentError, UsageError

QUARRY = [sys.executable, "-m", "quarry.cli.main"]


def run(*args: str, code: int = 0, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        [*QUARRY, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    return proc.stdout if code == 0 else proc.stderr


@pytest.fixture
def two_files(tmp_path):
    """Two particle files, each with Step#0 and Step#1, and a 1-D field."""
    for k, name in enumerate(["run_a.h5", "run_b,x.h5"]):
        with h5py.File(tmp_path / name, "w") as f:
            for step in (0, 1):
                f[f"Step#{step}/x"] = np.array([0.5, 1.5]) + k + step
    with h5py.File(tmp_path / "f.h5", "w") as f:
        f["bx"] = np.arange(8.0) * 10
    return tmp_path


@pytest.mark.parametrize("ext", [".h5", ".nc", ".parquet", ".csv", ".npy"])
def test_rows_of_several_files_say_which_file_they_came_from(two_files, ext):
    """Each file has its own Step#0: (quarry_step, quarry_row) alone repeated
    across files, so the table leads with quarry_file over several files."""
    d = two_files
    files = [str(d / "run_a.h5"), str(d / "run_b,x.h5")]
    out = str(d / f"t{ext}")
    grid = ["--grid", "origin=0 spacing=1"]
    run("interp", *files, "--field", f"bx={d / 'f.h5'}", "--at", "x", *grid, "--out", out)
    if ext == ".h5":
        with h5py.File(out) as f:  # h5py lists names in name order
            assert set(f) == {"quarry_file", "quarry_step", "quarry_row", "bx"}
            got = {k: f[k][...] for k in ("quarry_file", "quarry_step", "quarry_row", "bx")}
            got["quarry_file"] = f["quarry_file"].asstr()[...]
    elif ext == ".parquet":
        got = {k: np.asarray(v) for k, v in pq.read_table(out).to_pydict().items()}
    elif ext == ".npy":
        table = np.load(out)
        got = {k: table[k] for k in table.dtype.names}
    elif ext == ".csv":
        with open(out, newline="") as f:
            rows = list(csv.reader(f))
        got = {k: np.array([r[i] for r in rows[1:]]) for i, k in enumerate(rows[0])}
    else:
        import netCDF4

        with netCDF4.Dataset(out) as f:
            got = {k: np.asarray(f[k][...]) for k in f.variables}
    assert list(got)[:3] == ["quarry_file", "quarry_step", "quarry_row"]
    assert [str(v) for v in got["quarry_file"]] == [files[0]] * 4 + [files[1]] * 4
    keys = {
        (str(a), int(b), int(c)) for a, b, c in zip(*(got[k] for k in list(got)[:3]), strict=True)
    }
    assert len(keys) == 8
    # x = 0.5 + file + step (+1 for the second row): bx = 10 * x on this grid.
    want = [10 * (0.5 + k + s + r) for k in (0, 1) for s in (0, 1) for r in (0, 1)]
    assert np.array_equal(np.asarray(got["bx"], float), want)


def test_printed_csv_quotes_a_file_name_holding_a_comma(two_files):
    d = two_files
    files = [str(d / "run_a.h5"), str(d / "run_b,x.h5")]
    text = run("interp", *files, "--field", f"bx={d / 'f.h5'}", "--at", "x", "--grid",
               "origin=0 spacing=1")  # fmt: skip
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["quarry_file", "quarry_step", "quarry_row", "bx"]
    assert {len(r) for r in rows} == {4} and rows[-1][0] == files[1]


def test_a_cf_coordinates_attribute_in_any_order_pairs_by_dimension(tmp_path):
    """CF lists coordinates in no order: ``lon lat`` on ``t(y, x)`` with
    ``lat(y)`` and ``lon(x)`` must not swap the axes."""
    import netCDF4

    lat, lon = np.array([0.0, 1.0, 2.0, 3.0]), np.array([0.0, 2.0, 4.0, 6.0, 8.0])
    t = np.add.outer(lat * 10, lon)
    path = str(tmp_path / "t.nc")
    with netCDF4.Dataset(path, "w") as f:
        f.createDimension("y", 4)
        f.createDimension("x", 5)
        for name, dim, values in (("lat", "y", lat), ("lon", "x", lon)):
            f.createVariable(name, "f8", (dim,))[:] = values
        var = f.createVariable("t", "f8", ("y", "x"))
        var[:] = t
        var.coordinates = "lon lat"
    with h5py.File(tmp_path / "p.h5", "w") as f:
        f["plat"], f["plon"] = np.array([1.0, 2.5]), np.array([2.0, 5.0])
    with quarry.open(str(tmp_path / "p.h5")) as ds:
        got = ds.select_all(["plat"]).interpolate({"t": path}, at=["plat", "plon"])["t"]
    assert got.tolist() == [10 * 1.0 + 2.0, 10 * 2.5 + 5.0]


@pytest.fixture
def particles(tmp_path):
    with h5py.File(tmp_path / "p.h5", "w") as f:
        f["x"], f["e"] = np.array([0.5, 2.0]), np.array([1.0, 2.0])
        f["pos"] = np.array([[0.5, 1.0], [1.5, 0.25]])
        f["g/x"] = np.array([7.0, 8.0])
    with h5py.File(tmp_path / "f.h5", "w") as f:
        f["bx"] = np.arange(16.0).reshape(4, 4)
        f["Step#0/b"], f["Step#1/b"] = np.arange(4.0), np.arange(4.0) * 2
    return tmp_path


@pytest.mark.parametrize("at", ["", ",", " , "])
def test_an_empty_at_is_a_usage_error(particles, at):
    d = particles
    for where in ([], ["--where", "e > 0"]):
        err = run("interp", str(d / "p.h5"), "--field", f"b={d / 'f.h5'}:/Step#0/b", "--at",
                  at, "--grid", "origin=0 spacing=1", *where, code=2)  # fmt: skip
        assert "names no variable" in err and len(err.strip().splitlines()) == 1


def test_the_api_refuses_a_string_or_no_names(particles):
    with quarry.open(str(particles / "p.h5")) as ds:
        sel = ds.select_all(["x"])
        for bad in ({"at": "xyz"}, {"at": ["x"], "values": "e"}):
            with pytest.raises(UsageError, match="as a list of names"):
                sel.interpolate({"b": f"{particles / 'f.h5'}:/Step#0/b"}, grid="origin=0 spacing=1",
                                **bad)  # fmt: skip
        with pytest.raises(UsageError, match="at least one variable"):
            ds.select_all([])


def test_a_field_named_like_a_group_of_a_values_column_is_refused_before_work(particles):
    d = particles
    for ext in (".h5", ".nc", ".parquet"):
        err = run("interp", str(d / "p.h5"), "--field", f"g={d / 'f.h5'}:/Step#0/b", "--at", "x",
                  "--grid", "origin=0 spacing=1", "--values", "/x,/g/x", "--out",
                  str(d / f"o{ext}"), code=2)  # fmt: skip
        assert "other than the --values columns (values= in Python) and their groups" in err
        assert not os.path.exists(d / f"o{ext}")


def test_at_may_name_columns_of_a_2d_position_array(particles):
    d = particles
    text = run("interp", str(d / "p.h5"), "--field", f"bx={d / 'f.h5'}:bx", "--at",
               "pos[:, 0],pos[:, 1]", "--grid", "origin=0,0 spacing=1,1")  # fmt: skip
    # bx[i, j] = 4 i + j, bilinear: exact for this plane.
    assert text.splitlines()[1:] == ["0,3.0", "1,6.25"]


def test_bad_field_subscripts_point_at_the_field(particles):
    d = particles
    field = f"{d / 'f.h5'}:bx[1.5]"
    err = run("interp", str(d / "p.h5"), "--field", f"bx={field}", "--at", "x", "--grid",
              "origin=0 spacing=1", code=2)  # fmt: skip
    lines = err.splitlines()
    assert lines[0] == f"quarry: error: field {field}: subscripts are integers"
    assert lines[1].strip() == field and lines[2].index("^") == lines[1].index("[1.5]") + 1


def test_an_ambiguous_field_variable_names_the_field_file_and_a_working_spelling(particles):
    d = particles
    args = ["interp", str(d / "p.h5"), "--at", "x", "--grid", "origin=0 spacing=1"]
    err = run(*args, "--field", f"b={d / 'f.h5'}", code=2)
    fields = str(d / "f.h5")
    assert f"'b' matches 2 variables of {fields}" in err
    assert f"b={fields}:/Step#{{step}}/b" in err and "--per-step" not in err
    spelled = err.split(" or ")[0].split("--field ")[1]  # b=...:/Step#0/b
    assert run(*args, "--field", spelled).splitlines()[1:] == ["0,0.5", "1,2.0"]


def test_a_raw_field_described_in_quarry_index_path_is_found(tmp_path):
    data, idx = tmp_path / "data", tmp_path / "idx"
    data.mkdir()
    idx.mkdir()
    np.arange(16, dtype="<f4").tofile(data / "bx.bin")
    with h5py.File(tmp_path / "p.h5", "w") as f:
        f["x"] = np.array([0.5, 2.0])
    run("register", str(data / "bx.bin"), "--dtype", "<f4", "--shape", "16", "--index", str(idx))
    assert not os.path.exists(str(data / "bx.bin") + ".qraw.json")
    env = {"QUARRY_INDEX_PATH": str(idx)}
    text = run("interp", str(tmp_path / "p.h5"), "--field", f"bx={data / 'bx.bin'}", "--at", "x",
               "--grid", "origin=0 spacing=1", env=env)  # fmt: skip
    assert text.splitlines()[1:] == ["0,0.5", "1,2.0"]
    assert run("query", str(data / "bx.bin"), "bx > 3", "--count", env=env).strip() == "12"


@pytest.mark.parametrize(
    ("fields", "grid", "said"),
    [
        ({"bx": "FIELD"}, {"origin": (0,), "spacing": (1,)}, "grid is text as 'origin="),
        ({"bx": "FIELD"}, ((0,), (1,)), "not a tuple"),
        (["FIELD"], "origin=0 spacing=1", "fields maps each column's name to its field"),
        ("FIELD", "origin=0 spacing=1", "got a str"),
        ({"bx": np.zeros(3)}, "origin=0 spacing=1", "field 'bx': give its name as text"),
    ],
)
def test_api_arguments_of_other_types_are_refused_saying_what_to_give(tmp_path, fields, grid, said):
    particles = write_particles(str(tmp_path / "p.h5"), {"x": np.array([0.5, 1.5])})
    field = write_field(str(tmp_path), "raw", "bx", np.array([0.0, 2.0, 4.0]))
    if isinstance(fields, dict):
        fields = {k: field if isinstance(v, str) else v for k, v in fields.items()}
    elif fields == ["FIELD"]:
        fields = [field]
    else:
        fields = field
    with quarry.open(particles) as ds, pytest.raises(JoinArgumentError, match=re.escape(said)):
        ds.select_all(["x"]).interpolate(fields, ["x"], grid=grid)


def test_a_field_may_be_a_pathlib_path(tmp_path):
    particles = write_particles(str(tmp_path / "p.h5"), {"x": np.array([0.5, 1.5])})
    field = write_field(str(tmp_path), "raw", "bx", np.array([0.0, 2.0, 4.0]))
    with quarry.open(particles) as ds:
        table = ds.select_all(["x"]).interpolate(
            {"bx": Path(field)}, ["x"], grid="origin=0 spacing=1"
        )
    assert table["bx"].tolist() == [1.0, 3.0]


def test_a_grid_past_float64_is_a_usage_error_without_warnings(particles):
    d = particles
    err = run("interp", str(d / "p.h5"), "--field", f"b={d / 'f.h5'}:/Step#0/b", "--at", "x",
              "--grid", "origin=1e308 spacing=1e308", code=2)  # fmt: skip
    assert err.strip().splitlines() == [
        "quarry: error: --grid 'origin=1e+308 spacing=1e+308': along axis 0, origin + 3 * "
        "spacing lies past the largest float64"
    ]


def test_a_grid_whose_points_float64_cannot_tell_apart_is_a_usage_error(particles):
    """Spacing 1 at origin 2**53 makes points 0 and 1 the same float64: it was
    blamed on the field's coordinates (exit 1), not on the --grid given."""
    d = particles
    err = run("interp", str(d / "p.h5"), "--field", f"b={d / 'f.h5'}:/Step#0/b", "--at", "x",
              "--grid", f"origin={2**53} spacing=1", code=2)  # fmt: skip
    assert err.strip().splitlines() == [
        "quarry: error: --grid 'origin=9007199254740992.0 spacing=1.0': along axis 0, points 0 "
        "and 1 (origin + 0 * spacing and origin + 1 * spacing) are the same float64: the "
        "spacing is below float64's resolution there"
    ]


@pytest.mark.parametrize("spec", ["{f}[:, 3", "{f}:bx[1"])
def test_an_unclosed_bracket_is_said_with_a_caret(particles, spec):
    d = particles
    text = spec.format(f=d / "f.h5")
    err = run("interp", str(d / "p.h5"), "--field", f"b={text}", "--at", "x",
              "--grid", "origin=0 spacing=1", code=2)  # fmt: skip
    lines = err.splitlines()
    assert lines[0] == f"quarry: error: field {text}: its '[' is not closed"
    assert lines[1].strip() == text and lines[2].index("^") == lines[1].index("[")


def test_values_of_a_2d_variable_set_the_table_of_1d_coordinates(tmp_path):
    """Regridding onto a target grid: --at lat,lon (1-D coordinates) broadcast
    along the axes of a 2-D --values variable, as they do for a --where."""
    import netCDF4

    with netCDF4.Dataset(tmp_path / "src.nc", "w") as nc:
        nc.createDimension("lat", 5)
        nc.createDimension("lon", 6)
        nc.createVariable("lat", "f8", ("lat",))[:] = np.linspace(-90, 90, 5)
        nc.createVariable("lon", "f8", ("lon",))[:] = np.linspace(0, 360, 6)
        nc.createVariable("tas", "f8", ("lat", "lon"))[:] = np.arange(30.0).reshape(5, 6)
    with netCDF4.Dataset(tmp_path / "tgt.nc", "w") as nc:
        nc.createDimension("lat", 3)
        nc.createDimension("lon", 4)
        nc.createVariable("lat", "f8", ("lat",))[:] = [-45, 0, 45]
        nc.createVariable("lon", "f8", ("lon",))[:] = [10, 100, 200, 300]
        nc.createVariable("mask", "f4", ("lat", "lon"))[:] = np.arange(12.0).reshape(3, 4)
    common = ["interp", str(tmp_path / "tgt.nc"), "--field", f"t={tmp_path / 'src.nc'}:tas",
              "--at", "lat,lon", "--values", "mask"]  # fmt: skip
    every = list(csv.DictReader(io.StringIO(run(*common))))
    where = list(csv.DictReader(io.StringIO(run(*common, "--where", "mask >= 0"))))
    assert len(every) == 12 and every == where
    assert [float(r["mask"]) for r in every] == list(range(12))
    # tas = 6 * (lat + 90) / 45 + (lon / 72): bilinear is exact on it
    lat, lon = np.meshgrid([-45, 0, 45], [10, 100, 200, 300], indexing="ij")
    want = 6 * (lat + 90) / 45 + lon / 72
    assert np.allclose([float(r["t"]) for r in every], want.ravel(), rtol=1e-12)


def test_at_is_x_y_z_by_default_whatever_select_all_named(tmp_path):
    """The README: `at=` is x, y, z by default (axis 0 first), not the order
    the selection's names were given in."""
    rng = np.random.default_rng(5)
    columns = {k: rng.uniform(0, 3, 20) for k in "xyz"}
    particles = write_particles(str(tmp_path / "p.h5"), columns)
    values = rng.normal(size=(4, 4, 4))
    field = write_field(str(tmp_path), "raw", "bx", values)
    grid = "origin=0,0,0 spacing=1,1,1"
    with quarry.open(particles) as ds:
        default = ds.select_all(["z", "y", "x"]).interpolate({"bx": field}, grid=grid)
        named = ds.select_all(["z", "y", "x"]).interpolate(
            {"bx": field}, ["x", "y", "z"], grid=grid
        )
    assert np.array_equal(default["bx"], named["bx"])
