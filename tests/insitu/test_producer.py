"""InSituIndexer: the index made from the producer's memory is the one
``quarry index`` builds afterwards from the file, answers as NumPy does, and
survives a producer that fails part way."""

import os
import subprocess
import sys
import threading

import h5py
import numpy as np
import pytest
from insitu_cases import assert_same_index, step_arrays

import quarry
from oracle import oracle_ids
from quarry.index.store import IndexStore
from quarry.insitu import producer

STEPS = 12  # Step#10 lists before Step#2: the index is written in the file's order
SIZE = 2_500  # no block length below divides it
BLOCK = 1_000


def _weighed_an_index(selection):
    """Whether every condition of ``selection`` had an index to weigh (its
    estimate; None where no index holds the variable), whichever path it
    then took: a dense range's ids come from a scan, cheaper than decoding."""
    accesses = selection.access()
    return bool(accesses) and all(access.estimate is not None for access in accesses)


def _run(path, template, steps=STEPS, fail_after=None, **kwargs):
    """A producer: each step written with h5py, then handed over."""
    rng = np.random.default_rng(7)
    data = {}
    with (
        quarry.InSituIndexer(path, template, block_len=BLOCK, **kwargs) as ix,
        h5py.File(path, "w") as f,
    ):
        for step in range(steps):
            if step == fail_after:
                raise RuntimeError("the simulation blew up")
            arrays = step_arrays(rng, step, SIZE)
            for name, values in arrays.items():
                f.create_dataset(template.format(step=step, name=name), data=values)
            ix.add(step, arrays)
            data[step] = arrays
    return ix, data


@pytest.mark.parametrize(
    "template", ["/Step#{step}/{name}", "/data/{step}/particles/electrons/{name}"]
)
def test_index_is_the_one_built_afterwards(tmp_path, template):
    path = str(tmp_path / "run.h5")
    ix, _ = _run(path, template, bins=64, max_pending_steps=1, batch_steps=5)
    assert ix.steps_indexed == list(range(STEPS))
    assert IndexStore(path + ".qidx", path).trusted  # no CRC check needed at once
    with quarry.open(path, index=str(tmp_path / "after.qidx")) as ds:
        ds.build_index(bins=64, block_len=BLOCK)
    assert_same_index(path + ".qidx", str(tmp_path / "after.qidx"))


