"""What the README promises of ``interpolate``, case by case: axis order,
grid lines and the far edge, outside points, missing values, the region
read, how a field is named, and the errors."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
from interp_cases import assert_close, count_reads, reference, write_field, write_particles

import quarry
from cli_run import run
from quarry.errors import JoinArgumentError, JoinError, SourceError, UsageError
from quarry.formats.hdf5 import HDF5Driver
from quarry.formats.raw import RawDriver

GRID = "origin=0,0,0 spacing=1,1,1"


def _linear_field(shape, dtype="<f8"):
    """f[i, j, k] = 100 i + 10 j + k: multilinear interpolation is exact on it."""
    i, j, k = np.indices(shape)
    return (100.0 * i + 10.0 * j + k).astype(dtype)


def _interp(tmp_path, points, field_values, *, grid=GRID, fmt="raw", **kw):
    names = "xyz"[: len(points)]
    columns = {n: np.asarray(p, dtype=np.float64) for n, p in zip(names, points, strict=True)}
    particles = write_particles(str(tmp_path / "p.h5"), columns)
    field = write_field(str(tmp_path), fmt, "bx", field_values)
    with quarry.open(particles) as ds:
        return ds.select_all(list(columns)).interpolate(
            {"bx": field}, list(columns), grid=grid, **kw
        )


def test_axis_order_is_the_arrays_c_order_axis_0_first(tmp_path):
    """--at x,y,z pairs x with axis 0, y with axis 1, z with axis 2, and so do
    the --grid numbers."""
    values = _linear_field((5, 6, 7))
    grid = "origin=1,2,3 spacing=0.5,2,4"
    x, y, z = [1.25, 2.0], [2.0, 5.0], [3.0, 13.0]
    table = _interp(tmp_path, (x, y, z), values, grid=grid)
    i = (np.array(x) - 1) / 0.5
    j = (np.array(y) - 2) / 2
    k = (np.array(z) - 3) / 4
    np.testing.assert_allclose(table["bx"], 100 * i + 10 * j + k, rtol=1e-14)


def test_points_on_grid_lines_and_on_the_far_edge_give_the_nodes_values(tmp_path):
    values = _linear_field((4, 5, 3))
    nodes = np.array([(i, j, k) for i in range(4) for j in range(5) for k in range(3)], float)
    table = _interp(tmp_path, nodes.T, values)
    assert table["bx"].tolist() == values.reshape(-1).astype(float).tolist()
    # the far faces, and a line along the far edge
    edge = np.array([[3.0, 4.0, 2.0], [3.0, 1.5, 0.25], [0.5, 4.0, 2.0], [3.0, 4.0, 1.0]])
    table = _interp(tmp_path, edge.T, values)
    assert table["bx"].tolist() == (100 * edge[:, 0] + 10 * edge[:, 1] + edge[:, 2]).tolist()


def test_outside_points_are_nan_or_clamped_to_the_nearest_edge(tmp_path):
    values = _linear_field((4, 5, 3))
    points = np.array([[-0.1, 1, 1], [3.5, 1, 1], [1, -2, 1], [1, 1, 9], [np.nan, 1, 1]]).T
    nan = _interp(tmp_path, points, values)
    assert np.isnan(nan["bx"]).all()
    clamp = _interp(tmp_path, points, values, outside="clamp")
    assert clamp["bx"][:4].tolist() == [11.0, 311.0, 101.0, 112.0]
    assert np.isnan(clamp["bx"][4])  # a NaN position has no nearest edge


def test_missing_field_values_reach_the_cells_that_hold_them(tmp_path):
    values = _linear_field((4, 4, 4))
    values[2, 2, 2] = np.nan
    table = _interp(tmp_path, ([1.5, 2.5, 0.5], [1.5, 2.5, 0.5], [1.5, 2.5, 0.5]), values)
    assert np.isnan(table["bx"][:2]).all()
    assert table["bx"][2] == 55.5


def test_integer_and_float32_fields_are_interpolated_in_float64(tmp_path):
    for dtype in ("<i2", "<f4"):
        values = _linear_field((3, 3, 3), dtype)
        table = _interp(tmp_path, ([0.5], [0.25], [1.75]), values)
        assert table["bx"].dtype == np.float64
        assert table["bx"].tolist() == [50.0 + 2.5 + 1.75]


@pytest.mark.parametrize("fmt", ["raw", "hdf5", "hdf5-chunked"])
def test_only_the_region_the_hits_touch_is_read(tmp_path, monkeypatch, fmt):
    """The box of the hits' cells, one read per index along axis 0 of the
    box (its rows of axis 1), counted at the driver."""
    shape = (32, 40, 48)
    values = np.random.default_rng(0).normal(size=shape).astype("<f4")
    reads = count_reads(monkeypatch, RawDriver if fmt == "raw" else HDF5Driver)
    rng = np.random.default_rng(1)
    n = 5000
    points = (rng.uniform(10.2, 13.7, n), rng.uniform(20.1, 22.9, n), rng.uniform(5.5, 39.1, n))
    points[0][:2] = [10.2, 13.7]  # cells 10 and 13 along axis 0 are certainly hit
    points[1][:2] = [20.1, 22.9]
    points[2][:2] = [5.5, 39.1]  # and most of axis 2: its rows are read whole
    table = _interp(tmp_path, points, values, fmt=fmt)
    plane, row = 40 * 48, 48
    expected = [(i * plane + 20 * row, i * plane + 24 * row) for i in range(10, 15)]
    assert reads == expected
    read_bytes = sum(b - a for a, b in reads) * 4
    assert table.bytes_read == {"bx": read_bytes}
    assert read_bytes < values.nbytes / 40
    assert not np.isnan(table["bx"]).any()

    reads.clear()  # hits over every axis: one read of the whole field
    corners = np.array([[0.0, 0.0, 0.0], [31.0, 39.0, 47.0]]).T
    _interp(tmp_path, corners, values, fmt=fmt)
    assert reads == [(0, values.size)]

    reads.clear()  # every hit outside: nothing read
    table = _interp(tmp_path, ([-1.0], [0.0], [0.0]), values, fmt=fmt)
    assert reads == [] and table.bytes_read == {"bx": 0} and np.isnan(table["bx"][0])


def test_a_field_is_the_files_only_variable_or_the_one_its_name_resolves_to(tmp_path):
    particles = write_particles(str(tmp_path / "p.h5"), {"x": np.array([0.5, 1.5])})
    path = str(tmp_path / "fields.h5")
    with h5py.File(path, "w") as f:
        f["mesh/bx"] = np.array([0.0, 1.0, 2.0])
        f["mesh/by"] = np.array([0.0, 10.0, 20.0])
        f["mesh/sub/by"] = np.array([5.0, 5.0, 5.0])
    with quarry.open(particles) as ds:
        sel = ds.select_all(["x"])
        grid = "origin=0 spacing=1"
        table = sel.interpolate(
            {"bx": path, "b2": f"{path}:mesh/by", "b3": f"{path}:sub/by"}, ["x"], grid=grid
        )
        assert table["bx"].tolist() == [0.5, 1.5]
        assert table["b2"].tolist() == [5.0, 15.0]
        assert table["b3"].tolist() == [5.0, 5.0]
        with pytest.raises(quarry.UnknownVariableError, match="bz"):
            sel.interpolate({"bz": path}, ["x"], grid=grid)
        with pytest.raises(SourceError, match=r"no such field file: .*nothere\.h5"):
            sel.interpolate({"bx": str(tmp_path / "nothere.h5")}, ["x"], grid=grid)


def test_the_table_names_its_columns_as_every_output_does(tmp_path):
    columns = {"x": np.array([0.5, 1.5, 2.5]), "quarry_row": np.array([7, 8, 9])}
    particles = write_particles(str(tmp_path / "p.h5"), columns)
    field = write_field(str(tmp_path), "raw", "bx", np.array([0.0, 2.0, 4.0]))
    with quarry.open(particles) as ds:
        table = ds.query("x > 1").interpolate(
            {"bx": field}, ["x"], grid="origin=0 spacing=1", values=["quarry_row", "x"]
        )
        frame = table.to_pandas()
    assert list(table.columns) == ["quarry_row_", "quarry_row", "x", "bx"]
    assert table["quarry_row_"].tolist() == [1, 2]
    assert table["bx"][0] == 3.0 and np.isnan(table["bx"][1])
    assert frame.index.name == "quarry_row_" and frame["bx"].iloc[0] == 3.0
    assert np.isnan(frame["bx"].iloc[1])  # 2.5 lies past the last node, 2


def test_no_hits_give_an_empty_table(tmp_path):
    particles = write_particles(str(tmp_path / "p.h5"), {"x": np.array([0.5, 1.5])})
    field = write_field(str(tmp_path), "raw", "bx", np.array([0.0, 2.0, 4.0]))
    with quarry.open(particles) as ds:
        table = ds.query("x > 5").interpolate({"bx": field}, ["x"], grid="origin=0 spacing=1")
    assert len(table) == 0 and table["bx"].dtype == np.float64
    assert table.summary()["bx"] == {
        "min": None,
        "max": None,
        "mean": None,
        "nan": 0,
        "bytes_read": 0,
        "read_by": "box",
    }


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"at": ["x", "y"]}, JoinArgumentError, r"has 1 dimension.*\(at= in Python\) gives 2"),
        ({"at": []}, JoinArgumentError, r"position variables \(--at x,y,z; at= in Python\)"),
        ({"method": "bilinear"}, JoinArgumentError, r"takes 2 .*\(at= in Python\) gives 1"),
        ({"fields": {}}, JoinArgumentError, r"fields=\{'bx': 'field/bx.bin'\} in Python"),
        ({"method": "cubic"}, JoinArgumentError, "use one of linear, bilinear, trilinear"),
        ({"outside": "wrap"}, JoinArgumentError, "use nan or clamp"),
        ({"grid": "origin=0 spacing=1,2"}, JoinArgumentError, "origin has 1 numbers"),
        ({"grid": "origin=0,0 spacing=1,2"}, JoinArgumentError, "gives 2 axes but /bx"),
        ({"grid": "origin=a spacing=1"}, JoinArgumentError, "takes numbers"),
        ({"grid": None}, JoinArgumentError, "no coordinate variables; give its grid"),
        ({"fields": {"x": "FIELD"}}, JoinArgumentError, r"--values columns \(values= in Python"),
    ],
)
def test_bad_arguments_are_refused_with_a_clear_message(tmp_path, kwargs, error, message):
    particles = write_particles(
        str(tmp_path / "p.h5"), {"x": np.array([0.5]), "y": np.array([0.5])}
    )
    field = write_field(str(tmp_path), "raw", "bx", np.array([0.0, 2.0, 4.0]))
    args = {"fields": {"bx": field}, "at": ["x"], "grid": "origin=0 spacing=1"} | kwargs
    args["fields"] = {k: field if v == "FIELD" else v for k, v in args["fields"].items()}
    with quarry.open(particles) as ds, pytest.raises(error, match=message):
        ds.select_all(["x"]).interpolate(values=["x"], **args)


@pytest.mark.parametrize(("values", "at"), [(None, ["x"]), (["x"], None), (3, ["x"])])
def test_names_that_are_not_a_list_are_refused_saying_what_to_give(tmp_path, values, at):
    """``values=None`` (or ``at=None``) was a TypeError from deep inside."""
    particles = write_particles(str(tmp_path / "p.h5"), {"x": np.array([0.5])})
    field = write_field(str(tmp_path), "raw", "bx", np.array([0.0, 2.0, 4.0]))
    with quarry.open(particles) as ds, pytest.raises(UsageError, match=r"or \[\] for none"):
        ds.select_all(["x"]).interpolate(
            {"bx": field}, at, grid="origin=0 spacing=1", values=values
        )


@pytest.mark.parametrize("dtype", ["i8", "u8"])
def test_an_integer_position_float64_cannot_hold_is_refused(tmp_path, dtype):
    """README: an integer position beyond 2**53 is an error, never a particle
    placed in another cell (2**53 + 1 became 2**53, a node, answering 0.0
    where the point lies half-way, 0.5). 2**53 itself is exact and joins."""
    x = np.array([2**53 + 1, 2**53, 2**53 - 1], dtype)
    particles = write_particles(str(tmp_path / "p.h5"), {"x": x})
    field = write_field(str(tmp_path), "raw", "bx", np.array([0.0, 1.0, 2.0]))
    grid = f"origin={2**53} spacing=2"
    with quarry.open(particles) as ds, pytest.raises(JoinError, match="holds 9007199254740993"):
        ds.select_all(["x"]).interpolate({"bx": field}, ["x"], grid=grid)
    args = ["--field", f"bx={field}", "--at", "x", "--grid", grid]
    refused = run("interp", particles, *args, code=1)
    assert "position variable x holds 9007199254740993, beyond 2**53" in refused.stderr
    with quarry.open(particles) as ds:
        exact = ds.query(f"x <= {2**53}").interpolate({"bx": field}, ["x"], grid=grid)
    assert exact["quarry_row"].tolist() == [1, 2]
    assert exact["bx"][0] == 0.0 and np.isnan(exact["bx"][1])  # on node 0; outside


def test_every_particle_of_every_step_from_python_as_from_the_cli(tmp_path):
    """README: select_all on a file with step groups spreads over them (it was
    an AmbiguousNameError advising --per-step), and a series has select_all:
    the same table as ``quarry interp`` without --where."""
    path = str(tmp_path / "steps.h5")
    with h5py.File(path, "w") as f:
        f["Step#0/x"], f["Step#1/x"] = np.array([0.5, 1.5]), np.array([1.0, 2.5])
    field = write_field(str(tmp_path), "raw", "bx", np.array([0.0, 2.0, 4.0, 6.0]))
    grid = "origin=0 spacing=1"
    with quarry.open(path) as ds:
        from_file = ds.select_all(["x"]).interpolate({"bx": field}, ["x"], grid=grid)
    with quarry.open_series(path) as series:
        from_series = series.select_all(["x"]).interpolate({"bx": field}, ["x"], grid=grid)
    cli = run("interp", path, "--field", f"bx={field}", "--at", "x", "--grid", grid, "--json")
    assert json.loads(cli.stdout)["count"] == 4
    for table in (from_file, from_series):
        assert table["quarry_step"].tolist() == [0, 0, 1, 1]
        assert table["bx"].tolist() == [1.0, 3.0, 2.0, 5.0]


def test_coordinates_that_are_not_monotonic_are_a_data_error(tmp_path):
    particles = write_particles(str(tmp_path / "p.h5"), {"x": np.array([0.5])})
    field = write_field(
        str(tmp_path), "netcdf", "bx", np.array([0.0, 2.0, 4.0]), [np.array([0.0, 2.0, 1.0])]
    )
    with quarry.open(particles) as ds, pytest.raises(JoinError, match="not strictly increasing"):
        ds.select_all(["x"]).interpolate({"bx": field}, ["x"])


def test_grid_given_wins_over_the_files_coordinate_variables(tmp_path):
    particles = write_particles(str(tmp_path / "p.h5"), {"x": np.array([1.5])})
    field = write_field(
        str(tmp_path), "netcdf", "bx", np.array([0.0, 2.0, 4.0]), [np.array([0.0, 10.0, 20.0])]
    )
    with quarry.open(particles) as ds:
        sel = ds.select_all(["x"])
        assert sel.interpolate({"bx": field}, ["x"])["bx"].tolist() == [0.3]
        given = sel.interpolate({"bx": field}, ["x"], grid="origin=0 spacing=1")
        assert given["bx"].tolist() == [3.0]


def test_a_subarray_takes_its_part_of_the_coordinate_variables(tmp_path):
    """``tas[0]`` of a (time, lat, lon) field: a 2-D field on lat and lon."""
    rng = np.random.default_rng(2)
    tas = rng.normal(280, 10, (3, 5, 4))
    coords = [np.arange(3.0), np.linspace(-60, 60, 5), np.array([0.0, 90, 180, 270])]
    field = write_field(str(tmp_path), "netcdf", "tas", tas, coords)
    lat, lon = rng.uniform(-70, 70, 50), rng.uniform(0, 270, 50)
    particles = write_particles(str(tmp_path / "p.h5"), {"lat": lat, "lon": lon})
    with quarry.open(particles) as ds:
        table = ds.select_all(["lat"]).interpolate({"t": f"{field}:tas[1]"}, ["lat", "lon"])
    assert_close(table["t"], reference(tas[1], coords[1:], [lat, lon], "nan"), tas)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("copy", [False, True])
def test_fields_on_one_grid_or_several_in_one_join_are_each_their_own(tmp_path, seed, copy):
    """Fields of one join are located once per grid they share; each answer
    is bit for bit the one joined alone, and the NumPy reference's: two
    components of one mesh (float32, int16), one of a larger shape (another
    grid), and one that is a subarray of a larger variable (the mesh's shape,
    other rows read)."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(n) for n in rng.integers(2, 7, 3))
    mesh = {
        "bx": rng.normal(0, 10, shape).astype("<f4"),
        "by": rng.integers(-500, 500, shape).astype("<i2"),
        "bz": rng.normal(0, 1, tuple(n + 2 for n in shape)),
        "ex": rng.normal(0, 1, (shape[0] + 2, *shape[1:])),
    }
    texts = {name: write_field(str(tmp_path), "raw", name, v) for name, v in mesh.items()}
    texts["ex"] += f"[1:{shape[0] + 1}]"
    kept = dict(mesh, ex=mesh["ex"][1 : shape[0] + 1])
    n = int(rng.integers(1, 400))
    points = [rng.uniform(-0.5, s - 0.5, n) for s in shape]
    particles = write_particles(str(tmp_path / "p.h5"), dict(zip("xyz", points, strict=True)))
    with quarry.open(particles) as ds:
        if copy:
            ds.reorganize(["x", "y", "z"], bins=3)
        alone = {
            name: ds.select_all(["x"]).interpolate({name: text}, list("xyz"), grid=GRID)[name]
            for name, text in texts.items()
        }
        together = ds.select_all(["x"]).interpolate(texts, list("xyz"), grid=GRID)
    for name, values in kept.items():
        assert np.array_equal(together[name], alone[name], equal_nan=True), name
        # A subarray keeps the whole variable's coordinates along its axes: ex's axis 0
        # starts at node 1.
        coords = [
            np.arange(s, dtype=np.float64) + (name == "ex" and k == 0)
            for k, s in enumerate(values.shape)
        ]
        assert_close(together[name], reference(values, coords, points, "nan"), values)


