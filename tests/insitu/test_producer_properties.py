"""Property: for any steps of any dtype and shape (NaNs, infinities, integer
extremes, sizes no block length divides), the in-situ index is the one
``quarry index`` builds afterwards, and its answers are NumPy's."""

import os
import tempfile

import h5py
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from insitu_cases import assert_same_index

import quarry
from generators import DTYPES, column, shapes
from oracle import oracle_ids


@st.composite
def runs(draw):
    steps = draw(st.integers(1, 12))
    names = draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True))
    dtypes = {n: draw(st.sampled_from(DTYPES)) for n in names}
    data = []
    for _ in range(steps):
        shape = draw(shapes())
        size = int(np.prod(shape))
        data.append({n: column(draw, dtypes[n], size).reshape(shape) for n in names})
    return data


@settings(max_examples=25)
@given(data=runs(), block_len=st.sampled_from([1, 7, 64, 1000]), cut=st.floats(-5, 5))
def test_in_situ_index_is_the_build_afterwards(data, block_len, cut):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "run.h5")
        with (
            quarry.InSituIndexer(path, block_len=block_len, bins=16, batch_steps=3) as ix,
            h5py.File(path, "w") as f,
        ):
            for step, arrays in enumerate(data):
                for name, values in arrays.items():
                    f.create_dataset(f"Step#{step}/{name}", data=values)
                ix.add(step, arrays)
        after = os.path.join(d, "after.qidx")
        with quarry.open(path, index=after) as ds:
            ds.build_index(block_len=block_len, bins=16)
        assert_same_index(path + ".qidx", after)
        name = sorted(data[0])[0]
        query = f"{name} > {cut!r}"
        with quarry.open_series(path) as series:
            got = [part.ids().tolist() for part in series.query(query).selections]
        want = [oracle_ids(query, {k: v.reshape(-1) for k, v in s.items()}).tolist() for s in data]
        assert got == want
