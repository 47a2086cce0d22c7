"""Python's key-kind table (quarry.expr.keys) agrees with the core's enum."""

from __future__ import annotations

import numpy as np
import pytest

from quarry import _core
from quarry.expr.keys import EDGE_DTYPES, INTEGER_RANGES, KEY_DTYPES, KEY_KINDS, key_kind

STORED = ["f4", "f8", ">f4", "i1", "i2", "<i4", ">i8", "u1", "u2", "u4", ">u8"]


def test_python_names_the_core_kinds_in_tag_order():
    assert KEY_KINDS == _core.KEY_KINDS == ("f64", "i64", "u64")
    assert tuple(KEY_DTYPES) == tuple(EDGE_DTYPES) == KEY_KINDS


@pytest.mark.parametrize("stored", STORED)
def test_every_stored_dtype_has_the_kind_the_core_builds_it_in(stored, tmp_path):
    """The kind Python picks is the one the core's build tags the blocks with:
    a column opened with it reads them, opened with another kind refuses."""
    dtype = np.dtype(stored)
    values = np.arange(50).astype(dtype)
    kind = key_kind(dtype)
    edges = np.array([10, 20], dtype=KEY_DTYPES[kind])
    (data, _crc), *_ = _core.build_blocks(values.astype(dtype.newbyteorder("=")), edges, 64)
    path = tmp_path / "x.idx"
    path.write_bytes(data)
    spans = [(0, 0, len(data))]
    col = _core.Column.open([_core.IndexFile(path)], kind, spans, 50, 64)
    sure, cand = col.count(10, True, 20, False)
    checked = values[cand.to_ids()]
    assert sure + np.count_nonzero((checked >= 10) & (checked < 20)) == 10
    for other in set(KEY_KINDS) - {kind}:
        with pytest.raises(_core.CorruptBlockError):
            _core.Column.open([_core.IndexFile(path)], other, spans, 50, 64)


def test_key_dtypes_hold_every_value_of_their_kind():
    assert [d.itemsize for d in KEY_DTYPES.values()] == [8, 8, 8]
    assert all(d.str[0] == "<" for d in EDGE_DTYPES.values())
    assert INTEGER_RANGES == {"i64": (-(2**63), 2**63 - 1), "u64": (0, 2**64 - 1)}


def test_a_dtype_without_a_kind_is_refused():
    with pytest.raises(KeyError):
        key_kind(np.dtype(bool))
