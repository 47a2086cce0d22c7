"""``mpiexec -n N quarry reorg`` writes the copy a serial build writes: the
same parts, values, rows and offset tables, whatever the number of ranks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import pytest

from copy_arrays import copy_arrays

pytest.importorskip("mpi4py")
MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
pytestmark = pytest.mark.skipif(
    MPIEXEC is None, reason="no mpiexec (pip install 'quarry-index[mpi]')"
)


def mpirun(n: int, *argv: str, expect: int = 0) -> subprocess.CompletedProcess[str]:
    # HWLOC_XMLFILE names no file, so MPICH's launcher leaves nothing in /tmp
    # (see tests/parallel/test_mpi.py).
    missing = os.path.join(tempfile.gettempdir(), "no-hwloc-topology-file.xml")
    done = subprocess.run(
        [MPIEXEC, "-n", str(n), sys.executable, "-m", "quarry.cli.main", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HWLOC_XMLFILE": missing},
    )
    assert done.returncode == expect, done.stdout + done.stderr
    return done


def test_ranks_write_the_serial_copy(tmp_path):
    path = str(tmp_path / "run.h5")
    rng = np.random.default_rng(11)
    with h5py.File(path, "w") as f:
        for step in range(2):
            energy = rng.exponential(0.4, 10_007)
            energy[rng.random(10_007) < 0.05] = np.nan
            f[f"Step#{step}/energy"] = energy
            f[f"Step#{step}/x"] = rng.integers(-100, 300, 10_007).astype("i4")
    args = ["reorg", path, "--vars", "energy,x", "--bin-size", "0.1,25", "--part-rows", "1000"]
    subprocess.run([sys.executable, "-m", "quarry.cli.main", *args], check=True)
    serial = copy_arrays(path + ".qmd")
    for ranks in (2, 3):
        out = mpirun(ranks, *args)
        assert out.stdout.count("reorganised") == 1  # rank 0 speaks
        parallel = copy_arrays(path + ".qmd")
        assert serial.keys() == parallel.keys()
        for name, values in serial.items():
            np.testing.assert_array_equal(parallel[name], values, err_msg=name)
    assert [n for n in os.listdir(tmp_path) if n.endswith(".tmp")] == []


def test_a_mistake_is_reported_once(tmp_path):
    path = str(tmp_path / "run.h5")
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(10.0)
    done = mpirun(2, "reorg", path, "--vars", "nope", expect=1)
    assert done.stderr.count("nope") == 1, done.stderr


def test_ranks_take_the_ranges_from_a_fresh_index(tmp_path):
    """Each rank opens the file's index and takes the variables' ranges from it
    (see quarry.reorg.build.indexed_extents): the copy is the serial one."""
    import time

    import quarry
    from quarry.formats.base import fingerprint
    from quarry.index import fresh
    from quarry.reorg.build import indexed_extents

    path = str(tmp_path / "run.h5")
    rng = np.random.default_rng(5)
    with h5py.File(path, "w") as f:
        energy = rng.exponential(0.4, 20_011)
        energy[rng.random(20_011) < 0.05] = np.nan
        f["energy"] = energy
        f["x"] = rng.integers(-100, 300, 20_011).astype("i4")
    # An index built just after its file was written is trusted only once the
    # file's times are older than the racy window (quarry.index.fresh): the
    # ranks would then read the ranges, and the index would go untested here.
    window = fresh.FINE_RACY_NS if fingerprint(path).get("fine_times") else fresh.RACY_NS
    time.sleep(1.5 * window / 1e9)
    with quarry.open(path) as ds:
        ds.build_index()
    with quarry.open(path) as ds:
        plans = ds.reorganize_plan(["energy", "x"])
        known = indexed_extents(ds.index, plans, fingerprint(path))
    assert set(known) == {"/energy", "/x"}, "the index must give both ranges"
    args = ["reorg", path, "--vars", "energy,x", "--bins", "7", "--part-rows", "3000"]
    subprocess.run([sys.executable, "-m", "quarry.cli.main", *args], check=True)
    serial = copy_arrays(path + ".qmd")
    mpirun(2, *args)
    parallel = copy_arrays(path + ".qmd")
    assert serial.keys() == parallel.keys()
    for name, values in serial.items():
        np.testing.assert_array_equal(parallel[name], values, err_msg=name)


def test_bins_every_rank_refuses_are_refused_once_without_an_abort(tmp_path):
    """The axes come from the extents all ranks gathered, so every rank
    refused too many bins at once: each printed it and aborted the job."""
    path = str(tmp_path / "run.h5")
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(1000.0)
    done = mpirun(2, "reorg", path, "--vars", "x", "--bin-size", "1e-9", expect=1)
    said = (
        "quarry: error: /x would have more than 16777216 bins of size 1e-09 over [0.0, 999.0]: "
        "give a larger --bin-size or fewer --bins\n"
    )
    assert done.stderr == said
    assert sorted(os.listdir(tmp_path)) == ["run.h5"]
