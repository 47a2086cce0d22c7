"""A served file rewritten in place while a request reads it (HDF5 with its
file locking off, as is common on parallel file systems): the request is
refused with a 409, and the server never dies. Through a memory map, the
truncation HDF5 does on rewriting ended the whole process with SIGBUS."""

from __future__ import annotations

import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

from quarry.service.answers import OpenFiles
from quarry.service.catalog import Catalog
from quarry.service.config import ServiceError

#: A file read by quarry, truncated under it, then read again: what a
#: request in flight sees when a writer rewrites the file.
TRUNCATED = """
import os, sys
import h5py, numpy as np
import quarry
from quarry.formats.base import map_files

path, mapped = sys.argv[1], sys.argv[2] == "mapped"
with h5py.File(path, "w") as f:
    f["x"] = np.arange(1_000_000.0)
map_files(mapped)
with quarry.open(path) as ds:
    print(ds.query("x > 10").count(), flush=True)
    os.truncate(path, 4096)
    try:
        ds.select_all(["x"]).values("x")
        print("read", flush=True)
    except Exception as exc:
        print("refused", type(exc).__name__, flush=True)
"""


@pytest.mark.parametrize("mapped", [True, False])
def test_reading_a_truncated_file_ends_the_process_only_through_a_map(tmp_path, mapped):
    done = subprocess.run(
        [sys.executable, "-c", TRUNCATED, str(tmp_path / "a.h5"), "mapped" if mapped else "read"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if mapped:  # why the service reads without maps
        assert done.returncode == -7, (done.returncode, done.stderr)  # SIGBUS
    else:
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[0] == "999989"


def test_the_service_reads_without_maps_and_refuses_a_file_written_during_a_request(tmp_path):
    from quarry.formats.base import map_files, maps_files
    from quarry.service.app import Service
    from quarry.service.config import Config

    root = os.path.realpath(tmp_path)
    with h5py.File(os.path.join(root, "a.h5"), "w") as f:
        f["x"] = np.arange(10.0)
    try:
        Service(Config.make([root], catalog=":memory:"))
        assert not maps_files()
    finally:
        map_files(True)
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
