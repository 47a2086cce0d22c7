"""What bounds the server's work: worker threads, past their time limit, stay
counted until they really end; when all are such, requests are refused (503)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import h5py
import httpx
import numpy as np
import servers

from quarry.service.app import ARROW
from quarry.service.config import Limits

#: Many OR'd arithmetic terms: no index answers them, each is a full scan.
SLOW = " or ".join(f"x*y*z + {k}*x > {1000 + k}" for k in range(300))


def _working() -> list[threading.Thread]:
    """The threads now inside quarry work (answers.run_guarded)."""
    frames = sys._current_frames()
    found = []
    for thread in threading.enumerate():
        frame = frames.get(thread.ident or -1)
        while frame is not None:
            if frame.f_code.co_name == "run_guarded":
                found.append(thread)
                break
            frame = frame.f_back
    return found


def test_slow_queries_past_their_time_hold_their_worker_until_they_end(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    rng = np.random.default_rng(0)
    with h5py.File(root / "big.h5", "w") as f:
        for name in "xyz":
            f[name] = rng.normal(size=2_000_000)
    with h5py.File(root / "small.h5", "w") as f:
        f["x"] = np.arange(10.0)
    limits = Limits(query_seconds=0.3)
    config = servers.config(str(root), str(tmp_path), limits=limits, workers=1, scan_every=0)
    slow = {"dataset": "big.h5", "query": SLOW}
    with servers.running(config) as url, httpx.Client(base_url=url, timeout=60) as client:
        first = client.post("/api/v1/query", json=slow)
        assert first.status_code == 504
        statuses = []
        for body in [slow, slow, {"dataset": "small.h5", "query": "x > 3"}]:
            answer = client.post("/api/v1/query", json=body)
            statuses.append(answer.status_code)
            assert len(_working()) <= 1
        assert statuses == [503, 503, 503], statuses
        assert "busy" in answer.json()["error"]
        # The worker threads are kept: once the slow work ends (it has no time
        # limit of its own), its slot is free again and the small query answers.
        deadline = time.monotonic() + 120
        small = answer
        while small.status_code == 503 and time.monotonic() < deadline:
            time.sleep(0.05)
            small = client.post("/api/v1/query", json={"dataset": "small.h5", "query": "x > 3"})
        assert small.status_code == 200
        assert small.json() == {"count": 6}


def test_dropped_open_files_are_closed_once_no_request_holds_them(tmp_path, monkeypatch):
    from quarry.dataset import Dataset
    from quarry.service.answers import OpenFiles
    from quarry.service.catalog import Catalog

    closed: list[Dataset] = []
    real_close = Dataset.close

    def close(self: Dataset) -> None:
        closed.append(self)
        real_close(self)

    monkeypatch.setattr(Dataset, "close", close)
    root = os.path.realpath(tmp_path)
    for name in ("a.h5", "b.h5"):
        with h5py.File(os.path.join(root, name), "w") as f:
            f["x"] = np.arange(10.0)
    catalog = Catalog(":memory:")
    catalog.rescan((root,))
    a, b = catalog.get("a.h5"), catalog.get("b.h5")
    closed.clear()  # the scan's own opens
    files = OpenFiles((root,), keep=1)
    with files.use(a) as first:
        with files.use(b) as second:  # a is dropped while this request holds it
            assert closed == []
        assert first.query("x > 4").count() == 5  # still usable by its holder
    assert closed == [first]
    with files.use(a) as again:  # b dropped, free: closed at once
        assert closed == [first, second]
    # h5py cannot write a file this process holds open: let it go, then change it
    again.close()
    closed.pop()
    with h5py.File(os.path.join(root, "a.h5"), "a") as f:
        f["x"][0] = 100.0  # a changed: its next use opens it afresh
    with files.use(a) as fresh:
        assert fresh is not again and closed == [first, second, again]
        assert fresh.query("x > 4").count() == 6
    files.close()
    assert closed == [first, second, again, fresh]
    catalog.close()


def _sourced_files(root: str, outside: str) -> None:
    """In ``root``: a file with external storage, one with a virtual dataset
    and one with an external link, each read from ``outside`` (``*_out.h5``)
    and from inside (``*_in.h5``)."""
    values = np.arange(6.0)
    for where in (root, outside):
        values.tofile(os.path.join(where, "raw.bin"))
        with h5py.File(os.path.join(where, "source.h5"), "w") as f:
            f["v"] = values
    for tag, where in (("in", root), ("out", outside)):
        raw = os.path.join(where, "raw.bin")
        with h5py.File(os.path.join(root, f"ext_{tag}.h5"), "w") as f:
            f.create_dataset("secret", (6,), "f8", external=[(raw, 0, 48)])
            f["plain"] = values
        layout = h5py.VirtualLayout((6,), "f8")
        layout[:] = h5py.VirtualSource(os.path.join(where, "source.h5"), "v", (6,))
        with h5py.File(os.path.join(root, f"vds_{tag}.h5"), "w") as f:
            f.create_virtual_dataset("secret", layout)
            f["plain"] = values
        with h5py.File(os.path.join(root, f"lnk_{tag}.h5"), "w") as f:
            f["secret"] = h5py.ExternalLink(os.path.join(where, "source.h5"), "v")
            f["plain"] = values


def test_files_reading_data_outside_the_roots_are_not_served(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    _sourced_files(str(root), str(outside))
    config = servers.config(str(root), str(tmp_path), token=servers.TOKEN.encode(), scan_every=0)
    with servers.running(config) as url, httpx.Client(base_url=url, timeout=60) as client:
        listed = {d["path"] for d in client.get("/api/v1/datasets").json()["datasets"]}
        assert {"ext_in.h5", "vds_in.h5", "lnk_in.h5"} <= listed
        assert not listed & {"ext_out.h5", "vds_out.h5", "lnk_out.h5"}
        for kind in ("ext", "vds", "lnk"):
            # quarry reads no variable through an external link; the file is still refused
            name = "plain" if kind == "lnk" else "secret"
            inner = {"dataset": f"{kind}_in.h5", "query": f"{name} > 2"}
            assert client.post("/api/v1/query", json=inner).json() == {"count": 3}
            outer = {"dataset": f"{kind}_out.h5", "query": "secret > 2"}
            answer = client.post("/api/v1/query", json=outer)
            assert answer.status_code == 404
            assert answer.json() == {"error": f"no dataset '{kind}_out.h5' in the catalog"}
            assert client.get(f"/api/v1/datasets/{kind}_out.h5").status_code == 404
        # a served file rewritten after the scan to read outside is refused at its next use
        raw = os.path.join(outside, "raw.bin")
        os.replace(root / "ext_in.h5", root / "gone.h5")
        with h5py.File(root / "ext_in.h5", "w") as f:
            f.create_dataset("secret", (6,), "f8", external=[(raw, 0, 48)])
        answer = client.post("/api/v1/query", json={"dataset": "ext_in.h5", "query": "secret > 2"})
        assert answer.status_code == 404
        auth = {"Authorization": f"Bearer {servers.TOKEN}"}
        job = client.post("/api/v1/index", json={"dataset": "ext_in.h5"}, headers=auth).json()
        done = client.get(f"/api/v1/jobs/{job['job']}?wait=30").json()
        assert done["state"] == "failed" and "no dataset" in done["result"]["error"]
        assert not os.path.exists(root / "ext_in.h5.qidx")


def test_a_zarr_store_with_a_symlink_out_of_the_roots_is_not_served(tmp_path):
    """A chunk file, or a whole array's folder, of a store under the root
    linked to another store outside: its values were served as the store's."""
    import zarr

    root, outside = tmp_path / "root", tmp_path / "outside"
    private = zarr.open_group(str(outside / "private.zarr"), mode="w")
    private.create_array("t", shape=(100,), dtype="f8", chunks=(100,))[:] = np.arange(100.0) * 7
    for name in ("chunk", "array", "inside"):
        store = zarr.open_group(str(root / f"{name}.zarr"), mode="w")
        store.create_array("t", shape=(100,), dtype="f8", chunks=(100,))[:] = np.ones(100)
    (root / "chunk.zarr/t/c/0").unlink()
    (root / "chunk.zarr/t/c/0").symlink_to(outside / "private.zarr/t/c/0")
    for item in (root / "array.zarr/t").rglob("*"):
        if item.is_file():
            item.unlink()
    (root / "array.zarr/t/c").rmdir()
    (root / "array.zarr/t").rmdir()
    (root / "array.zarr/t").symlink_to(outside / "private.zarr/t")
    (root / "inside.zarr/u").symlink_to(root / "inside.zarr/t")  # a link inside the root is fine
    config = servers.config(str(root), str(tmp_path), scan_every=0)
    with servers.running(config) as url, httpx.Client(base_url=url, timeout=60) as client:
        listed = {d["path"] for d in client.get("/api/v1/datasets").json()["datasets"]}
        assert "inside.zarr" in listed and not listed & {"chunk.zarr", "array.zarr"}
        for name in ("chunk.zarr", "array.zarr"):
            answer = client.post("/api/v1/query", json={"dataset": name, "query": "t > 1"})
            assert answer.status_code == 404, answer.text


