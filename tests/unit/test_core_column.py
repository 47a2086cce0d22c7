"""The binding's ``Column`` owns what it reads: no argument a caller passes
later can point it at other bytes, and every misuse is a Python exception
(``ValueError`` or ``CorruptBlockError``), never a Rust panic."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest

from quarry import _core

BLOCK_LEN = 300


def _index_file(tmp_path: Path, values: np.ndarray) -> tuple[Path, list[tuple[int, int, int]]]:
    """Blocks of ``values`` written one after another into one index file."""
    edges = np.quantile(values, [0.25, 0.5, 0.75]).astype(values.dtype)
    blocks = _core.build_blocks(values, np.unique(edges), BLOCK_LEN)
    spans, offset = [], 0
    path = tmp_path / "x.idx"
    with path.open("wb") as f:
        for data, _crc in blocks:
            f.write(data)
            spans.append((0, offset, len(data)))
            offset += len(data)
    return path, spans


@pytest.fixture
def column(tmp_path: Path) -> tuple[_core.Column, np.ndarray]:
    values = np.random.default_rng(19).integers(-500, 500, size=1000, dtype=np.int64)
    path, spans = _index_file(tmp_path, values)
    col = _core.Column.open([_core.IndexFile(path)], "i64", spans, len(values), BLOCK_LEN)
    return col, values


def _answer(col: _core.Column, values: np.ndarray, lo: int, hi: int, **kw: object) -> int:
    sure, cand = col.count(lo, True, hi, False, **kw)  # type: ignore[arg-type]
    ids = cand.to_ids()
    return int(sure) + int(np.count_nonzero((values[ids] >= lo) & (values[ids] < hi)))


def test_a_column_keeps_its_file_mapped_after_the_caller_drops_it(column):
    col, values = column
    gc.collect()  # the IndexFile made in the fixture is gone; the column holds the map
    for lo, hi in [(-500, 500), (-37, 120), (3, 4), (499, 600)]:
        assert _answer(col, values, lo, hi) == np.count_nonzero((values >= lo) & (values < hi))


def test_a_share_of_blocks_counts_its_rows_and_stays_in_range(column):
    col, values = column
    n_blocks = -(-len(values) // BLOCK_LEN)
    whole = np.count_nonzero((values >= -100) & (values < 100))
    shares = [_answer(col, values, -100, 100, blocks=(b, b + 1)) for b in range(n_blocks)]
    assert sum(shares) == whole
    assert _answer(col, values, -100, 100, blocks=(n_blocks, n_blocks)) == 0
    # a share cut from a longer table takes the blocks this column has
    assert _answer(col, values, -100, 100, blocks=(0, n_blocks + 7)) == whole
    tail = values[(n_blocks - 1) * BLOCK_LEN :]
    last = np.count_nonzero((tail >= -100) & (tail < 100))
    assert _answer(col, values, -100, 100, blocks=(n_blocks - 1, 99)) == last


def test_a_row_set_of_another_table_is_a_value_error(column):
    col, values = column
    other = _core.RowSet.full(len(values) + 1, BLOCK_LEN)
    with pytest.raises(ValueError, match="row set of 1001 rows"):
        col.leaf(0, True, 10, True, domain=other)
    with pytest.raises(ValueError, match="row set of 1001 rows"):
        col.histogram(np.array([0.0, 10.0]), domain=other)


def test_an_unknown_key_kind_is_a_value_error_naming_the_kinds(tmp_path):
    path, spans = _index_file(tmp_path, np.arange(1000, dtype=np.int64))
    with pytest.raises(ValueError, match='unknown key kind "f32"; the kinds are f64, i64, u64'):
        _core.Column.open([_core.IndexFile(path)], "f32", spans, 1000, BLOCK_LEN)


@pytest.mark.parametrize(
    "change",
    [
        lambda spans: [(1, o, n) for _, o, n in spans],  # a file that was not given
        lambda spans: [*spans[:-1], (0, spans[-1][1], spans[-1][2] + 1)],  # past the end
        lambda spans: spans[:-1],  # too few blocks for the rows
    ],
)
def test_spans_that_do_not_fit_the_files_are_corrupt_not_a_panic(tmp_path, change):
    path, spans = _index_file(tmp_path, np.arange(1000, dtype=np.int64))
    with pytest.raises(_core.CorruptBlockError):
        _core.Column.open([_core.IndexFile(path)], "i64", change(spans), 1000, BLOCK_LEN)


def test_blocks_opened_as_another_key_kind_are_corrupt(tmp_path):
    path, spans = _index_file(tmp_path, np.arange(1000, dtype=np.int64))
    with pytest.raises(_core.CorruptBlockError):
        _core.Column.open([_core.IndexFile(path)], "f64", spans, 1000, BLOCK_LEN)


@pytest.mark.parametrize(("n_rows", "block_len"), [(2**62, 1), (1000, 0), (1000, 2**32)])
def test_a_table_shape_the_spans_do_not_hold_is_refused_before_allocating(
    tmp_path, n_rows, block_len
):
    path, spans = _index_file(tmp_path, np.arange(1000, dtype=np.int64))
    with pytest.raises((ValueError, _core.CorruptBlockError)):
        _core.Column.open([_core.IndexFile(path)], "i64", spans, n_rows, block_len)
