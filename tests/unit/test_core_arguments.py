"""Arguments the core cannot use are Python exceptions that say what was
wrong, never a Rust panic (``pyo3_runtime.PanicException``)."""

from __future__ import annotations

import numpy as np
import pytest

from quarry import _core


@pytest.mark.parametrize("block_len", [0, 2**32])
def test_a_block_length_out_of_range_is_a_value_error(block_len):
    x = np.arange(10.0)
    with pytest.raises(ValueError, match=f"block length {block_len} is not in 1..2"):
        _core.scan_range(x, 0.0, True, 3.0, True, block_len)
    with pytest.raises(ValueError, match=f"block length {block_len} is not in 1..2"):
        _core.scan_compare([x], [("load", 0.0)], "<", [("const", 3.0)], 10, block_len)


def test_edges_of_another_dtype_than_the_key_are_named():
    with pytest.raises(TypeError, match="expected a 1-D float64 array, got a 1-D int64 array"):
        _core.build_blocks(np.arange(10.0), np.array([1, 2]), 4)


def test_two_dimensional_values_are_named():
    with pytest.raises(TypeError, match="expected a 1-D float64 array, got a 2-D float64 array"):
        _core.build_blocks(np.zeros((2, 5)), np.array([1.0]), 4)


def test_values_that_do_not_fill_the_table_are_a_value_error():
    with pytest.raises(ValueError, match="a column holds 10 values, the table 20 rows"):
        _core.evaluate([np.arange(10.0)], [("load", 0.0)], 20)
