"""What a hostile or careless client meets: paths that try to leave the roots,
writes without the token, answers and bodies past the limits, slow queries,
malformed JSON, wrong types, huge numbers, and Unicode everywhere."""

from __future__ import annotations

import http.client
import itertools
import json
import os
import urllib.parse

import h5py
import httpx
import numpy as np
import pytest
import servers

from quarry.service.config import Limits

SECRET = "TOP-SECRET-VARIABLE"


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A root with a file, a Unicode file and a symlink out; a file outside."""
    base = tmp_path_factory.mktemp("tree")
    outside = base / "outside"
    outside.mkdir()
    with h5py.File(outside / "secret.h5", "w") as f:
        f[SECRET] = np.arange(10.0)
    root = base / "root"
    (root / "run").mkdir(parents=True)
    columns = servers.particles(str(root / "run" / "p.h5"), n=2000)
    (root / "ünï").mkdir()
    with h5py.File(root / "ünï" / "énergie.h5", "w") as f:
        f["énergie"] = np.linspace(0, 3, 301)
    (root / "link.h5").symlink_to(outside / "secret.h5")
    (root / "up").symlink_to(outside, target_is_directory=True)
    return str(root), str(outside), columns


@pytest.fixture(scope="module")
def served(tree, tmp_path_factory):
    root, outside, columns = tree
    catalog = str(tmp_path_factory.mktemp("catalog"))
    limits = Limits(body_bytes=100_000, rows=500, result_bytes=5_000)
    config = servers.config(
        root, catalog, token=servers.TOKEN.encode(), limits=limits, scan_every=0
    )
    with servers.running(config) as url, httpx.Client(base_url=url, timeout=60) as client:
        yield client, url, root, outside, columns


def _raw(url: str, method: str, target: str, body: bytes | None = None) -> tuple[int, bytes]:
    """A request sent with ``target`` exactly as written (no client normalises it)."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    conn.request(method, target, body=body, headers={"Content-Type": "application/json"})
    answer = conn.getresponse()
    out = answer.status, answer.read()
    conn.close()
    return out


@pytest.mark.parametrize(
    "target",
    [
        "/api/v1/datasets/../../outside/secret.h5",
        "/api/v1/datasets/..%2F..%2Foutside%2Fsecret.h5",
        "/api/v1/datasets/%2e%2e/%2e%2e/outside/secret.h5",
        "/api/v1/datasets/run/%2e%2e%2f%2e%2e%2f..%2foutside/secret.h5",
        "/api/v1/datasets//etc/passwd",
        "/api/v1/datasets/%2Fetc%2Fpasswd",
        "/api/v1/datasets/link.h5",
        "/api/v1/datasets/up/secret.h5",
        "/api/v1/datasets/run/p.h5%00.txt",
    ],
)
def test_paths_that_leave_the_root_are_404_with_nothing_of_what_lies_there(served, target):
    _, url, _, outside, _ = served
    status, body = _raw(url, "GET", target)
    assert status == 404
    assert SECRET.encode() not in body and b"root:" not in body
    assert outside.encode() not in body


@pytest.mark.parametrize(
    "dataset",
    [
        "../outside/secret.h5",
        "run/../../outside/secret.h5",
        "link.h5",
        "up/secret.h5",
        "/etc/passwd",
    ],
)
def test_a_query_naming_a_path_out_of_the_root_is_404(served, dataset):
    client, _, _, outside, _ = served
    absolute = dataset if dataset.startswith("/") else os.path.join(outside, "secret.h5")
    for name in (dataset, absolute):
        answer = client.post("/api/v1/query", json={"dataset": name, "query": f"`{SECRET}` > 1"})
        assert answer.status_code == 404
        assert answer.json() == {"error": f"no dataset {name!r} in the catalog"}


def test_a_file_swapped_for_a_symlink_out_after_the_scan_is_404(tree, tmp_path):
    _, outside, _ = tree
    mine = tmp_path / "root"
    mine.mkdir()
    with h5py.File(mine / "swap.h5", "w") as f:
        f["x"] = np.arange(5.0)
    config = servers.config(str(mine), str(tmp_path), scan_every=0)
    with servers.running(config) as url, httpx.Client(base_url=url, timeout=60) as client:
        body = {"dataset": "swap.h5", "query": "x > 1"}
        assert client.post("/api/v1/query", json=body).json() == {"count": 3}
        os.remove(mine / "swap.h5")
        (mine / "swap.h5").symlink_to(os.path.join(outside, "secret.h5"))
        answer = client.post("/api/v1/query", json={**body, "query": f"`{SECRET}` > 1"})
        assert (answer.status_code, answer.json()) == (
            404,
            {"error": "no dataset 'swap.h5' in the catalog"},
        )


