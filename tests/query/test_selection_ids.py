"""``Selection.ids`` converts the hits once: every later call (the values,
outputs and joins of the selection ask again) gets the same read-only array,
equal to NumPy's answer, and a new answer is converted afresh."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

import quarry


@pytest.mark.parametrize("indexed", [False, True])
def test_ids_are_converted_once_and_shared_read_only(tmp_path, indexed):
    rng = np.random.default_rng(5)
    x = rng.normal(size=10_007)
    x[rng.integers(0, len(x), 50)] = np.nan
    path = str(tmp_path / "p.h5")
    with h5py.File(path, "w") as f:
        f["x"] = x
    with quarry.open(path) as ds:
        if indexed:
            ds.build_index(block_len=1000)
        sel = ds.query("x > 0.7")
        first = sel.ids()
        assert first.tolist() == np.flatnonzero(x > 0.7).tolist()
        assert sel.ids() is first
        sel.values("x")
        sel.output_table(["x"])
        assert sel.ids() is first
        with pytest.raises(ValueError, match="read-only"):
            first[0] = 1
        # an answer taken later (as MPI ranks give it) is converted afresh
        other = ds.query("x < -2")
        sel.set_answer(rows=other.rows)
        assert sel.ids() is not first
        assert sel.ids().tolist() == np.flatnonzero(x < -2).tolist()
        assert sel.ids() is sel.ids()


X, A = np.arange(5.0), np.arange(24.0).reshape(2, 3, 4) - 3


@pytest.mark.parametrize(
    ("query", "picked"),
    [
        ("x[2] > 1", X[2] > 1),
        ("a[-1, -1, -1] > 0", A[-1, -1, -1] > 0),
        ("x[2] > 5", X[2] > 5),
        ("a[1, :, 2] > 10", A[1, :, 2] > 10),
    ],
)
def test_coords_of_a_subarray_are_numpys_argwhere_even_of_one_element(tmp_path, query, picked):
    """A subarray of one element (x[2]) counted and gave ids, but its
    coordinates were a ValueError traceback: its hits are at no index."""
    path = str(tmp_path / "c.h5")
    with h5py.File(path, "w") as f:
        f["x"], f["a"] = X, A
    with quarry.open(path) as ds:
        coords = ds.query(query).coords()
    assert coords.shape == np.argwhere(picked).shape
    np.testing.assert_array_equal(coords, np.argwhere(picked))


@pytest.mark.parametrize("jobs", [1, 3])
def test_ids_are_converted_on_the_datasets_threads(tmp_path, monkeypatch, jobs):
    """``ids()`` converted the rows on every core even where the dataset was
    opened with ``jobs=1`` (its count and values kept to it)."""
    from quarry import pool
    from quarry.query.execute import Executor

    path = str(tmp_path / "t.h5")
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(100.0)
    seen = []
    convert = Executor.ids_of

    def watched(self, rows):
        seen.append(pool.jobs())
        return convert(self, rows)

    monkeypatch.setattr(Executor, "ids_of", watched)
    with pool.threads(2), quarry.open(path, jobs=jobs) as ds:
        assert ds.query("x > 90").ids().tolist() == list(range(91, 100))
    assert seen == [jobs]
