"""Answers through a server equal the local Dataset's where a probe found they
did not: variables named like Quarry's own Arrow columns, step groups whose
numbers are alike, a histogram of one variable against itself, bins a local
histogram takes; and the refusals that name what a client can do (an unknown
variable whatever the answer's size, a damaged index)."""

from __future__ import annotations

import io
import json
import os

import h5py
import httpx
import numpy as np
import pyarrow as pa
import pytest
import servers

import quarry
from quarry.errors import HistogramError
from quarry.service.config import Limits

ARROW = "application/vnd.apache.arrow.stream"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("root"))
    rng = np.random.default_rng(4)
    with h5py.File(os.path.join(root, "flat.h5"), "w") as f:
        f["quarry_row"] = rng.integers(0, 100, 501)
        f["e"] = rng.normal(size=501)
    with h5py.File(os.path.join(root, "steps.h5"), "w") as f:
        for step, n in (("1", 37), ("01", 41), ("2", 43)):
            f[f"Step#{step}/e"] = rng.normal(size=n)
            f[f"Step#{step}/quarry_step"] = rng.normal(size=n)
    with h5py.File(os.path.join(root, "damaged.h5"), "w") as f:
        f["e"] = np.arange(100_000.0)
    with quarry.open(os.path.join(root, "damaged.h5")) as ds:
        ds.build_index(block_len=10_000)
    with open(os.path.join(root, "damaged.h5.qidx"), "r+b") as index:
        index.seek(os.fstat(index.fileno()).st_size // 3)
        byte = index.read(1)[0]
        index.seek(-1, os.SEEK_CUR)
        index.write(bytes([byte ^ 0xFF]))
    catalog = str(tmp_path_factory.mktemp("catalog"))
    limits = Limits(rows=100)
    config = servers.config(
        root, catalog, token=servers.TOKEN.encode(), scan_every=0, limits=limits
    )
    with servers.running(config) as url, httpx.Client(base_url=url, timeout=60) as client:
        yield url, client, root


def _same(remote, local):
    if isinstance(local, list):
        assert len(remote) == len(local)
        for r, m in zip(remote, local, strict=True):
            np.testing.assert_array_equal(r, m)
    else:
        np.testing.assert_array_equal(remote, local)


@pytest.mark.parametrize(
    ("file", "query", "name"),
    [("flat.h5", "e > 1", "quarry_row"), ("steps.h5", "e > 1", "quarry_step")],
)
def test_variables_named_like_quarrys_columns_and_alike_step_numbers(served, file, query, name):
    url, client, root = served
    remote = quarry.connect(url).open(file).query(query)
    with quarry.open(os.path.join(root, file)) as ds:
        local = ds.query(query)
        _same(remote.ids(), local.ids())
        _same(remote.values(name), local.values(name))
        _same(remote.values("e"), local.values("e"))
    body = {"dataset": file, "query": query, "output": "values", "variables": [name]}
    answer = client.post("/api/v1/query", json=body, headers={"Accept": ARROW})
    table = pa.ipc.open_stream(io.BytesIO(answer.content)).read_all()
    assert f"{name}_" in table.column_names and name in table.column_names


def test_a_histogram_of_one_variable_against_itself_is_two_dimensional(served):
    url, _, root = served
    remote = quarry.connect(url).open("flat.h5").histogram(["e", "e"], bins=3)
    with quarry.open(os.path.join(root, "flat.h5")) as ds:
        local = ds.histogram(["e", "e"], bins=3)
    assert remote.counts.shape == (3, 3)
    np.testing.assert_array_equal(remote.counts, local.counts)


def test_the_client_takes_the_bins_a_local_histogram_takes(served):
    url, client, root = served
    remote = quarry.connect(url).open("flat.h5")
    with quarry.open(os.path.join(root, "flat.h5")) as ds:
        for bins in (np.array([-1.0, 0.0, 2.5]), "auto", "sturges", np.int64(4)):
            np.testing.assert_array_equal(
                remote.histogram("e", bins=bins).counts, ds.histogram("e", bins=bins).counts
            )
        with pytest.raises(HistogramError, match="estimators bin one variable, not 2"):
            ds.histogram(["e", "quarry_row"], bins="fd")
    for bins, variables in (("fdd", ["e"]), ("fd", ["e", "quarry_row"])):
        refused = client.post(
            "/api/v1/histogram", json={"dataset": "flat.h5", "variables": variables, "bins": bins}
        )
        assert refused.status_code == 400 and "NumPy's estimators" in refused.json()["error"]


def test_an_unknown_variable_is_404_whatever_the_answers_size(served):
    _, client, _ = served
    for query in ("e > 2", "e > -10"):  # under and over the server's 100 rows
        body = {"dataset": "flat.h5", "query": query, "output": "values", "variables": ["ee"]}
        refused = client.post("/api/v1/query", json=body)
        assert refused.status_code == 404 and "did you mean e?" in refused.json()["error"]
    body = {"dataset": "flat.h5", "query": "e > 2", "output": "ids", "variables": ["e"]}
    refused = client.post("/api/v1/query", json=body)
    assert refused.status_code == 400 and "'variables' goes with" in refused.json()["error"]


def test_a_damaged_index_is_409_naming_the_forced_rebuild_which_mends_it(served):
    _, client, _ = served
    body = {"dataset": "damaged.h5", "query": "e > 5"}
    # The scan saw a fresh stat; the damage is found by the first request to read it.
    assert client.get("/api/v1/datasets/damaged.h5").json()["index"]["state"] == "fresh"
    refused = client.post("/api/v1/query", json=body)
    said = 'rebuild it with POST /api/v1/index {"dataset": "damaged.h5", "force": true}'
    assert refused.status_code == 409 and said in refused.json()["error"]
    # ... and the catalog says so from then on, rescanned or not.
    for rescan in (False, True):
        if rescan:
            auth = {"Authorization": f"Bearer {servers.TOKEN}"}
            assert client.post("/api/v1/rescan", headers=auth).status_code == 200
        detail = client.get("/api/v1/datasets/damaged.h5").json()
        assert (detail["fresh"], detail["indexed"], detail["index"]["state"]) == (
            False,
            False,
            "damaged",
        )
        assert "damaged.h5.qidx" in detail["index"]["error"]
    auth = {"Authorization": f"Bearer {servers.TOKEN}"}
    job = client.post(
        "/api/v1/index", json={"dataset": "damaged.h5", "force": True}, headers=auth
    ).json()["job"]
    done = client.get(f"/api/v1/jobs/{job}", params={"wait": 60}).json()
    assert done["state"] == "done", json.dumps(done)
    assert client.post("/api/v1/query", json=body).json() == {"count": 99_994}
    assert client.get("/api/v1/datasets/damaged.h5").json()["index"]["state"] == "fresh"


def test_an_estimators_bins_past_the_servers_most_are_413_and_a_grid_of_counts_is_not(
    tmp_path,
):
    root = tmp_path / "root"
    root.mkdir()
    with h5py.File(root / "w.h5", "w") as f:
        f["e"] = np.random.default_rng(2).normal(size=5000)
        f["f"] = np.random.default_rng(3).normal(size=5000)
    config = servers.config(str(root), str(tmp_path), scan_every=0, limits=Limits(bins=20))
    with servers.running(config) as url, httpx.Client(base_url=url, timeout=60) as client:
        body = {"dataset": "w.h5", "variables": ["e"], "bins": "sqrt"}  # 71 bins
        refused = client.post("/api/v1/histogram", json=body)
        assert refused.status_code == 413 and "made 71 bins" in refused.json()["error"]
        grid = {"dataset": "w.h5", "variables": ["e", "f"], "bins": 20}  # 400 cells, 20 a side
        assert client.post("/api/v1/histogram", json=grid).status_code == 200
