"""Builds with N ranks and queries with M ranks give the serial answers.

Each test launches ``mpiexec -n N`` (oversubscribed on a 2-core machine) on
tests/parallel/mpi_cases.py or the CLI. They skip where mpi4py or mpiexec
is missing (``pip install 'quarry-index[mpi]'`` brings both).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import mpi_cases
import numpy as np
import pytest

import quarry
from oracle import oracle_ids
from quarry.index import layout

BIN = os.path.dirname(sys.executable)
MPIEXEC = shutil.which("mpiexec", path=BIN) or shutil.which("mpiexec")
pytest.importorskip("mpi4py")
pytestmark = pytest.mark.skipif(
    MPIEXEC is None, reason="no mpiexec (pip install 'quarry-index[mpi]')"
)
HERE = os.path.dirname(__file__)


def mpiexec_environment() -> dict[str, str]:
    """The environment for mpiexec: this one, with HWLOC_XMLFILE naming a
    file that does not exist. MPICH's launcher (hydra) otherwise writes the
    machine's topology to /tmp/hydra_hwloc_xmlfile_XXXXXX (a fixed
    directory, not TMPDIR) for its ranks to load, and leaves it there when a
    rank aborts. With HWLOC_XMLFILE set it writes none, and hwloc, finding
    no file there, discovers the topology itself (binding to cores still
    works), as the ranks would have without the shared file."""
    missing = os.path.join(tempfile.gettempdir(), "no-hwloc-topology-file.xml")
    assert not os.path.exists(missing)
    return {**os.environ, "HWLOC_XMLFILE": missing}


def mpirun(n: int, *argv: str, expect: int = 0) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [MPIEXEC, "-n", str(n), *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env=mpiexec_environment(),
    )
    assert done.returncode == expect, done.stdout + done.stderr
    return done


def cases(n: int, *argv: str, expect: int = 0) -> subprocess.CompletedProcess[str]:
    return mpirun(n, sys.executable, os.path.join(HERE, "mpi_cases.py"), *argv, expect=expect)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The data, the serial index, and indexes built with 2 and 3 ranks."""
    directory = str(tmp_path_factory.mktemp("mpi"))
    members = mpi_cases.make(directory)
    mpi_cases.build(directory)  # serial: idx-1-g*
    cases(2, "build", directory)
    cases(3, "build", directory)
    return directory, members


INDEXES = ["idx-1-gauto", "idx-2-gauto", "idx-2-g2", "idx-3-gauto", "idx-3-g3"]


def test_sharded_indexes_hold_the_serial_blocks(data):
    directory, _ = data
    serial = _blocks(os.path.join(directory, "idx-1-gauto", "run_0.h5.qidx"))
    for name in INDEXES[1:]:
        path = os.path.join(directory, name, "run_0.h5.qidx")
        assert _blocks(path) == serial, name
    # all ranks on one file: its blocks lie in one shard per rank
    _, manifest = layout.read(os.path.join(directory, "idx-3-g3", "run_0.h5.qidx"))
    assert len(manifest.shards) == 3
    # files shared over groups of one rank: each rank writes a whole index file
    _, manifest = layout.read(os.path.join(directory, "idx-2-gauto", "run_1.h5.qidx"))
    assert manifest.shards == ()


def _blocks(index_path: str) -> dict[str, list[bytes]]:
    files, manifest = layout.read(index_path)
    return {
        var: [files[f].read(o, n) for f, o, n in entry.spans]
        for var, entry in manifest.variables.items()
    }


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_any_index_queried_with_any_ranks_matches_numpy(data, ranks, tmp_path):
    directory, members = data
    with open(os.path.join(directory, "queries.json")) as f:
        queries = json.load(f)
    for name in INDEXES:
        index = os.path.join(directory, name)
        out = str(tmp_path / f"{name}.npz")
        if ranks == 1:
            mpi_cases.query(directory, index, out)
        else:
            cases(ranks, "query", directory, index, out)
        found = np.load(out)
        for q, text in enumerate(queries):
            for m, columns in enumerate(members.values()):
                expect = oracle_ids(_folded(text, columns["d"]), columns)
                where = f"{name}, {ranks} rank(s), member {m}: {text}"
                assert int(found[f"{q}/{m}/count"]) == len(expect), where
                assert int(found[f"batch/{q}/{m}"]) == len(expect), where
                np.testing.assert_array_equal(found[f"{q}/{m}/ids"], expect, err_msg=where)
                for var in mpi_cases.VALUES:
                    np.testing.assert_array_equal(
                        found[f"{q}/{m}/{var}"], columns[var][expect], err_msg=where
                    )


