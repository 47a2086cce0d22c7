"""``quarry interp`` from the shell: its outputs equal the API's table and
the NumPy reference; its errors are one line, exit 2 for usage, 1 for data."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import h5py
import numpy as np
import pytest
from interp_cases import assert_close, reference, write_field, write_particles

QUARRY = [sys.executable, "-m", "quarry.cli.main"]
GRID = "origin=0,0,0 spacing=2.6,2.6,1.04"
SHAPE = (12, 10, 8)


def run(*args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([*QUARRY, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    if code:  # one line (a query's error adds the query and a caret under it)
        assert "Traceback" not in proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 or "error in query" in lines[0], proc.stderr
        assert proc.stderr.startswith("quarry: error"), proc.stderr
    return proc


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(7)
    n = 4000
    columns = {
        "x": rng.uniform(-1, 30, n),
        "y": rng.uniform(0, 24, n),
        "z": rng.uniform(0, 8, n),
        "energy": rng.uniform(0, 2, n).astype("f4"),
    }
    particles = write_particles(str(tmp_path / "particles.h5"), columns)
    bx = rng.normal(size=SHAPE).astype("<f4")
    by = rng.normal(size=SHAPE)
    fields = {
        "bx": (write_field(str(tmp_path), "raw", "bx", bx), bx),
        "by": (write_field(str(tmp_path), "hdf5", "by", by), by),
    }
    return tmp_path, particles, columns, fields


def _expected(columns, values, mask, outside="nan"):
    coords = [s * np.arange(n) for s, n in zip((2.6, 2.6, 1.04), SHAPE, strict=True)]
    return reference(values, coords, [columns[v][mask] for v in "xyz"], outside)


def _args(particles, fields, *more):
    spec = [a for name, (path, _) in fields.items() for a in ("--field", f"{name}={path}")]
    return [
        "interp",
        particles,
        *spec,
        "--at",
        "x,y,z",
        "--grid",
        GRID,
        "--where",
        "1.2 < energy < 1.3",
        *more,
    ]


@pytest.mark.parametrize("ext", [".h5", ".parquet", ".npy", ".nc", ".csv"])
def test_the_output_file_holds_rows_values_and_fields(data, ext):
    folder, particles, columns, fields = data
    out = str(folder / f"hits{ext}")
    proc = run(*_args(particles, fields, "--values", "energy", "--out", out))
    mask = (columns["energy"] > 1.2) & (columns["energy"] < 1.3)
    assert proc.stdout == f"{mask.sum()} particle(s) written to {out}\n"
    if ext == ".h5":
        with h5py.File(out) as f:
            got = {k: f[k][()] for k in f}
            assert f.attrs["query"] == "1.2 < energy < 1.3"
            assert f.attrs["fields"] == f"bx={fields['bx'][0]} by={fields['by'][0]}"
            assert f.attrs["grid"] == GRID and f.attrs["at"] == "x,y,z"
            assert f["bx"].attrs["interpolated_from"] == fields["bx"][0]
    elif ext == ".parquet":
        import pyarrow.parquet

        got = {k: np.asarray(v) for k, v in pyarrow.parquet.read_table(out).to_pydict().items()}
    elif ext == ".nc":
        import netCDF4

        with netCDF4.Dataset(out) as ds:
            ds.set_auto_mask(False)
            got = {k: ds[k][:] for k in ds.variables}
    elif ext == ".csv":
        got = {k: np.asarray(v) for k, v in _csv(out).items()}
    else:
        records = np.load(out)
        got = {k: records[k] for k in records.dtype.names}
    order = list(got) if ext in (".npy", ".parquet", ".csv") else sorted(got)
    names = ["quarry_row", "energy", "bx", "by"]
    assert order == (names if ext in (".npy", ".parquet", ".csv") else sorted(names))
    assert got["quarry_row"].tolist() == np.flatnonzero(mask).tolist()
    np.testing.assert_array_equal(got["energy"], columns["energy"][mask])
    for name, (_, values) in fields.items():
        assert_close(got[name], _expected(columns, values, mask), values)


def _csv(path):
    import csv

    with open(path) as f:
        rows = list(csv.reader(f))
    return {name: [float(r[k]) for r in rows[1:]] for k, name in enumerate(rows[0])}


def test_json_gives_the_count_and_each_fields_min_max_mean(data):
    _, particles, columns, fields = data
    result = json.loads(run(*_args(particles, fields, "--json", "--outside", "clamp")).stdout)
    mask = (columns["energy"] > 1.2) & (columns["energy"] < 1.3)
    assert result["count"] == int(mask.sum())
    for name, (_, values) in fields.items():
        expected = _expected(columns, values, mask, "clamp")
        stats = result["fields"][name]
        assert stats["nan"] == 0
        assert stats["min"] == pytest.approx(expected.min(), rel=1e-12)
        assert stats["max"] == pytest.approx(expected.max(), rel=1e-12)
        assert stats["mean"] == pytest.approx(expected.mean(), rel=1e-12)
        assert 0 < stats["bytes_read"] <= values.nbytes


def test_without_out_it_prints_csv_and_without_where_it_takes_every_particle(data):
    _, particles, columns, fields = data
    path = fields["bx"][0]
    proc = run("interp", particles, "--field", f"bx={path}[:, 2, 3]", "--at", "x", "--grid", GRID)
    lines = proc.stdout.splitlines()
    assert lines[0] == "quarry_row,bx"
    assert len(lines) == 1 + len(columns["x"])
    got = np.array([float(line.split(",")[1]) for line in lines[1:]])
    coords = [2.6 * np.arange(SHAPE[0])]
    expected = reference(fields["bx"][1][:, 2, 3], coords, [columns["x"]], "nan")
    assert_close(got, expected, fields["bx"][1])


def test_a_netcdf_field_brings_its_grid(tmp_path):
    particles = write_particles(str(tmp_path / "p.h5"), {"lat": np.array([-45.0, 10.0, 60.0])})
    field = write_field(
        str(tmp_path), "netcdf", "t", np.array([250.0, 280.0, 300.0]), [np.array([-90, 0, 90])]
    )
    proc = run("interp", particles, "--field", f"t={field}", "--at", "lat", "--json")
    stats = json.loads(proc.stdout)["fields"]["t"]
    assert stats["min"] == 265.0 and stats["max"] == pytest.approx(280 + 20 * 60 / 90, rel=1e-15)


@pytest.mark.parametrize(
    ("change", "code", "message"),
    [
        (["--field", "bz=missing.bin"], 1, "no such field file: missing.bin"),
        (["--at", "x,y"], 2, "has 3 dimension.*--at .*gives 2"),
        (["--grid", "origin=0,0,0 spacing=1,1"], 2, "origin has 3 numbers but spacing has 2"),
        (["--grid", "origin=0,0,0 step=1,1,1"], 2, "cannot read 'step=1,1,1'"),
        (["--field", "nothing"], 2, "write NAME=FILE"),
        (["--where", "energy >"], 2, "error in query"),
        (["--method", "linear"], 2, "linear interpolation takes 1"),
        (["--at", "x,y,w"], 1, "no variable 'w'"),
    ],
)
def test_bad_input_is_one_line_and_the_right_exit_status(data, change, code, message):
    _, particles, _, fields = data
    args = _args(particles, {"bx": fields["bx"]})
    option = change[0]
    if option in args and option != "--field":
        args[args.index(option) + 1] = change[1]
    else:
        args = [*args, *change] if option != "--field" else [*args[:2], *change, *args[4:]]
    proc = run(*args, code=code)
    assert re.search(message, proc.stderr), proc.stderr


def test_a_field_without_coordinates_needs_grid(data):
    _, particles, _, fields = data
    proc = run("interp", particles, "--field", f"bx={fields['bx'][0]}", "--at", "x,y,z", code=2)
    assert "has no coordinate variables; give its grid" in proc.stderr


def test_a_coordinate_variable_of_the_wrong_length_is_named(tmp_path):
    """It was reported as 'has no coordinate variables', sending the user to write a
    --grid for a file that has coordinates, one of them wrong."""
    path = str(tmp_path / "f.h5")
    with h5py.File(path, "w") as f:
        f["F"], f["x"], f["y"] = np.zeros((5, 4)), np.arange(4.0), np.arange(4.0)
    particles = write_particles(str(tmp_path / "p.h5"), {"x": [1.0], "y": [1.0]})
    proc = run("interp", particles, "--field", f"F={path}:F", "--at", "x,y", code=2)
    last = proc.stderr.strip().splitlines()[-1]
    assert "field F" in last and "/x has 4 points where axis 0 has 5" in last, last


def test_coordinates_on_some_axes_only_are_named(tmp_path):
    """It was 'has no coordinate variables': the axes that have them, and the
    one that lacks them, are named, with the --grid that would do instead."""
    import netCDF4

    path = str(tmp_path / "half.nc")
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 4)
        nc.createDimension("q", 3)
        nc.createVariable("x", "f8", ("x",))[:] = np.arange(4.0)
        nc.createVariable("t", "f8", ("x", "q"))[:] = np.zeros((4, 3))
    particles = write_particles(str(tmp_path / "p.h5"), {"x": [1.0], "y": [1.0]})
    proc = run("interp", particles, "--field", f"t={path}:t", "--at", "x,y", code=2)
    assert proc.stderr.strip().splitlines()[-1] == (
        f"quarry: error: field t ({path}:t): /t has coordinate variables for axis 0 (/x) but "
        "none for axis 1; a grid from the file needs one for every axis; or give its grid, "
        'one number per axis of /t (shape (4, 3)), axis 0 first: --grid "origin=0,0 '
        'spacing=1,1" (grid= in Python)'
    )


def test_fields_past_floats_say_nothing_but_their_answer(tmp_path):
    """A field holding inf and -inf (whose mean is NaN), and a grid so fine that the
    far particles' fractions overflow: NumPy's RuntimeWarnings reached stderr."""
    path = str(tmp_path / "f.h5")
    with h5py.File(path, "w") as f:
        f["F"] = np.array([1.0, np.inf, 3.0, -np.inf])
    particles = write_particles(str(tmp_path / "p.h5"), {"x": [0.0, 1.0, 2.0, 3.0, 9.0]})

    def summary(grid: str) -> dict[str, object]:
        args = ["--field", f"F={path}", "--at", "x", "--grid", grid, "--json"]
        proc = run("interp", particles, *args)
        assert proc.stderr == ""
        return json.loads(proc.stdout)["fields"]["F"]

    assert summary("origin=0 spacing=1")["mean"] is None
    assert summary("origin=0 spacing=1e-320")["nan"] == 5  # 0 x inf


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_the_grid_a_field_without_coordinates_is_told_to_take_works_as_printed(tmp_path, rank):
    """The hint gave three axes whatever the field's rank: followed, it failed."""
    particles = write_particles(str(tmp_path / "p.h5"), {v: np.array([0.5, 1.5]) for v in "xyz"})
    with h5py.File(tmp_path / "f.h5", "w") as f:
        f["b"] = np.ones((3,) * rank)
    spec = [
        "interp",
        particles,
        "--field",
        f"b={tmp_path / 'f.h5'}",
        "--at",
        "x,y,z"[: 2 * rank - 1],
    ]
    hint = re.search(r'--grid "([^"]+)"', run(*spec, code=2).stderr).group(1)
    assert hint == f"origin={','.join('0' * rank)} spacing={','.join('1' * rank)}"
    assert run(*spec, "--grid", hint, "--json").returncode == 0