def test_cli_index_afterwards_is_the_same_and_queries_need_no_rebuild(tmp_path):
    path = str(tmp_path / "run.h5")
    _run(path, "/Step#{step}/{name}", steps=3)
    os.mkdir(tmp_path / "after")
    cli = [sys.executable, "-m", "quarry.cli.main"]
    built = subprocess.run(
        [*cli, "index", path, "--block-size", str(BLOCK), "--index", str(tmp_path / "after")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "indexed" in built.stdout
    assert_same_index(path + ".qidx", str(tmp_path / "after" / "run.h5.qidx"))
    skipped = subprocess.run(
        [*cli, "index", path, "--block-size", str(BLOCK)], capture_output=True, text=True
    )
    assert "up to date" in skipped.stdout


def test_a_restarted_run_indexes_what_the_file_held_before(tmp_path):
    """A producer restarted from a checkpoint appends to its file ("a"): the
    steps written before, and an array written but never handed, are
    indexed from the file at close, so the index is still the one quarry
    index builds afterwards, and no step is left to be scanned."""
    path = str(tmp_path / "run.h5")
    _, data = _run(path, "/Step#{step}/{name}", steps=3)
    rng = np.random.default_rng(8)
    with (
        quarry.InSituIndexer(path, block_len=BLOCK) as ix,
        h5py.File(path, "a") as f,
    ):
        for step in range(3, STEPS):
            arrays = step_arrays(rng, step, SIZE)
            for name, values in arrays.items():
                f[f"/Step#{step}/{name}"] = values
            ix.add(step, arrays)
            data[step] = arrays
        f["/params/mass"] = rng.random(SIZE)
    assert ix.steps_indexed == list(range(3, STEPS))
    with quarry.open(path, index=str(tmp_path / "after.qidx")) as ds:
        ds.build_index(block_len=BLOCK)
    assert_same_index(path + ".qidx", str(tmp_path / "after.qidx"))
    with quarry.open_series(path) as series:
        sel = series.query("v0 > 1.5")
        got = [part.ids().tolist() for part in sel.selections]
        assert all(_weighed_an_index(part) for part in sel.selections)
    assert got == [oracle_ids("v0 > 1.5", data[step]).tolist() for step in range(STEPS)]


@pytest.mark.parametrize("query", ["v0 > 1.5", "v1 <= -0.5 || v2 > 300", "v6 == 1 && v7 > 2"])
def test_answers_equal_numpy(tmp_path, query):
    path = str(tmp_path / "run.h5")
    _, data = _run(path, "/Step#{step}/{name}", steps=4)
    with quarry.open_series(path) as series:
        sel = series.query(query)
        got = [part.ids() for part in sel.selections]
        assert all(_weighed_an_index(part) for part in sel.selections)
    expected = [oracle_ids(query, data[step]) for step in range(4)]
    assert [g.tolist() for g in got] == [e.tolist() for e in expected]


def test_a_producer_failure_leaves_the_finished_steps_indexed(tmp_path):
    path = str(tmp_path / "run.h5")
    with (
        pytest.warns(RuntimeWarning, match="covers 5 of the 5 step"),
        pytest.raises(RuntimeError, match="blew up"),
    ):
        _run(path, "/Step#{step}/{name}", fail_after=5)
    rng = np.random.default_rng(7)
    data = [step_arrays(rng, step, SIZE) for step in range(5)]
    store = IndexStore(path + ".qidx", path)
    assert store.trusted
    assert {p.split("/")[1] for p in store.manifest.variables} == {f"Step#{s}" for s in range(5)}
    with quarry.open_series(path) as series:
        per_step = series.query("v1 > 1").per_step()
    assert [r["count"] for r in per_step] == [len(oracle_ids("v1 > 1", d)) for d in data]


def test_a_step_cut_short_is_left_out_and_scanned(tmp_path):
    """The producer handed step 2 and then failed while writing it: step 2
    is in the file only in part, so the index covers steps 0 and 1."""
    path = str(tmp_path / "run.h5")
    rng = np.random.default_rng(3)
    data = [step_arrays(rng, step, SIZE) for step in range(3)]
    with (
        pytest.warns(RuntimeWarning, match="covers 2 of the 3"),
        pytest.raises(OSError),
        quarry.InSituIndexer(path, block_len=BLOCK) as ix,
        h5py.File(path, "w") as f,
    ):
        for step, arrays in enumerate(data):
            ix.add(step, arrays)
            for name, values in arrays.items():
                if step == 2 and name == "v3":
                    raise OSError("disk full")
                f.create_dataset(f"Step#{step}/{name}", data=values)
    assert ix.steps_indexed == [0, 1]
    store = IndexStore(path + ".qidx", path)
    assert sorted({p.split("/")[1] for p in store.manifest.variables}) == ["Step#0", "Step#1"]
    with quarry.open_series(path) as series:
        counts = [r["count"] for r in series.query("v0 > 0").per_step()]
    assert counts == [len(oracle_ids("v0 > 0", d)) for d in data]


def test_values_not_written_as_handed_are_left_out(tmp_path):
    path = str(tmp_path / "run.h5")
    x = np.arange(3000.0)
    with (
        pytest.warns(RuntimeWarning, match="covers 1 of the 2"),
        pytest.raises(KeyError),
        quarry.InSituIndexer(path, block_len=BLOCK) as ix,
        h5py.File(path, "w") as f,
    ):
        f.create_dataset("Step#0/x", data=x)
        ix.add(0, {"x": x})
        f.create_dataset("Step#1/x", data=x[::-1])  # not what it handed
        ix.add(1, {"x": x})
        raise KeyError("stop")
    assert ix.steps_indexed == [0]
    # Found while the blocks were being copied: copied again without step 1.
    assert sorted(IndexStore(path + ".qidx", path).manifest.variables) == ["/Step#0/x"]
    assert sorted(os.listdir(tmp_path)) == ["run.h5", "run.h5.qidx"]
    with quarry.open_series(path) as series:
        counts = [r["count"] for r in series.query("x > 1000").per_step()]
    assert counts == [int((x > 1000).sum()), int((x[::-1] > 1000).sum())]


def test_a_finished_run_that_wrote_elsewhere_is_an_error(tmp_path):
    path = str(tmp_path / "run.h5")
    with (
        pytest.raises(quarry.SourceError, match="holds nothing at /Step#0/x"),
        quarry.InSituIndexer(path) as ix,
        h5py.File(path, "w") as f,
    ):
        f.create_dataset("x", data=np.arange(5.0))
        ix.add(0, {"x": np.arange(5.0)})
    assert not os.path.exists(path + ".qidx")
    assert [n for n in os.listdir(tmp_path) if n != "run.h5"] == []


def test_add_waits_while_the_queue_is_full(tmp_path, monkeypatch):
    """Back-pressure: with one step indexing and one waiting, the producer's
    third add() waits until indexing moves on."""
    release = threading.Event()
    started = threading.Event()
    real = producer.index_arrays

    def slow(*args, **kwargs):
        started.set()
        release.wait()
        return real(*args, **kwargs)

    monkeypatch.setattr(producer, "index_arrays", slow)
    path = str(tmp_path / "run.h5")
    returned = []
    ix = quarry.InSituIndexer(path, max_pending_steps=1)

    def produce():
        for step in range(3):
            ix.add(step, {"x": np.arange(10.0)})
            returned.append(step)

    thread = threading.Thread(target=produce)
    thread.start()
    started.wait()
    thread.join(timeout=0.5)  # bounded wait: it must still be blocked
    assert thread.is_alive() and returned == [0, 1]
    release.set()
    thread.join()
    assert returned == [0, 1, 2]
    ix.close(failed=True)  # nothing was written to the file: nothing published
    assert not os.path.exists(path + ".qidx")


def test_bad_arrays_are_refused(tmp_path):
    path = str(tmp_path / "run.h5")
    with quarry.InSituIndexer(path) as ix:
        with pytest.raises(quarry.UnsupportedVariableError, match="/Step#0/s"):
            ix.add(0, {"s": np.array(["a", "b"])})
        ix.add(0, {"x": np.arange(3.0)})
        with pytest.raises(ValueError, match="already handed"):
            ix.add(0, {"x": np.arange(3.0)})
        with h5py.File(path, "w") as f:
            f.create_dataset("Step#0/x", data=np.arange(3.0))
    with pytest.raises(ValueError, match="must hold"):
        quarry.InSituIndexer(path, "/Step#{step}/x")


KILLED_PRODUCER = """
import sys, h5py, numpy as np, quarry
path = sys.argv[1]
ix = quarry.InSituIndexer(path, block_len=100, batch_steps=1)
with h5py.File(path, "w") as f:
    for step in range(3):
        f[f"Step#{step}/x"] = np.arange(250.0) + step
        ix.add(step, {"x": np.arange(250.0) + step})
ix._queue.put(None)  # every step indexed and its batch written (not published)
ix._worker.join()
print("written", flush=True)
sys.stdin.readline()
"""


def test_a_producer_killed_outright_publishes_nothing(tmp_path):
    """SIGKILL: no index, and the next build removes what it left."""
    path = str(tmp_path / "run.h5")
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED_PRODUCER, path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout.readline().strip() == "written"
    process.kill()
    process.communicate()
    assert not os.path.exists(path + ".qidx")
    assert [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]  # its temporary
    cli = [sys.executable, "-m", "quarry.cli.main", "index", path]
    subprocess.run(cli, check=True, capture_output=True)
    assert sorted(os.listdir(tmp_path)) == ["run.h5", "run.h5.qidx"]


def test_blocks_are_written_in_batches(tmp_path, monkeypatch):
    """With batch_steps=2, the blocks of two steps go out at a time (a step
    here is three blocks), and the rest on close."""
    flushed = []

    class Recording(producer.BatchWriter):
        def flush(self):
            flushed.append(len(self._pending))
            super().flush()

    monkeypatch.setattr(producer, "BatchWriter", Recording)
    path = str(tmp_path / "run.h5")
    with (
        quarry.InSituIndexer(path, block_len=BLOCK, batch_steps=2) as ix,
        h5py.File(path, "w") as f,
    ):
        for step in range(5):
            f[f"Step#{step}/x"] = np.arange(float(SIZE))
            ix.add(step, {"x": np.arange(float(SIZE))})
    assert flushed == [6, 6, 3]


def test_the_defaults_the_readme_gives(tmp_path):
    ix = quarry.InSituIndexer(str(tmp_path / "run.h5"))
    assert (ix._queue.maxsize, ix.batch_steps, ix.template) == (2, 4, "/Step#{step}/{name}")
    ix.close()
    shown = subprocess.run(
        [sys.executable, "-m", "quarry.cli.main", "index", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "stay unchanged this long (default 2)" in " ".join(shown.split())


def _write_and_hand(path, write, hand):
    """A finished run writing ``write(f)`` and handing ``hand`` over."""
    with quarry.InSituIndexer(path, block_len=BLOCK) as ix, h5py.File(path, "w") as f:
        write(f)
        for step, arrays in hand.items():
            ix.add(step, arrays)


@pytest.mark.parametrize("case", ["scaled", "off_by_one", "lossy_filter"])
def test_a_finished_run_whose_file_holds_other_values_publishes_nothing(tmp_path, case):
    """On every close the file's values are checked against the CRCs of the
    values handed; a finished run whose file differs is an error, never an
    index giving wrong counts."""
    path = str(tmp_path / "run.h5")
    rng = np.random.default_rng(3)
    x = [rng.random(SIZE) for _ in range(2)]
    if case == "scaled":
        writes, hand = {"Step#0/x": {"data": x[0] * 0.5}}, {0: {"x": x[0]}}
    elif case == "off_by_one":  # the file's step k holds what add() got as step k+1
        writes = {"Step#0/x": {"data": x[1]}, "Step#1/x": {"data": x[0]}}
        hand = {0: {"x": x[0]}, 1: {"x": x[1]}}
    else:
        writes, hand = {"Step#0/x": {"data": x[0], "scaleoffset": 1}}, {0: {"x": x[0]}}

    def write(f):
        for name, kwargs in writes.items():
            f.create_dataset(name, **kwargs)

    with pytest.raises(quarry.errors.InSituMismatchError, match=r"/Step#0/x.*step 0") as err:
        _write_and_hand(path, write, hand)
    assert "quarry index" in str(err.value)
    assert not os.path.exists(path + ".qidx")
    assert os.listdir(tmp_path) == ["run.h5"]


def test_an_indexer_closed_inside_the_writer_is_an_error(tmp_path):
    """``with h5py.File(...) as f, InSituIndexer(...) as ix``: the indexer
    closes while the file is still open for writing, so any index published
    then would be stale as soon as h5py closes the file."""
    path = str(tmp_path / "run.h5")
    x = np.arange(3000.0)
    with (
        pytest.raises(quarry.errors.InSituUsageError, match="still open for writing"),
        h5py.File(path, "w") as f,
        quarry.InSituIndexer(path, block_len=BLOCK) as ix,
    ):
        f.create_dataset("Step#0/x", data=x)
        ix.add(0, {"x": x})
    assert os.listdir(tmp_path) == ["run.h5"]
    with h5py.File(path, "r") as reader, quarry.InSituIndexer(path, block_len=BLOCK) as ix:
        ix.add(0, {"x": reader["Step#0/x"][:]})  # a file open only to read is no writer
    assert ix.steps_indexed == [0]


@pytest.mark.parametrize("template", ["/Step{stp}/{name}", "/Step#{step}/{name", "/S{0}/{name}"])
def test_a_template_that_does_not_format_is_refused_at_once(tmp_path, template):
    with pytest.raises(quarry.errors.InSituUsageError, match="template") as err:
        quarry.InSituIndexer(str(tmp_path / "run.h5"), template)
    assert template in str(err.value)
    assert os.listdir(tmp_path) == []


def test_the_staging_file_is_made_at_the_first_batch_and_removed_when_close_is_interrupted(
    tmp_path, monkeypatch
):
    path = str(tmp_path / "run.h5")
    never_closed = quarry.InSituIndexer(path)
    assert os.listdir(tmp_path) == []  # an indexer never closed leaves nothing behind
    never_closed.close(failed=True)
    ix = quarry.InSituIndexer(path, batch_steps=1)
    ix.add(0, {"x": np.arange(10.0)})
    worker = ix._worker

    class Interrupted:
        def join(self):
            worker.join()  # the step is indexed and its batch written: the staging file exists
            assert [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
            raise KeyboardInterrupt

    monkeypatch.setattr(ix, "_worker", Interrupted())
    with pytest.raises(KeyboardInterrupt):
        ix.close()
    assert os.listdir(tmp_path) == []
