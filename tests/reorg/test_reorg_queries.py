"""Queries answered through a reorganised copy: the same counts and ids as the
index and as NumPy, chosen by cost, named in --explain, refused when stale."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

import quarry
from oracle import oracle_ids
from quarry.errors import CorruptCopyError, StaleCopyError
from quarry.query.stats import Estimate
from quarry.reorg import open_copy

DTYPES = ["f4", "f8", "i4", "u2"]


def quarry_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``quarry ARGS`` in a process of its own, which must succeed; its output as text."""
    return subprocess.run(
        [sys.executable, "-m", "quarry.cli.main", *args], check=True, capture_output=True, text=True
    )


def column(rng: np.random.Generator, dtype: str, n: int) -> np.ndarray:
    if dtype.startswith("f"):
        v = rng.normal(0, 10, n).round(rng.integers(0, 2)).astype(dtype)
        v[rng.random(n) < 0.03] = np.nan
        return v
    return rng.integers(0 if dtype.startswith("u") else -30, 30, n).astype(dtype)


def random_table(
    tmp_path, rng: np.random.Generator, seed: int, n: int, names: list[str]
) -> tuple[str, dict[str, np.ndarray]]:
    """Columns ``names`` of ``n`` rows, their dtypes taken in turn from
    DTYPES from ``seed`` on, written to an HDF5 file: its path and the columns."""
    cols = {k: column(rng, DTYPES[(seed + i) % len(DTYPES)], n) for i, k in enumerate(names)}
    path = str(tmp_path / "d.h5")
    with h5py.File(path, "w") as f:
        for k, v in cols.items():
            f[k] = v
    return path, cols


def box_query(rng: np.random.Generator, names: list[str]) -> str:
    parts = []
    for name in rng.permutation(names)[: rng.integers(1, len(names) + 1)]:
        a, b = sorted(float(v) for v in rng.integers(-35, 35, 2) + rng.choice([0, 0.5]))
        lo, hi = rng.choice(["<", "<="]), rng.choice(["<", "<="])
        parts.append(f"{a!r} {lo} {name} {hi} {b!r}" if rng.random() < 0.8 else f"{name} > {a!r}")
    return " && ".join(parts)


@pytest.fixture
def forced(monkeypatch):
    """Every box a copy holds goes through it, whatever the costs, so small
    data exercises that path."""
    monkeypatch.setattr(
        Estimate, "choice", property(lambda e: "mdbin" if e.mdbin is not None else "index")
    )


@pytest.mark.parametrize("seed", range(6))
def test_a_box_through_the_copy_equals_numpy_and_the_index(tmp_path, seed, forced):
    rng = np.random.default_rng(seed)
    n = 3001  # divides neither the parts nor the blocks
    names = ["a", "b", "c"]
    path, cols = random_table(tmp_path, rng, seed, n, names)
    queries = [box_query(rng, names) for _ in range(25)]
    with quarry.open(path) as ds:
        ds.build_index(block_len=512)
        alone = [ds.query(q).ids() for q in queries]
        ds.reorganize(names, bins=int(rng.integers(2, 9)), part_rows=int(rng.integers(500, 4000)))
    with quarry.open(path) as ds:
        for q, want_index in zip(queries, alone, strict=True):
            want = oracle_ids(q, cols)
            counted, listed = ds.query(q), ds.query(q)
            assert counted.count() == len(want), q
            np.testing.assert_array_equal(listed.ids(), want, err_msg=q)
            np.testing.assert_array_equal(want_index, want, err_msg=q)
            assert [a.path for a in listed.access()] == ["mdbin"], q


