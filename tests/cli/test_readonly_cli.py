"""Read-only data: the index goes elsewhere (``--index DIR`` or
``QUARRY_INDEX_PATH``), and a query that finds no index says it scans.

The data directory is made unwritable in a way the CLI process really feels:
``chmod 555`` for an ordinary user; as root (who ignores permission bits),
the CLI runs under ``setpriv`` without CAP_DAC_OVERRIDE, so the bits apply
to it too. Where neither is possible the tests skip and say why.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys

import h5py
import numpy as np
import pytest

SETPRIV = shutil.which("setpriv")
AS_ROOT = os.geteuid() == 0
pytestmark = pytest.mark.skipif(
    AS_ROOT and SETPRIV is None,
    reason="running as root without setpriv: no way to make a directory unwritable to the CLI",
)


def quarry(*args: str, code: int = 0, env: dict[str, str] | None = None) -> tuple[str, str]:
    prefix = [SETPRIV, "--bounding-set=-dac_override", "--"] if AS_ROOT else []
    command = [*prefix, sys.executable, "-m", "quarry.cli.main", *args]
    environ = {k: v for k, v in os.environ.items() if k != "QUARRY_INDEX_PATH"}
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=120, env={**environ, **(env or {})}
    )
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    return done.stdout, done.stderr


@pytest.fixture
def read_only(tmp_path):
    """``ro/small.h5`` in a directory the CLI cannot write, and its values."""
    directory = tmp_path / "ro"
    directory.mkdir()
    path = str(directory / "small.h5")
    px = np.random.default_rng(5).normal(size=5_000)
    px[::97] = np.nan
    with h5py.File(path, "w") as f:
        f["px"] = px
    os.chmod(directory, stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)
    yield path, px
    os.chmod(directory, stat.S_IRWXU)


def test_indexing_read_only_data_says_how_to_put_the_index_elsewhere(read_only):
    path, _ = read_only
    _, err = quarry("index", path, "--quiet", code=1)
    directory = os.path.dirname(path)
    assert f"the directory {directory} is not writable" in err
    assert "--index DIR" in err and "QUARRY_INDEX_PATH=DIR" in err
    assert "Errno" not in err and err.count("\n") == 1
    assert os.listdir(directory) == ["small.h5"]  # no temporary left behind


def test_quarry_index_path_is_where_indexes_are_written_and_found(read_only, tmp_path):
    path, px = read_only
    indexes = tmp_path / "indexes"
    env = {"QUARRY_INDEX_PATH": os.pathsep.join([str(tmp_path / "absent"), str(indexes)])}
    out, _ = quarry("index", path, "--quiet", env=env)
    # the first directory of the list is made when missing and takes the index
    assert os.path.exists(tmp_path / "absent" / "small.h5.qidx"), out
    out, err = quarry("query", path, "px > 0.5", env=env)
    assert int(out) == int((px > 0.5).sum()) and err == ""
    info, _ = quarry("info", path, env=env)
    assert str(tmp_path / "absent" / "small.h5.qidx") in info.splitlines()[0]


def test_an_index_made_with_index_dir_is_found_through_the_variable(read_only, tmp_path):
    path, px = read_only
    indexes = str(tmp_path / "indexes")
    os.makedirs(indexes)
    quarry("index", path, "--index", indexes, "--quiet")
    out, err = quarry("query", path, "px <= -1", env={"QUARRY_INDEX_PATH": indexes})
    assert int(out) == int((px <= -1).sum()) and err == ""


def test_a_query_without_an_index_says_it_scans(read_only, tmp_path):
    path, px = read_only
    indexes = str(tmp_path / "indexes")
    os.makedirs(indexes)
    quarry("index", path, "--index", indexes, "--quiet")
    out, err = quarry("query", path, "px > 0.5")  # the index is elsewhere, not named
    assert int(out) == int((px > 0.5).sum())
    assert err.startswith(f"quarry: no index found for {path} (looked beside it); scanning")
    assert "--index DIR or QUARRY_INDEX_PATH" in err
    assert err.count("\n") == 1
    out, err = quarry("query", path, "px > 0.5", "--quiet")
    assert int(out) == int((px > 0.5).sum()) and err == ""
    out, err = quarry("query", path, "px > 0.5", "--index", indexes)
    assert err == ""


def test_the_stale_message_repeats_the_index_it_needs(read_only, tmp_path):
    path, _ = read_only
    indexes = str(tmp_path / "indexes")
    os.makedirs(indexes)
    quarry("index", path, "--index", indexes, "--quiet")
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))  # the data "changed"
    _, err = quarry("query", path, "px > 0", "--index", indexes, code=1)
    index = os.path.join(indexes, "small.h5.qidx")
    assert f"quarry index {path} --index {index}" in err
    # ... and that command rebuilds it, after which the query answers
    quarry("index", path, "--index", index, "--quiet")
    quarry("query", path, "px > 0", "--index", indexes)


@pytest.mark.parametrize("command", [["index"], ["reorg", "--vars", "x"]])
def test_an_index_directory_that_does_not_exist_is_named(tmp_path, command):
    """``--index nd/`` for a directory not made yet: ``quarry index`` printed the
    system's rename error, ``quarry reorg`` called the directory not writable and its
    copy an index."""
    path = str(tmp_path / "d.h5")
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(10.0)
    missing = str(tmp_path / "nd") + "/"
    _, err = quarry(command[0], path, *command[1:], "--index", missing, code=1)
    what = "index" if command[0] == "index" else "reorganised copy"
    assert f"cannot write the {what} of {path}: there is no directory" in err
    assert "make it first" in err and not os.path.exists(missing)
