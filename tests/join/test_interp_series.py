"""``SeriesSelection.interpolate`` and ``quarry interp`` over a series: each
member's hits joined with its own field (a ``{step}`` template or a ``*``
pattern) or with one field for all, against a per-step NumPy reference, in
one table led by ``quarry_step``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest
from interp_cases import assert_close, reference, write_field

import quarry
from quarry.errors import JoinArgumentError, SeriesMemberError
from quarry.formats.raw import RawLayout, register

GRID = "origin=0,0 spacing=1.5,0.5"
SHAPE = (9, 13)
COORDS = [1.5 * np.arange(SHAPE[0]), 0.5 * np.arange(SHAPE[1])]
QUARRY = [sys.executable, "-m", "quarry.cli.main"]


def _particles(rng, n):
    return {
        "x": rng.uniform(-1, 13, n),
        "y": rng.uniform(0, 6.5, n),
        "energy": rng.uniform(0, 2, n).astype("f4"),
    }


@pytest.fixture(params=["files", "steps"])
def series(request, tmp_path):
    """Four steps of particles (a file each, or step groups of one file)
    and four fields, one per step (``bx_<step>.bin``), and one for all."""
    rng = np.random.default_rng(11)
    steps = [_particles(rng, n) for n in (300, 0, 1000, 77)]
    if request.param == "files":
        for k, columns in enumerate(steps):
            # named apart from their positions, which are the steps
            with h5py.File(tmp_path / f"run_{10 * k + 1}.h5", "w") as f:
                for name, values in columns.items():
                    f[name] = values
        source = str(tmp_path / "run_*.h5")
    else:
        source = str(tmp_path / "run.h5")
        with h5py.File(source, "w") as f:
            for k, columns in enumerate(steps):
                for name, values in columns.items():
                    f[f"Step#{k}/{name}"] = values
    fields = []
    for k in range(len(steps)):
        values = rng.normal(size=SHAPE).astype("<f4")
        fields.append(values)
        path = str(tmp_path / f"bx_{k}.bin")
        values.tofile(path)
        register(path, RawLayout("bx", values.dtype.str, SHAPE))
    common = rng.normal(size=SHAPE)
    return tmp_path, source, steps, fields, common, write_field(str(tmp_path), "hdf5", "b", common)


def _expected(steps, fields, common):
    """Per step: its hits (energy > 0.5), its own field and the common one
    interpolated there by the reference."""
    rows, step_of, own, shared, energy = [], [], [], [], []
    for k, columns in enumerate(steps):
        keep = columns["energy"] > 0.5
        points = [columns["x"][keep], columns["y"][keep]]
        rows.append(np.flatnonzero(keep))
        step_of.append(np.full(int(keep.sum()), k))
        own.append(reference(fields[k], COORDS, points, "nan"))
        shared.append(reference(common, COORDS, points, "nan"))
        energy.append(columns["energy"][keep])
    return [np.concatenate(c) for c in (step_of, rows, energy, own, shared)]


@pytest.mark.parametrize("own", ["bx_{step}.bin", "bx_*.bin"])
def test_each_step_is_joined_with_its_own_field_and_the_common_one(series, own):
    folder, source, steps, fields, common, shared = series
    with quarry.open_series(source) as s:
        table = s.query("energy > 0.5").interpolate(
            {"bx": str(folder / own), "b": shared}, ["x", "y"], grid=GRID, values=["energy"]
        )
    step, rows, energy, expected_own, expected_shared = _expected(steps, fields, common)
    lead = ["quarry_step"]
    if source.endswith("*.h5"):  # several files: each row says which
        lead = ["quarry_file", *lead]
        files = [str(folder / f"run_{10 * k + 1}.h5") for k in step.tolist()]
        assert table["quarry_file"].tolist() == files
    assert list(table.columns) == [*lead, "quarry_row", "energy", "bx", "b"]
    assert table["quarry_step"].tolist() == step.tolist()
    assert table["quarry_row"].tolist() == rows.tolist()
    assert table["energy"].tolist() == energy.tolist()
    assert_close(table["bx"], expected_own, np.concatenate([f.ravel() for f in fields]))
    assert_close(table["b"], expected_shared, common)
    assert table.bytes_read["b"] > 0 and table.summary()["bx"]["read_by"] == "box"


def test_the_step_column_is_named_apart_from_a_variable_of_that_name(tmp_path):
    path = str(tmp_path / "p.h5")
    with h5py.File(path, "w") as f:
        for k in (3, 5):
            f[f"Step#{k}/x"], f[f"Step#{k}/quarry_step"] = np.array([0.5, 1.0]), np.array([7, 8])
    field = write_field(str(tmp_path), "raw", "bx", np.array([0.0, 2.0, 4.0]))
    with quarry.open(path) as ds:
        table = ds.query("x > 0.6").interpolate(
            {"bx": field}, ["x"], grid="origin=0 spacing=1", values=["quarry_step"]
        )
    assert list(table.columns) == ["quarry_step_", "quarry_row", "quarry_step", "bx"]
    assert table["quarry_step_"].tolist() == [3, 5] and table["quarry_step"].tolist() == [8, 8]
    assert table["bx"].tolist() == [2.0, 2.0]


def test_a_pattern_without_a_file_per_step_or_a_missing_field_is_refused(series):
    folder, source, *_ = series
    with quarry.open_series(source) as s, pytest.raises(JoinArgumentError, match="matches 0"):
        s.query("energy > 0.5").interpolate({"bx": str(folder / "nope_*.bin")}, ["x", "y"])
    os.remove(folder / "bx_2.bin")  # a data error names the member
    missing = r"(run_21.h5|step 2).*no such field file: .*bx_2.bin"
    with quarry.open_series(source) as s, pytest.raises(SeriesMemberError, match=missing):
        s.query("energy > 0.5").interpolate(
            {"bx": str(folder / "bx_{step}.bin")}, ["x", "y"], grid=GRID
        )


def _cli(*args, code=0):
    proc = subprocess.run([*QUARRY, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == code, proc.stderr
    return proc


def test_quarry_interp_takes_a_series_and_a_file_of_steps(series):
    folder, source, steps, fields, common, shared = series
    args = ["--field", f"bx={folder / 'bx_{step}.bin'}", "--field", f"b={shared}"]
    args += ["--at", "x,y", "--grid", GRID, "--where", "energy > 0.5", "--values", "energy"]
    out = str(folder / "hits.h5")
    _cli("interp", source, *args, "--out", out)
    step, rows, energy, expected_own, expected_shared = _expected(steps, fields, common)
    with h5py.File(out) as f:
        assert f["quarry_step"][()].tolist() == step.tolist()
        assert f["quarry_row"][()].tolist() == rows.tolist()
        assert f["energy"][()].tolist() == energy.tolist()
        assert_close(f["bx"][()], expected_own, np.concatenate([v.ravel() for v in fields]))
        assert_close(f["b"][()], expected_shared, common)
    summary = json.loads(_cli("interp", source, *args, "--json").stdout)
    assert summary["count"] == len(rows)
    assert summary["fields"]["b"]["nan"] == int(np.isnan(expected_shared).sum())
    # without --where: every particle of every step
    every = json.loads(_cli("interp", source, *args[:-4], "--json").stdout)
    assert every["count"] == sum(len(c["x"]) for c in steps)
    bad = _cli("interp", source, *args[:1], f"bx={folder / 'nope_*.bin'}", *args[2:], code=2)
    assert bad.stderr.startswith("quarry: error") and "matches 0 file(s)" in bad.stderr


def test_one_step_picked_by_path_reads_its_own_field_from_the_template(tmp_path):
    """`--path Step#5` (`path="Step#5"`) with a field `bx_{step}.bin` reads
    bx_5.bin; a `*` pattern matching one file per step names them all, so
    with one step it is refused with what to write instead."""
    path = str(tmp_path / "p.h5")
    with h5py.File(path, "w") as f:
        for k in (0, 5):
            f[f"Step#{k}/x"] = np.array([0.5, 1.5])
    for k in (0, 5):
        write_field(str(tmp_path), "raw", f"bx_{k}", np.full(3, 10.0 * (k + 1)))
    template = str(tmp_path / "bx_{step}.bin")
    with quarry.open(path) as ds:
        table = ds.query("x > 0", path="Step#5").interpolate(
            {"bx": template}, ["x"], grid="origin=0 spacing=1"
        )
        assert table["bx"].tolist() == [60.0, 60.0]
        with pytest.raises(JoinArgumentError, match=r"matches 2 file\(s\) for 1 step\(s\)"):
            ds.query("x > 0", path="Step#5").interpolate(
                {"bx": str(tmp_path / "bx_*.bin")}, ["x"], grid="origin=0 spacing=1"
            )
    args = ["--field", f"bx={template}", "--at", "x", "--grid", "origin=0 spacing=1"]
    summary = json.loads(_cli("interp", path, *args, "--path", "Step#5", "--json").stdout)
    assert summary["fields"]["bx"]["mean"] == 60.0


def test_a_series_table_goes_to_pandas_in_long_format(tmp_path):
    """As a series selection's to_pandas: numbered rows, quarry_row a column,
    since a row number repeats from step to step."""
    path = str(tmp_path / "steps.h5")
    with h5py.File(path, "w") as f:
        f["Step#0/x"], f["Step#1/x"] = np.array([0.5, 1.5]), np.array([0.5, 2.5])
    field = write_field(str(tmp_path), "raw", "bx", np.array([0.0, 2.0, 4.0, 6.0]))
    with quarry.open_series(path) as series:
        sel = series.query("x > 0")
        frame = sel.interpolate({"bx": field}, ["x"], grid="origin=0 spacing=1").to_pandas()
        hits = sel.to_pandas(["x"])
    assert frame.index.tolist() == [0, 1, 2, 3] == hits.index.tolist()
    assert frame["quarry_step"].tolist() == [0, 0, 1, 1]
    assert frame["quarry_row"].tolist() == [0, 1, 0, 1]
    assert frame["bx"].tolist() == [1.0, 3.0, 1.0, 5.0]