def test_the_byte_limit_is_the_encoded_answers_and_json_is_encoded_off_the_loop(
    tmp_path, monkeypatch
):
    from quarry.service import answers

    root = tmp_path / "root"
    columns = servers.particles(str(root / "p.h5"), n=4000)
    query = "energy > 0.5"
    chosen = np.flatnonzero(columns["energy"] > 0.5)
    n = len(chosen)
    # 16 bytes a row (id and value) is under the limit; JSON's text is not
    limits = Limits(rows=10 * n, result_bytes=20 * n)
    encoders: list[str] = []
    real_bytes = answers.json_bytes

    def json_bytes(content: object) -> bytes:
        encoders.append(threading.current_thread().name)
        return real_bytes(content)

    monkeypatch.setattr(answers, "json_bytes", json_bytes)
    config = servers.config(str(root), str(tmp_path), limits=limits, scan_every=0)
    body = {"dataset": "p.h5", "query": query, "output": "values", "variables": "energy"}
    with servers.running(config) as url, httpx.Client(base_url=url, timeout=60) as client:
        as_json = client.post("/api/v1/query", json=body)
        assert as_json.status_code == 413
        assert "ask for Arrow" in as_json.json()["error"]
        arrow = client.post("/api/v1/query", json=body, headers={"Accept": ARROW})
        assert arrow.status_code == 200
        table = pa_table(arrow.content)
        np.testing.assert_array_equal(table["quarry_row"], chosen)
        small = client.post("/api/v1/query", json={**body, "query": "energy > 2.5"})
        assert small.status_code == 200
        np.testing.assert_array_equal(small.json()["ids"], np.flatnonzero(columns["energy"] > 2.5))
        assert client.post("/api/v1/query", json={**body, "output": "count"}).json() == {"count": n}
    assert encoders and set(encoders) == {"quarry-work"}