def test_writes_need_the_bearer_token_and_are_disabled_without_a_token_file(served, tmp_path):
    client, _, root, _, _ = served
    body = {"dataset": "run/p.h5"}
    for headers, status in [
        ({}, 401),
        ({"Authorization": "Basic czNjcmV0"}, 401),
        ({"Authorization": "Bearer"}, 401),
        ({"Authorization": "Bearer s3cret-toke"}, 403),
        ({"Authorization": f"Bearer {servers.TOKEN}x"}, 403),
        ({"Authorization": "Bearer ünïcode".encode()}, 403),
    ]:
        for path in ("/api/v1/index", "/api/v1/rescan"):
            answer = client.post(path, json=body, headers=headers)
            assert answer.status_code == status, (headers, path)
            if status == 401:
                assert answer.headers["www-authenticate"] == "Bearer"
    right = {"Authorization": f"Bearer {servers.TOKEN}"}
    assert client.post("/api/v1/rescan", headers=right).json()["datasets"] == 2
    config = servers.config(root, str(tmp_path), scan_every=0)
    with servers.running(config) as url, httpx.Client(base_url=url, timeout=60) as other:
        refused = other.post("/api/v1/index", json=body, headers=right)
        assert (refused.status_code, refused.json()) == (
            403,
            {"error": "writes are disabled: the server was started without --token-file"},
        )
        assert other.post("/api/v1/rescan", headers=right).status_code == 403


def test_bodies_and_answers_past_the_limits_are_413_and_counts_still_answer(served):
    client, _, _, _, columns = served
    big = {"dataset": "run/p.h5", "query": "x > 1" + " " * 100_001}
    assert client.post("/api/v1/query", json=big).status_code == 413
    chunks = (b" " * 10_000 for _ in range(20))  # no Content-Length: read until the limit
    json_type = {"Content-Type": "application/json"}
    assert client.post("/api/v1/query", content=chunks, headers=json_type).status_code == 413
    many = {"dataset": "run/p.h5", "query": "q < 100", "output": "ids"}
    expected = int(np.count_nonzero(columns["q"] < 100))
    assert expected > 500
    refused = client.post("/api/v1/query", json=many)
    assert refused.status_code == 413
    assert f"the answer holds {expected} rows" in refused.json()["error"]
    assert "quarry query --out" in refused.json()["error"]
    count = client.post("/api/v1/query", json={**many, "output": "count"})
    assert count.json() == {"count": expected}
    bytes_limited = {**many, "query": "q < 30", "output": "values", "variables": ["x", "q", "id"]}
    assert 5_000 / 32 < np.count_nonzero(columns["q"] < 30) <= 500
    assert client.post("/api/v1/query", json=bytes_limited).status_code == 413
    small = {**bytes_limited, "query": "q < 2"}
    assert client.post("/api/v1/query", json=small).status_code == 200