def _folded(text: str, d: np.ndarray) -> str:
    """The query with its aggregate as NumPy computes it (the oracle has no
    aggregates; a row within an ulp of the threshold is vanishingly rare)."""
    return text.replace("mean(d) + std(d)", repr(float(d.mean() + d.std())))


def test_cli_under_mpiexec_prints_the_serial_answer(data, tmp_path):
    directory, _ = data
    files = [os.path.join(directory, f) for f in mpi_cases.FILES]
    index = str(tmp_path / "cli-idx")
    quarry_bin = os.path.join(BIN, "quarry")
    built = mpirun(3, quarry_bin, "index", *files, "--index", index, "--json")
    report = json.loads(built.stdout)  # rank 0 alone prints
    assert report["built"] == 2
    query = "a > 0.5 && d < mean(d)"
    serial = subprocess.run(
        [quarry_bin, "query", *files, query, "--index", index, "--per-step"],
        capture_output=True,
        text=True,
        check=True,
    )
    shared = mpirun(2, quarry_bin, "query", *files, query, "--index", index, "--per-step")
    assert json.loads(shared.stdout) == json.loads(serial.stdout)
    # a batch: each rank answers a run of the members; rank 0 prints every line
    batch = tmp_path / "batch.txt"
    batch.write_text("a > 0.5\n# a comment\nd < mean(d) && b > 0\n-100 <= b < 50\n")
    for extra in ([], ["--per-step"]):
        argv = ["query", *files, "--batch", str(batch), "--index", index, *extra]
        serial = subprocess.run([quarry_bin, *argv], capture_output=True, text=True, check=True)
        shared = mpirun(3, quarry_bin, *argv)
        assert shared.stdout == serial.stdout and len(shared.stdout.splitlines()) == 3
    # a mistake that only the members' planning finds: agreed, reported once, exit 1
    batch.write_text("a > 0.5\nzz > 1\n")
    argv = ["query", *files, "--batch", str(batch), "--index", index, "--per-step"]
    serial = subprocess.run([quarry_bin, *argv], capture_output=True, text=True)
    shared = mpirun(3, quarry_bin, *argv, expect=1)
    assert serial.returncode == 1 and shared.stdout == ""
    assert shared.stderr.splitlines() == serial.stderr.splitlines()
    assert serial.stderr.startswith("quarry: error: line 2 (zz > 1): ")
    # values of one file gathered to rank 0, and written per rank
    one = files[0]
    args = [one, "b > 100", "--index", index, "--path", "Step#1", "--values", "a,b", "--json"]
    serial = subprocess.run([quarry_bin, "query", *args], capture_output=True, text=True)
    shared = mpirun(3, quarry_bin, "query", *args)
    expect, got = json.loads(serial.stdout), json.loads(shared.stdout)
    assert got["values"] == expect["values"] and got["count"] == expect["count"] > 0
    out = str(tmp_path / "hits.npy")
    per_rank = mpirun(
        2,
        quarry_bin,
        "query",
        one,
        "b > 100",
        "--index",
        index,
        "--path",
        "Step#1",
        "--ids",
        "--out",
        out,
        "--out-per-rank",
        "--json",
    )
    written = json.loads(per_rank.stdout)["out"]
    assert len(written) == 2
    with quarry.open(one, index=os.path.join(index, "run_0.h5.qidx")) as ds:
        serial_ids = ds.query("b > 100", "Step#1").ids()
    np.testing.assert_array_equal(np.concatenate([np.load(f) for f in written]), serial_ids)
    # one file's steps, as a series of one file: each member's values, as serially
    args = [one, "b > 100", "--index", index, "--values", "a", "--json"]
    serial = subprocess.run([quarry_bin, "query", *args], capture_output=True, text=True)
    shared = mpirun(2, quarry_bin, "query", *args)
    assert json.loads(shared.stdout) == json.loads(serial.stdout)
    assert len(json.loads(serial.stdout)["per_step"]) > 1


