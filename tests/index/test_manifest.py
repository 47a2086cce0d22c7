"""The typed manifest: it reads and writes back an index's JSON byte for byte,
and a manifest with a field missing or malformed is refused naming the field
(a damaged index, never a KeyError or a wrong answer)."""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import quarry
from quarry.errors import CorruptIndexError
from quarry.index import layout
from quarry.index.manifest import Manifest

_TRAILER = struct.Struct("<QQII8s")


@pytest.fixture
def indexed(tmp_path):
    """An index with variables of every key kind, an empty one, a
    non-dividing block length and a derived variable."""
    path = str(tmp_path / "run.h5")
    rng = np.random.default_rng(3)
    with h5py.File(path, "w") as f:
        f["x"] = rng.normal(size=1000)
        f["y"] = rng.normal(size=1000).astype("f4")
        f["n"] = rng.integers(-50, 50, 1000).astype("i2")
        f["u"] = rng.integers(0, 2**40, (10, 100)).astype("u8")
        f["none"] = np.zeros(0)
    with quarry.open(path) as ds:
        built = ds.build_index(block_len=97, bins=16, derive=["r=sqrt(x**2 + y**2)"])
    return path, built


def _body(index_path: str) -> bytes:
    data = Path(index_path).read_bytes()
    offset, length, *_ = _TRAILER.unpack(data[-_TRAILER.size :])
    return data[offset : offset + length]


def _rewrite(index_path: str, change: Callable[[dict[str, Any]], object]) -> None:
    """Change the manifest's JSON and write it back with a valid checksum: a
    damage the CRC cannot see (a bug, a hand edit, another writer)."""
    data = Path(index_path).read_bytes()
    offset, _, _, version, end = _TRAILER.unpack(data[-_TRAILER.size :])
    doc = json.loads(data[offset : -_TRAILER.size])
    change(doc)
    body = json.dumps(doc, separators=(",", ":")).encode()
    trailer = _TRAILER.pack(offset, len(body), zlib.crc32(body), version, end)
    Path(index_path).write_bytes(data[:offset] + body + trailer)


