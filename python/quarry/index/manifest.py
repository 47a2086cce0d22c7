"""The manifest of an index file, typed: what :mod:`quarry.index.layout`
keeps as JSON after the blocks.

::

    {"format": "quarry-index", "version": 4, "created_by": "quarry 0.4.0",
     "source": {"name": "run.h5", "size": ..., "mtime_ns": ..., "ctime_ns": ...,
                "ino": ..., "fine_times": 1, "read_ns": ...},
     "block_len": 1048576,
     "derived": [{"name": "r", "expr": "sqrt(x**2 + y**2)"}],
     "shards": [{"name": "run.h5.qidx.3f9a2c01-0001.qshard", "size": ...}],
     "edges_area": [8200, 2851932157],
     "variables": {"/x": {"dtype": "<f8", "shape": [500], "key": "f64", "bins": 1024,
                          "precision": 2, "edges": [0, 8200], "blocks": [[0, 16, 812], ...],
                          "source_crc32": [...]}},
     "listing": {"backend": "hdf5", "step_context": null, "variables": [...]}}

The bin edges are not in the JSON: every variable's edges (their
little-endian bytes) lie one after another in the *edges area*, just before
the JSON in the index file, and a variable's ``edges`` is its ``[start,
length]`` there; ``edges_area`` is the area's length and CRC-32. A JSON
decoder reads a long string at about 1 GB/s, and the edges of 1,440
variables (16 MB of base64 in format version 3, where ``edges`` was that
string) took 14 ms of every open of a 720-step file; the raw bytes are
checked and sliced in 2. Version 3 manifests are still read.

``follow`` (optional) is written by ``quarry index --follow`` (see
:class:`Follow`): how many steps of a run still being written the index
covers, and the files of the run that prove those steps unchanged.

``listing`` (optional) is every variable of the file as the build saw it
(:mod:`quarry.formats.listing`): while the index is fresh, opening the file
needs no walk of it.

:meth:`Manifest.from_json` checks every field it reads and names the one
that is missing or malformed; a variable's entry is read and checked when
first used (a query of one step of a 720-step file reads 1 entry of 1,440),
and its per-block lists, thousands of numbers most queries never look at,
where they are used.
:meth:`Manifest.to_json` gives back exactly the JSON a build writes (same
keys, same order), so an index's manifest reads and writes back byte for
byte. Fields a reader does not know are ignored, and the source's stat
fields are kept as recorded: an index from before ``ctime_ns``, ``ino`` or
``read_ns`` were recorded lacks them (see :mod:`quarry.index.fresh`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from quarry.errors import CorruptIndexError
from quarry.records import record, replace

if TYPE_CHECKING:
    from quarry.formats.listing import Listing
    from quarry.index.derived import Derivation

FORMAT = "quarry-index"


def _field(doc: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """``doc[key]``, checked to be of ``kind`` (a bool is not an int here)."""
    if key not in doc:
        raise CorruptIndexError(f"the manifest's {where}{key} is missing")
    value = doc[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _kinds(kind)):
        raise CorruptIndexError(f"the manifest's {where}{key} is {value!r}, not {_name(kind)}")
    return value


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _name(kind: type | tuple[type, ...]) -> str:
    names = {dict: "an object", list: "a list", str: "a string", int: "an integer"}
    return " or ".join(names.get(k, k.__name__) for k in _kinds(kind))


def _ints(values: Sequence[Any], where: str) -> None:
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise CorruptIndexError(f"the manifest's {where} holds something other than integers")


#: Bytes of one bin edge, in every key kind (f64, i64, u64).
EDGE_BYTES = 8


def _edges(at: list[Any] | str, area: bytes, where: str) -> bytes:
    """A variable's edges: ``[start, length]`` in the edges ``area``, or the
    base64 text of a version 3 manifest."""
    if isinstance(at, str):
        import base64
        import binascii

        try:
            return base64.b64decode(at, validate=True)
        except binascii.Error:
            raise CorruptIndexError(f"the manifest's {where}edges is not base64") from None
    _ints(at, f"{where}edges")
    if len(at) != 2 or at[0] < 0 or at[1] % EDGE_BYTES or at[0] + at[1] > len(area):
        raise CorruptIndexError(
            f"the manifest's {where}edges {at!r} do not lie in its {len(area)}-byte edges area"
        )
    return area[at[0] : at[0] + at[1]]


@record
class SourceRecord:
    """What the build recorded of its source: its file name, its stat as
    :func:`~quarry.formats.base.fingerprint` gives it (``stamp``, the keys
    as recorded), and when reading began (``read_ns``; None in an index
    from before it was recorded)."""

    name: str
    stamp: Mapping[str, int]
    read_ns: int | None = None

    @staticmethod
    def from_json(doc: Any) -> SourceRecord:
        if not isinstance(doc, dict):
            raise CorruptIndexError(f"the manifest's source is {doc!r}, not an object")
        stamp = {k: v for k, v in doc.items() if k not in ("name", "read_ns")}
        _ints(list(stamp.values()), "source")
        read_ns = _field(doc, "read_ns", int, "source.") if "read_ns" in doc else None
        name = _field(doc, "name", str, "source.") if "name" in doc else ""
        return SourceRecord(name, stamp, read_ns)

    def to_json(self) -> dict[str, Any]:
        read = {} if self.read_ns is None else {"read_ns": self.read_ns}
        return {"name": self.name, **self.stamp, **read}


@record
class Shard:
    """A file of blocks written by one rank of a parallel build (named
    relative to the index) and its size in bytes."""

    name: str
    size: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "size": self.size}


@record
class FollowedFile:
    """A file of a store that its writer only appends to (ADIOS2 BP5's
    ``md.idx``, ``md.0``, ``data.0``...), as it was when an index of the run
    was published: its name in the store, size, inode, and the CRC-32 of
    its bytes ``[start, size)`` then (None for data files, whose blocks
    carry their own CRCs; ``start`` skips a header the writer updates in
    place, such as the "writer active" flag in BP5's ``md.idx``)."""

    name: str
    size: int
    ino: int
    crc32: int | None
    start: int = 0

    def to_json(self) -> list[Any]:
        return [self.name, self.size, self.ino, self.crc32, self.start]


@record
class Follow:
    """An index published while following a run (``quarry index --follow``):
    it covers steps ``0 .. steps-1``; ``closed`` once the writer closed the
    run. Freshness is then decided by ``files`` (see
    :func:`quarry.index.fresh.assess`), since the run grows under the index.

    Examples
    --------
    >>> follow = Follow(3, False, (FollowedFile("md.idx", 96, 7, 12345, 64),))
    >>> Follow.from_json(follow.to_json()) == follow
    True
    """

    steps: int
    closed: bool
    files: tuple[FollowedFile, ...]

    def writer_closed(self, path: str) -> bool:
        """Whether the writer has closed the run ``path``: as the follower
        saw it, or, where the follower stopped first (an idle timeout, a
        kill), as the run's own header says it now."""
        if self.closed:
            return True
        from quarry.formats.adios2 import writer_active

        return writer_active(path) is False

    def to_json(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "closed": self.closed,
            "files": [f.to_json() for f in self.files],
        }

    @staticmethod
    def from_json(doc: Any) -> Follow:
        if not isinstance(doc, dict):
            raise CorruptIndexError(f"the manifest's follow is {doc!r}, not an object")
        files = []
        for item in _field(doc, "files", list, "follow."):
            if not (isinstance(item, list) and len(item) == 5 and isinstance(item[0], str)):
                raise CorruptIndexError(f"the manifest's follow.files holds {item!r}")
            _ints([v for v in item[1:] if v is not None], "follow.files")
            files.append(FollowedFile(item[0], item[1], item[2], item[3], item[4]))
        return Follow(
            _field(doc, "steps", int, "follow."),
            _field(doc, "closed", bool, "follow."),
            tuple(files),
        )


@record
class VariableEntry:
    """One indexed variable: its dtype (NumPy's ``str``, as read), shape, the
    key kind its bins are kept in (``f64``, ``i64`` or ``u64``), the options
    it was built with, its bin edges (their little-endian bytes, see
    :func:`quarry.index.layout.decode_edges`), and per block its ``[file,
    offset, length]`` span and the CRC-32 of the values indexed.

    ``blocks`` and ``source_crc32`` are None in a copy without the per-block
    lists (what ranks other than 0 of a parallel build are given).
    """

    dtype: str
    shape: tuple[int, ...]
    key: str
    bins: int
    precision: int
    edges: bytes
    blocks: Sequence[Sequence[int]] | None
    source_crc32: Sequence[int] | None

    @property
    def n_rows(self) -> int:
        """Rows of the variable: the product of its shape.

        Examples
        --------
        >>> VariableEntry("<f8", (4, 5), "f64", 8, 2, b"", [], []).n_rows
        20
        """
        rows = 1
        for s in self.shape:
            rows *= s
        return rows

    @property
    def spans(self) -> list[tuple[int, int, int]]:
        """Each block's ``(file, offset, length)``, checked to be three integers."""
        if self.blocks is None:
            raise CorruptIndexError("this copy of the manifest has no per-block lists")
        spans = []
        for span in self.blocks:
            if not isinstance(span, list) or len(span) != 3:
                raise CorruptIndexError(
                    f"the manifest's block span {span!r} is not [file, offset, length]"
                )
            _ints(span, "block spans")
            spans.append((span[0], span[1], span[2]))
        return spans

    @property
    def crcs(self) -> Sequence[int]:
        """The recorded CRC-32 of each block, checked to be integers."""
        if self.source_crc32 is None:
            raise CorruptIndexError("this copy of the manifest has no per-block lists")
        _ints(self.source_crc32, "source_crc32")
        return self.source_crc32

    @staticmethod
    def from_json(doc: Any, path: str, area: bytes = b"") -> VariableEntry:
        """The entry of ``path`` in the decoded JSON ``doc``, its edges taken
        from the manifest's edges ``area`` (or, in a version 3 manifest,
        decoded from the base64 text ``doc`` holds)."""
        where = f"variables[{path!r}]."
        if not isinstance(doc, dict):
            raise CorruptIndexError(f"the manifest's variables[{path!r}] is {doc!r}, not an object")
        shape = _field(doc, "shape", list, where)
        _ints(shape, f"{where}shape")
        blocks = _field(doc, "blocks", list, where) if "blocks" in doc else None
        crcs = _field(doc, "source_crc32", list, where) if "source_crc32" in doc else None
        if (blocks is None) != (crcs is None) or (
            blocks is not None and crcs is not None and len(blocks) != len(crcs)
        ):
            raise CorruptIndexError(
                f"the manifest's {where}blocks and {where}source_crc32 do not match"
            )
        return VariableEntry(
            dtype=_field(doc, "dtype", str, where),
            shape=tuple(shape),
            key=_field(doc, "key", str, where),
            bins=_field(doc, "bins", int, where),
            precision=_field(doc, "precision", int, where),
            edges=_edges(_field(doc, "edges", (list, str), where), area, where),
            blocks=blocks,
            source_crc32=crcs,
        )

    def to_json(self, edges_at: int = 0) -> dict[str, Any]:
        """The JSON-ready entry, its edges lying at ``edges_at`` in the edges area."""
        doc: dict[str, Any] = {
            "dtype": self.dtype,
            "shape": list(self.shape),
            "key": self.key,
            "bins": self.bins,
            "precision": self.precision,
            "edges": [edges_at, len(self.edges)],
        }
        if self.blocks is not None and self.source_crc32 is not None:
            doc["blocks"] = [list(span) for span in self.blocks]
            doc["source_crc32"] = list(self.source_crc32)
        return doc


@record
class Manifest:
    """An index's manifest (see the module notes).

    Examples
    --------
    >>> doc = {"format": "quarry-index", "version": 4, "created_by": "quarry 0.4.0",
    ...        "source": {"name": "a.h5", "size": 8, "mtime_ns": 1, "read_ns": 5},
    ...        "block_len": 4, "derived": [], "shards": [], "edges_area": [0, 0],
    ...        "variables": {}}
    >>> manifest = Manifest.from_json(doc)
    >>> manifest.block_len, manifest.source.stamp["size"], manifest.to_json() == doc
    (4, 8, True)
    >>> Manifest.from_json({**doc, "block_len": "4"})
    Traceback (most recent call last):
    ...
    quarry.errors.CorruptIndexError: the manifest's block_len is '4', not an integer
    """

    version: int
    created_by: str
    source: SourceRecord
    block_len: int
    derived: tuple[Derivation, ...]
    shards: tuple[Shard, ...]
    variables: Mapping[str, VariableEntry]
    listing: Listing | None = None
    """The file's variables as the build saw them; None in indexes from
    before listings were recorded, or of files a listing cannot describe."""
    follow: Follow | None = None
    """Set in an index ``quarry index --follow`` published (see :class:`Follow`)."""

    @staticmethod
    def from_json(
        doc: Any,
        area: bytes = b"",
        damaged: Callable[[str], CorruptIndexError] = CorruptIndexError,
    ) -> Manifest:
        """The manifest in the decoded JSON ``doc``, its variables' edges in
        the edges ``area`` (read from where :func:`edges_area` says); raises
        :class:`CorruptIndexError` naming the field that is missing or
        malformed, a variable's entry when it is first read (the error
        ``damaged`` makes of the message). Fields it does not know are ignored."""
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise CorruptIndexError("the manifest is not a Quarry manifest")
        block_len = _field(doc, "block_len", int, "")
        if block_len < 1:
            raise CorruptIndexError(f"the manifest's block_len is {block_len}, not positive")
        derived = []
        for d in doc.get("derived", []):
            if not isinstance(d, dict):
                raise CorruptIndexError(f"the manifest's derived holds {d!r}, not an object")
            from quarry.index.derived import Derivation  # only an index with some

            derived.append(
                Derivation(_field(d, "name", str, "derived."), _field(d, "expr", str, "derived."))
            )
        shards = []
        for s in doc.get("shards", []):
            if not isinstance(s, dict):
                raise CorruptIndexError(f"the manifest's shards holds {s!r}, not an object")
            shards.append(
                Shard(_field(s, "name", str, "shards."), _field(s, "size", int, "shards."))
            )
        entries = _field(doc, "variables", dict, "")
        listing = None
        if "listing" in doc:
            from quarry.formats.listing import Listing

            try:
                listing = Listing.from_json(doc["listing"])
            except (KeyError, TypeError, ValueError) as exc:
                raise CorruptIndexError(f"the manifest's listing is malformed ({exc})") from None
        follow = Follow.from_json(doc["follow"]) if "follow" in doc else None
        return Manifest(
            version=_field(doc, "version", int, ""),
            created_by=_field(doc, "created_by", str, "") if "created_by" in doc else "",
            source=SourceRecord.from_json(doc.get("source", {})),
            block_len=block_len,
            derived=tuple(derived),
            shards=tuple(shards),
            variables=_Entries(entries, area, damaged),
            listing=listing,
            follow=follow,
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON-ready manifest, keys in the order a build writes them
        (its edges lying in :meth:`edges_area`)."""
        doc = self.head_json(self.edges_area())
        starts = _starts(self.variables.values())
        doc["variables"] = {
            p: e.to_json(at) for (p, e), at in zip(self.variables.items(), starts, strict=True)
        }
        if self.listing is not None:
            doc["listing"] = self.listing.to_json()
        if self.follow is not None:
            doc["follow"] = self.follow.to_json()
        return doc

    def head_json(self, area: bytes) -> dict[str, Any]:
        """The keys :meth:`to_json` puts before the variables, the edges
        ``area`` described among them."""
        import numpy as np

        from quarry import _core

        return {
            "format": FORMAT,
            "version": self.version,
            "created_by": self.created_by,
            "source": self.source.to_json(),
            "block_len": self.block_len,
            "derived": [d.to_dict() for d in self.derived],
            "shards": [s.to_json() for s in self.shards],
            "edges_area": [len(area), _core.crc32(np.frombuffer(area, np.uint8))],
        }

    def edges_area(self) -> bytes:
        """Every variable's edges, one after another in the variables' order:
        the bytes the index file holds just before the manifest's JSON."""
        return b"".join(e.edges for e in self.variables.values())

    def without_blocks(self) -> Manifest:
        """This manifest without the per-block lists (for broadcasting)."""
        return replace(
            self,
            variables={
                p: replace(e, blocks=None, source_crc32=None) for p, e in self.variables.items()
            },
        )


class _Entries(Mapping[str, VariableEntry]):
    """A read manifest's variable entries, each made from its JSON (and
    checked) when first read, then kept: making all 1,440 of a 720-step
    file's took 20 ms of every open, and a step's query reads its own few.

    Examples
    --------
    >>> doc = {"dtype": "<f8", "shape": [2], "key": "f64", "bins": 4,
    ...        "precision": 2, "edges": [0, 8]}
    >>> entries = _Entries({"/x": doc, "/y": {**doc, "key": 7}}, bytes(8), CorruptIndexError)
    >>> list(entries), entries["/x"].n_rows, entries["/x"] is entries["/x"]
    (['/x', '/y'], 2, True)
    >>> entries["/y"]
    Traceback (most recent call last):
    ...
    quarry.errors.CorruptIndexError: the manifest's variables['/y'].key is 7, not a string
    """

    __slots__ = ("_area", "_damaged", "_docs", "_made")

    def __init__(
        self,
        docs: dict[str, Any],
        area: bytes,
        damaged: Callable[[str], CorruptIndexError],
    ) -> None:
        self._docs = docs
        self._area = area
        self._damaged = damaged
        self._made: dict[str, VariableEntry] = {}

    def __getitem__(self, path: str) -> VariableEntry:
        entry = self._made.get(path)
        if entry is None:
            try:
                entry = VariableEntry.from_json(self._docs[path], path, self._area)
            except CorruptIndexError as exc:
                raise self._damaged(str(exc)) from None
            self._made[path] = entry
        return entry

    def __contains__(self, path: object) -> bool:
        return path in self._docs

    def __iter__(self) -> Iterator[str]:
        return iter(self._docs)

    def __len__(self) -> int:
        return len(self._docs)


def _starts(entries: Iterable[VariableEntry]) -> list[int]:
    """Where each entry's edges start in the edges area."""
    starts, at = [], 0
    for entry in entries:
        starts.append(at)
        at += len(entry.edges)
    return starts


def edges_area(doc: Any) -> tuple[int, int]:
    """The ``(length, CRC-32)`` of the edges area the decoded manifest
    ``doc`` describes; ``(0, 0)`` for a version 3 manifest, which has none.

    Examples
    --------
    >>> edges_area({"edges_area": [16, 7]}), edges_area({})
    ((16, 7), (0, 0))
    """
    if not isinstance(doc, dict) or "edges_area" not in doc:
        return 0, 0
    area = _field(doc, "edges_area", list, "")
    _ints(area, "edges_area")
    if len(area) != 2 or area[0] < 0 or area[1] < 0:
        raise CorruptIndexError(f"the manifest's edges_area is {area!r}, not [length, crc32]")
    return area[0], area[1]


class ManifestText:
    """Encodes manifests as an index file holds them: the edges area, and the
    compact JSON (the keys in :meth:`Manifest.to_json`'s order), keeping the
    text of each variable entry and each listed variable it encoded: a
    followed run's manifest grows by one step's variables at every publish,
    and encoding the whole of it each time (``json.dumps``) cost more than
    the step's indexing once the run was a few hundred steps long. A
    variable is encoded again whenever its entry is another object than the
    one encoded, or its edges moved in the area.

    Examples
    --------
    >>> import json
    >>> m = Manifest(4, "", SourceRecord("a.h5", {"size": 8}), 4, (), (), {})
    >>> area, body = ManifestText().encode(m)
    >>> area == b"" and body == json.dumps(m.to_json(), separators=(",", ":")).encode()
    True
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[VariableEntry, int, str]] = {}
        self._listed: dict[str, tuple[Any, str]] = {}

    def encode(self, manifest: Manifest) -> tuple[bytes, bytes]:
        """``manifest``'s edges area, and its JSON as
        ``json.dumps(manifest.to_json(), separators=(",", ":"))`` encoded."""
        from quarry.formats.listing import variable_json

        area = manifest.edges_area()
        head = manifest.head_json(area)
        entries = manifest.variables.items()
        starts = _starts(manifest.variables.values())
        text = [_compact(head)[:-1], ',"variables":{']
        text.append(
            ",".join(
                f"{_compact(p)}:{self._entry(p, e, at)}"
                for (p, e), at in zip(entries, starts, strict=True)
            )
        )
        text.append("}")
        if manifest.listing is not None:
            listing = manifest.listing
            listed = [(v.path, v) for v in listing.variables]
            about = {"backend": listing.backend, "step_context": listing.step_context}
            text += [',"listing":', _compact(about)[:-1], ',"variables":[']
            text += [",".join(self._kept(listed, variable_json)), "]"]
            after = listing.after_variables_json()
            text += [("," + _compact(after)[1:-1]) if after else "", "}"]
        if manifest.follow is not None:
            text += [',"follow":', _compact(manifest.follow.to_json())]
        text.append("}")
        return area, "".join(text).encode()

    def _entry(self, path: str, entry: VariableEntry, at: int) -> str:
        """The text of ``entry`` with its edges at ``at``, as kept where it is."""
        held = self._entries.get(path)
        if held is None or held[0] is not entry or held[1] != at:
            held = self._entries[path] = (entry, at, _compact(entry.to_json(at)))
        return held[2]

    def _kept(self, items: Iterable[tuple[str, Any]], to_json: Any) -> list[str]:
        """Each listed variable's text, in order, kept where it is the same object."""
        out = []
        for path, item in items:
            held = self._listed.get(path)
            if held is None or held[0] is not item:
                held = self._listed[path] = (item, _compact(to_json(item)))
            out.append(held[1])
        return out


def _compact(doc: Any) -> str:
    import json

    return json.dumps(doc, separators=(",", ":"))