@pytest.mark.parametrize("how", ["count", "rows", "batch"])
def test_a_read_failing_on_one_rank_is_raised_on_every_rank(tmp_path, how):
    """The Mpi runner agreed only on Quarry's own errors: a read error
    (OSError, a damaged chunk) on one rank left the others waiting forever
    in the counts' collective call."""
    cases(3, "read_fails", str(tmp_path), how)
    said = [(tmp_path / f"said-{how}-{rank}.txt").read_text() for rank in range(3)]
    failed = "[Errno 5] Can't synchronously read data (injected)"
    if how == "batch":  # the rank that hit it keeps its error's type (and exit code)
        assert said == [f"ParallelError: {failed}"] * 2 + [f"OSError: {failed}"]
    else:  # every rank the same, which the command line says once
        assert said == [f"ParallelError: rank 2: {failed}"] * 3


def test_a_batch_over_one_table_is_printed_once(data):
    directory, _ = data
    queries = os.path.join(directory, "one-table-batch.txt")
    with open(queries, "w") as f:
        f.write("b > 0\nb < -1\n")
    path = os.path.join(directory, "run_0.h5")
    argv = [sys.executable, "-m", "quarry.cli.main", "query", path, "--batch", queries]
    argv += ["--path", "Step#0"]
    serial = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=120)
    ranks = mpirun(3, *argv)
    assert len(serial.stdout.splitlines()) == 2 and ranks.stdout == serial.stdout


