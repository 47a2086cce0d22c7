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


def test_a_kept_file_does_not_stop_its_writer(tmp_path):
    """The HDF5 library locks every file it opens for as long as it is open:
    a file the server kept after answering refused its simulation's next
    step (``unable to lock file``) until 32 other files were opened. The
    next request after the write answers from the file as written."""
    import subprocess
    import sys

    root = os.path.realpath(tmp_path)
    path = os.path.join(root, "sim.h5")
    with h5py.File(path, "w") as f:
        f["Step#0/x"] = np.arange(100.0)
    catalog = Catalog(":memory:")
    catalog.rescan((root,))
    files = OpenFiles((root,))
    entry = catalog.get("sim.h5")
    with files.use(entry) as ds:
        assert ds.query("x > 5").count() == 94
    writer = (
        "import h5py, numpy as np, sys\n"
        "with h5py.File(sys.argv[1], 'a') as f:\n"
        "    f['Step#1/x'] = np.arange(100.0) + 50\n"
    )
    done = subprocess.run([sys.executable, "-c", writer, path], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    catalog.rescan((root,))
    with files.use(catalog.get("sim.h5")) as ds:
        assert ds.query("x > 5").count() == 94 + 100
    files.close()
    catalog.close()


def test_a_kept_file_opened_by_a_scan_does_not_stop_its_writer(tmp_path, monkeypatch):
    """With a fresh index the file is opened only when a request reads values
    (a scan): that request releases the lock the HDF5 library took."""
    import subprocess
    import sys

    import quarry
    from quarry.index import fresh

    # Built "long after" the write (no racy window): the index's listing is trusted.
    monkeypatch.setattr(fresh, "RACY_NS", 0)
    monkeypatch.setattr(fresh, "FINE_RACY_NS", 0)

    root = os.path.realpath(tmp_path)
    path = os.path.join(root, "sim.h5")
    with h5py.File(path, "w") as f:  # chunked: its values are read by the HDF5 library
        f.create_dataset("x", data=np.arange(100.0), chunks=(10,))
    with quarry.open(path) as ds:
        ds.build_index()
    catalog = Catalog(":memory:")
    catalog.rescan((root,))
    files = OpenFiles((root,))
    with files.use(catalog.get("sim.h5")) as ds:
        assert ds.query("x > 5").count() == 94
        assert not ds.file_open  # answered by the index alone
    with files.use(catalog.get("sim.h5")) as ds:
        assert len(ds.query("x > 5").values("x")) == 94  # values: read from the file
        assert ds.file_open
    writer = "import h5py, sys\nwith h5py.File(sys.argv[1], 'a') as f:\n    f['y'] = [1.0]\n"
    done = subprocess.run([sys.executable, "-c", writer, path], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    files.close()
    catalog.close()


def test_a_request_between_two_writes_of_one_update_sees_the_first_alone(tmp_path):
    """README: a write is told by the file's stat before and after each request, so a
    request that falls between two writes of one update answers from the first alone;
    one that a write falls inside is refused."""
    import subprocess
    import sys

    root = os.path.realpath(tmp_path)
    path = os.path.join(root, "flip.h5")
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.zeros(1000))

    def write(rows: str) -> None:  # another program, with the HDF5 library's locking on
        code = (
            f"import h5py, sys\nwith h5py.File(sys.argv[1], 'r+') as f:\n    f['x'][{rows}] = 1.0\n"
        )
        done = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr

    catalog = Catalog(":memory:")
    catalog.rescan((root,))
    files = OpenFiles((root,))
    with files.use(catalog.get("flip.h5")) as ds:
        assert ds.query("x > 0.5").count() == 0
    write(":500")  # the update's first write
    with files.use(catalog.get("flip.h5")) as ds:
        assert ds.query("x > 0.5").count() == 500  # half of the update, answered
    with pytest.raises(ServiceError) as refused, files.use(catalog.get("flip.h5")) as ds:
        ds.query("x > 0.5").count()
        write("500:")  # the second write, inside a request
    assert refused.value.status == 409
    with files.use(catalog.get("flip.h5")) as ds:
        assert ds.query("x > 0.5").count() == 1000
    files.close()
    catalog.close()


def test_a_kept_netcdf4_file_does_not_stop_its_writer(tmp_path):
    """README: NetCDF-4 files are HDF5 underneath, locked by the same library."""
    import subprocess
    import sys

    netcdf4 = pytest.importorskip("netCDF4")
    root = os.path.realpath(tmp_path)
    path = os.path.join(root, "sim.nc")
    with netcdf4.Dataset(path, "w", format="NETCDF4") as ds:
        ds.createDimension("n", 100)
        ds.createVariable("x", "f8", ("n",))[:] = np.arange(100.0)
    catalog = Catalog(":memory:")
    catalog.rescan((root,))
    files = OpenFiles((root,))
    with files.use(catalog.get("sim.nc")) as ds:
        assert ds.query("x > 5").count() == 94
    writer = (
        "import netCDF4, sys\n"
        "with netCDF4.Dataset(sys.argv[1], 'a') as ds:\n"
        "    ds['x'][:10] = 50.0\n"
    )
    done = subprocess.run([sys.executable, "-c", writer, path], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    with files.use(catalog.get("sim.nc")) as ds:
        assert ds.query("x > 5").count() == 100
    files.close()
    catalog.close()