def pa_table(data: bytes) -> dict[str, np.ndarray]:
    import pyarrow as pa

    table = pa.ipc.open_stream(data).read_all()
    return {name: table[name].to_numpy() for name in table.column_names}


def test_edges_of_two_or_three_variables_are_one_list_per_variable(tmp_path):
    root = tmp_path / "root"
    columns = servers.particles(str(root / "p.h5"), n=3000)
    config = servers.config(str(root), str(tmp_path), limits=Limits(rows=1000), scan_every=0)
    x_edges, q_edges = [-100.0, -10.0, 0.0, 25.0, 100.0], [0.0, 50.0, 199.5]
    body = {"dataset": "p.h5", "variables": ["x", "q"], "edges": [x_edges, q_edges]}
    with servers.running(config) as url, httpx.Client(base_url=url, timeout=60) as client:
        answer = client.post("/api/v1/histogram", json=body)
        assert answer.status_code == 200, answer.text
        x, q = columns["x"], columns["q"]
        keep = ~np.isnan(x)
        expected, _, _ = np.histogram2d(x[keep], q[keep], bins=[x_edges, q_edges])
        np.testing.assert_array_equal(answer.json()["counts"], expected)
        assert answer.json()["edges"] == [x_edges, q_edges]
        flat = client.post("/api/v1/histogram", json={**body, "edges": x_edges})
        assert flat.status_code == 400
        assert "2 lists of numbers, one per variable" in flat.json()["error"]
        wide = list(np.linspace(0, 200, 40))
        many = client.post("/api/v1/histogram", json={**body, "edges": [wide, wide]})
        assert many.status_code == 413
        assert "39 x 39 bins is more than this server gives" in many.json()["error"]
        counted = client.post("/api/v1/histogram", json={**body, "edges": None, "bins": 32})
        assert counted.status_code == 413


