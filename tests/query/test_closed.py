"""A dataset used after it was closed, or a selection read after its file was
opened again, says so (:class:`quarry.ClosedDatasetError`), never a library's
traceback or an answer from a file no longer there."""

from __future__ import annotations

import os
import re

import h5py
import numpy as np
import pytest

import quarry


def write(path: str, scale: float) -> None:
    with h5py.File(path + ".new", "w") as f:
        f["e"], f["x"] = np.arange(40.0) * scale, np.ones(40)
    os.replace(path + ".new", path)


@pytest.mark.parametrize("indexed", [False, True])
def test_a_closed_dataset_and_its_selections_say_so(tmp_path, indexed):
    path = str(tmp_path / "c.h5")
    write(path, 1.0)
    ds = quarry.open(path)
    if indexed:
        ds.build_index()
    box, one = ds.query("e > 10 && x > 0.5"), ds.query("e > 10")
    assert ds.query("e > 10 && x > 0.5").count() == 29  # its box kept
    kept = ds.query("e > 10 && x > 0.5")
    ds.close()
    message = re.escape(f"{path} is closed: open it again")
    for use in (
        box.count,
        one.ids,
        lambda: kept.count(),
        lambda: one.values("x"),
        lambda: ds.query("e > 3"),
        ds.variables,
        lambda: ds.variable("e"),
        ds.build_index,
        lambda: ds.reorganize(["e", "x"], bins=4),
        lambda: ds.query_many(["e > 1", "e > 2"]),
    ):
        with pytest.raises(quarry.ClosedDatasetError, match=message):
            use()
    with quarry.open(path) as again:
        assert again.query("e > 10 && x > 0.5").count() == 29


def test_a_selection_made_before_its_file_was_opened_again_says_so(tmp_path):
    path = str(tmp_path / "r.h5")
    write(path, 1.0)
    with quarry.open(path) as ds:
        before = ds.query("e > 10 && x > 0.5")
        assert ds.query("e > 10 && x > 0.5").count() == 29
        kept = ds.query("e > 10 && x > 0.5")
        write(path, 2.0)
        ds.build_index()  # opens the file as it is now
        for old in (before, kept):
            with pytest.raises(quarry.ClosedDatasetError, match="was opened again since"):
                old.count()
        assert ds.query("e > 10 && x > 0.5").count() == 34


def test_a_closed_series_says_so(tmp_path):
    path = str(tmp_path / "s.h5")
    with h5py.File(path, "w") as f:
        for s in range(3):
            f[f"Step#{s}/e"] = np.arange(10.0) + s
    series = quarry.open_series(path)
    sel = series.query("e > 5")
    series.close()
    with pytest.raises(quarry.SeriesMemberError, match=r"step 0: .* is closed: open it again"):
        sel.counts()


def test_a_count_or_ids_already_read_stay_readable(tmp_path):
    path = str(tmp_path / "a.h5")
    write(path, 1.0)
    with quarry.open(path) as ds:
        sel = ds.query("e > 10 && x > 0.5")
        assert sel.count() == 29
        ids = sel.ids()
    assert sel.count() == 29 and sel.shape == (40,)
    np.testing.assert_array_equal(sel.ids(), ids)
    assert sel.stats().rows_scanned > 0 and sel.access()
    with pytest.raises(quarry.ClosedDatasetError, match="is closed"):
        sel.values("x")  # values read from the file