def test_the_copy_is_taken_when_cheaper_and_explain_names_it(tmp_path):
    """README: a box is answered from the copy when that costs less than the
    index or a scan, and --explain names the path taken with its estimate."""
    rng = np.random.default_rng(1)
    n = 2_000_000  # enough rows that the index's work outweighs reading the copy's tables
    cols = {
        "energy": rng.exponential(1, n).astype("f4"),
        "x": rng.uniform(0, 300, n).astype("f4"),
        "y": rng.uniform(0, 300, n).astype("f4"),
    }
    path = str(tmp_path / "p.h5")
    with h5py.File(path, "w") as f:
        for k, v in cols.items():
            f[k] = v
    query = "1.2 < energy < 1.3 && 140 < x < 150 && 65 < y < 75"
    quarry_cli("reorg", path, "--vars", "energy,x,y", "--bin-size", "0.1,10,10")
    # Without an index the box costs three scans: the copy reads its boundary rows.
    run = quarry_cli("query", path, query, "--explain", "--json")
    result = json.loads(run.stdout)
    assert result["count"] == len(oracle_ids(query, cols))
    (plan,) = result["plan"]
    assert plan["access"] == "mdbin" and plan["mdbin_cost"] < plan["scan_cost"]
    assert plan["index_cost"] is None  # no index was weighed: none is shown
    run = quarry_cli("query", path, query, "--explain")
    assert (
        "plan: 1.2 < /energy < 1.3 && 140.0 < /x < 150.0 && 65.0 < /y < 75.0: mdbin" in run.stderr
    )
    assert "; no index; scan: cost" in run.stderr
    # AND is associative: a box written with parentheses is the same box.
    for nested in (
        "(1.2 < energy < 1.3 && 140 < x < 150) && 65 < y < 75",
        "1.2 < energy < 1.3 && (140 < x < 150 && 65 < y < 75)",
    ):
        result = json.loads(quarry_cli("query", path, nested, "--explain", "--json").stdout)
        assert result["count"] == len(oracle_ids(query, cols))
        assert [p["access"] for p in result["plan"]] == ["mdbin"], nested
    # Bounds between the index's bin edges leave it rows to check and whole
    # bins' row sets to make and intersect: still more than the copy reads.
    quarry_cli("index", path)
    ragged = "1.213 < energy < 1.287 && 140.3 < x < 149.6 && 65.2 < y < 74.9"
    run = quarry_cli("query", path, ragged, "--explain", "--json")
    result = json.loads(run.stdout)
    assert result["count"] == len(oracle_ids(ragged, cols))
    (plan,) = result["plan"]
    assert plan["access"] == "mdbin" and plan["mdbin_cost"] < plan["index_cost"], plan
    # A condition the copy does not hold goes through the index as before.
    run = quarry_cli("query", path, "energy > 1.25", "--explain", "--json")
    assert [p["access"] for p in json.loads(run.stdout)["plan"]] == ["index"]


def test_a_box_the_index_answers_for_less_leaves_the_copy_unread(tmp_path):
    """Never slower than the index: on a small file opened afresh, reading the
    copy's tables costs more than the index's answer, so the index answers
    and the copy's tables are never read: at the command line, where the
    index needs no values, NumPy is not even imported."""
    rng = np.random.default_rng(2)
    n = 5_000
    cols = {"energy": rng.uniform(0, 100, n).astype("f4"), "x": rng.uniform(0, 100, n)}
    path = str(tmp_path / "s.h5")
    with h5py.File(path, "w") as f:
        for k, v in cols.items():
            f[k] = v
    query = "10 <= energy < 20 && 10 <= x < 20"
    with quarry.open(path) as ds:
        ds.build_index()
        ds.reorganize(["energy", "x"], bins=10)
    with quarry.open(path) as ds:
        sel = ds.query(query)
        assert sel.count() == len(oracle_ids(query, cols))
        assert [a.path for a in sel.access()] == ["index", "index"]
    probe = (
        "import sys; from quarry.cli.main import main; code = main(); "
        "print('numpy' in sys.modules, file=sys.stderr); sys.exit(code)"
    )
    for _ in range(2):  # the first proves the just-written file unchanged by its CRCs
        run = subprocess.run(
            [sys.executable, "-c", probe, "query", path, query], capture_output=True, text=True
        )
    assert run.stdout == f"{len(oracle_ids(query, cols))}\n", run.stderr
    assert run.stderr.strip().splitlines()[-1] == "False", run.stderr


