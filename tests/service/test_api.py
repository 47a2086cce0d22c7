"""The JSON API over real HTTP: every answer equals the local Dataset's and a
NumPy oracle's; errors carry the CLI's messages and fitting status codes."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import h5py
import httpx
import numpy as np
import pyarrow as pa
import pytest
import servers

import quarry
from oracle import oracle_ids
from quarry.service.answers import json_ready

ARROW = "application/vnd.apache.arrow.stream"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("root"))
    columns = servers.particles(os.path.join(root, "run", "p.h5"))
    with quarry.open(os.path.join(root, "run", "p.h5")) as ds:
        ds.build_index(block_len=1024)
    px = servers.steps(os.path.join(root, "steps.h5"))
    catalog = str(tmp_path_factory.mktemp("catalog"))
    config = servers.config(root, catalog, token=servers.TOKEN.encode(), scan_every=0)
    with servers.running(config) as url, httpx.Client(base_url=url, timeout=60) as client:
        yield client, root, columns, px


def _query(client, **body):
    return client.post("/api/v1/query", json={"dataset": "run/p.h5", **body})


def test_the_catalog_lists_every_file_by_its_path_under_the_root(served):
    client, root, _, _ = served
    listed = client.get("/api/v1/datasets").json()["datasets"]
    st = os.stat(os.path.join(root, "run", "p.h5"))
    assert listed == [
        {
            "path": "run/p.h5",
            "format": "hdf5",
            "size": st.st_size,
            "mtime": st.st_mtime_ns / 1e9,
            "indexed": True,
            "fresh": True,
        },
        {
            "path": "steps.h5",
            "format": "hdf5",
            "size": os.path.getsize(os.path.join(root, "steps.h5")),
            "mtime": os.stat(os.path.join(root, "steps.h5")).st_mtime_ns / 1e9,
            "indexed": False,
            "fresh": False,
        },
    ]


def test_a_datasets_variables_are_those_quarry_info_gives(served):
    client, root, _, _ = served
    detail = client.get("/api/v1/datasets/run/p.h5").json()
    with quarry.open(os.path.join(root, "run", "p.h5")) as ds:
        assert detail["variables"] == json_ready(ds.info()["variables"])
    names = {v["name"]: (v["shape"], v["dtype"], v["indexed"]) for v in detail["variables"]}
    assert names["x"] == ([5000], "float32", True)
    assert names["q"] == ([5000], "uint8", True)
    assert detail["index"]["state"] == "fresh"
    assert detail["index"]["path"] == "run/p.h5.qidx"  # under the root, and no more
    assert root not in json.dumps(detail)


QUERIES = [
    "energy > 1.3",
    "energy > 1.3 && x < 10",
    "!(energy < 2) || q == 7",
    "x != x",  # the NaNs
    "2.5 < energy <= 3",
    "id >= 4990",
]


def _oracle(columns, query):
    return oracle_ids(query, columns)


@pytest.mark.parametrize("query", QUERIES)
def test_counts_ids_and_values_equal_the_local_dataset_and_numpy(served, query):
    client, root, columns, _ = served
    expected = _oracle(columns, query)
    assert _query(client, query=query).json() == {"count": len(expected)}
    as_json = _query(client, query=query, output="values", variables=["x", "q"]).json()
    assert as_json["ids"] == expected.tolist()
    assert as_json["values"]["q"] == columns["q"][expected].tolist()
    x = [np.nan if v is None else v for v in as_json["values"]["x"]]
    np.testing.assert_array_equal(np.array(x, np.float32), columns["x"][expected])
    answer = _query(
        client, query=query, output="values", variables=["x", "q", "id"], per_step=False
    )
    assert answer.status_code == 200
    arrow = client.post(
        "/api/v1/query",
        json={"dataset": "run/p.h5", "query": query, "output": "values", "variables": ["x", "id"]},
        headers={"Accept": ARROW},
    )
    assert arrow.headers["content-type"] == ARROW
    table = pa.ipc.open_stream(io.BytesIO(arrow.content)).read_all()
    assert table.column_names == ["quarry_row", "x", "id"]
    assert table.schema.field("x").type == pa.float32()
    np.testing.assert_array_equal(table["quarry_row"].to_numpy(), expected)
    np.testing.assert_array_equal(table["x"].to_numpy(), columns["x"][expected])
    with quarry.open(os.path.join(root, "run", "p.h5")) as ds:
        sel = ds.query(query)
        np.testing.assert_array_equal(table["id"].to_numpy(), sel.values("id"))


def test_ids_alone_as_arrow(served):
    client, _, columns, _ = served
    arrow = client.post(
        "/api/v1/query",
        json={"dataset": "run/p.h5", "query": "energy > 2", "output": "ids"},
        headers={"Accept": f"{ARROW}, application/json"},
    )
    table = pa.ipc.open_stream(io.BytesIO(arrow.content)).read_all()
    assert table.column_names == ["quarry_row"]
    assert int(arrow.headers["x-quarry-count"]) == table.num_rows
    with np.errstate(invalid="ignore"):
        expected = np.flatnonzero(columns["energy"] > 2)
    np.testing.assert_array_equal(table["quarry_row"].to_numpy(), expected)


@pytest.mark.parametrize(
    ("accept", "arrow"),
    [
        (f"{ARROW};q=0, application/json", False),  # q=0: not acceptable
        (f"application/json;q=0.5, {ARROW};q=0.1", False),
        (f"{ARROW};q=0.8, application/json;q=0.5", True),
        ("*/*", False),
        (f"*/*, {ARROW}", True),
    ],
)
def test_the_accept_headers_qualities_choose_arrow_or_json(served, accept, arrow):
    """README: Arrow where the request's Accept header prefers it; q=0 refused Arrow
    and a higher quality for JSON were ignored."""
    client, _, _, _ = served
    answer = client.post(
        "/api/v1/query",
        json={"dataset": "run/p.h5", "query": "energy > 2", "output": "ids"},
        headers={"Accept": accept},
    )
    assert answer.status_code == 200
    assert answer.headers["content-type"] == (ARROW if arrow else "application/json")


def test_per_step_counts_of_a_series_and_its_hits_per_step(served):
    client, _, _, px = served
    body = {"dataset": "steps.h5", "query": "px > 1.5", "per_step": True}
    answer = client.post("/api/v1/query", json=body).json()
    counts = [int(np.count_nonzero(p > 1.5)) for p in px]
    assert answer == {
        "count": sum(counts),
        "per_step": [{"file": "steps.h5", "step": k, "count": c} for k, c in enumerate(counts)],
    }
    plain = client.post("/api/v1/query", json={**body, "dataset": "run/p.h5", "query": "q < 3"})
    assert plain.json()["per_step"] == [
        {"file": "run/p.h5", "step": None, "count": plain.json()["count"]}
    ]
    body = {"dataset": "steps.h5", "query": "px > 1.5", "output": "values", "variables": "px"}
    arrow = client.post("/api/v1/query", json=body, headers={"Accept": ARROW})
    table = pa.ipc.open_stream(io.BytesIO(arrow.content)).read_all()
    for k, p in enumerate(px):
        mine = table.filter(pa.compute.equal(table["quarry_step"], k))
        np.testing.assert_array_equal(mine["quarry_row"].to_numpy(), np.flatnonzero(p > 1.5))
        np.testing.assert_array_equal(mine["px"].to_numpy(), p[p > 1.5])
    as_json = client.post("/api/v1/query", json=body).json()
    assert [m["ids"] for m in as_json["per_step"]] == [np.flatnonzero(p > 1.5).tolist() for p in px]


def test_histograms_equal_numpys(served):
    client, _, columns, px = served
    energy, x = columns["energy"], columns["x"]
    with np.errstate(invalid="ignore"):
        chosen = energy[(x > 0) & ~np.isnan(energy)]
    body = {"dataset": "run/p.h5", "variables": ["energy"], "where": "x > 0", "bins": 7}
    answer = client.post("/api/v1/histogram", json=body).json()
    counts, edges = np.histogram(chosen, bins=7)
    assert answer["counts"] == counts.tolist()
    np.testing.assert_allclose(answer["edges"], edges, rtol=0, atol=0)
    body = {"dataset": "run/p.h5", "variables": "q", "edges": [0, 10, 50, 199.5]}
    assert client.post("/api/v1/histogram", json=body).json()["counts"] == (
        np.histogram(columns["q"], bins=[0, 10, 50, 199.5])[0].tolist()
    )
    body = {"dataset": "run/p.h5", "variables": "q", "bins": 4, "range": [10, 20]}
    assert client.post("/api/v1/histogram", json=body).json()["counts"] == (
        np.histogram(columns["q"], bins=4, range=(10, 20))[0].tolist()
    )
    body = {"dataset": "steps.h5", "variables": "px", "where": "px > 0", "bins": 5}
    every = np.concatenate([p[p > 0] for p in px])
    assert client.post("/api/v1/histogram", json=body).json()["counts"] == (
        np.histogram(every, bins=5)[0].tolist()
    )


@pytest.mark.parametrize(
    ("route", "body", "said"),
    [
        ("histogram", {"variables": "energy", "query": "x > 1"}, "unknown field 'query' (this"),
        (
            "query",
            {"query": "x > 1", "outptu": "ids"},
            "unknown field 'outptu' (did you mean 'output'?)",
        ),
        ("query", {"query": "x > 1", "path": "Step#0"}, "unknown field 'path' ("),
    ],
)
def test_a_field_the_request_does_not_take_is_a_400_not_ignored(served, route, body, said):
    """A slip answered a different question: a histogram's 'query' (for 'where')
    binned every row, 'path' (the command line's, for 'context') summed every step."""
    client, _, _, _ = served
    answer = client.post(f"/api/v1/{route}", json={"dataset": "run/p.h5", **body})
    assert answer.status_code == 400 and answer.json()["error"].startswith(said), answer.text


def test_a_bad_query_is_a_400_with_the_message_and_caret_the_cli_prints(served):
    client, root, _, _ = served
    answer = _query(client, query="energy > (1 +")
    assert answer.status_code == 400
    cli = subprocess.run(
        [sys.executable, "-m", "quarry.cli.main", "query", "run/p.h5", "energy > (1 +"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert cli.returncode == 2
    assert cli.stderr == f"quarry: error in query: {answer.json()['error']}\n"
    assert answer.json()["error"].endswith("^")
    assert (answer.json()["query"], answer.json()["position"]) == ("energy > (1 +", 13)


def test_unknown_datasets_and_variables_are_404_and_name_only_the_catalog_path(served):
    client, root, _, _ = served
    missing = _query(client, query="nothing > 1")
    assert missing.status_code == 404
    assert "no variable 'nothing' in run/p.h5" in missing.json()["error"]
    assert root not in missing.text
    answer = client.post("/api/v1/query", json={"dataset": "run/none.h5", "query": "x > 1"})
    assert (answer.status_code, answer.json()) == (
        404,
        {"error": "no dataset 'run/none.h5' in the catalog"},
    )
    assert client.get("/api/v1/datasets/run/none.h5").status_code == 404
    assert client.get("/api/v1/nothing").json() == {"error": "no such page"}


def test_the_openapi_document_describes_every_route(served):
    from quarry.service.app import ROUTES

    client, _, _, _ = served
    doc = client.get("/api/v1/openapi.json").json()
    routes = {
        (r.path.replace("{path:path}", "{path}"), m.lower())
        for r in ROUTES
        if r.path.startswith("/api/")
        for m in r.methods or ()
        if m != "HEAD"
    }
    described = {(p, m) for p, item in doc["paths"].items() for m in item}
    assert described == routes


def test_a_stale_index_is_a_409_until_it_is_rebuilt_by_a_job(tmp_path):
    root = str(tmp_path / "root")
    path = os.path.join(root, "p.h5")
    columns = servers.particles(path, n=3000)
    with quarry.open(path) as ds:
        ds.build_index()
    with h5py.File(path, "r+") as f:
        f["energy"][0] = 99.0
    columns["energy"][0] = 99.0
    config = servers.config(root, str(tmp_path), token=servers.TOKEN.encode(), scan_every=0)
    with servers.running(config) as url, httpx.Client(base_url=url, timeout=60) as client:
        assert client.get("/api/v1/datasets").json()["datasets"][0]["fresh"] is False
        stale = client.post("/api/v1/query", json={"dataset": "p.h5", "query": "energy > 3"})
        assert stale.status_code == 409
        assert "has changed since it was indexed" in stale.json()["error"]
        # what a client can do: the CLI's command would run on the server
        assert stale.json()["error"].endswith(
            'rebuild it with POST /api/v1/index {"dataset": "p.h5"}'
        )
        auth = {"Authorization": f"Bearer {servers.TOKEN}"}
        job = client.post("/api/v1/index", json={"dataset": "p.h5"}, headers=auth)
        assert job.status_code == 202
        done = client.get(f"/api/v1/jobs/{job.json()['job']}", params={"wait": 60}).json()
        assert (done["state"], done["result"]) == ("done", {"status": "built"})
        assert client.get("/api/v1/datasets").json()["datasets"][0]["fresh"] is True
        fresh = client.post("/api/v1/query", json={"dataset": "p.h5", "query": "energy > 3"})
        with np.errstate(invalid="ignore"):
            assert fresh.json() == {"count": int(np.count_nonzero(columns["energy"] > 3))}
        again = client.post("/api/v1/index", json={"dataset": "p.h5"}, headers=auth).json()
        ended = client.get(f"/api/v1/jobs/{again['job']}", params={"wait": 60}).json()
        assert ended["result"] == {"status": "up to date"}
    # The jobs outlive the server: a restart still answers their ids.
    with servers.running(config) as url, httpx.Client(base_url=url, timeout=60) as client:
        kept = client.get(f"/api/v1/jobs/{job.json()['job']}").json()
        assert (kept["state"], kept["dataset"]) == ("done", "p.h5")
        assert client.get("/api/v1/jobs/unknown").status_code == 404


def test_a_file_a_writer_holds_locked_is_a_409_not_a_500(tmp_path):
    """README: HDF5 refuses to open a file another process holds open for writing:
    the request gets a 409 saying so (try again), not 'the server failed'."""
    root = str(tmp_path / "root")
    path = os.path.join(root, "p.h5")
    columns = servers.particles(path, n=3000)
    config = servers.config(root, str(tmp_path), token=servers.TOKEN.encode(), scan_every=0)
    hold = (
        "import h5py, sys, time\n"
        "f = h5py.File(sys.argv[1], 'r+')\n"
        "print('held', flush=True)\n"
        "sys.stdin.read()\n"
    )
    with servers.running(config) as url, httpx.Client(base_url=url, timeout=60) as client:
        writer = subprocess.Popen(
            [sys.executable, "-c", hold, path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert writer.stdout is not None and writer.stdout.readline() == "held\n"
            held = client.post("/api/v1/query", json={"dataset": "p.h5", "query": "energy > 3"})
            assert held.status_code == 409, held.text
            assert held.json()["error"].startswith("p.h5 cannot be read now (")
            assert "a program may be writing it; try again when it is done" in held.json()["error"]
        finally:
            writer.communicate("")
        done = client.post("/api/v1/query", json={"dataset": "p.h5", "query": "energy > 3"})
        with np.errstate(invalid="ignore"):
            assert done.json() == {"count": int(np.count_nonzero(columns["energy"] > 3))}