def test_a_manifest_reads_and_writes_back_byte_for_byte(indexed):
    path, built = indexed
    body = _body(path + ".qidx")
    _, read = layout.read_manifest(path + ".qidx")
    assert read == built
    assert json.dumps(read.to_json(), separators=(",", ":")).encode() == body
    assert Manifest.from_json(json.loads(body), read.edges_area()).to_json() == json.loads(body)
    assert sorted(read.variables) == ["/n", "/none", "/r", "/u", "/x", "/y"]
    assert {p: e.key for p, e in read.variables.items()} == {
        "/n": "i64",
        "/none": "f64",
        "/r": "f64",
        "/u": "u64",
        "/x": "f64",
        "/y": "f64",
    }
    for entry in read.variables.values():
        assert len(entry.spans) == len(entry.crcs) == -(-entry.n_rows // 97)


def test_fields_a_reader_does_not_know_are_ignored(indexed):
    path, _ = indexed
    _rewrite(path + ".qidx", lambda doc: doc.update(added_later={"any": [1, 2]}))
    with quarry.open(path) as ds:
        assert ds.query("x > 0").count() == int((h5py.File(path)["x"][:] > 0).sum())


def _delete(*keys: Any) -> Callable[[dict[str, Any]], object]:
    def change(doc: dict[str, Any]) -> None:
        for key in keys[:-1]:
            doc = doc[key]
        del doc[keys[-1]]

    return change


def _set(value: Any, *keys: Any) -> Callable[[dict[str, Any]], object]:
    def change(doc: dict[str, Any]) -> None:
        for key in keys[:-1]:
            doc = doc[key]
        doc[keys[-1]] = value

    return change


DAMAGES = {
    "block_len is missing": _delete("block_len"),
    "block_len is '97', not an integer": _set("97", "block_len"),
    "block_len is 0, not positive": _set(0, "block_len"),
    "variables is missing": _delete("variables"),
    "variables is [], not an object": _set([], "variables"),
    "version is missing": _delete("version"),
    "variables['/x'].blocks and variables['/x'].source_crc32 do not match": _delete(
        "variables", "/x", "source_crc32"
    ),
    "variables['/x'].edges is missing": _delete("variables", "/x", "edges"),
    "variables['/x'].key is 64, not a string": _set(64, "variables", "/x", "key"),
    "variables['/x'].shape holds something other than integers": _set(
        ["1000"], "variables", "/x", "shape"
    ),
    "variables['/x'].bins is True, not an integer": _set(True, "variables", "/x", "bins"),
    "derived.expr is missing": _delete("derived", 0, "expr"),
    "shards holds 'a', not an object": _set(["a"], "shards"),
    "source is 'run.h5', not an object": _set("run.h5", "source"),
    "source holds something other than integers": _set("now", "source", "size"),
}


@pytest.mark.parametrize("why", list(DAMAGES))
def test_a_damaged_field_is_named(indexed, why):
    path, _ = indexed
    _rewrite(path + ".qidx", DAMAGES[why])
    expected = f"index {path}.qidx is damaged (the manifest's {why}); rebuild it"
    with pytest.raises(CorruptIndexError) as caught:
        _, manifest = layout.read_manifest(path + ".qidx")
        dict(manifest.variables)  # an entry is checked when first read
    assert str(caught.value).startswith(expected)
    with pytest.raises(CorruptIndexError, match="is damaged"), quarry.open(path) as ds:
        ds.query("x > 0").count()


def test_a_manifest_of_another_format_is_refused(indexed):
    path, _ = indexed
    _rewrite(path + ".qidx", _set("other", "format"))
    with pytest.raises(CorruptIndexError, match=r"damaged \(the manifest is not a Quarry manifest"):
        layout.read_manifest(path + ".qidx")


def test_damaged_checksums_are_named_when_they_are_compared(indexed):
    path, _ = indexed
    _rewrite(path + ".qidx", _set(["c"] * 11, "variables", "/x", "source_crc32"))
    with quarry.open(path) as ds, pytest.raises(CorruptIndexError, match="source_crc32 holds"):
        ds.verify()


def test_a_damaged_block_span_is_named_when_the_column_opens(indexed):
    path, _ = indexed
    _rewrite(path + ".qidx", _set([0, 16], "variables", "/x", "blocks", 3))
    with quarry.open(path) as ds:
        assert ds.query("n > 0").count() == int((h5py.File(path)["n"][:] > 0).sum())
        with pytest.raises(CorruptIndexError, match=r"/x .*\[0, 16\] is not \[file, offset"):
            ds.query("x > 0").count()


def test_a_kept_manifest_text_encodes_each_manifest_as_json_dumps(indexed):
    """One ManifestText over manifests that share, replace (same path, another
    entry), add and drop variables, reorder the listing, gain shards and a
    follow: each encoded as json.dumps encodes its JSON, with its edges area
    (a variable dropped moves the edges after it: their entries are encoded
    again)."""
    from quarry.index.manifest import Follow, FollowedFile, ManifestText, Shard
    from quarry.records import replace

    _, built = indexed
    text = ManifestText()

    def dumps(manifest):
        return manifest.edges_area(), json.dumps(manifest.to_json(), separators=(",", ":")).encode()

    x = built.variables["/x"]
    kept = {p: e for p, e in built.variables.items() if p != "/n"}
    grown = replace(
        built,
        variables={**kept, "/x": replace(x, bins=x.bins + 1), "/z": built.variables["/y"]},
        shards=(Shard("run.h5.qidx.b-0001.qshard", 10),),
        follow=Follow(2, False, (FollowedFile("md.idx", 96, 7, 5, 64),)),
        listing=replace(built.listing, variables=built.listing.variables[::-1]),
    )
    for manifest in (built, grown, built, replace(built, listing=None)):
        assert text.encode(manifest) == dumps(manifest)


def _as_version_3(index_path: str) -> None:
    """Rewrite a version 4 index as version 3 wrote it: each variable's
    edges as base64 text in the JSON, no edges area, version 3 in the header
    and the trailer (the blocks stay where they are)."""
    import base64

    data = Path(index_path).read_bytes()
    offset, _, _, _, end = _TRAILER.unpack(data[-_TRAILER.size :])
    doc = json.loads(data[offset : -_TRAILER.size])
    length, _ = doc.pop("edges_area")
    area = data[offset - length : offset]
    for entry in doc["variables"].values():
        start, size = entry["edges"]
        entry["edges"] = base64.b64encode(area[start : start + size]).decode()
    doc["version"] = 3
    body = json.dumps(doc, separators=(",", ":")).encode()
    head = data[:8] + struct.pack("<I", 3) + data[12 : offset - length]
    trailer = _TRAILER.pack(len(head), len(body), zlib.crc32(body), 3, end)
    Path(index_path).write_bytes(head + body + trailer)


def test_the_edges_lie_outside_the_json_and_a_version_3_index_still_reads(indexed):
    """The JSON holds each variable's [start, length] in the edges area, not
    the edges; an index written by version 3 (edges as base64 text) reads to
    the same manifest and answers the same counts."""
    path, built = indexed
    doc = json.loads(_body(path + ".qidx"))
    assert doc["version"] == layout.VERSION == 4
    assert all(isinstance(e["edges"], list) for e in doc["variables"].values())
    assert doc["edges_area"][0] == sum(len(e.edges) for e in built.variables.values())
    edges = layout.decode_edges(built.variables["/x"])
    assert len(edges) > 1 and np.all(np.diff(edges) > 0)
    with quarry.open(path) as ds:
        want = [ds.query(q).count() for q in ("x > 0.3", "n < 7", "r > 1", "u > 2**39")]
    _as_version_3(path + ".qidx")
    _, old = layout.read_manifest(path + ".qidx")
    assert old.variables == built.variables
    with quarry.open(path) as ds:
        assert [ds.query(q).count() for q in ("x > 0.3", "n < 7", "r > 1", "u > 2**39")] == want


def test_a_damaged_edges_area_is_a_damaged_index(indexed):
    path, _ = indexed
    index = path + ".qidx"
    data = bytearray(Path(index).read_bytes())
    offset, *_ = _TRAILER.unpack(data[-_TRAILER.size :])
    data[offset - 3] ^= 0xFF  # a byte of the last variable's edges
    Path(index).write_bytes(bytes(data))
    with pytest.raises(CorruptIndexError, match="edges area checksum mismatch"):
        layout.read_manifest(index)


@pytest.mark.parametrize(
    ("edges", "area", "why"),
    [
        ([0, 10**9], None, r"edges \[0, 1000000000\] do not lie in its \d+-byte edges area"),
        ([0, 12], None, r"edges \[0, 12\] do not lie"),
        ([-8, 8], None, r"edges \[-8, 8\] do not lie"),
        (["0", 8], None, "edges holds something other than integers"),
        ("not base64!", None, "edges is not base64"),
        (None, [1], r"edges_area is \[1\], not \[length, crc32\]"),
        (None, "x", "edges_area is 'x', not a list"),
    ],
)
def test_a_damaged_edges_span_is_named(indexed, edges, area, why):
    path, _ = indexed

    def change(doc: dict[str, Any]) -> None:
        if edges is not None:
            doc["variables"]["/x"]["edges"] = edges
        if area is not None:
            doc["edges_area"] = area

    _rewrite(path + ".qidx", change)
    with pytest.raises(CorruptIndexError, match=why):
        _, manifest = layout.read_manifest(path + ".qidx")
        dict(manifest.variables)


def test_an_index_of_a_later_format_is_refused_with_the_versions_read(indexed):
    path, _ = indexed
    data = bytearray(Path(path + ".qidx").read_bytes())
    data[8:12] = struct.pack("<I", 9)
    Path(path + ".qidx").write_bytes(bytes(data))
    with pytest.raises(
        CorruptIndexError, match="has format version 9; this Quarry reads versions 3, 4"
    ):
        layout.read_manifest(path + ".qidx")


def test_an_entry_is_read_when_first_used(indexed):
    """A variable's entry is made from the JSON when a query first reads it:
    an entry damaged where the CRC cannot see leaves the other variables
    answering, and is named as damaged when its variable is queried."""
    path, _ = indexed
    _rewrite(path + ".qidx", _set(64, "variables", "/n", "key"))
    _, manifest = layout.read_manifest(path + ".qidx")
    assert len(manifest.variables) == 6 and "/n" in manifest.variables
    x = h5py.File(path)["x"][:]
    with quarry.open(path) as ds:
        assert ds.query("x > 0.5").count() == int((x > 0.5).sum())
        refused = r"damaged \(the manifest's variables\['/n'\].key is 64, not a string\)"
        with pytest.raises(CorruptIndexError, match=refused):
            ds.query("n > 3").count()
