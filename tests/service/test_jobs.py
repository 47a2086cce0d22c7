"""Build jobs, with the build itself held until the test lets it go, so that
what overlaps is decided by the test and not by timing: one build of a file
at a time, at most ``builds`` at once, queued builds cancelled on stopping."""

from __future__ import annotations

import queue
import threading
from types import SimpleNamespace

import h5py
import numpy as np
import pytest

import quarry.series
from quarry.service.catalog import Catalog
from quarry.service.jobs import Builds


@pytest.fixture
def held(tmp_path, monkeypatch):
    """A catalog of three files whose builds start (their path put on
    ``started``) and then wait for ``release[path]``."""
    for name in ("a.h5", "b.h5", "c.h5"):
        with h5py.File(tmp_path / name, "w") as f:
            f["x"] = np.arange(10.0)
    catalog = Catalog(str(tmp_path / ".catalog.sqlite"))
    catalog.rescan((str(tmp_path),))
    started: queue.Queue[str] = queue.Queue()
    release = {e.real: threading.Event() for e in catalog.entries()}

    class Series:
        def __init__(self, path: str) -> None:
            self.path = path

        def __enter__(self) -> Series:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def build_indexes(self, *args: object, **kwargs: object):
            started.put(self.path)
            release[self.path].wait()
            yield SimpleNamespace(status="built")

    monkeypatch.setattr(quarry.series, "open_series", Series)
    yield catalog, started, release
    catalog.close()


def test_one_build_per_file_and_at_most_builds_at_once(held):
    catalog, started, release = held
    a, b = catalog.get("a.h5"), catalog.get("b.h5")
    builds = Builds(catalog, builds=1)
    first = builds.submit(a, {})
    second = builds.submit(b, {})
    assert started.get(timeout=60) == a.real
    assert builds.get(first["id"])["state"] == "running"
    assert builds.get(second["id"])["state"] == "queued"  # the one build slot is taken
    assert builds.submit(a, {})["id"] == first["id"]  # a's build is under way: that job
    assert builds.submit(b, {})["id"] == second["id"]
    release[a.real].set()
    assert started.get(timeout=60) == b.real
    assert builds.get(first["id"], wait=60)["state"] == "done"
    release[b.real].set()
    ended = builds.get(second["id"], wait=60)
    assert (ended["state"], ended["result"]) == ("done", {"status": "built"})
    again = builds.submit(a, {})  # a's build ended: a new one
    assert again["id"] != first["id"]
    assert builds.get(again["id"], wait=60)["state"] == "done"
    builds.stop()


def test_stopping_finishes_the_running_build_and_cancels_the_queued_ones(held):
    catalog, started, release = held
    a, b, c = (catalog.get(name) for name in ("a.h5", "b.h5", "c.h5"))
    builds = Builds(catalog, builds=1)
    running = builds.submit(a, {})
    queued = [builds.submit(b, {}), builds.submit(c, {})]
    assert started.get(timeout=60) == a.real
    stopping = threading.Thread(target=builds.stop)
    stopping.start()
    # The queued jobs are cancelled while a's build still runs, before it is let go.
    assert [builds.get(j["id"], wait=60)["state"] for j in queued] == ["cancelled"] * 2
    assert builds.get(running["id"])["state"] == "running"
    release[a.real].set()
    stopping.join(timeout=60)
    assert not stopping.is_alive()
    assert builds.get(running["id"])["state"] == "done"
    assert [builds.get(j["id"])["state"] for j in queued] == ["cancelled", "cancelled"]
    assert started.empty()
    # Recorded in the catalog too: a new server finds them as they ended.
    assert catalog.job(queued[0]["id"])["state"] == "cancelled"
    assert catalog.job(running["id"])["result"] == {"status": "built"}


def test_a_build_failing_in_an_unforeseen_way_ends_failed_not_running(tmp_path, monkeypatch):
    """A build that raised anything but a QuarryError left its job 'running'
    for ever, and every later build of the file was handed that job."""
    with h5py.File(tmp_path / "a.h5", "w") as f:
        f["x"] = np.arange(10.0)
    catalog = Catalog(str(tmp_path / ".catalog.sqlite"))
    catalog.rescan((str(tmp_path),))
    calls = []

    class Series:
        def __init__(self, path: str) -> None:
            pass

        def __enter__(self) -> Series:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def build_indexes(self, *args: object, **kwargs: object):
            calls.append(kwargs)
            if len(calls) == 1:
                raise RuntimeError("something no one saw coming")
            yield SimpleNamespace(status="built")

    monkeypatch.setattr(quarry.series, "open_series", Series)
    builds = Builds(catalog, builds=1)
    a = catalog.get("a.h5")
    first = builds.submit(a, {})
    ended = builds.get(first["id"], wait=60)
    assert ended["state"] == "failed"
    assert ended["result"] == {"error": "the build failed: something no one saw coming"}
    again = builds.submit(a, {})
    assert again["id"] != first["id"] and builds.get(again["id"], wait=60)["state"] == "done"
    builds.stop()
    catalog.close()


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"bins": 2**40}, "bins must be 1 to 1,048,576"),
        ({"precision": 99}, "precision must be 0..6"),
    ],
)
def test_build_options_the_index_refuses_are_a_400_before_any_job(tmp_path, options, said):
    """bins=2**40 was queued and aborted the server allocating 8 TiB; precision=99
    left its job running for ever."""
    import httpx
    import servers

    with h5py.File(tmp_path / "a.h5", "w") as f:
        f["x"] = np.arange(10.0)
    config = servers.config(str(tmp_path), str(tmp_path / "work"), token=servers.TOKEN.encode())
    auth = {"Authorization": f"Bearer {servers.TOKEN}"}
    with servers.running(config) as url, httpx.Client(base_url=url, timeout=60) as client:
        answer = client.post("/api/v1/index", json={"dataset": "a.h5", **options}, headers=auth)
        assert answer.status_code == 400 and said in answer.json()["error"], answer.text
        fine = client.post("/api/v1/index", json={"dataset": "a.h5", "bins": 8}, headers=auth)
        job = client.get(f"/api/v1/jobs/{fine.json()['job']}?wait=30").json()
        assert job["state"] == "done", job