@pytest.mark.parametrize(
    "dtype", ["<f4", "<f8", "<i1", "<i2", "<i4", "<i8", "<u1", "<u2", "<u4", "<u8"]
)
@pytest.mark.parametrize("rank", [1, 2, 3])
def test_the_corner_sum_is_numpys_formula_bit_for_bit(dtype, rank):
    """The core's sum over each cell's corners (quarry.join.groups.corner_sum)
    equals NumPy evaluating the formula over whole arrays, bit for bit, for
    every dtype (64-bit integers past 2^53 included), NaN nodes and
    fractions at 0 and 1."""
    import itertools

    from quarry.join.groups import corner_sum

    rng = np.random.default_rng(rank)
    n, size = 2000, 64
    if dtype[1] == "f":
        values = rng.normal(0, 1e3, size).astype(dtype)
        values[rng.random(size) < 0.1] = np.nan
    else:
        info = np.iinfo(dtype)
        values = rng.integers(info.min, info.max, size, dtype=dtype, endpoint=True)
    t = [rng.choice([0.0, 1.0, 0.5, *rng.random(5)], n) for _ in range(rank)]
    planes = [rng.integers(0, size - 8, n) for _ in range(2 ** max(rank - 1, 0))]
    corners = [
        (int("".join(map(str, c[:-1])) or "0", 2), c[-1])
        for c in itertools.product((0, 1), repeat=rank)
    ]
    got = corner_sum([values], t, planes, corners)[0]
    weights = [1.0 - t[0], t[0]]
    for fraction in t[1:]:
        weights = [w * f for w in weights for f in (1.0 - fraction, fraction)]
    want = np.zeros(n)
    for weight, (plane, offset) in zip(weights, corners, strict=True):
        want += weight * values[planes[plane] + offset]
    assert got.tobytes() == want.tobytes()