def test_a_stale_copy_is_refused_like_a_stale_index(tmp_path):
    path = str(tmp_path / "s.h5")
    with h5py.File(path, "w") as f:
        f["x"], f["y"] = np.arange(100.0), np.arange(100.0)
    with quarry.open(path) as ds:
        ds.reorganize(["x", "y"], bins=4)
    with h5py.File(path, "a") as f:
        f["x"][0] = 50.0
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    with quarry.open(path) as ds, pytest.raises(StaleCopyError, match="quarry reorg"):
        ds.query("x < 10 && y < 10").count()


def test_a_stale_copy_does_not_refuse_queries_it_could_not_answer(tmp_path):
    """A write to a variable the copy does not hold: queries of that
    variable (or of others beside the copy's) answer without the copy; a box
    over the copy's own variables is still refused until it is rebuilt or verified."""
    path = str(tmp_path / "s.h5")
    with h5py.File(path, "w") as f:
        f["x"], f["y"], f["c"] = np.arange(100.0), np.arange(100.0), np.arange(100.0)
    with quarry.open(path) as ds:
        ds.reorganize(["x", "y"], bins=4)
    with h5py.File(path, "a") as f:
        f["c"][0] = 99.0
    with quarry.open(path) as ds:
        assert ds.query("c > 50").count() == 50
        assert ds.query("c > 50 && x < 60").count() == 10
        with pytest.raises(StaleCopyError, match="quarry reorg"):
            ds.query("x < 10 && y < 10").count()


@pytest.mark.parametrize("seed", range(6))
def test_values_through_the_copy_equal_numpy_and_the_index(tmp_path, seed, forced):
    """README: values at the hits of a box the copy answered: its variables' read from
    the copy's runs (no byte of the file read for them), the others gathered
    from the file; all in ascending row order, equal to NumPy's and to the
    index path's, dtypes included."""
    rng = np.random.default_rng(100 + seed)
    n = 2999
    dtypes = [*DTYPES, ">f8", "i1"]
    names = ["a", "b", "c"]
    cols = {k: column(rng, dtypes[(seed + 2 * i) % len(dtypes)], n) for i, k in enumerate(names)}
    cols["w"] = rng.normal(size=n).astype("f4")  # not in the copy
    path = str(tmp_path / "v.h5")
    with h5py.File(path, "w") as f:
        for k, v in cols.items():
            f[k] = v
    queries = [box_query(rng, names) for _ in range(20)]
    index_dir, copy_dir = str(tmp_path / "index"), str(tmp_path / "copy")
    with quarry.open(path, index=index_dir) as ds:
        ds.build_index(block_len=256)
    with quarry.open(path, index=copy_dir) as ds:
        ds.reorganize(names, bins=int(rng.integers(2, 12)), part_rows=int(rng.integers(300, 3000)))
    with quarry.open(path, index=index_dir) as by_index, quarry.open(path, index=copy_dir) as ds:
        for q in queries:
            want = oracle_ids(q, cols)
            sel, alone = ds.query(q), by_index.query(q)
            np.testing.assert_array_equal(sel.ids(), want, err_msg=q)
            assert [a.path for a in sel.access()] == ["mdbin"], q
            read_before = sel.stats().bytes_read
            for k in names:
                got = sel.values(k)
                native = cols[k].dtype.newbyteorder("=")
                assert got.dtype == alone.values(k).dtype == native
                np.testing.assert_array_equal(got, cols[k][want], err_msg=q)
                np.testing.assert_array_equal(got, alone.values(k), err_msg=q)
            assert sel.stats().bytes_read == read_before, q  # from the copy, not the file
            np.testing.assert_array_equal(sel.values("w"), cols["w"][want], err_msg=q)
            assert sel.stats().bytes_read == read_before + 4 * len(want), q


