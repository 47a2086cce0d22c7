"""A rebuild under load: queries answered while a file's index is rebuilt are
all right (the old index or the new one answers, never a part of either), and
none fails."""

from __future__ import annotations

import threading

import httpx
import servers

import quarry
from oracle import oracle_ids


def test_queries_during_a_rebuild_are_all_answered_and_all_right(tmp_path):
    root = tmp_path / "root"
    path = str(root / "p.h5")
    columns = servers.particles(path, n=200_000, seed=9)
    with quarry.open(path) as ds:
        ds.build_index(block_len=4096, bins=64)
    queries = ["energy > 1.3", "x < -20 && q > 100", "id < 5000 || energy > 3"]
    expected = {q: len(oracle_ids(q, columns)) for q in queries}
    config = servers.config(str(root), str(tmp_path), token=servers.TOKEN.encode(), scan_every=0)
    answers: list[tuple[str, int, object]] = []
    with servers.running(config) as url, httpx.Client(base_url=url, timeout=60) as client:
        auth = {"Authorization": f"Bearer {servers.TOKEN}"}
        body = {"dataset": "p.h5", "force": True, "block_size": 65536, "bins": 2048}
        job = client.post("/api/v1/index", json=body, headers=auth).json()["job"]
        ended = threading.Event()

        def ask() -> None:
            with httpx.Client(base_url=url, timeout=60) as mine:
                k = 0
                while not ended.is_set() or k < len(queries):
                    q = queries[k % len(queries)]
                    got = mine.post("/api/v1/query", json={"dataset": "p.h5", "query": q})
                    answers.append((q, got.status_code, got.json()))
                    k += 1

        readers = [threading.Thread(target=ask) for _ in range(3)]
        for reader in readers:
            reader.start()
        done = client.get(f"/api/v1/jobs/{job}", params={"wait": 60}).json()
        ended.set()
        for reader in readers:
            reader.join()
        assert (done["state"], done["result"]) == ("done", {"status": "built"})
    wrong = [(q, s, a) for q, s, a in answers if (s, a) != (200, {"count": expected[q]})]
    assert not wrong
    assert len(answers) >= 3 * len(queries)
    with quarry.open(path) as ds:
        assert ds.index.block_len == 65536