def test_a_big_endian_netcdf_field_is_interpolated_as_its_little_endian_twin(tmp_path):
    """NetCDF hands back a big-endian variable's values in their own byte order."""
    import netCDF4

    values = _linear_field((4, 5, 3))
    for name, endian in (("big", ">f8"), ("little", "<f8")):
        with netCDF4.Dataset(str(tmp_path / f"{name}.nc"), "w") as f:
            for axis, n in zip("abc", values.shape, strict=True):
                f.createDimension(axis, n)
            f.createVariable("bx", endian, ("a", "b", "c"), endian=name)[:] = values
    # Points in opposite corners: the box read is the whole field, as NetCDF stores it.
    points = {"x": [0.5, 2.75], "y": [0.25, 3.5], "z": [0.25, 1.75]}
    particles = write_particles(str(tmp_path / "p.h5"), {k: np.array(v) for k, v in points.items()})
    with quarry.open(particles) as ds:
        tables = {
            name: ds.select_all(list(points)).interpolate(
                {"bx": str(tmp_path / f"{name}.nc")}, list(points), grid=GRID
            )
            for name in ("big", "little")
        }
    assert (
        tables["big"]["bx"].tolist()
        == tables["little"]["bx"].tolist()
        == [100 * x + 10 * y + z for x, y, z in zip(*points.values(), strict=True)]
    )


