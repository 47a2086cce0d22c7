"""Copying staged blocks into an index (``BlockWriter.add_copied``) and the
per-block CRC-32 a check computes again (``verify.source_crcs``), each
against an independent computation: the bytes concatenated in Python, and
``zlib.crc32`` of every block."""

from __future__ import annotations

import errno
import os
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quarry.index import layout, verify


def _staged(tmp_path, blobs):
    """A file holding ``blobs`` one after another, after a 16-byte header,
    and each blob's ``(offset, length)`` in it."""
    path = tmp_path / "staged.bin"
    path.write_bytes(b"H" * 16 + b"".join(blobs))
    offsets = np.cumsum([16] + [len(b) for b in blobs])
    return str(path), [(int(o), len(b)) for o, b in zip(offsets, blobs, strict=False)]


@pytest.mark.parametrize("kernel", [True, False])
@settings(max_examples=40, deadline=None)
@given(
    blobs=st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=12),
    picks=st.lists(st.integers(0, 11), max_size=20),
    sync_every=st.integers(1, 64),
)
def test_copied_blocks_are_the_bytes_appended(tmp_path_factory, kernel, blobs, picks, sync_every):
    """Extents in any order (adjacent ones copied in one run, the disk syncing
    every few bytes), by the kernel or read and written where it cannot copy:
    the index holds the blocks' bytes in that order after what was already
    written, at the spans returned, and what is written next follows them."""
    tmp_path = tmp_path_factory.mktemp("copy")
    source, extents = _staged(tmp_path, blobs)
    chosen = [extents[k % len(extents)] for k in picks] or extents
    mp = pytest.MonkeyPatch()
    mp.setattr(layout, "COPY_SYNC_BYTES", sync_every)
    if not kernel:  # a file system the kernel cannot copy between

        def refuse(*args):
            raise OSError(errno.EXDEV, "Invalid cross-device link")

        mp.setattr(os, "copy_file_range", refuse)
    try:
        writer = layout.ShardWriter(str(tmp_path / "run.h5.qidx"), "b", 0, 3)
        before = writer.add_all([b"first"])
        with open(source, "rb") as f:
            spans = writer.add_copied(f.fileno(), chosen)
        after = writer.add_all([b"last"])
        writer.close()
    finally:
        mp.undo()
    with open(writer.path, "rb") as f:
        data = f.read()
    with open(source, "rb") as f:
        staged = f.read()
    want = [staged[o : o + n] for o, n in chosen]
    assert [data[o : o + n] for _, o, n in spans] == want
    assert [f for f, _, _ in spans] == [3] * len(chosen)
    assert data[16:] == b"first" + b"".join(want) + b"last"
    assert before[0][1] == 16 and after[0][1] == len(data) - 4


def test_a_copy_past_the_end_of_the_staged_file_is_an_error(tmp_path):
    source, extents = _staged(tmp_path, [b"abc"])
    writer = layout.ShardWriter(str(tmp_path / "run.h5.qidx"), "b", 0, 1)
    with open(source, "rb") as f, pytest.raises(EOFError, match="ends before byte"):
        writer.add_copied(f.fileno(), [(extents[0][0], 10)])
    writer.abort()


@settings(max_examples=60, deadline=None)
@given(
    dtype=st.sampled_from(["u1", "i2", "u4", "i4", "f4", "f8", "i8"]),
    rows=st.integers(0, 3000),
    block_len=st.integers(1, 700),
    seed=st.integers(0, 2**32 - 1),
)
def test_source_crcs_are_zlibs_per_block(dtype, rows, block_len, seed):
    """Every dtype (NaNs and all bit patterns: random bytes), sizes that do
    not divide the block: the CRC-32 of each block's bytes."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 256, rows * np.dtype(dtype).itemsize, dtype="u1").view(dtype)
    got = verify.source_crcs(lambda p, a, b: values[a:b], [("/v", rows)], block_len)
    want = [zlib.crc32(values[a : a + block_len].tobytes()) for a in range(0, rows, block_len)]
    assert got == {"/v": want}
