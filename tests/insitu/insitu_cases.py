"""Shared pieces of the in-situ tests: generated steps, and comparing two
index files byte for byte but for the moment each took its fingerprint."""

import json
import struct

import numpy as np

_TRAILER = struct.Struct("<QQII8s")

DTYPES = ["<f4", "<f8", "<i4", "<u2", "<i8", ">f8", "bool", "<f2"]


def step_arrays(rng: np.random.Generator, step: int, size: int) -> dict[str, np.ndarray]:
    """One step of particles: several dtypes, NaNs in the floats, a size
    that no block length here divides."""
    out = {}
    for k, dtype in enumerate(DTYPES):
        kind = np.dtype(dtype).kind
        if kind == "b":
            values = rng.random(size) < 0.3
        elif kind == "f":
            values = (rng.normal(step, 2.0, size)).astype(dtype)
            values[rng.random(size) < 0.05] = np.nan
        else:
            info = np.iinfo(dtype)
            values = rng.integers(max(info.min, -1000), min(info.max, 1000), size, dtype=dtype)
        out[f"v{k}"] = values
    return out


def split(path: str) -> tuple[bytes, dict]:
    """An index file's bytes before its manifest, and the manifest."""
    with open(path, "rb") as f:
        data = f.read()
    offset, length, _, _, _ = _TRAILER.unpack(data[-_TRAILER.size :])
    return data[:offset], json.loads(data[offset : offset + length])


def assert_same_index(made: str, built: str) -> None:
    """``made`` is ``built`` byte for byte, but for ``source.read_ns``."""
    made_blocks, made_manifest = split(made)
    built_blocks, built_manifest = split(built)
    assert made_blocks == built_blocks
    assert made_manifest["source"].pop("read_ns") > 0
    built_manifest["source"].pop("read_ns")
    assert json.dumps(made_manifest) == json.dumps(built_manifest)