@pytest.mark.parametrize("dtype", ["u1", "u2", "u4", "i1", "i2", "f4"])
def test_a_box_with_a_range_no_value_can_hold_answers_as_numpy(tmp_path, dtype):
    """A condition outside what the variable's dtype can hold (``u < -1`` of
    unsigned values) is empty: with a copy present the query answers 0 rows,
    as NumPy does, never an error."""
    rng = np.random.default_rng(7)
    n = 2003
    info = np.iinfo(dtype) if dtype[0] in "ui" else None
    low, high = (int(info.min), int(info.max)) if info is not None else (-1e3, 1e3)
    cols = {
        "u": rng.integers(max(low, -100), min(high, 100), n).astype(dtype),
        "v": rng.normal(0, 10, n).astype("f4"),
    }
    path = str(tmp_path / "e.h5")
    with h5py.File(path, "w") as f:
        for k, v in cols.items():
            f[k] = v
    with quarry.open(path) as ds:
        ds.build_index()
        ds.reorganize(["u", "v"], bins=4)
    below, above = repr(float(low) - 1.5), repr(float(high) + 1.5)
    queries = [
        f"u < {below} && v > 3",
        f"v > 3 && u <= {below}",
        f"u > {above} && v < 5",
        f"{below} > u && v < 5",
        f"{above} < u < {float(high) + 9} && v > -3",
        "u < 20 && v > -3",
    ]
    with quarry.open(path) as ds:
        for q in queries:
            want = oracle_ids(q, cols)
            assert ds.query(q).count() == len(want), q
            np.testing.assert_array_equal(ds.query(q).ids(), want, err_msg=q)


def test_explain_over_a_files_steps_names_each_steps_plan(tmp_path):
    """The issue: `quarry query ... --explain` prints the plan and `--json`
    adds "plan", also for a file of step groups (the H5Part layout the issue's
    particles.h5 has), where the query runs in every step: the plan of each
    step, named by it, never silently nothing."""
    rng = np.random.default_rng(4)
    path = str(tmp_path / "p.h5")
    with h5py.File(path, "w") as f:
        for step in range(2):
            f[f"Step#{step}/energy"] = rng.uniform(0, 2, 100_000)
            f[f"Step#{step}/x"] = rng.uniform(0, 300, 100_000)
    query = "1.2 < energy < 1.3 && 140 <= x < 150"
    quarry_cli("reorg", path, "--vars", "energy,x", "--bin-size", "0.1,10")
    run = quarry_cli("query", path, query, "--explain", "--json")
    result = json.loads(run.stdout)
    assert [(p["step"], p["access"]) for p in result["plan"]] == [(0, "mdbin"), (1, "mdbin")]
    assert all(list(p)[:2] == ["file", "step"] and p["file"] == path for p in result["plan"])
    assert set(result["stats"]) >= {"rows_checked", "bytes_read"}
    steps = [
        json.loads(
            quarry_cli("query", path, query, "--path", f"Step#{s}", "--explain", "--json").stdout
        )
        for s in range(2)
    ]
    assert result["stats"] == {k: sum(one["stats"][k] for one in steps) for k in result["stats"]}
    run = quarry_cli("query", path, query, "--explain", "--json", "--ids")
    assert [p["access"] for p in json.loads(run.stdout)["plan"]] == ["mdbin", "mdbin"]
    run = quarry_cli("query", path, query, "--explain")
    with h5py.File(path) as f:
        expected = sum(
            np.count_nonzero((e > 1.2) & (e < 1.3) & (x >= 140) & (x < 150))
            for e, x in ((f[f"Step#{s}/energy"][()], f[f"Step#{s}/x"][()]) for s in range(2))
        )
    assert run.stdout == f"{expected}\n"
    plans = [line for line in run.stderr.splitlines() if line.startswith("plan: ")]
    assert len(plans) == 2 and all(": mdbin (" in line for line in plans), run.stderr
    assert "step 0" in plans[0] and "step 1" in plans[1]