def test_a_failing_rank_publishes_nothing_and_is_named(data, tmp_path):
    directory, _ = data
    index = str(tmp_path / "run_0.h5.qidx")
    with quarry.open(os.path.join(directory, "run_0.h5"), index=index) as ds:
        ds.build_index(block_len=mpi_cases.BLOCK_LEN)
    with open(index, "rb") as f:
        before = f.read()
    done = cases(3, "fail", directory, index, expect=3)
    message = done.stdout
    assert "rank 1: No space left on device (injected)" in message, message
    assert message.count("failed on 1 rank(s)") == 3  # every rank raises the same error
    with open(index, "rb") as f:
        assert f.read() == before  # the old index is untouched
    assert glob.glob(str(tmp_path / "*.qshard")) == []
    assert [p for p in os.listdir(tmp_path) if p.endswith(".tmp")] == []
    with quarry.open(os.path.join(directory, "run_0.h5"), index=index) as ds:
        assert ds.query("b > 0", "Step#0").count() > 0


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (["query", "{d}/run_0.h5", "energyy > 1", "--path", "Step#0"], 1, "'energyy'"),
        (["query", "{d}/run_0.h5", "a >> 1", "--path", "Step#0"], 2, "error in query"),
        (["query", "{d}/run_*.h5", "energyy > 1", "--per-step"], 1, "'energyy'"),
        (["query", "{d}/nowhere.h5", "a > 1"], 1, "nowhere.h5"),
        (["index", "{d}/nowhere.h5", "--index", "{d}/unused"], 1, "nowhere.h5"),
        (["query", "{d}/run_0.h5", "{d}/run_1.h5", "a > 1", "--explain"], 2, "--explain takes"),
        (
            ["query", "{d}/run_*.h5", "a > 1", "--ids", "--out", "{d}/o.npy", "--out-per-rank"],
            2,
            "steps are written to .h5, .nc or .parquet",
        ),
        # Found when the hits were written, after the work: one rank stopped them all.
        (["query", "{d}/run_0.h5", "a > 1", "--values", "nosuch"], 1, "step 0: no variable"),
        (["query", "{d}/run_0.h5", "a > 1", "--ids", "--out", "{d}/o.npy"], 2, "steps are"),
        (["query", "{d}/run_0.h5", "a > 1", "--values", "b", "--out", "/no/dir/o.h5"], 1, "/no"),
        (
            ["query", "{d}/run_0.h5", "a > 1", "--path", "Step#0", "--values", "nosuch"],
            1,
            "no variable 'nosuch'",
        ),
        (
            ["query", "{d}/run_0.h5", "a > 1", "--path", "Step#0", "--ids", "--out", "/no/o.npy"],
            1,
            "there is no directory /no",
        ),
        # Refused by argparse, before MPI starts: each rank knew its rank from the launcher.
        (["query", "{d}/run_0.h5", "a > 1", "--count", "--ids"], 2, "not allowed with"),
        (["query", "{d}/run_0.h5", "a > 1", "--jobs", "x"], 2, "expected a whole number"),
    ],
)
def test_a_mistake_under_mpiexec_is_reported_once_with_the_serial_code(data, argv, code, says):
    """Found by every rank while planning, before any collective work: rank
    0 reports it once and every rank exits cleanly with the serial exit code
    (no MPI_Abort, whose teardown could drop the very lines it follows)."""
    directory, _ = data
    argv = [a.format(d=directory) for a in argv]
    done = mpirun(2, os.path.join(BIN, "quarry"), *argv, expect=code)
    serial = subprocess.run(
        [sys.executable, "-m", "quarry.cli.main", *argv], capture_output=True, text=True
    )
    assert serial.returncode == code
    assert done.stderr == serial.stderr, done.stderr
    assert says in done.stderr and done.stdout == ""
    assert "Abort" not in done.stderr and "stopping every rank" not in done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["info", "{d}/run_0.h5"],
        ["hist", "{d}/run_0.h5", "a", "--where", "b > 0", "--json"],
        ["plot", "{d}/run_0.h5", "a", "d", "--where", "b > 0", "--png", "{out}/plot.png"],
        ["track", "{d}/run_0.h5", "a > 0.5", "--at-step", "0", "--id-var", "b", "--json"],
        [
            "interp",
            "{d}/run_0.h5",
            "--field",
            "f={d}/run_1.h5:a",
            "--at",
            "a",
            "--out",
            "{out}/t.h5",
        ],
        ["verify", "{d}/run_0.h5"],
        ["register", "{d}/run_0.h5", "--dtype", "<f4", "--shape", "4"],
        ["serve", "{d}", "--port", "0"],
    ],
    ids=lambda argv: argv[0],
)
def test_commands_that_run_in_one_process_say_so(data, tmp_path, argv):
    """The README: only index, query and reorg share work over ranks; the others
    "run in one process and say so under mpiexec, writing nothing": rank 0 alone
    says it, on one line, and every rank exits 1."""
    directory, _ = data
    argv = [a.format(d=directory, out=tmp_path) for a in argv]
    done = mpirun(2, os.path.join(BIN, "quarry"), *argv, expect=1)
    said = f"quarry: error: quarry {argv[0]} runs in one process; start it without mpiexec"
    assert done.stderr.splitlines() == [said + " (index, query and reorg share work over ranks)"], (
        done.stderr
    )
    assert done.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_explain_runs_in_one_process_and_says_so(data):
    """The README: query --explain, whose plan is one process's, says so under mpiexec."""
    directory, _ = data
    path = os.path.join(directory, "run_0.h5")
    argv = ["query", path, "a > 0.5", "--path", "Step#0", "--explain"]
    done = mpirun(2, os.path.join(BIN, "quarry"), *argv, expect=2)
    assert done.stderr == "quarry: error: --explain runs in one process, without mpiexec\n"
    assert done.stdout == ""


def test_out_per_rank_needs_mpiexec(data, capsys):
    from quarry.cli.main import main

    directory, _ = data
    path = os.path.join(directory, "run_0.h5")
    assert (
        main(
            [
                "query",
                path,
                "b > 0",
                "--path",
                "Step#0",
                "--ids",
                "--out",
                "x.npy",
                "--out-per-rank",
            ]
        )
        == 2  # a command line that cannot run as given
    )
    assert "--out-per-rank is for runs under mpiexec" in capsys.readouterr().err