def test_posts_need_a_json_content_type_and_hosts_a_loopback_name(tmp_path):
    root = tmp_path / "root"
    servers.particles(str(root / "p.h5"), n=100)
    config = servers.config(str(root), str(tmp_path), scan_every=0)
    body = json.dumps({"dataset": "p.h5", "query": "q > 3"})
    with servers.running(config) as url, httpx.Client(base_url=url, timeout=60) as client:
        for kind in (None, "text/plain", "application/x-www-form-urlencoded"):
            headers = {} if kind is None else {"Content-Type": kind}
            answer = client.post("/api/v1/query", content=body, headers=headers)
            assert answer.status_code == 415, kind
            assert "Content-Type: application/json" in answer.json()["error"]
        typed = {"Content-Type": "application/json; charset=utf-8"}
        assert client.post("/api/v1/query", content=body, headers=typed).status_code == 200
        port = url.rsplit(":", 1)[1]
        for name in (f"localhost:{port}", f"127.0.0.1:{port}", "LOCALHOST"):
            assert client.get("/api/v1/datasets", headers={"Host": name}).status_code == 200
        for name in (f"attacker.example:{port}", "127.0.0.1.attacker.example", ""):
            answer = client.get("/api/v1/datasets", headers={"Host": name})
            assert answer.status_code == 421, name
            assert "--allow-host" in answer.json()["error"]


def test_a_token_is_compared_as_the_bytes_sent_unicode_included(tmp_path):
    root = tmp_path / "root"
    servers.particles(str(root / "p.h5"), n=10)
    token = "ünï-tøken-✓".encode()
    config = servers.config(str(root), str(tmp_path), token=token, scan_every=0)
    with servers.running(config) as url, httpx.Client(base_url=url, timeout=60) as client:
        right = client.post("/api/v1/rescan", headers={"Authorization": b"Bearer " + token})
        assert right.status_code == 200, right.text
        latin = "ünï-tøken-✓".encode("latin-1", "replace")
        wrong = client.post("/api/v1/rescan", headers={"Authorization": b"Bearer " + latin})
        assert wrong.status_code == 403


def test_waiting_for_a_job_takes_no_thread_from_rescans(tmp_path, monkeypatch):
    """More clients wait on a job than the server has threads (anyio's 40);
    a rescan still answers while they wait."""
    import quarry.series
    from quarry.service import app as service_app

    root = tmp_path / "root"
    servers.particles(str(root / "p.h5"), n=10)
    release = threading.Event()
    real_open = quarry.series.open_series

    def blocked_open(path: str) -> object:
        release.wait()
        return real_open(path)

    monkeypatch.setattr(quarry.series, "open_series", blocked_open)
    arrived = threading.Semaphore(0)

    def counting_app(config: object) -> object:
        inner = service_app.create_app(config)  # type: ignore[arg-type]

        async def app(scope: dict, receive: object, send: object) -> None:
            if scope["type"] == "http" and b"wait=" in scope.get("query_string", b""):
                arrived.release()  # the route runs to its first await before anything else
            await inner(scope, receive, send)

        return app

    monkeypatch.setattr(servers, "create_app", counting_app)
    config = servers.config(str(root), str(tmp_path), token=servers.TOKEN.encode(), scan_every=0)
    auth = {"Authorization": f"Bearer {servers.TOKEN}"}
    with servers.running(config) as url, httpx.Client(base_url=url, timeout=60) as client:
        job = client.post("/api/v1/index", json={"dataset": "p.h5"}, headers=auth).json()["job"]
        ended: list[str] = []

        def wait() -> None:
            with httpx.Client(base_url=url, timeout=90) as mine:
                ended.append(mine.get(f"/api/v1/jobs/{job}?wait=60").json()["state"])

        waiters = [threading.Thread(target=wait) for _ in range(45)]
        for thread in waiters:
            thread.start()
        for _ in waiters:
            arrived.acquire()
        try:
            rescan = client.post("/api/v1/rescan", headers=auth, timeout=20)
            assert rescan.status_code == 200
        finally:
            release.set()
            for thread in waiters:
                thread.join()
        assert ended == ["done"] * 45


def test_a_row_limit_crossed_does_not_suggest_arrow(tmp_path):
    """Arrow changes an answer's bytes, not its rows: a 413 for rows (or
    for an Arrow request) names the other ways, not Arrow."""
    root = tmp_path / "root"
    columns = servers.particles(str(root / "p.h5"), n=4000)
    n = int(np.count_nonzero(columns["energy"] > 0.5))
    config = servers.config(str(root), str(tmp_path), limits=Limits(rows=n // 2), scan_every=0)
    body = {"dataset": "p.h5", "query": "energy > 0.5", "output": "ids"}
    with servers.running(config) as url, httpx.Client(base_url=url, timeout=60) as client:
        for headers in ({}, {"Accept": ARROW}):
            refused = client.post("/api/v1/query", json=body, headers=headers)
            assert refused.status_code == 413
            assert "Arrow" not in refused.json()["error"]
            assert "narrow the query, ask for the count" in refused.json()["error"]