@pytest.mark.parametrize("seed", range(4))
def test_bytes_damaged_in_a_copy_are_an_error_never_a_wrong_answer(tmp_path, seed, forced):
    """Every block of the copy a query reads is checked against its CRC-32:
    with one byte of one column (or of the row numbers) changed, each
    random box answers as NumPy or raises CorruptCopyError, and a box over
    every row (whose ids read every block of the row numbers) raises."""
    rng = np.random.default_rng(seed)
    n = 20_011
    names = ["a", "b", "c"]
    path, cols = random_table(tmp_path, rng, seed, n, names)
    with quarry.open(path) as ds:
        ds.reorganize(names, bins=int(rng.integers(2, 6)), part_rows=int(rng.integers(5000, 9000)))
    copy = path + ".qmd"
    target = ["columns/0", "columns/1", "columns/2", "rows"][seed]
    with h5py.File(copy, "r") as f:
        offset, nbytes = f[f"m0/{target}"].id.get_offset(), f[f"m0/{target}"].nbytes
    with open(copy, "r+b") as f:
        at = offset + int(rng.integers(0, nbytes))
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0x5A]))
    raised = 0
    with quarry.open(path) as ds:
        for q in [box_query(rng, names) for _ in range(20)]:
            try:
                got = ds.query(q).ids()
            except CorruptCopyError:
                raised += 1
                continue
            np.testing.assert_array_equal(got, oracle_ids(q, cols), err_msg=q)
    with quarry.open(path) as ds:
        everything = " && ".join(f"{k} > -1e9" for k in names)
        with pytest.raises(CorruptCopyError, match="damaged"):
            sel = ds.query(everything)
            sel.ids()
            for k in names:
                sel.values(k)


def test_a_file_with_a_copy_and_no_index_is_not_said_to_be_scanned(tmp_path):
    """Without an index the CLI says the data is scanned, unless the file has a
    reorganised copy: then only what the copy does not answer is scanned."""
    rng = np.random.default_rng(3)
    cols = {k: rng.uniform(0, 100, 50_000).astype("f4") for k in ("e", "x")}
    path = str(tmp_path / "c.h5")
    with h5py.File(path, "w") as f:
        for k, v in cols.items():
            f[k] = v
    query = "10.5 < e < 11.5 && 40 < x < 50"

    def run() -> tuple[int, str]:
        done = quarry_cli("query", path, query)
        return int(done.stdout), done.stderr

    count, err = run()
    assert count == len(oracle_ids(query, cols)) and "; scanning the data." in err
    quarry_cli("reorg", path, "--vars", "e,x", "--bin-size", "1,10")
    count, err = run()
    assert count == len(oracle_ids(query, cols))
    assert "no index found" in err and "what its reorganised copy does not answer is scanned" in err
    assert "scanning the data" not in err


def test_a_stale_copy_of_steps_names_the_command_that_rebuilds_it(tmp_path):
    """The stale copy's message names the command that builds it again, and
    that command works: every step's variables by their names within the
    step (`--vars energy,x`), not all steps' full paths in one table (which
    asked for more bins than 64 bits hold over 20 steps)."""
    path = str(tmp_path / "s.h5")
    rng = np.random.default_rng(9)
    with h5py.File(path, "w") as f:
        for step in range(20):
            f[f"Step#{step}/energy"] = rng.exponential(1, 500)
            f[f"Step#{step}/x"] = rng.uniform(0, 100, 500)
    quarry_cli("reorg", path, "--vars", "energy,x", "--bins", "8")
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    with quarry.open(path) as ds, pytest.raises(quarry.QuarryError, match="reorganised") as err:
        ds.query("energy < 0.5 && x < 40").counts()
    # The copy serves every step: its staleness is told of the file, not of step 0.
    said = str(err.value)
    assert said.startswith(f"{path}: {path} has changed") and "step 0" not in said
    command = str(err.value).rsplit("build the copy again with: ", 1)[1]
    assert command == f"quarry reorg {path} --vars energy,x --bins 8"
    quarry_cli(*command.split()[1:])
    with quarry.open(path) as ds:
        assert len(ds.query("energy < 0.5 && x < 40").counts()) == 20
    assert {a.count for m in open_copy(path).manifest.members for a in m.axes} == {8}


