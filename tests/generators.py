"""Random data for the property tests: shapes, columns of every dtype, files."""

from __future__ import annotations

import h5py
import numpy as np
from hypothesis import strategies as st

DTYPES = ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "f8"]
NAMES = ["a", "b", "c"]


@st.composite
def shapes(draw):
    rank = draw(st.integers(1, 4))
    dims = draw(st.lists(st.integers(0 if rank == 1 else 1, 9), min_size=rank, max_size=rank))
    if rank == 1:
        dims = [draw(st.sampled_from([0, 1, 2, 7, 63, 64, 65, 257, 1000, 2049]))]
    return tuple(dims)


def column(draw, dtype: str, size: int) -> np.ndarray:
    dt = np.dtype(dtype)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if dt.kind == "f":
        style = draw(st.sampled_from(["normal", "few", "wide"]))
        if style == "normal":
            v = rng.normal(0, 10, size)
        elif style == "few":
            v = rng.choice([-1.5, 0.0, 0.1, 2.0, 1e30], size)
        else:
            v = rng.standard_cauchy(size) * 1e3
        v = v.astype(dt)
        if size and draw(st.booleans()):
            v[rng.random(size) < 0.1] = np.nan
        if size and draw(st.booleans()):
            v[rng.integers(0, size)] = np.inf
            v[rng.integers(0, size)] = -np.inf
        return v
    info = np.iinfo(dt)
    style = draw(st.sampled_from(["small", "full", "extremes"]))
    if style == "small":
        lo = max(info.min, -20)
        return rng.integers(lo, lo + 40, size, endpoint=False).astype(dt)
    if style == "full":
        return rng.integers(info.min, info.max, size, dtype=dt, endpoint=True)
    return rng.choice(np.array([info.min, info.min + 1, 0, info.max - 1, info.max], dtype=dt), size)


def write(path: str, data: dict[str, np.ndarray], storage: str) -> None:
    with h5py.File(path, "w") as f:
        for name, values in data.items():
            kw: dict = {}
            if storage != "contiguous" and values.size:
                kw["chunks"] = tuple(max(1, s // 2) for s in values.shape)
                if storage == "gzip":
                    kw["compression"] = "gzip"
            f.create_dataset(f"group/{name}", data=values, **kw)
