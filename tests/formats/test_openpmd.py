"""openPMD series written by openpmd-api (HDF5 and ADIOS2 BP, group- and
file-based), queried against NumPy: iterations as steps, species as a
context, record components spelled ``position.x``, constant components,
``si=True`` with and without an index, and ``quarry info``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import quarry
from quarry.errors import QuarryError, SeriesMemberError

pytest.importorskip("openpmd_api")
pytest.importorskip("adios2")

import openpmd_files as written_files
from openpmd_files import ITERATIONS, MOMENTUM_SI, POSITION_SI, SPECIES, WEIGHTING

QUARRY = [sys.executable, "-m", "quarry.cli.main"]
LAYOUTS = {
    "h5-group": ("run.h5", "group", "run.h5"),
    "h5-file": ("run_%T.h5", "file", "run_*.h5"),
    "bp-group": ("run.bp", "group", "run.bp"),
    "bp-file": ("run_%T.bp", "file", "run_*.bp"),
}


@pytest.fixture(scope="module", params=list(LAYOUTS))
def series(request, tmp_path_factory):
    """(source to open, values written, indexed?) for one layout."""
    pattern, encoding, source = LAYOUTS[request.param]
    folder = tmp_path_factory.mktemp(request.param)
    cwd = os.getcwd()
    os.chdir(folder)  # openpmd-api writes where the name says; keep it in the temp folder
    try:
        written = written_files.write(pattern, encoding, seed=len(request.param))
    finally:
        os.chdir(cwd)
    return str(folder / source), written


def _numpy(written, species, key, op, literal, scale=1.0):
    """Per-iteration counts of ``values * scale op literal`` (NaN never counts)."""
    ops = {">": np.greater, "<=": np.less_equal, "==": np.equal, "!=": np.not_equal}
    out = []
    for it in ITERATIONS:
        values = written.values[(it, species, key)].astype(np.float64) * scale
        out.append(int(np.sum(ops[op](values, literal) & ~np.isnan(values))))
    return out


def _index(source):
    with quarry.open_series(source) as s:
        list(s.build_indexes(block_len=16, force=True))


@pytest.mark.parametrize("indexed", [False, True])
def test_iterations_are_the_steps_and_a_species_is_a_context(series, indexed):
    source, written = series
    if indexed:
        _index(source)
    with quarry.open_series(source) as s:
        assert [m.step for m in s.members] == list(ITERATIONS)
        for species in SPECIES:
            s_sp = quarry.open_series(source, path=species)
            for query, key, op, lit in (
                ("position.x > 2.5", "position/x", ">", 2.5),
                ("momentum.x <= -0.25", "momentum/x", "<=", np.float32(-0.25)),
                ("id != 1013", "id", "!=", 1013),
            ):
                assert s_sp.query(query).counts() == _numpy(written, species, key, op, lit), query
            hits = s_sp.query("position.x > 2.5 && position.y <= 0")
            for it, ids, vals in zip(
                ITERATIONS, hits.ids(), hits.values("position.y"), strict=True
            ):
                x, y = (written.values[(it, species, f"position/{c}")] for c in "xy")
                expected = np.flatnonzero((x > 2.5) & (y <= 0))
                np.testing.assert_array_equal(ids, expected)
                np.testing.assert_array_equal(vals, y[expected])
            s_sp.close()
        # an indexed or scanned query, from the index where there is one
        counts = s.query("`electrons/position/x` > 0").counts()
        assert counts == _numpy(written, "electrons", "position/x", ">", 0.0)


def test_one_file_of_iterations_answers_as_a_series(series):
    source, written = series
    if "*" in source:
        pytest.skip("file-based: one iteration per file")
    with quarry.open(source) as ds:
        sel = ds.query("position.x > 1", path="ions")
        assert sel.counts() == _numpy(written, "ions", "position/x", ">", 1.0)
        assert [m.step for m in sel.members] == list(ITERATIONS)
        # one iteration named as a context: one table
        one = ds.query("position.x > 1", path="data/10/particles/ions")
        assert one.count() == _numpy(written, "ions", "position/x", ">", 1.0)[1]


def test_ambiguous_names_list_the_spellings_that_pick_each(series):
    source, _ = series
    with quarry.open_series(source) as s:
        with pytest.raises(SeriesMemberError) as species:
            s.query("position.x > 0").counts()
        assert "electrons.position.x" in str(species.value)
        assert "ions.position.x" in str(species.value)
        with pytest.raises(SeriesMemberError) as components:
            quarry.open_series(source, path="electrons").query("x > 0").counts()
        message = str(components.value)
        assert "position.x" in message and "momentum.x" in message
        with pytest.raises(QuarryError) as mesh:
            s.query("E.x > 0 && x > 0").counts()
        assert "E.x" in str(mesh.value) or "`E/x`" in str(mesh.value)


def test_a_mesh_component_by_its_spelling(series):
    source, written = series
    with quarry.open_series(source) as s:
        counts = s.query("E.x > 1 && E.y < 0").counts()
    expected = [
        int(
            np.sum(
                (written.values[(it, "meshes", "E/x")] > 1)
                & (written.values[(it, "meshes", "E/y")] < 0)
            )
        )
        for it in ITERATIONS
    ]
    assert counts == expected


@pytest.mark.parametrize("indexed", [False, True])
def test_constant_components_read_as_arrays(series, indexed):
    source, written = series
    if indexed:
        _index(source)
    for species in SPECIES:
        with quarry.open_series(source, path=species) as s:
            sizes = [len(written.values[(it, species, "id")]) for it in ITERATIONS]
            assert s.query("weighting > 1").counts() == [
                n if WEIGHTING[species] > 1 else 0 for n in sizes
            ]
            assert s.query("positionOffset.x == 0.5 && id >= 1000").counts() == [
                int(np.sum(written.values[(it, species, "id")] >= 1000)) for it in ITERATIONS
            ]
            values = s.query("position.x > 0").values("weighting")
            assert all(np.all(v == WEIGHTING[species]) for v in values)


@pytest.mark.parametrize("indexed", [False, True])
def test_si_multiplies_by_unit_si_exactly(series, indexed):
    source, written = series
    if indexed:
        _index(source)
    with quarry.open_series(source, path="electrons", si=True) as s:
        for query, key, op, lit, scale in (
            ("position.x > 2.5e-6", "position/x", ">", 2.5e-6, POSITION_SI),
            # a literal that is itself one of the products: == and <= are exact
            ("position.x <= 1e-06", "position/x", "<=", 1e-6, POSITION_SI),
            ("momentum.x > 1e-3", "momentum/x", ">", 1e-3, MOMENTUM_SI),
            ("momentum.x * 1 > 1e-3", "momentum/x", ">", 1e-3, MOMENTUM_SI),  # arithmetic
            ("id > 1012.5", "id", ">", 1012.5, 1.0),
        ):
            assert s.query(query).counts() == _numpy(written, "electrons", key, op, lit, scale)
        sel = s.query("position.x > 2.5e-6")
        for it, vals in zip(ITERATIONS, sel.values("position.x"), strict=True):
            x = written.values[(it, "electrons", "position/x")]
            np.testing.assert_array_equal(vals, x[x * POSITION_SI > 2.5e-6] * POSITION_SI)
        every = np.concatenate(
            [
                written.values[(it, "electrons", "momentum/x")].astype(np.float64) * MOMENTUM_SI
                for it in ITERATIONS
            ]
        )
        hist = s.histogram("momentum.x", bins=7)
        expected, edges = np.histogram(every[~np.isnan(every)], bins=7)
        np.testing.assert_array_equal(hist.counts, expected)
        np.testing.assert_allclose(hist.edges, edges)
    with quarry.open_series(source, path="electrons") as stored:  # the default: stored values
        assert stored.query("position.x > 2.5e-6").counts() == _numpy(
            written, "electrons", "position/x", ">", 2.5e-6
        )


def test_si_equals_every_product_on_the_stored_values(series):
    """Literals that are products of stored values, and their neighbours."""
    source, written = series
    x = written.values[(10, "electrons", "position/x")]
    products = (x[~np.isnan(x)] * POSITION_SI)[:5]
    literals = [*products, *np.nextafter(products, np.inf), *np.nextafter(products, -np.inf)]
    _index(source)
    one = source.replace("*", "10")  # file-based: the file of iteration 10
    with quarry.open_series(one, path="data/10/particles/electrons", si=True) as s:
        for lit in literals:
            for op, fn in ((">", np.greater), ("<=", np.less_equal), ("==", np.equal)):
                got = s.query(f"position.x {op} {float(lit)!r}").count()
                assert got == int(np.sum(fn(x * POSITION_SI, lit))), (op, lit)


def test_info_shows_unit_si_and_unit_dimension(series):
    source, written = series
    file = source.replace("*", "10")
    shown = subprocess.run(
        [*QUARRY, "info", file, "--json", "--path", "electrons"],
        capture_output=True,
        text=True,
        check=True,
    )
    variables = {v["path"].split("/data/10/")[-1]: v for v in json.loads(shown.stdout)["variables"]}
    momentum = variables["particles/electrons/momentum/x"]
    assert momentum["unitSI"] == MOMENTUM_SI
    assert momentum["unitDimension"] == [1.0, 1.0, -1.0, 0.0, 0.0, 0.0, 0.0]
    assert momentum["si_units"] == "kg·m/s"
    assert variables["particles/electrons/position/x"]["si_units"] == "m"
    n = len(written.values[(10, "electrons", "id")])
    assert variables["particles/electrons/weighting"]["shape"] == [n]
    text = subprocess.run(
        [*QUARRY, "info", file, "--path", "electrons"], capture_output=True, text=True, check=True
    ).stdout
    line = next(
        row
        for row in text.splitlines()
        if row.strip().startswith("/data/10/particles/electrons/momentum/x")
    )
    assert "unitSI 0.0025" in line and "(kg·m/s)" in line
    assert "openPMD constant" in next(row for row in text.splitlines() if "weighting" in row)


def test_cli_si_and_species(series):
    source, written = series
    total = sum(_numpy(written, "ions", "position/x", ">", 3e-6, POSITION_SI))
    proc = subprocess.run(
        [*QUARRY, "query", source, "position.x > 3e-6", "--path", "ions", "--si", "--json"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["count"] == total
    wrong = subprocess.run(
        [*QUARRY, "query", source, "position.x > 0"], capture_output=True, text=True
    )
    assert wrong.returncode == 1 and "Traceback" not in wrong.stderr
    assert "electrons.position.x" in wrong.stderr and "ions.position.x" in wrong.stderr


def test_si_aggregates_and_outputs(series, tmp_path):
    source, written = series
    import h5py

    with quarry.open_series(source, path="electrons", si=True) as s:
        sel = s.query("position.x > mean(position.x)")
        every = np.concatenate(
            [written.values[(it, "electrons", "position/x")] for it in ITERATIONS]
        )
        # each iteration's mean is its own (one query per member)
        expected = []
        for it in ITERATIONS:
            x = written.values[(it, "electrons", "position/x")] * POSITION_SI
            expected.append(int(np.sum(x > np.nanmean(x))))
        assert sel.counts() == expected and len(every) > 0
        out = str(tmp_path / "hits.h5")
        sel.extract(out, ["position.x"])
    columns = []

    def collect(name, obj):
        if name.endswith("/x"):
            columns.append((obj.attrs["unitSI"], obj[:]))

    with h5py.File(out, "r") as f:
        f.visititems(collect)
    assert len(columns) == len(ITERATIONS)
    for unit, values in columns:
        assert unit == 1.0 and len(values) and np.all(np.abs(values) < 1e-3)  # metres


def test_variable_based_bp_is_refused_clearly(tmp_path):
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        written_files.write("run.bp", "variable", seed=5)
    finally:
        os.chdir(cwd)
    with pytest.raises(quarry.errors.SourceError, match="variable-based"):
        quarry.open(str(tmp_path / "run.bp"))


def test_tracking_with_si_gives_values_in_si_units(series, tmp_path):
    """The README's --si promise covers `quarry track` too: the query's
    literal and the values read at every step are stored * unitSI in float64,
    the ids stay exact."""
    import h5py

    source, written = series
    first = ITERATIONS[0]
    out = str(tmp_path / "tracks.h5")
    argv = ["track", source, "position.x > 2.5e-6", "--at-step", str(first), "--path"]
    argv += ["electrons", "--si", "--values", "position.x", "--out", out, "--json"]
    done = subprocess.run([*QUARRY, *argv], capture_output=True, text=True, check=True)
    tracks = json.loads(done.stdout)
    x = written.values[(first, "electrons", "position/x")].astype(np.float64) * POSITION_SI
    ids = written.values[(first, "electrons", "id")]
    assert sorted(tracks["ids"]) == sorted(ids[x > 2.5e-6].tolist()) and tracks["ids"]
    for it, step in zip(ITERATIONS, tracks["steps"], strict=True):
        at = {
            int(i): v
            for i, v in zip(
                written.values[(it, "electrons", "id")],
                written.values[(it, "electrons", "position/x")],
                strict=True,
            )
        }
        for particle, got in zip(tracks["ids"], step["values"]["position.x"], strict=True):
            if particle in at:
                assert got == np.float64(at[particle]) * POSITION_SI
            else:
                assert got is None
    units = []
    with h5py.File(out, "r") as f:
        f.visititems(
            lambda name, obj: units.append(obj.attrs["unitSI"]) if name.endswith("/x") else None
        )
    assert units and all(u == 1.0 for u in units)