def test_variables_of_extreme_range_bin_without_numpy_warnings(tmp_path):
    """float32 spanning +-3e38 and subnormal float64: their bins overflow to
    infinities on the way, which the clip puts in the end bins. A query said
    so with a NumPy RuntimeWarning and its source line, even under --quiet."""
    import warnings

    path = str(tmp_path / "a.h5")
    rng = np.random.default_rng(0)
    x = rng.random(200_000).astype(np.float32)
    x[0], x[1] = -3e38, 3e38
    t, y = rng.random(200_000) * 1e-310, rng.random(200_000)
    with h5py.File(path, "w") as f:
        f["x"], f["y"], f["t"] = x, y, t
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with quarry.open(path) as ds:
            ds.reorganize(["x", "y", "t"], bins=4)
            assert ds.query("x > 0.5 && y < 0.5").count() == int(((x > 0.5) & (y < 0.5)).sum())
            assert ds.query("t > 5e-311 && y < 0.5").count() == int(
                ((t > 5e-311) & (y < 0.5)).sum()
            )
            listed = ds.query("x > 0.5 && y < 0.5")
            assert len(listed.ids()) == int(((x > 0.5) & (y < 0.5)).sum())


def test_a_float32_reaching_its_lowest_value_bins_without_numpy_warnings(tmp_path):
    """The greatest value below float32's lowest finite edge is -inf: NumPy's
    nextafter said so with an overflow warning on every query of the copy.
    With -inf among the values, the first edge as a multiple of 1e37
    (-3.5e38, -inf in float32) made -inf's bin NaN: a damaged copy."""
    import warnings

    path = str(tmp_path / "h.h5")
    rng = np.random.default_rng(3)
    h = np.clip(rng.normal(0, 1e38, 100_003), -3e38, 3e38).astype("f4")
    h[0], h[1], h[2::1000] = np.finfo("f4").min, np.finfo("f4").max, -np.inf
    with h5py.File(path, "w") as f:
        f["h"], f["u"] = h, rng.random(len(h))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with quarry.open(path) as ds:
            ds.reorganize(["h", "u"], bin_size=[1e37, 0.1])
            for query in ("1e37 < h < 1.05e38 && u < 0.5", "h < -3e38 && u >= 0"):
                expected = oracle_ids(query, {"h": h, "u": ds.query("u >= 0").values("u")})
                np.testing.assert_array_equal(ds.query(query).ids(), expected)


@pytest.mark.parametrize(
    ("binning", "count"),
    [({"bins": [16, 4]}, 16), ({"bin_size": [1e306, 0.5]}, 360), ({"bins": [1, 7]}, 1)],
)
def test_values_spanning_more_than_float64_holds_are_binned_as_asked(tmp_path, binning, count):
    """Finite values from -1.7e308 to 1.7e308 span more than float64 holds:
    every --bins and --bin-size gave one bin of width 1 (the copy narrowed
    nothing, and said so nowhere), and --bin-size 0.5 was not refused."""
    rng = np.random.default_rng(count)
    n = 5003
    x = rng.uniform(-1, 1, n) * 1.7e308
    x[rng.random(n) < 0.05] = np.nan
    x[:4] = [np.finfo("f8").max, -np.finfo("f8").max, np.inf, -np.inf]
    y = rng.normal(size=n)
    path = str(tmp_path / "wide.h5")
    with h5py.File(path, "w") as f:
        f["x"], f["y"] = x, y
    with quarry.open(path) as ds:
        manifest = ds.reorganize(["x", "y"], **binning)
        assert manifest.members[0].axes[0].count == count
        for _ in range(40):
            a, b = (float(v) for v in np.sort(rng.uniform(-1, 1, 2) * 1.79e308))
            c = float(rng.normal())
            query = f"{a!r} < x && x <= {b!r} && y > {c!r}"
            want = np.flatnonzero((x > a) & (x <= b) & (y > c))
            np.testing.assert_array_equal(ds.query(query).ids(), want, err_msg=query)
        with pytest.raises(quarry.QuarryError, match=r"more than 16777216 bins of size 0\.5"):
            ds.reorganize(["x", "y"], bin_size=[0.5, 0.5])
