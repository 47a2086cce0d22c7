"""Start-up: a count the index answers alone imports neither NumPy nor h5py
(and so cannot have opened the data file), and gives NumPy's answer; any
other count reads the file, importing NumPy (and h5py only for a dataset not
stored contiguous), and gives NumPy's answer too.

Nothing here is timed (benches/startup.py times it): what is checked is what
the process imported, through ``sys.modules`` at its end.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from unittest import mock

import h5py
import numpy as np
import pytest

import quarry
from quarry.formats.listing import ListedDtype
from quarry.index import fresh
from quarry.query import execute

#: Runs ``quarry ARGS...`` in this process, then prints its exit status,
#: whether NumPy and h5py were imported, and which of the modules slow to
#: import or use (dataclasses compiles its methods with exec, inspect is
#: large; quarry.records replaces both) were, as one JSON line on stderr. A file
#: just written and indexed is trusted at once (see :func:`trust_at_once`).
PROBE = """
import json, sys
from quarry.cli.main import main
from quarry.index import fresh
fresh.RACY_NS = fresh.FINE_RACY_NS = 0
code = main(sys.argv[1:])
sys.stdout.flush()
heavy = {m: m in sys.modules for m in ("numpy", "h5py")}
slow = sorted({"dataclasses", "inspect"} & set(sys.modules))
print(json.dumps({"code": code, **heavy, "slow": slow}), file=sys.stderr)
"""

N = 50_001  # not a multiple of the block length
BLOCK = 4096


def probe(*args: str) -> tuple[str, str, dict[str, object]]:
    """``quarry ARGS`` run through :data:`PROBE`: stdout, stderr's other lines,
    and what the probe reported."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120
    )
    *lines, last = done.stderr.splitlines()
    return done.stdout, "\n".join(lines), json.loads(last)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    """An indexed file of every kind of column a count compares (floats with
    NaNs, float32, signed and unsigned integers), and its values."""
    path = str(tmp_path_factory.mktemp("startup") / "run.h5")
    rng = np.random.default_rng(15)
    energy = rng.normal(size=N)
    energy[rng.random(N) < 0.01] = np.nan
    columns = {
        "energy": energy,
        "x": rng.uniform(-5, 5, N).astype("f4"),
        "n": rng.integers(-1000, 1000, N).astype("i4"),
        "tag": rng.integers(0, 255, N).astype("u1"),
    }
    with h5py.File(path, "w") as f:
        for name, values in columns.items():
            f[name] = values
    with quarry.open(path) as ds:
        ds.build_index(block_len=BLOCK)
    return path, columns


@pytest.fixture(autouse=True)
def trust_at_once(monkeypatch):
    """A file written and indexed a moment ago is trusted at once, as in
    tests/index/test_listing.py (see :mod:`quarry.index.fresh`): the probe's
    process does the same."""
    monkeypatch.setattr(fresh, "RACY_NS", 0)
    monkeypatch.setattr(fresh, "FINE_RACY_NS", 0)


QUERIES = {
    # literals at decimal bin edges: the index alone answers
    "energy > 1.0": lambda c: c["energy"] > 1.0,
    "energy <= -0.5": lambda c: c["energy"] <= -0.5,
    "x >= 2.5": lambda c: c["x"] >= 2.5,
    "n < 100": lambda c: c["n"] < 100,
    "tag == 7": lambda c: c["tag"] == 7,
    "energy > 1.0 && n < 100": lambda c: (c["energy"] > 1.0) & (c["n"] < 100),
    "!(x < 1.5) || tag >= 200": lambda c: ~(c["x"] < 1.5) & ~np.isnan(c["x"]) | (c["tag"] >= 200),
    # literals inside bins, arithmetic: values are read from the file
    "energy > 1.0123": lambda c: c["energy"] > 1.0123,
    "x < 0.123456": lambda c: c["x"] < 0.123456,
    "energy * 2 > 1": lambda c: c["energy"] * 2 > 1,
}