@pytest.mark.parametrize("fmt", ["raw", "hdf5", "hdf5-chunked"])
def test_a_part_picking_within_rows_is_gathered_where_the_field_is_mapped(
    tmp_path, monkeypatch, fmt
):
    """A subarray that picks one index along axis 2 (``bx[:, :, 7]``: one plane of
    the cube) read every row it lies in, 48 times the plane here. Its nodes alone
    are gathered from the memory map of a raw or contiguous HDF5 field; a chunked
    one, whose gather reads whole spans, is still read by rows."""
    shape = (32, 40, 48)
    values = np.random.default_rng(0).normal(size=shape).astype("<f4")
    reads = count_reads(monkeypatch, RawDriver if fmt == "raw" else HDF5Driver)
    rng = np.random.default_rng(1)
    n = 5000
    x, y = rng.uniform(10.2, 13.7, n), rng.uniform(20.1, 22.9, n)
    x[:2], y[:2] = [10.2, 13.7], [20.1, 22.9]
    particles = write_particles(str(tmp_path / "p.h5"), {"x": x, "y": y})
    field = write_field(str(tmp_path), fmt, "bx", values)
    with quarry.open(particles) as ds:
        plane = ds.select_all(["x", "y"]).interpolate(
            {"bx": f"{field}[:, :, 7]"}, ["x", "y"], grid=GRID
        )
    i, j = x - np.floor(x), y - np.floor(y)
    i0, j0 = np.floor(x).astype(int), np.floor(y).astype(int)
    at = values[:, :, 7].astype(np.float64)
    want = (
        (1 - i) * (1 - j) * at[i0, j0]
        + (1 - i) * j * at[i0, j0 + 1]
        + i * (1 - j) * at[i0 + 1, j0]
        + i * j * at[i0 + 1, j0 + 1]
    )
    np.testing.assert_allclose(plane["bx"], want, rtol=1e-12, atol=1e-12)
    if fmt == "hdf5-chunked":
        rows = [(a * 40 * 48 + 20 * 48, a * 40 * 48 + 24 * 48) for a in range(10, 15)]
        assert reads == rows and plane.bytes_read == {"bx": 5 * 4 * 48 * 4}
    else:
        assert reads == [] and plane.bytes_read == {"bx": 5 * 4 * 4}