def test_damage_one_rank_finds_while_answering_is_said_once(tmp_path):
    """A damaged block of one shard, met by one rank while the hits were
    gathered: the error was printed 0 to 3 times (with MPI_Abort's lines), and
    in some runs not at all. Every rank now raises it together: one line, exit 1."""
    import struct

    path = str(tmp_path / "p.h5")
    with h5py.File(path, "w") as f:
        f["x"] = np.random.default_rng(1).uniform(0, 300, 100_003)
    quarry_cli = os.path.join(BIN, "quarry")
    mpirun(3, quarry_cli, "index", path, "--block-size", "9999", "--quiet")
    with open(path + ".qidx", "rb") as f:
        whole = f.read()
    offset, length = struct.unpack("<QQ", whole[-32:-16])
    manifest = json.loads(whole[offset : offset + length])
    shard_number, at, size = manifest["variables"]["/x"]["blocks"][7]
    shard = os.path.join(tmp_path, manifest["shards"][shard_number - 1]["name"])
    with open(shard, "r+b") as f:
        f.seek(at + size // 2)
        f.write(b"\xde\xad\xbe\xef" * 50)
    for _ in range(3):
        done = mpirun(
            3,
            quarry_cli,
            "query",
            path,
            "x > 100.5",
            "--ids",
            "--out",
            str(tmp_path / "h.npy"),
            "--quiet",
            expect=1,
        )
        assert len(done.stderr.splitlines()) == 1, done.stderr
        assert "is damaged at variable /x (block 7" in done.stderr
        assert "Abort" not in done.stderr


def test_a_missing_shard_is_named_with_the_reason(tmp_path):
    """The reason read "(None)": the core's error carries no strerror."""
    path = str(tmp_path / "p.h5")
    with h5py.File(path, "w") as f:
        f["e"] = np.random.default_rng(0).normal(size=60_000)
    mpirun(3, os.path.join(BIN, "quarry"), "index", path, "--block-size", "5000", "--quiet")
    (shard,) = glob.glob(path + ".qidx.*-0001.qshard")
    os.remove(shard)
    with pytest.raises(quarry.QuarryError) as err, quarry.open(path) as ds:
        ds.query("e > 1").count()
    said = str(err.value)
    assert f"its shard {shard} cannot be read (No such file or directory" in said, said
    assert "rebuild it with: quarry index" in said


def test_a_rank_file_naming_the_source_is_refused_before_the_work(tmp_path):
    """Refused only when rank 1 came to write over it (exit 1, MPI_Abort's
    lines), where every output naming an input is refused first (exit 2)."""
    source = str(tmp_path / "d.rank0001.h5")
    with h5py.File(source, "w") as f:
        f["e"] = np.arange(10.0)
    with open(source, "rb") as f:
        before = f.read()
    argv = ["query", source, "e > 1", "--values", "e", "--out", str(tmp_path / "d.h5")]
    done = mpirun(2, os.path.join(BIN, "quarry"), *argv, "--out-per-rank", expect=2)
    assert (
        done.stderr == f"quarry: error: will not write {source}: it is the file being read; "
        "write the output to another file\n"
    )
    with open(source, "rb") as f:
        assert f.read() == before


def test_rank_files_are_this_runs_alone(tmp_path):
    """A run on fewer ranks left an earlier run's hits.rank0002.npy, which
    read back as part of the answer; a run one rank failed left the other
    ranks' files, looking like a partial answer."""
    path = str(tmp_path / "p.h5")
    rng = np.random.default_rng(3)
    with h5py.File(path, "w") as f:
        f["e"] = rng.exponential(0.3, 100_000)
        f.create_dataset("b", data=rng.normal(size=100_000), chunks=(10_000,), compression="gzip")
    quarry_cli = os.path.join(BIN, "quarry")
    hits = str(tmp_path / "hits.npy")
    for ranks in (3, 2):
        mpirun(
            ranks,
            quarry_cli,
            "query",
            path,
            "e > 1",
            "--ids",
            "--out",
            hits,
            "--out-per-rank",
            "--quiet",
        )
    files = sorted(glob.glob(str(tmp_path / "hits.rank*.npy")))
    assert [os.path.basename(f) for f in files] == ["hits.rank0000.npy", "hits.rank0001.npy"]
    with h5py.File(path) as f:
        want = np.flatnonzero(f["e"][()] > 1)
    np.testing.assert_array_equal(np.concatenate([np.load(f) for f in files]), want)
    with h5py.File(path) as f:  # a damaged chunk of b, read by the last rank alone
        chunk = f["b"].id.get_chunk_info(9)
    with open(path, "r+b") as f:
        f.seek(chunk.byte_offset + 20)
        f.write(b"\xff" * 200)
    values = str(tmp_path / "v.h5")
    mpirun(
        3,
        quarry_cli,
        "query",
        path,
        "e > 1",
        "--values",
        "b",
        "--out",
        values,
        "--out-per-rank",
        "--quiet",
        expect=1,
    )
    assert glob.glob(str(tmp_path / "v.*")) == []