def test_a_field_named_by_a_variable_its_file_lacks_lists_what_the_file_holds(tmp_path):
    particles = write_particles(str(tmp_path / "p.h5"), {"x": np.array([0.5, 1.5])})
    field = tmp_path / "f.h5"
    with h5py.File(field, "w") as f:
        f["bx"], f["by"] = np.arange(5.0), np.arange(5.0)
    proc = run(
        "interp",
        particles,
        "--field",
        f"q={field}",
        "--at",
        "x",
        "--grid",
        "origin=0 spacing=1",
        code=1,
    )
    assert proc.stderr.strip() == (
        f"quarry: error: no variable 'q' in {field}, which holds 2 variables (/bx, /by); "
        f"name one with --field q={field}:VAR"
    )


def test_a_field_subscript_numpy_would_reverse_is_a_usage_error(tmp_path):
    """As in a query (exit 2), not a data error (exit 1)."""
    particles = write_particles(str(tmp_path / "p.h5"), {"x": np.array([0.5, 1.5])})
    with h5py.File(tmp_path / "f.h5", "w") as f:
        f["b"] = np.arange(5.0)
    field = f"{tmp_path / 'f.h5'}[::-1]"
    proc = run(
        "interp",
        particles,
        "--field",
        f"b={field}",
        "--at",
        "x",
        "--grid",
        "origin=0 spacing=1",
        code=2,
    )
    assert proc.stderr.strip() == (
        f"quarry: error: field b ({field}): step -1 on axis 0: only positive steps are supported"
    )


