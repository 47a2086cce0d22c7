"""Each ADIOS2 step as written: its own shape (particle counts that change
from step to step) and its real step number (a variable written at some steps
only), differential against NumPy reading the same file step by step with
adios2 directly."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import quarry
from oracle import oracle_ids

adios2 = pytest.importorskip("adios2", reason="adios2 is not installed")

CLI = [sys.executable, "-m", "quarry.cli.main"]
DTYPES = ["f4", "f8", "i4", "u2", "i8"]


def write_run(path, sizes, seed=0, every_other=True):
    """A run whose step ``s`` holds ``sizes[s]`` particles of several dtypes
    (floats with NaNs), and ``x`` (more values than particles) on even steps only."""
    rng = np.random.default_rng(seed)
    with adios2.Stream(path, "w") as stream:
        for s, _ in enumerate(stream.steps(len(sizes))):
            n = sizes[s]
            arrays = {f"v_{code}": (rng.normal(s, 40, n)).astype(code) for code in DTYPES}
            for code in ("f4", "f8"):
                arrays[f"v_{code}"][rng.random(n) < 0.1] = np.nan
            if s % 2 == 0 or not every_other:
                arrays["x"] = rng.normal(0, 1, n + 3)
            for name, values in arrays.items():
                stream.write(name, values, [values.size], [0], [values.size])


def read_steps(path):
    """Step number -> {name: values}, read by adios2 step by step."""
    steps = {}
    with adios2.Stream(path, "r") as stream:
        for _ in stream.steps():
            arrays = {}
            for name, meta in stream.available_variables().items():
                if not meta["Shape"]:  # a local array: this file's steps write one block
                    arrays[name] = np.asarray(stream.read(name, block_id=0))
                    continue
                shape = tuple(int(n) for n in meta["Shape"].split(","))
                # adios2 cannot read an empty array (it divides by its size)
                empty = np.empty(shape, name[2:] if name.startswith("v_") else "f8")
                # The step's own selection: BP4's default is another step's shape.
                whole = ([0] * len(shape), list(shape))
                arrays[name] = np.asarray(stream.read(name, *whole)) if all(shape) else empty
            steps[stream.current_step()] = arrays
    return steps


def listing(path):
    with quarry.open(path) as ds:
        return {v.path: v.shape for v in ds.variables()}


def expected_listing(steps):
    return {f"/Step#{s}/{n}": a.shape for s, arrays in steps.items() for n, a in arrays.items()}


def cli(*args):
    return subprocess.run([*CLI, *args], capture_output=True, text=True)


@pytest.fixture
def run_bp(tmp_path):
    path = str(tmp_path / "run.bp")
    write_run(path, [3001, 3018, 3035, 3052, 2990])
    return path, read_steps(path)


def test_each_step_has_its_own_shape_and_number(run_bp):
    path, steps = run_bp
    assert sorted(steps) == [0, 1, 2, 3, 4]
    assert listing(path) == expected_listing(steps)
    assert "/Step#1/x" not in listing(path)


@pytest.mark.parametrize("indexed", [False, True])
def test_queries_in_every_step_equal_numpy(run_bp, indexed):
    path, steps = run_bp
    with quarry.open(path) as ds:
        if indexed:
            ds.build_index(block_len=1000)
        for s, arrays in steps.items():
            for name, values in arrays.items():
                query = f"/Step#{s}/{name} > 3"
                sel = ds.query(query)
                want = oracle_ids(query, {f"/Step#{s}/{name}": values})
                np.testing.assert_array_equal(sel.ids(), want)
                np.testing.assert_array_equal(sel.values(f"/Step#{s}/{name}"), values[want])


@pytest.mark.parametrize("indexed", [False, True])
def test_per_step_counts_on_the_command_line_equal_numpy(run_bp, indexed):
    path, steps = run_bp
    if indexed:
        assert cli("index", path, "--block-size", "1000").returncode == 0
    done = cli("query", path, "v_f4 > 2 && v_i4 < 30", "--per-step", "--json")
    assert done.returncode == 0, done.stderr
    got = {r["step"]: r["count"] for r in json.loads(done.stdout)["per_step"]}
    query = "v_f4 > 2 && v_i4 < 30"
    assert got == {s: len(oracle_ids(query, a)) for s, a in steps.items()}
    # x in the steps that hold it; a step without it is named as such.
    done = cli("query", path, "x > 0.5", "--path", "Step#2", "--count")
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == int((steps[2]["x"] > 0.5).sum())
    done = cli("query", path, "x > 0.5", "--per-step")
    assert done.returncode == 1
    assert "step 1: no variable 'x'" in done.stderr and "Traceback" not in done.stderr


def test_a_variable_written_late_is_in_its_own_step(tmp_path):
    path = str(tmp_path / "late.bp")
    with adios2.Stream(path, "w") as stream:
        for s, _ in enumerate(stream.steps(3)):
            stream.write("e", np.arange(4.0 + s), [4 + s], [0], [4 + s])
            if s == 2:
                stream.write("late", np.arange(7.0), [7], [0], [7])
    assert listing(path) == expected_listing(read_steps(path))
    with quarry.open(path) as ds:
        assert ds.query("/Step#2/late > 4").count() == 2
    debris = os.path.join("/tmp", f"late.bp_{os.getpid():x}_profiling.json")
    assert not os.path.exists(debris)


@given(
    sizes=st.lists(st.integers(0, 300), min_size=1, max_size=6),
    seed=st.integers(0, 2**16),
    every_other=st.booleans(),
)
def test_any_sizes_read_as_adios2_reads_them(tmp_path_factory, sizes, seed, every_other):
    path = str(tmp_path_factory.mktemp("bp") / "run.bp")
    write_run(path, sizes, seed, every_other)
    steps = read_steps(path)
    assert listing(path) == expected_listing(steps)
    with quarry.open(path) as ds:
        for s, arrays in steps.items():
            for name, values in arrays.items():
                query = f"/Step#{s}/{name} < 1"
                want = oracle_ids(query, {f"/Step#{s}/{name}": values})
                np.testing.assert_array_equal(ds.query(query).ids(), want)


def write_engine_run(path, engine, local, sizes):
    """``always`` at every step and ``some`` at odd steps only, each step's
    size its own, written by ``engine`` (BP4 or BP5) as global arrays or as
    per-writer blocks (``local``)."""
    io = adios2.Adios().declare_io("w")
    io.set_engine(engine)
    writer = io.open(path, adios2.bindings.Mode.Write)
    made: dict[str, object] = {}
    for step, n in enumerate(sizes):
        writer.begin_step()
        for name, values in (("always", np.arange(n) * 0.5 + step), ("some", np.full(n, step))):
            if name == "some" and step % 2 == 0:
                continue
            values = values.astype("f8")
            if name not in made:
                shape, start = ([], []) if local else ([n], [0])
                made[name] = io.define_variable(name, values, shape, start, [n])
            variable = made[name]
            if not local:
                variable.set_shape([n])
            variable.set_selection([[] if local else [0], [n]])
            writer.put(variable, values, adios2.bindings.Mode.Sync)
        writer.end_step()
    writer.close()


@pytest.mark.parametrize("local", [False, True])
@pytest.mark.parametrize("engine", ["BP4", "BP5"])
def test_a_variable_at_some_steps_has_each_steps_shape_whichever_engine(tmp_path, engine, local):
    """BP4's reader gave a variable that skips steps another step's shape
    (its shape lookup takes a step number, its reads the step's rank among
    those holding it; a local array's blocks were listed by step number):
    a wrong count at one step, an ADIOS2 traceback at another."""
    path = str(tmp_path / f"run_{engine}.bp")
    write_engine_run(path, engine, local, [10, 11, 12, 13, 9, 7])
    steps = read_steps(path)
    assert listing(path) == expected_listing(steps)
    with quarry.open(path) as ds:
        for step, arrays in steps.items():
            for name, values in arrays.items():
                where = f"/Step#{step}/{name}"
                got = ds.query(f"{where} >= {step}").ids()
                np.testing.assert_array_equal(got, np.flatnonzero(values >= step))
                np.testing.assert_array_equal(
                    ds.query(f"{where} >= {step}").values(where), values[got]
                )


def test_what_the_bindings_raise_on_a_read_is_a_source_error_naming_the_variable(tmp_path):
    from quarry.errors import SourceError

    path = str(tmp_path / "run.bp")
    write_engine_run(path, "BP5", False, [10, 11])
    with quarry.open(path) as ds:
        reader = ds.driver._reader

        def refuse(*args, **kwargs):
            raise ValueError("[ADIOS2 EXCEPTION] selection out of bounds")

        reader.read = refuse
        with pytest.raises(SourceError, match=r"cannot read /Step#1/always from .*out of bounds"):
            ds.query("/Step#1/always > 1").count()
