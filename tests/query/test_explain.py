"""What a query did (``sel.stats()``, ``--explain``): the README's promises
about the index, checked by the work done rather than by the answer alone.
An engine that scanned every range would give the same answers and fail here."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import h5py
import numpy as np
import pytest

import quarry

N = 1 << 18
BLOCK = 1 << 14
N_BLOCKS = N // BLOCK
#: Literals that fall between 2-significant-digit edges.
BETWEEN = [0.31416, 0.7071, 1.2345, 0.0123]
#: Of those, the ones above which more than a quarter of the energies lie.
DENSE = {0.31416, 0.0123}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    rng = np.random.default_rng(20)
    columns = {
        "energy": rng.exponential(0.5, N),
        "x": rng.uniform(0, 200, N).astype("f4"),
        "t": np.arange(N, dtype="i8"),  # sorted: zone maps rule out whole blocks
    }
    columns["energy"][rng.random(N) < 0.01] = np.nan
    path = str(tmp_path_factory.mktemp("stats") / "run.h5")
    with h5py.File(path, "w") as f:
        for name, values in columns.items():
            f[name] = values
    with quarry.open(path) as ds:
        ds.build_index(block_len=BLOCK)
    return path, columns


def _count_with_stats(path, query, **open_kw):
    with quarry.open(path, **open_kw) as ds:
        sel = ds.query(query)
        return sel.count(), sel.stats()


@pytest.mark.parametrize("query", ["1.5 < energy < 1.6", "x > 140", "0.25 <= energy"])
def test_a_count_on_typed_literals_checks_nothing_and_reads_nothing(data, query):
    path, columns = data
    count, stats = _count_with_stats(path, query)
    energy, x = columns["energy"], columns["x"].astype("f8")
    want = {
        "1.5 < energy < 1.6": np.count_nonzero((energy > 1.5) & (energy < 1.6)),
        "x > 140": np.count_nonzero(x > 140),
        "0.25 <= energy": np.count_nonzero(energy >= 0.25),
    }[query]
    assert count == want
    assert (stats.rows_checked, stats.bytes_read, stats.bitmaps_decoded) == (0, 0, 0)
    assert stats.rows_scanned == 0


@pytest.mark.parametrize("literal", BETWEEN)
def test_a_count_decodes_only_boundary_bitmaps(data, literal):
    """Bins inside the range are counted from their counts: a count decodes
    at most the one bin that straddles the literal in each block, while the
    ids of the same query decode the bins inside as well; where those hold
    more than a quarter of the rows (``INSIDE_COST``), the ids come from one
    scan instead, which costs less than decoding them."""
    path, columns = data
    count, stats = _count_with_stats(path, f"energy > {literal}")
    assert count == np.count_nonzero(columns["energy"] > literal)
    assert stats.bitmaps_decoded <= N_BLOCKS
    with quarry.open(path) as ds:
        listed = ds.query(f"energy > {literal}")
        assert len(listed.ids()) == count
        (access,) = listed.access()
        done = listed.stats()
        if literal in DENSE:
            assert access.path == "scan"
            assert (done.bitmaps_decoded, done.rows_scanned) == (0, N)
        else:
            assert access.path == "index"
            assert done.bitmaps_decoded > N_BLOCKS and done.rows_scanned == 0


@pytest.mark.parametrize("literal", BETWEEN)
def test_a_literal_between_edges_checks_about_one_bin_per_block_end(data, literal):
    """1024 equal-weight bins: one bin holds about N/1024 rows, so a range
    with one end checks about that many (twice that, for the sample's
    noise), where a scan would check N."""
    path, columns = data
    one_bin = N / 1024
    for query, ends in ((f"energy > {literal}", 1), (f"{literal} < energy < 2.71828", 2)):
        count, stats = _count_with_stats(path, query)
        energy = columns["energy"]
        assert count == np.count_nonzero((energy > literal) & ((ends == 1) | (energy < 2.71828)))
        assert 0 < stats.rows_checked <= 2 * ends * one_bin, query
        assert 0 < stats.bitmaps_decoded <= ends * N_BLOCKS, query
        assert stats.bytes_read == stats.rows_checked * 8  # only the candidates' values


def test_bins_bound_the_rows_checked(tmp_path, data):
    _, columns = data
    path = str(tmp_path / "bins.h5")
    with h5py.File(path, "w") as f:
        f["energy"] = columns["energy"]
    checked = {}
    for bins in (16, 128, 1024):  # `quarry index --bins`, then `query --explain`
        built = _cli(
            "index", path, "--bins", str(bins), "--precision", "0", "--block-size", str(BLOCK)
        )
        assert built.returncode == 0, built.stderr
        total = 0
        for literal in BETWEEN:
            done = _cli("query", path, f"energy > {literal}", "--explain", "--json")
            answer = json.loads(done.stdout)
            assert answer["count"] == np.count_nonzero(columns["energy"] > literal)
            assert answer["stats"]["rows_checked"] <= 2 * N / bins
            total += answer["stats"]["rows_checked"]
        checked[bins] = total
    assert checked[1024] < checked[128] < checked[16]


def test_a_scan_reads_only_the_rows_an_index_left(data):
    """Arithmetic is scanned on the rows still in play after the indexed
    range: as many as NumPy finds true or NaN in that range."""
    path, columns = data
    energy, x = columns["energy"], columns["x"].astype("f8")
    with quarry.open(path) as ds:
        sel = ds.query("1.5 < energy < 1.6 && x * 2 > 100")
        assert sel.count() == np.count_nonzero((energy > 1.5) & (energy < 1.6) & (x * 2 > 100))
        stats = sel.stats()
    assert stats.rows_scanned == np.count_nonzero((energy > 1.5) & (energy < 1.6))
    assert stats.rows_checked == 0
    alone = _count_with_stats(path, "x * 2 > 100")[1]
    assert (alone.rows_scanned, alone.blocks_scanned) == (N, N_BLOCKS)
    assert alone.bytes_read == N * 4  # x is float32, read once
    assert alone.bitmaps_decoded == 0


def test_zone_maps_skip_blocks_without_reading_bitmaps(data):
    path, columns = data
    first_live = 13 * BLOCK + 5
    with quarry.open(path) as ds:
        sel = ds.query(f"t >= {first_live} && x > 1")
        t, x = columns["t"], columns["x"]
        assert sel.count() == np.count_nonzero((t >= first_live) & (x > 1))
        stats = sel.stats()
    blocks_with_t = len(np.unique(t[t >= first_live] // BLOCK))
    assert stats.blocks_skipped == N_BLOCKS - blocks_with_t


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "quarry.cli.main", *args], capture_output=True, text=True
    )


def test_cli_explain_reports_the_same_numbers(data):
    path, columns = data
    query = "energy > 0.31416"
    done = _cli("query", path, query, "--explain", "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    count, stats = _count_with_stats(path, query)
    assert answer["count"] == count == np.count_nonzero(columns["energy"] > 0.31416)
    assert answer["stats"] == stats.to_dict()
    assert {"rows_checked", "bitmaps_decoded", "bytes_read"} <= set(answer["stats"])
    typed = json.loads(_cli("query", path, "1.5 < energy < 1.6", "--explain", "--json").stdout)
    assert typed["stats"]["rows_checked"] == typed["stats"]["bytes_read"] == 0
    # with rows: the values read at the hits count too
    rows = _cli("query", path, "1.5 < energy < 1.6", "--values", "x", "--json", "--explain")
    hits = json.loads(rows.stdout)
    assert hits["stats"]["bytes_read"] == 4 * hits["count"]
    plain = _cli("query", path, query, "--explain")
    assert plain.stdout.strip() == str(count)
    assert plain.stderr.startswith("explain: rows_checked=")
    assert "stats" not in json.loads(_cli("query", path, query, "--json").stdout)


def test_cli_explain_takes_one_file(data):
    path, _ = data
    done = _cli("query", path, path, "energy > 1", "--explain")
    assert done.returncode == 2
    assert done.stderr.strip() == "quarry: error: --explain takes one file and one query"


def test_stats_add_up_over_shares_of_blocks(data):
    path, columns = data
    literal = 0.7071
    with quarry.open(path) as ds:
        whole = ds.query(f"energy > {literal}")
        whole.count()
        parted = ds.query(f"energy > {literal}")
        parted.evaluate(rows=False, progress=lambda n: None)
    assert parted.count() == np.count_nonzero(columns["energy"] > literal)
    assert parted.stats().rows_checked == whole.stats().rows_checked
    assert math.isclose(parted.stats().bytes_read, whole.stats().bytes_read)


def test_bytes_read_count_values_as_decoded(tmp_path):
    """The README: `bytes_read` counts a packed variable's values as read,
    float64 after scale_factor, not the int16 the file stores."""
    import netCDF4

    path = str(tmp_path / "packed.nc")
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("n", 1000)
        t = nc.createVariable("t", "i2", ("n",))
        t.scale_factor = 0.25
        t[:] = np.arange(1000) * 0.25
    with quarry.open(path) as ds:
        sel = ds.query("t > 100")
        assert sel.count() == 599
        assert sel.stats().bytes_read == 1000 * 8
