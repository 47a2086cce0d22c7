"""A served file rewritten in place while a request reads it (HDF5 with its
file locking off, as is common on parallel file systems): the answer may mix
the old file and the new, so the request is refused with a 409; and a stale
copy is rebuilt by the request its 409 names."""

from __future__ import annotations

import os

import h5py
import numpy as np
import pytest

from quarry.service.answers import OpenFiles
from quarry.service.catalog import Catalog
from quarry.service.config import ServiceError


def test_a_file_written_during_a_request_is_refused(tmp_path):
    root = os.path.realpath(tmp_path)
    with h5py.File(os.path.join(root, "a.h5"), "w") as f:
        f["x"] = np.arange(10.0)
    catalog = Catalog(":memory:")
    catalog.rescan((root,))
    files = OpenFiles((root,))
    entry = catalog.get("a.h5")
    changed = pytest.raises(ServiceError, match="changed while it was being read")
    with changed as refused, files.use(entry) as ds:
        assert ds.query("x > 4").count() == 5
        os.truncate(os.path.join(root, "a.h5"), 100)  # a writer, mid-request
    assert refused.value.status == 409
    files.close()
    catalog.close()


def test_a_stale_copy_is_refused_naming_the_request_that_rebuilds_it_and_that_does(tmp_path):
    """A copy left stale by a change refused every query of its file with a
    shell command for the server's machine; POST /api/v1/index (which the 409
    of a stale index names) rebuilt the index alone, so queries stayed 409."""
    import time

    import httpx
    import servers

    import quarry

    root = tmp_path / "root"
    root.mkdir()
    path = str(root / "p.h5")
    rng = np.random.default_rng(3)
    with h5py.File(path, "w") as f:
        f["energy"], f["x"] = rng.random(50_000) * 2, rng.random(50_000) * 300
    with quarry.open(path) as ds:
        ds.build_index()
        ds.reorganize(["energy", "x"], bin_size=[0.1, 10])
    time.sleep(1.1)  # a later modification time
    with h5py.File(path, "a") as f:
        f["energy"][:10] = 1.25
        energy, x = f["energy"][()], f["x"][()]
    want = int(((energy > 1.2) & (energy < 1.3) & (x > 140) & (x < 150)).sum())
    config = servers.config(str(root), str(tmp_path), token=servers.TOKEN.encode(), scan_every=0)
    auth = {"Authorization": f"Bearer {servers.TOKEN}"}
    body = {"dataset": "p.h5", "query": "1.2 < energy < 1.3 && 140 < x < 150"}
    with servers.running(config) as url, httpx.Client(base_url=url, timeout=60) as client:
        refused = client.post("/api/v1/query", json=body)
        assert refused.status_code == 409
        assert refused.json()["error"].endswith(
            'rebuild it with POST /api/v1/index {"dataset": "p.h5"}'
        ), refused.text
        job = client.post("/api/v1/index", json={"dataset": "p.h5"}, headers=auth).json()
        done = client.get(f"/api/v1/jobs/{job['job']}?wait=60").json()
        assert done["state"] == "done" and done["result"]["copy"] == "rebuilt", done
        answer = client.post("/api/v1/query", json=body)
        assert answer.status_code == 200 and answer.json() == {"count": want}, answer.text
    with quarry.open(path) as ds:  # the copy is fresh again: its box reads no part stale
        assert ds.reorganize_again() is None
        assert ds.query(body["query"]).count() == want
