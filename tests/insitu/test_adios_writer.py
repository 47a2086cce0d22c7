"""quarry.insitu.Writer: each step written with adios2 and indexed in the
same call; the index is the one ``quarry index run.bp`` builds afterwards."""

import numpy as np
import pytest
from insitu_cases import assert_same_index, step_arrays

import quarry
from oracle import oracle_ids
from quarry.index.store import IndexStore
from quarry.insitu import Writer

SIZE = 2_500


def _steps(count):
    rng = np.random.default_rng(11)
    steps = []
    for step in range(count):
        energy = rng.normal(step * 0.2, 1.0, SIZE).astype(np.float32)
        energy[rng.random(SIZE) < 0.05] = np.nan
        steps.append(
            {
                "energy": energy,
                "x": rng.normal(0, 3, SIZE),
                "id": rng.permutation(SIZE).astype(np.int64),
                "tag": rng.integers(0, 7, SIZE).astype(np.uint16),
            }
        )
    return steps


def test_the_index_is_the_one_built_afterwards_and_answers_as_numpy(tmp_path):
    path = str(tmp_path / "run.bp")
    steps = _steps(11)
    with Writer(path, block_len=1000, batch_steps=3) as w:
        for arrays in steps:
            w.write_step(arrays)
    assert w.indexer.steps_indexed == list(range(11))
    assert IndexStore(path + ".qidx", path).trusted
    with quarry.open(path, index=str(tmp_path / "after.qidx")) as ds:
        ds.build_index(block_len=1000)
    assert_same_index(path + ".qidx", str(tmp_path / "after.qidx"))
    query = "energy > 0.5 && (x < 1 || tag == 3)"
    with quarry.open_series(path) as series:
        counts = [r["count"] for r in series.query(query).per_step()]
    assert counts == [len(oracle_ids(query, arrays)) for arrays in steps]


def test_a_failure_keeps_the_steps_written(tmp_path):
    path = str(tmp_path / "run.bp")
    steps = _steps(3)
    with (
        pytest.warns(RuntimeWarning, match="covers 3 of the 3"),
        pytest.raises(ZeroDivisionError),
        Writer(path, block_len=1000) as w,
    ):
        for arrays in steps:
            w.write_step(arrays)
        _ = 1 / 0
    with quarry.open_series(path) as series:
        counts = [r["count"] for r in series.query("x > 1").per_step()]
    assert counts == [len(oracle_ids("x > 1", arrays)) for arrays in steps]


def test_a_variable_the_file_decodes_is_refused(tmp_path):
    """A fill value declared in the file makes it read other values than the
    producer handed: no in-situ index, and the message says what to run."""
    import adios2

    path = str(tmp_path / "run.bp")
    energy = np.array([1.0, -999.0, 3.0])
    with (
        pytest.raises(quarry.SourceError, match=r"_FillValue=-999.0.*quarry index"),
        quarry.InSituIndexer(path) as ix,
        adios2.Stream(path, "w") as s,
    ):
        s.begin_step()
        s.write("energy", energy, [3], [0], [3])
        s.write_attribute("_FillValue", np.array([-999.0]), variable_name="energy")
        s.end_step()
        ix.add(0, {"energy": energy})


def test_steps_of_changing_sizes_and_a_variable_at_even_steps(tmp_path):
    """Particle counts that change each step (as in particle-in-cell codes)
    and ``x`` written at even steps only: the index is the one built
    afterwards, and each step answers as NumPy on that step's arrays."""
    path = str(tmp_path / "run.bp")
    rng = np.random.default_rng(5)
    steps = []
    for step in range(5):
        arrays = step_arrays(rng, step, 3001 + 17 * step)
        if step % 2 == 0:
            arrays["x"] = rng.normal(0, 1, 2000 + step).astype(np.float32)
        steps.append(arrays)
    with Writer(path, block_len=1000) as w:
        for arrays in steps:
            w.write_step(arrays)
    with quarry.open(path, index=str(tmp_path / "after.qidx")) as ds:
        ds.build_index(block_len=1000)
    assert_same_index(path + ".qidx", str(tmp_path / "after.qidx"))
    query = "v1 > 1 && v2 < 300"
    with quarry.open_series(path) as series:
        counts = [r["count"] for r in series.query(query).per_step()]
        assert counts == [len(oracle_ids(query, arrays)) for arrays in steps]
    with quarry.open(path) as ds:
        for step in (0, 2, 4):
            got = ds.query(f"/Step#{step}/x > 0.5").count()
            assert got == int((steps[step]["x"] > 0.5).sum())