def index_alone(path: str, query: str) -> bool:
    """Whether the index answers ``query``'s count without reading a value
    (what the API's statistics say, independently of the CLI), in a process
    that has not imported NumPy: the planner weighs its import
    (quarry.query.execute.IMPORT_COST)."""
    with mock.patch.object(execute, "numpy_imported", lambda: False), quarry.open(path) as ds:
        sel = ds.query(query)
        sel.count()
        stats = sel.stats()
        return stats.bytes_read == 0 and stats.rows_checked == 0 and stats.rows_scanned == 0


@pytest.mark.parametrize("query", list(QUERIES))
def test_a_count_is_numpys_and_imports_numpy_only_to_read_values(indexed, query):
    path, columns = indexed
    with np.errstate(invalid="ignore"):
        expected = int(QUERIES[query](columns).sum())
    out, err, seen = probe("query", path, query, "--count")
    assert seen["code"] == 0, err
    assert int(out) == expected
    if index_alone(path, query):
        assert not seen["numpy"] and not seen["h5py"] and not seen["slow"], f"{query}: {seen}"
    else:  # contiguous datasets are read through the offsets the index lists
        assert seen["numpy"] and not seen["h5py"], f"{query} reads values: {seen}"


def test_most_of_these_counts_are_answered_by_the_index_alone(indexed):
    """The test above is not vacuous: its edge literals need no value."""
    path, _ = indexed
    alone = [q for q in QUERIES if index_alone(path, q)]
    assert len(alone) == 7 and "energy > 1.0" in alone and "energy > 1.0123" not in alone


def test_the_json_count_of_the_index_is_numpys_without_numpy(indexed):
    path, columns = indexed
    out, err, seen = probe("query", path, "energy > 1.0", "--count", "--json")
    assert seen == {"code": 0, "numpy": False, "h5py": False, "slow": []}, err
    assert json.loads(out)["count"] == int((columns["energy"] > 1.0).sum())


def test_counts_over_files_need_no_numpy_either_and_a_batch_no_h5py(indexed, tmp_path):
    """A batch plans and counts its queries as arrays (NumPy), but opens no
    data file when the index answers every count alone."""
    path, columns = indexed
    other = str(tmp_path / "other.h5")
    energy = np.random.default_rng(16).normal(size=999)
    with h5py.File(other, "w") as f:
        f["energy"] = energy
    with quarry.open(other) as ds:
        ds.build_index()
    expected = int((columns["energy"] > 1.0).sum() + (energy > 1.0).sum())
    out, err, seen = probe("query", path, other, "energy > 1.0")
    assert seen == {"code": 0, "numpy": False, "h5py": False, "slow": []}, err
    assert int(out) == expected
    batch = tmp_path / "queries.txt"
    batch.write_text("energy > 1.0\nn < 100\n")
    out, err, seen = probe("query", path, "--batch", str(batch))
    # NumPy brings inspect with it, so only the imports themselves are checked here
    assert (seen["code"], seen["numpy"], seen["h5py"]) == (0, True, False), err
    counts = [json.loads(line)["count"] for line in out.splitlines()]
    assert counts == [int((columns["energy"] > 1.0).sum()), int((columns["n"] < 100).sum())]


@pytest.mark.parametrize(
    ("query", "code", "message"),
    [
        ("energi > 1", 1, "no variable 'energi' in"),
        ("energy >> 1", 2, "error in query"),
    ],
)
def test_query_errors_need_no_numpy_and_read_as_before(indexed, query, code, message):
    path, _ = indexed
    _, err, seen = probe("query", path, query, "--count")
    assert seen == {"code": code, "numpy": False, "h5py": False, "slow": []}
    assert message in err and "Traceback" not in err