@pytest.mark.parametrize("ext", [".h5", ".parquet"])
def test_a_field_read_from_a_file_per_step_records_its_template(tmp_path, ext):
    """Each column's interpolated_from named the first step's file alone."""
    import pyarrow.parquet as pq

    particles = str(tmp_path / "p.h5")
    with h5py.File(particles, "w") as f:
        for step in (0, 1):
            f[f"Step#{step}/x"] = np.array([0.5, 1.5])
    for step in (0, 1):
        with h5py.File(tmp_path / f"f_{step}.h5", "w") as f:
            f["b"] = np.array([0.0, 10.0, 20.0]) * (step + 1)
    template = f"{tmp_path}/f_{{step}}.h5:b"
    out = str(tmp_path / f"o{ext}")
    run(
        "interp",
        particles,
        "--field",
        f"b={template}",
        "--at",
        "x",
        "--grid",
        "origin=0 spacing=1",
        "--out",
        out,
    )
    if ext == ".h5":
        with h5py.File(out) as f:
            assert f["b"][()].tolist() == [5.0, 15.0, 10.0, 30.0]
            assert f["b"].attrs["interpolated_from"] == template
    else:
        meta = pq.read_table(out).schema.field("b").metadata
        assert meta[b"interpolated_from"].decode() == template