def test_a_query_past_the_time_limit_is_504(tree, tmp_path):
    root, _, _ = tree
    limits = Limits(query_seconds=1e-9)
    config = servers.config(root, str(tmp_path), limits=limits, scan_every=0)
    with servers.running(config) as url, httpx.Client(base_url=url, timeout=60) as client:
        answer = client.post("/api/v1/query", json={"dataset": "run/p.h5", "query": "x*x > 1"})
        assert answer.status_code == 504
        assert "took longer than this server allows" in answer.json()["error"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{", "the request body is not valid JSON"),
        (b"[1, 2]", "must be a JSON object, not a list"),
        (b'{"dataset": "run/p.h5", "query": NaN}', "NaN is not JSON"),
        (b"\xff\xfe{}", "not UTF-8 text"),
        # A lone surrogate, which JSON's escapes allow: a 500 when the 400 echoed it.
        (b'{"dataset": "run/p.h5", "query": "x > 1 && \\ud800 > 1"}', "a lone surrogate"),
        (b'{"dataset": "run/p.h5", "where": "\\udfff", "variables": "x"}', "a lone surrogate"),
        (b"[" * 50_000 + b"]" * 50_000, "not valid JSON"),
        (b'{"dataset": "run/p.h5", "query": 5}', "'query' must be a string, not int"),
        (b'{"dataset": ["run/p.h5"], "query": "x > 1"}', "'dataset' must be a string"),
        (b'{"dataset": "run/p.h5"}', "the request needs 'query'"),
        (b'{"dataset": "run/p.h5", "query": "x > 1", "output": "all"}', "'output' must be one"),
        (b'{"dataset": "run/p.h5", "query": "x > 1", "per_step": "yes"}', "'per_step' must be"),
        (b'{"dataset": "run/p.h5", "query": "x > 1", "output": "values"}', "needs 'variables'"),
        (
            b'{"dataset": "run/p.h5", "query": "x > 1", "output": "values", "variables": [1]}',
            "'variables' must be a name or a list of names",
        ),
        (b'{"dataset": "run/p.h5", "query": "x > ' + b"9" * 5000 + b'"}', "4,300 digits"),
        (b'{"dataset": "run/p.h5", "query": ' + b"9" * 5000 + b"}", "not valid JSON"),
    ],
)
def test_malformed_bodies_and_wrong_types_are_400_saying_what_is_wrong(served, body, message):
    _, url, _, _, _ = served
    status, answer = _raw(url, "POST", "/api/v1/query", body)
    assert status == 400
    assert message in json.loads(answer)["error"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"bins": 10**400}, "'bins' must be a whole number from 1 to 100000"),
        ({"bins": 0}, "'bins' must be a whole number"),
        ({"bins": True}, "'bins' must be a whole number"),
        ({"bins": 2.5}, "'bins' must be a whole number"),
        ({"edges": [0, 10**400]}, "too large for a float"),
        ({"edges": [0]}, "'edges' must be a list of 2"),
        ({"edges": [2, 1]}, "must increase monotonically"),
        ({"range": [0]}, "'range' must be [low, high]"),
        ({"range": ["a", 1]}, "'range' must hold numbers"),
        ({"variables": []}, "one to three variables"),
        ({"variables": ["x", "q", "id", "energy"]}, "one to three variables"),
    ],
)
def test_histogram_fields_out_of_range_are_400(served, fields, message):
    client, _, _, _, _ = served
    body = {"dataset": "run/p.h5", "variables": "x", **fields}
    answer = client.post("/api/v1/histogram", json=body)
    assert answer.status_code == 400, answer.text
    assert message in answer.json()["error"]


def test_numbers_json_cannot_hold_as_floats_are_400(served):
    _, url, _, _, _ = served
    body = b'{"dataset": "run/p.h5", "variables": "x", "edges": [0, 1e400]}'
    status, answer = _raw(url, "POST", "/api/v1/histogram", body)
    assert (status, json.loads(answer)) == (400, {"error": "'edges' must hold finite numbers"})


def test_unicode_paths_names_and_queries(served):
    client, url, _, _, _ = served
    paths = [d["path"] for d in client.get("/api/v1/datasets").json()["datasets"]]
    assert paths == ["run/p.h5", "ünï/énergie.h5"]
    status, body = _raw(url, "GET", "/api/v1/datasets/" + urllib.parse.quote("ünï/énergie.h5"))
    assert status == 200
    assert [v["name"] for v in json.loads(body)["variables"]] == ["énergie"]
    energy = np.linspace(0, 3, 301)
    body = {"dataset": "ünï/énergie.h5", "query": "énergie > 2"}
    answer = client.post("/api/v1/query", json=body)
    assert answer.json() == {"count": int(np.count_nonzero(energy > 2))}
    bad = client.post("/api/v1/query", json={"dataset": "ünï/énergie.h5", "query": "énergie > 🚀"})
    assert bad.status_code == 400
    assert bad.json()["error"].splitlines()[-1].endswith("^")
    unknown = client.post("/api/v1/query", json={"dataset": "ünï/énergie.h5", "query": "ωmega > 1"})
    assert unknown.status_code == 404
    assert "'ωmega'" in unknown.json()["error"]
    for name in ("a\u0000.h5", "ünï/\udcff.h5", "ünï/énergie.h5\n"):
        status, _ = _raw(
            url, "POST", "/api/v1/query", json.dumps({"dataset": name, "query": "x > 1"}).encode()
        )
        assert status == (400 if "\udcff" in name else 404)  # a lone surrogate is no text


def test_builds_run_one_at_a_time(tree, tmp_path):
    mine = tmp_path / "root"
    for k in range(3):
        servers.particles(str(mine / f"f{k}.h5"), n=20_000, seed=k)
    config = servers.config(
        str(mine),
        str(tmp_path),
        token=servers.TOKEN.encode(),
        limits=Limits(builds=1),
        scan_every=0,
    )
    right = {"Authorization": f"Bearer {servers.TOKEN}"}
    with servers.running(config) as url, httpx.Client(base_url=url, timeout=60) as client:
        jobs = [
            client.post("/api/v1/index", json={"dataset": f"f{k}.h5"}, headers=right).json()["job"]
            for k in range(3)
        ]
        ended = [client.get(f"/api/v1/jobs/{j}", params={"wait": 60}).json() for j in jobs]
    assert [j["state"] for j in ended] == ["done"] * 3
    spans = sorted((j["started"], j["finished"]) for j in ended)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