def test_a_changed_file_is_refused_as_before(indexed, tmp_path):
    """A file changed since its index was built: the index is not trusted,
    so the file is opened (h5py), and the count is refused."""
    path, _ = indexed
    changed = str(tmp_path / "changed.h5")
    with open(path, "rb") as src, open(changed, "wb") as dst:
        dst.write(src.read())
    with open(path + ".qidx", "rb") as src, open(changed + ".qidx", "wb") as dst:
        dst.write(src.read())
    with h5py.File(changed, "r+") as f:
        f["energy"][0] = 99.0
    _, err, seen = probe("query", changed, "energy > 1.0", "--count")
    assert seen["code"] == 1
    assert "changed since" in err or "stale" in err, err


def test_importing_quarry_imports_neither_numpy_nor_the_api():
    script = (
        "import sys, quarry\n"
        "print(sorted(m for m in ('numpy', 'h5py', 'quarry.dataset') if m in sys.modules))\n"
        "from quarry import Dataset, open\n"
        "print(Dataset.__module__, open.__module__, sorted(set(quarry.__all__) - set(dir(quarry))))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.stdout.splitlines() == ["[]", "quarry.dataset quarry.dataset []"], done.stderr


def test_the_stages_are_reached_from_import_quarry_alone():
    """The README's ``with quarry.parallel.threads(4): ...`` after ``import quarry``."""
    script = (
        "import quarry\n"
        "with quarry.parallel.threads(1):\n"
        "    print(quarry.pool.jobs(), quarry.errors.QuarryError.__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.stdout.splitlines() == ["1 QuarryError"], done.stderr


def test_every_public_name_of_quarry_resolves():
    for name in quarry.__all__:
        assert getattr(quarry, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = quarry.nope  # type: ignore[attr-defined]


@pytest.mark.parametrize("text", ["<f8", ">f4", "|u1", "<i2", ">u8", "|b1", "<M8[ns]", "|S5"])
def test_a_listed_dtype_is_the_numpy_dtype_it_names(text):
    listed, dtype = ListedDtype(text), np.dtype(text)
    assert listed == dtype and dtype == listed and hash(listed) == hash(dtype)
    assert (listed.str, listed.kind, listed.itemsize) == (dtype.str, dtype.kind, dtype.itemsize)
    assert str(listed) == str(dtype) and repr(listed) == repr(dtype)
    assert np.zeros(3, listed).dtype == dtype and np.dtype(listed) == dtype
    again = pickle.loads(pickle.dumps(listed))
    assert again == listed and again.str == text
    assert listed != np.dtype("<c16") and listed != ListedDtype("<c16")


@pytest.mark.parametrize("bad", ["float", "<f", "f8", "", "<f8x"])
def test_a_listing_with_an_unwritten_dtype_is_refused(bad):
    with pytest.raises(ValueError, match="not a dtype as NumPy writes one"):
        ListedDtype(bad)


def test_a_listed_variable_reads_as_the_files_own(indexed):
    """The listing's variables (a fresh index) equal the file's, dtypes included."""
    path, _ = indexed
    with quarry.open(path) as ds:
        listed = ds.variables()
        assert all(isinstance(v.dtype, ListedDtype) for v in listed)
    from quarry.formats import open_source

    driver = open_source(path)
    try:
        assert listed == driver.variables()
    finally:
        driver.close()
    assert os.path.exists(path + ".qidx")


@pytest.mark.parametrize("given", [None, "2"])
def test_the_cli_keeps_numpys_blas_to_one_thread_unless_told(given):
    """Quarry makes no BLAS calls: NumPy's OpenBLAS would otherwise start a
    thread per core at import, each busy-waiting for work (~0.1 s of CPU a
    process on 2 cores). A setting of the user's own stands."""
    code = (
        "import os\n"
        "from quarry.cli.main import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
        "import numpy\n"
        "print(os.environ['OPENBLAS_NUM_THREADS'], len(os.listdir('/proc/self/task')))"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    *_, setting, threads = done.stdout.split()  # after what --version prints
    assert setting == (given or "1"), done.stderr
    if given is None:
        assert threads == "1"  # NumPy loaded, and no BLAS thread beside the main one
