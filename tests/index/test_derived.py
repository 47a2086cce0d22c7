"""Derived variables indexed at build time, against NumPy and against the
same expression scanned."""

from __future__ import annotations

import json
import subprocess
import sys

import h5py
import numpy as np
import pytest

import quarry
from quarry.errors import DerivationError, QuerySyntaxError
from quarry.index.derived import Derivation

N = 1_003  # not a multiple of the block length


@pytest.fixture
def beam(tmp_path):
    path = str(tmp_path / "beam.h5")
    rng = np.random.default_rng(11)
    with h5py.File(path, "w") as f:
        for step in range(3):
            x = rng.normal(0, 1e-4, N)
            y = rng.normal(0, 1.2e-4, N).astype("f4")
            x[rng.random(N) < 0.05] = np.nan
            f[f"Step#{step}/x"] = x
            f[f"Step#{step}/y"] = y
            f[f"Step#{step}/id"] = np.arange(N)
    return path


def columns(path, step):
    with h5py.File(path) as f:
        return f[f"Step#{step}/x"][()], f[f"Step#{step}/y"][()].astype("f8")


@pytest.mark.parametrize("block_len", [100, 1 << 20])
def test_derived_radius_per_step_matches_numpy_and_the_scan(beam, block_len):
    with quarry.open(beam) as ds:
        manifest = ds.build_index(derive=["r=sqrt(x**2 + y**2)"], block_len=block_len)
        assert manifest.derived == (Derivation("r", "sqrt(x**2 + y**2)"),)
        assert {f"/Step#{s}/r" for s in range(3)} <= set(manifest.variables)
    with quarry.open(beam) as ds:  # a fresh open finds them through the index
        for step in range(3):
            x, y = columns(beam, step)
            r = np.sqrt(x**2 + y**2)
            for cut in (1e-4, 3.5e-4, float(np.nanmedian(r))):
                sel = ds.query(f"/Step#{step}/r > {cut!r}")
                want = np.flatnonzero(r > cut)
                np.testing.assert_array_equal(sel.ids(), want)
                assert sel.count() == len(want)
                scanned = ds.query(f"sqrt(/Step#{step}/x**2 + /Step#{step}/y**2) > {cut!r}")
                np.testing.assert_array_equal(scanned.ids(), want)
                np.testing.assert_array_equal(sel.values(f"/Step#{step}/r"), r[want])
            # missing inputs make r missing: unknown, never returned by a negation
            assert ds.query(f"!(/Step#{step}/r > 1e-4)").count() == int(np.sum(r <= 1e-4))
            info = ds.variable(f"/Step#{step}/r")
            assert info.dtype == np.dtype("f8") and "sqrt(x**2 + y**2)" in str(info.decoding)


def test_rebuild_keeps_derived_and_aggregates_use_them(beam):
    with quarry.open(beam) as ds:
        ds.build_index(derive=["r=sqrt(x**2 + y**2)", "ratio = x / y"])
        manifest = ds.build_index(block_len=128)  # no derive: keeps both
        assert [d.name for d in manifest.derived] == ["r", "ratio"]
        x, y = columns(beam, 2)
        r = np.sqrt(x**2 + y**2)
        sel = ds.query("/Step#2/r > 2*mean(/Step#2/r)")
        assert sel.aggregates[0].source == "index"
        assert sel.aggregates[0].value == pytest.approx(np.nanmean(r), rel=1e-12)
        assert sel.count() == int(np.sum(r > 2 * sel.aggregates[0].value))
        assert ds.query("/Step#0/ratio < 0").count() == int(
            np.sum(columns(beam, 0)[0] / columns(beam, 0)[1] < 0)
        )


def test_derivation_errors(beam):
    with quarry.open(beam) as ds:
        with pytest.raises(DerivationError, match="NAME=EXPRESSION"):
            ds.build_index(derive=["sqrt(x)"])
        with pytest.raises(QuerySyntaxError) as err:
            ds.build_index(derive=["r=sqrt(x**2 +)"])
        assert err.value.query == "sqrt(x**2 +)"
        with pytest.raises(DerivationError, match="no group of the file holds all of x, z"):
            ds.build_index(derive=["r=x+z"])
        with pytest.raises(DerivationError, match="already exists"):
            ds.build_index(derive=["x=y*2"])
        with pytest.raises(QuerySyntaxError, match="bare names"):
            ds.build_index(derive=["r=/Step#0/x*2"])
        with pytest.raises(DerivationError, match="row by row, so it takes no aggregate"):
            ds.build_index(derive=["z=x-mean(x)"])  # was a ValueError from the build
        assert not ds.has_index  # nothing was written