def test_a_nan_node_reaches_a_point_on_the_grid_line_beside_it(tmp_path):
    """README: a point on a grid line is in the cell past it, with weight 0 on that
    cell's far node; a NaN there reaches it (0 times NaN), as in SciPy."""
    field = np.array([10.0, 20.0, np.nan, 40.0])
    table = _interp(tmp_path, ([0.0, 0.5, 1.0, 2.5, 3.0],), field, grid="origin=0 spacing=1")
    got = table["bx"]
    assert got[:2].tolist() == [10.0, 15.0]
    assert np.isnan(got[2:]).all()  # x = 1 and x = 3 sit on finite nodes beside the NaN


def test_bytes_read_count_the_values_as_decoded(tmp_path):
    """The README: a packed field's `bytes_read` counts its values as read,
    float64 after scale_factor, not the int16 the file stores."""
    import netCDF4

    path = str(tmp_path / "packed.nc")
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("n", 10)
        bx = nc.createVariable("bx", "i2", ("n",))
        bx.scale_factor = 0.5
        bx[:] = np.arange(10) * 0.5
    particles = write_particles(str(tmp_path / "p.h5"), {"x": np.array([2.5, 3.5])})
    with quarry.open(particles) as ds:
        table = ds.select_all(["x"]).interpolate({"bx": path}, ["x"], grid="origin=0 spacing=1")
    assert table["bx"].tolist() == [1.25, 1.75]
    assert table.bytes_read == {"bx": 3 * 8}  # nodes 2, 3 and 4 as float64


