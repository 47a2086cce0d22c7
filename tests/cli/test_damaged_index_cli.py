"""The README's promise that a damaged index "print[s] one line and exit[s] 1"
from the CLI: bytes flipped in each part of the index file, or the file
cut short, give exactly one stderr line naming the index, no traceback."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from quarry.cli.main import main
from quarry.index import layout

QUARRY = [sys.executable, "-m", "quarry.cli.main"]
BLOCK_LEN = 1000
#: A block's fixed header, and each bin entry after it (quarry-core's block.rs).
BLOCK_FIXED_HEADER, BLOCK_ENTRY = 88, 48


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    path = tmp_path_factory.mktemp("damaged") / "run.h5"
    rng = np.random.default_rng(3)
    x = rng.normal(size=3 * BLOCK_LEN + 17)
    x[::50] = np.nan
    with h5py.File(path, "w") as f:
        f["x"] = x
    done = subprocess.run(
        [*QUARRY, "index", str(path), "--block-size", str(BLOCK_LEN), "--bins", "16", "--quiet"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return path, Path(str(path) + ".qidx").read_bytes()


def _block(pristine: bytes, path: Path, k: int) -> tuple[int, int, int]:
    """Block ``k`` of /x: its offset, length, and its header's length."""
    _, manifest = layout.read_manifest(str(path) + ".qidx")
    _, offset, length = manifest.variables["/x"].spans[k]
    (entries,) = struct.unpack_from("<I", pristine, offset + 16)
    return offset, length, BLOCK_FIXED_HEADER + BLOCK_ENTRY * entries + 4


def _manifest_start(pristine: bytes) -> int:
    offset, *_ = struct.unpack_from("<QQ", pristine, len(pristine) - 32)
    return int(offset)


def _flip(at: int):
    def damage(pristine: bytes, path: Path) -> bytes:
        bad = bytearray(pristine)
        bad[at if at >= 0 else len(bad) + at] ^= 0x5A
        return bytes(bad)

    return damage


def _flip_in_manifest(pristine: bytes, path: Path) -> bytes:
    return _flip(_manifest_start(pristine) + 40)(pristine, path)


def _flip_in_block_header(pristine: bytes, path: Path) -> bytes:
    offset, _, _ = _block(pristine, path, 1)
    return _flip(offset + 32)(pristine, path)  # the block's sum


def _flip_in_bin_entry(pristine: bytes, path: Path) -> bytes:
    offset, _, _ = _block(pristine, path, 0)
    return _flip(offset + BLOCK_FIXED_HEADER + 8)(pristine, path)  # the first bin's count


def _flip_in_bitmap(pristine: bytes, path: Path) -> bytes:
    # The payload ends with the highest bin's bitmap, which "x > 0" decodes.
    offset, length, header = _block(pristine, path, 2)
    assert length > header
    return _flip(offset + length - 3)(pristine, path)


def _truncate(pristine: bytes, path: Path) -> bytes:
    return pristine[: len(pristine) // 2]


DAMAGE = {
    "file header": _flip(2),
    "block header": _flip_in_block_header,
    "bin entry": _flip_in_bin_entry,
    "bitmap": _flip_in_bitmap,
    "manifest": _flip_in_manifest,
    "trailer": _flip(-5),
    "truncated": _truncate,
}


#: Each damage with the outputs that must see it. A count adds up the bins'
#: counts from the (checked) block headers without decoding a bitmap that
#: lies inside the range: a damaged bitmap is seen by --ids and --values,
#: which decode it, and a count stays right (below).
CASES = [(kind, out) for kind in DAMAGE for out in ("--ids", "--count") if kind != "bitmap"]
CASES += [("bitmap", "--ids"), ("bitmap", "--values")]


def _damaged_copy(indexed, folder: Path, kind: str) -> tuple[Path, Path]:
    source, pristine = indexed
    index = folder / "damaged.qidx"
    damaged = DAMAGE[kind](pristine, source)
    assert damaged != pristine
    index.write_bytes(damaged)
    return source, index


def _says_damaged_once(err: str, index: Path) -> None:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("quarry: error: ") and str(index) in lines[0], lines[0]
    assert "damaged" in lines[0] or "truncated" in lines[0], lines[0]


@pytest.mark.parametrize(("kind", "out"), CASES)
def test_a_damaged_index_is_one_line_and_exit_1(indexed, tmp_path, kind, out, capsys):
    source, index = _damaged_copy(indexed, tmp_path, kind)
    argv = [out, "x"] if out == "--values" else [out]
    code = main(["query", str(source), "x > 0", "--index", str(index), "--json", *argv])
    captured = capsys.readouterr()
    assert code == 1, captured
    assert captured.out == ""
    _says_damaged_once(captured.err, index)


@pytest.mark.parametrize("kind", ["bitmap", "manifest"])
def test_the_command_line_process_says_it_once(indexed, tmp_path, kind):
    """The same, from a process of its own: its status and its whole stderr."""
    source, index = _damaged_copy(indexed, tmp_path, kind)
    done = subprocess.run(
        [*QUARRY, "query", str(source), "x > 0", "--index", str(index), "--ids"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout == ""
    _says_damaged_once(done.stderr, index)


def test_a_count_that_needs_no_damaged_bitmap_is_right(indexed, tmp_path, capsys):
    source, index = _damaged_copy(indexed, tmp_path, "bitmap")
    assert main(["query", str(source), "x > 0", "--index", str(index), "--json"]) == 0
    with h5py.File(source) as f:
        assert json.loads(capsys.readouterr().out)["count"] == int(np.sum(f["x"][()] > 0))


def test_the_pristine_index_answers(indexed, tmp_path):
    """The damage above is what fails: the same command on the intact index
    answers as NumPy does."""
    source, pristine = indexed
    index = tmp_path / "intact.qidx"
    index.write_bytes(pristine)
    done = subprocess.run(
        [*QUARRY, "query", str(source), "x > 0", "--index", str(index), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    with h5py.File(source) as f:
        assert json.loads(done.stdout)["count"] == int(np.sum(f["x"][()] > 0))
    assert done.stderr == ""