def test_cli_derive_and_info(beam):
    cli = [sys.executable, "-m", "quarry.cli.main"]
    out = subprocess.run(
        [*cli, "index", beam, "--derive", "r=sqrt(x**2 + y**2)", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "/Step#1/r" in json.loads(out.stdout)["variables"]
    info = json.loads(
        subprocess.run(
            [*cli, "info", beam, "--json"], capture_output=True, text=True, check=True
        ).stdout
    )
    by_path = {v["path"]: v for v in info["variables"]}
    assert by_path["/Step#1/r"]["indexed"] and "derived" in by_path["/Step#1/r"]["decoding"]
    count = subprocess.run(
        [*cli, "query", beam, "/Step#1/r > 2e-4"], capture_output=True, text=True, check=True
    )
    x, y = columns(beam, 1)
    assert int(count.stdout) == int(np.sum(np.sqrt(x**2 + y**2) > 2e-4))
    bad = subprocess.run([*cli, "index", beam, "--derive", "r=x+"], capture_output=True, text=True)
    assert bad.returncode == 2 and "^" in bad.stderr and "Traceback" not in bad.stderr
    # A definition of the wrong form is a usage error too (exit 2), not a data error.
    for wrong, said in (("1z=x", "written NAME=EXPRESSION"), ("z=x-mean(x)", "no aggregate")):
        bad = subprocess.run(
            [*cli, "index", beam, "--derive", wrong], capture_output=True, text=True
        )
        assert bad.returncode == 2 and said in bad.stderr and "Traceback" not in bad.stderr


def test_derived_values_are_computed_span_by_span(tmp_path, monkeypatch):
    """The README: "computed span by span, never the whole array at once".
    NumPy's allocations are traced by tracemalloc, so the peak traced while
    building (and verifying) a derived variable over inputs of 32 MB each
    stays near a few 64K-row spans; materialising r, or reading x and y
    whole, would take 32 MB or more. Two bins and no precision edges keep
    the index itself (blocks waiting to be written) at 1 MB."""
    import tracemalloc

    from quarry.index import build, verify

    span, rows = 1 << 16, 1 << 22
    monkeypatch.setattr(build, "READ_SPAN", span)
    monkeypatch.setattr(verify, "READ_SPAN", span)
    path = str(tmp_path / "wide.h5")
    rng = np.random.default_rng(5)
    with h5py.File(path, "w") as f:  # chunked: read into NumPy arrays, not memory-mapped
        for name in "xy":
            f.create_dataset(name, data=rng.normal(size=rows), chunks=(span,))
    array_bytes = rows * 8
    with quarry.open(path) as ds:
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            ds.build_index([], derive=["r=sqrt(x**2 + y**2)"], block_len=span, bins=2, precision=0)
            built_peak = tracemalloc.get_traced_memory()[1] - base
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            assert ds.verify().ok
            verified_peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        assert built_peak < array_bytes / 4, f"{built_peak / 1e6:.1f} MB traced while building"
        assert verified_peak < array_bytes / 4, f"{verified_peak / 1e6:.1f} MB while verifying"
        with h5py.File(path) as f:
            r = np.sqrt(f["x"][()] ** 2 + f["y"][()] ** 2)
        assert ds.query("r > 1.5").count() == int(np.sum(r > 1.5))


def test_vars_may_name_the_derived_variable(beam):
    """`--vars r,x --derive r=...` indexes r and x (r was 'no variable')."""
    with quarry.open(beam) as ds:
        manifest = ds.build_index(["r", "x"], derive=["r=sqrt(x**2 + y**2)"])
    assert {p.rsplit("/", 1)[1] for p in manifest.variables} == {"r", "x"}


def test_a_name_resolves_anew_once_the_index_derives_another_of_it(tmp_path):
    """``Dataset.variable`` keeps what a name resolved to only while the
    variables it was resolved among stand: a derived ``/r`` made beside a
    stored ``/g/r`` takes the bare name ``r`` from the next call on."""
    path = str(tmp_path / "r.h5")
    with h5py.File(path, "w") as f:
        f["x"], f["g/r"] = np.array([3.0, -4.0]), np.array([1.0, 2.0])
    with quarry.open(path) as ds:
        assert ds.variable("r").path == "/g/r"
        assert ds.variable("r").path == "/g/r"  # kept
        ds.build_index(derive=["r=sqrt(x**2)"])
        assert ds.query("r > 3.5").count() == 1  # opens the index, and its driver
        assert ds.variable("r").path == "/r"