@pytest.mark.parametrize("fmt", ["raw", "hdf5", "hdf5-chunked"])
@pytest.mark.parametrize(
    ("part", "at"),
    [
        ((slice(None), slice(None), slice(None, None, 8)), ("x", "y", "z")),
        ((slice(None, None, 4), slice(None, None, 4), slice(None, None, 4)), ("x", "y", "z")),
        ((slice(None), 5, slice(None, None, 8)), ("x", "z")),
        ((slice(None, None, 4), 3, 10), ("x",)),
    ],
)
def test_every_nth_parts_read_their_nodes_alone(tmp_path, monkeypatch, fmt, part, at):
    """The README: a part that picks every n-th has its nodes alone gathered
    from a memory map (raw, contiguous HDF5); a chunked field reads, per
    picked index along axis 0, only the rows it spans."""
    shape = (32, 24, 40)
    values = np.random.default_rng(3).normal(size=shape).astype("<f4")
    reads = count_reads(monkeypatch, RawDriver if fmt == "raw" else HDF5Driver)
    picked = values[part]
    # The grid is the stored variable's: a kept axis' nodes lie at its stored indices.
    coords = [
        np.arange(n, dtype=np.float64)[p]
        for p, n in zip(part, shape, strict=True)
        if not isinstance(p, int)
    ]
    rng = np.random.default_rng(4)
    points = [rng.uniform(c[0], c[-1], 2000) for c in coords]
    particles = write_particles(str(tmp_path / "p.h5"), dict(zip(at, points, strict=True)))
    field = write_field(str(tmp_path), fmt, "bx", values)
    text = ", ".join(
        str(p) if isinstance(p, int) else f"{p.start or ''}:{p.stop or ''}:{p.step or ''}"
        for p in part
    )
    with quarry.open(particles) as ds:
        table = ds.select_all(list(at)).interpolate({"bx": f"{field}[{text}]"}, list(at), grid=GRID)
    assert_close(table["bx"], reference(picked, coords, points, "nan"), picked)
    if fmt == "hdf5-chunked":
        axis0 = range(shape[0])[part[0]]
        assert [a // (24 * 40) for a, _ in reads] == list(axis0)
    else:
        assert reads == [] and table.bytes_read == {"bx": picked.size * 4}
