"""Output files and query text refused as the command line's mistakes:
exit 2, before any work, with a message naming what would do."""

from __future__ import annotations

import os

import h5py
import numpy as np
import pytest
from test_cli import run


@pytest.fixture(scope="module")
def steps_h5(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("refused") / "steps.h5")
    with h5py.File(path, "w") as f:
        for s in range(2):
            f[f"Step#{s}/x"] = np.arange(10.0) + s
            f[f"Step#{s}/id"] = np.arange(10)
    return path


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["query", "{f}", "x > 3", "--path", "Step#0", "--values", "x", "--out", "{d}/a.xyz"],
            "argument --out: cannot write {d}/a.xyz: use one of .npy, .csv, .h5, .nc, .parquet",
        ),
        (
            ["query", "{f}", "x > 3", "--plot", "{d}/a.jpg"],
            "argument --plot: cannot draw {d}/a.jpg: use .png or .svg",
        ),
        (
            ["hist", "{f}", "x", "--path", "Step#0", "--png", "{d}/a.pdf"],
            "argument --png: cannot draw {d}/a.pdf: use .png or .svg",
        ),
        (
            ["plot", "{f}", "x", "id", "--where", "x > 1", "--path", "Step#0", "--svg", "{d}/a"],
            "argument --svg: cannot draw {d}/a: use .png or .svg",
        ),
        (
            ["track", "{f}", "x > 3", "--at-step", "0", "--out", "{d}/a.csv"],
            "argument --out: {d}/a.csv: steps are written to .h5, .nc or .parquet",
        ),
        # Known only once the output is chosen: still the command line's mistake.
        (
            ["query", "{f}", "x > 3", "--path", "Step#0", "--ids", "--out", "{d}/a.csv"],
            "ids and coordinates are written as .npy; got {d}/a.csv",
        ),
    ],
)
def test_an_output_format_quarry_does_not_write_is_a_usage_error(steps_h5, tmp_path, args, said):
    d = str(tmp_path)
    proc = run(*(a.format(f=steps_h5, d=d) for a in args), code=2)
    assert said.format(d=d) in proc.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_a_path_written_without_its_slash_is_shown_as_the_division_it_is(steps_h5):
    """``Step#0/x`` divides Step#0 by x: the error said there was no
    variable 'Step#0' and offered /Step#0/x, which is what was typed."""
    proc = run("query", steps_h5, "Step#1/id < 5 && Step#0/x > 3", code=2)
    assert "'/' divides Step#1 by id here" in proc.stderr
    assert "write `Step#1/id` (in backquotes) or /Step#1/id" in proc.stderr
    assert proc.stderr.splitlines()[-1] == " " * 8 + "^"  # under the '/'
    for written in ("`Step#0/x` > 3", "/Step#0/x > 3", "Step#0.x > 3"):
        assert run("query", steps_h5, written).stdout.strip() == "6"


@pytest.mark.parametrize("context", [["--per-step"], ["--path", "Step#1"]])
def test_a_path_from_the_root_without_its_slash_under_a_context(steps_h5, context):
    """Under a context (each step's group, or --path), ``Step#0/x`` is looked
    up inside it, where it names nothing: the error says so and gives the
    spelling from the root, which then answers."""
    proc = run("query", steps_h5, "x > 3 && Step#0/x > 3", *context, code=2)
    assert "'/' divides Step#0 by x here" in proc.stderr
    assert "write /Step#0/x: names without a leading '/' are looked up under" in proc.stderr
    assert proc.stderr.splitlines()[-1] == " " * (2 + 15) + "^"  # under the "/"
    fixed = run("query", steps_h5, "x > 3 && /Step#0/x > 3", *context, "--json")
    assert '"count"' in fixed.stdout


@pytest.fixture
def inputs(tmp_path):
    """Particles and a field beside them, each with its bytes to compare."""
    parts, field = str(tmp_path / "parts.h5"), str(tmp_path / "field.h5")
    rng = np.random.default_rng(5)
    with h5py.File(parts, "w") as f:
        f["x"], f["y"] = rng.uniform(0, 8, 50), rng.uniform(0, 6, 50)
        f["id"] = np.arange(50)
    with h5py.File(field, "w") as f:
        f["bx"] = rng.normal(size=(9, 7))
    os.symlink(parts, str(tmp_path / "link.h5"))
    return {
        "parts": (tmp_path / "parts.h5").read_bytes(),
        "field": (tmp_path / "field.h5").read_bytes(),
    }


@pytest.mark.parametrize(
    ("args", "over"),
    [
        (["query", "{d}/parts.h5", "x > 1", "--values", "x", "--out", "{d}/parts.h5"], "parts"),
        (["query", "{d}/parts.h5", "x > 1", "--values", "x", "--out", "{d}/link.h5"], "parts"),
        (["query", "{d}", "x > 1", "--values", "x", "--out", "{d}/field.h5"], "field"),
        (["track", "{d}/parts.h5", "x > 1", "--at-step", "0", "--out", "{d}/./parts.h5"], "parts"),
        (
            [
                "interp", "{d}/parts.h5", "--field", "bx={d}/field.h5:bx[:, :]", "--at", "x,y",
                "--grid", "origin=0,0 spacing=1,1", "--out", "{d}/field.h5",
            ],
            "field",
        ),
        (
            [
                "interp", "{d}/parts.h5", "--field", "bx={d}/field.h5:bx", "--at", "x,y",
                "--grid", "origin=0,0 spacing=1,1", "--values", "id", "--out", "{d}/parts.h5",
            ],
            "parts",
        ),
    ],
)  # fmt: skip
def test_an_output_over_a_file_being_read_is_refused(tmp_path, inputs, args, over):
    """An output is written to a new file renamed over its path: named as
    an input (by any name), it replaced the data with the answer."""
    d = str(tmp_path)
    proc = run(*(a.format(d=d) for a in args), code=2)
    assert "being read; write the output to another file" in proc.stderr
    assert (tmp_path / f"{over}.h5").read_bytes() == inputs[over]
    assert sorted(os.listdir(d)) == ["field.h5", "link.h5", "parts.h5"]


def test_the_api_does_not_write_over_its_source(tmp_path, inputs):
    import quarry
    from quarry.outputs.writers import OutputOverInputError

    parts = str(tmp_path / "parts.h5")
    with quarry.open(parts) as ds:
        sel = ds.query("x > 1")
        for write in (lambda p: sel.extract(p, ["x"]), sel.save):
            with pytest.raises(OutputOverInputError, match="being read"):
                write(str(tmp_path / "link.h5"))
    assert (tmp_path / "parts.h5").read_bytes() == inputs["parts"]