def test_particles_in_step_groups_are_interpolated_step_by_step_or_in_one_step(tmp_path, data):
    _, _, _, fields = data
    path = str(tmp_path / "steps.h5")
    with h5py.File(path, "w") as f:
        for step in range(2):
            for v in "xyz":
                f[f"Step#{step}/{v}"] = np.array([1.0, 2.0]) + step
    spec = ["--field", f"bx={fields['bx'][0]}", "--at", "x,y,z", "--grid", GRID]
    lines = run("interp", path, *spec, "--where", "x > 1").stdout.splitlines()
    assert lines[0] == "quarry_step,quarry_row,bx"
    assert [line.split(",")[:2] for line in lines[1:]] == [["0", "1"], ["1", "0"], ["1", "1"]]
    result = json.loads(run("interp", path, *spec, "--path", "Step#1", "--json").stdout)
    assert result["count"] == 2


def test_coordinates_that_are_not_monotonic_exit_1(tmp_path):
    particles = write_particles(str(tmp_path / "p.h5"), {"x": np.array([0.5])})
    field = write_field(
        str(tmp_path), "netcdf", "bx", np.array([0.0, 2.0, 4.0]), [np.array([0.0, 2.0, 1.0])]
    )
    proc = run("interp", particles, "--field", f"bx={field}", "--at", "x", code=1)
    assert "not strictly increasing or decreasing" in proc.stderr


def test_json_says_a_reorganised_copy_groups_the_reads(data):
    _, particles, _, fields = data
    before = json.loads(run(*_args(particles, fields, "--json")).stdout)["fields"]
    run("reorg", particles, "--vars", "x,y,z", "--bins", "8")
    after = json.loads(run(*_args(particles, fields, "--json")).stdout)["fields"]
    for name in fields:
        assert before[name]["read_by"] == "box" and after[name]["read_by"] == "mdbin"
        assert after[name]["bytes_read"] <= before[name]["bytes_read"]
        for stat in ("min", "max", "mean", "nan"):
            assert after[name][stat] == before[name][stat]
