"""``quarry.connect`` and ``quarry query --server``: answers through a server
equal the local Dataset's and a NumPy oracle's, on random queries over
columns of several dtypes with NaNs, and on a series; under MPI one rank
talks and the others receive."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import httpx
import numpy as np
import pytest
import servers
from hypothesis import given
from hypothesis import strategies as st

import quarry
from oracle import oracle_ids


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("root"))
    path = os.path.join(root, "run", "p.h5")
    columns = servers.particles(path, n=6001, seed=3)
    with quarry.open(path) as ds:
        ds.build_index(block_len=1000)
    px = servers.steps(os.path.join(root, "steps.h5"))
    catalog = str(tmp_path_factory.mktemp("catalog"))
    with servers.running(servers.config(root, catalog, scan_every=0)) as url:
        yield url, root, columns, px


LITERALS = {
    "energy": st.sampled_from([0.0, 0.5, 1.0, 1.3, 2.75, np.inf]),
    "x": st.sampled_from([-100.0, -3.5, 0.0, 12.25, 1e9]),
    "id": st.integers(-1, 6002),
    "q": st.integers(0, 256),
}


@st.composite
def queries(draw):
    terms = []
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(sorted(LITERALS)))
        op = draw(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]))
        literal = draw(LITERALS[name])
        term = f"{name} {op} {literal!r}".replace("inf", "inf")
        terms.append(f"!({term})" if draw(st.booleans()) else term)
    joined = terms[0]
    for term in terms[1:]:
        joined = f"{joined} {draw(st.sampled_from(['&&', '||']))} {term}"
    return joined


@given(query=queries())
def test_random_queries_through_the_server_equal_the_local_dataset_and_numpy(served, query):
    url, root, columns, _ = served
    remote = quarry.connect(url).open("run/p.h5").query(query)
    expected = oracle_ids(query, columns)
    assert remote.count() == len(expected)
    ids = remote.ids()
    assert ids.dtype == np.int64
    np.testing.assert_array_equal(ids, expected)
    with quarry.open(os.path.join(root, "run", "p.h5")) as ds:
        local = ds.query(query)
        for name in ("x", "q", "energy"):
            got = remote.values(name)
            assert got.dtype == local.values(name).dtype
            np.testing.assert_array_equal(got, local.values(name))
            np.testing.assert_array_equal(got, columns[name][expected])


def test_the_catalog_and_a_files_variables(served):
    url, _, _, _ = served
    conn = quarry.connect(url)
    with httpx.Client(base_url=url) as client:
        assert conn.datasets() == client.get("/api/v1/datasets").json()["datasets"]
    ds = conn.open("run/p.h5")
    assert [v["name"] for v in ds.variables()] == ["energy", "id", "q", "x"]
    with pytest.raises(quarry.service.config.ServiceError, match=r"no dataset 'nope\.h5'"):
        conn.open("nope.h5")


def test_histograms_through_the_server_equal_the_local_ones(served):
    url, root, columns, px = served
    remote = quarry.connect(url).open("run/p.h5")
    with quarry.open(os.path.join(root, "run", "p.h5")) as ds:
        for where, names, bins, value_range in [
            (None, "energy", 12, None),
            ("q < 50", "x", [-50.0, 0.0, 50.0], None),
            ("energy > 1", ["x", "q"], 4, [(-100, 100), (0, 255)]),
        ]:
            mine = remote.histogram(names, where=where, bins=bins, range=value_range)
            local = ds.histogram(names, where=where, bins=bins, range=value_range)
            np.testing.assert_array_equal(mine.counts, local.counts)
            if isinstance(names, str):
                np.testing.assert_array_equal(mine.edges, local.edges)
            else:
                for a, b in zip(mine.edges, local.edges, strict=True):
                    np.testing.assert_array_equal(a, b)
    counts, _ = remote.query("q > 100").histogram("q", bins=5)
    np.testing.assert_array_equal(counts, np.histogram(columns["q"][columns["q"] > 100], 5)[0])
    series = quarry.connect(url).open("steps.h5").query("px > 0")
    counts, _ = series.histogram("px", bins=3)
    np.testing.assert_array_equal(
        counts, np.histogram(np.concatenate([p[p > 0] for p in px]), 3)[0]
    )


def test_a_series_answers_per_member_as_a_local_series_selection(served):
    url, root, _, px = served
    remote = quarry.connect(url).open("steps.h5").query("px > 1")
    with quarry.open(os.path.join(root, "steps.h5")) as ds:
        local = ds.query("px > 1")
        assert remote.series
        assert remote.count() == local.count()
        assert remote.counts() == local.counts()
        assert [m["step"] for m in remote.per_step()] == [m["step"] for m in local.per_step()]
        for mine, theirs, p in zip(remote.ids(), local.ids(), px, strict=True):
            np.testing.assert_array_equal(mine, theirs)
            np.testing.assert_array_equal(mine, np.flatnonzero(p > 1))
        for mine, p in zip(remote.values("px"), px, strict=True):
            np.testing.assert_array_equal(mine, p[p > 1])
    one = quarry.connect(url).open("steps.h5").query("px > 1", path="Step#2")
    assert not one.series
    np.testing.assert_array_equal(one.ids(), np.flatnonzero(px[2] > 1))


def test_errors_are_raised_as_locally(served):
    url, root, _, _ = served
    remote = quarry.connect(url).open("run/p.h5")
    with (
        quarry.open(os.path.join(root, "run", "p.h5")) as ds,
        pytest.raises(quarry.QuerySyntaxError) as local,
    ):
        ds.query("energy >> 1")
    with pytest.raises(quarry.QuerySyntaxError) as there:
        remote.query("energy >> 1").count()
    assert str(there.value) == str(local.value)
    assert there.value.position == local.value.position
    with pytest.raises(quarry.service.config.ServiceError) as unknown:
        remote.query("nothing > 1").count()
    assert unknown.value.status == 404
    assert "no variable 'nothing' in run/p.h5" in str(unknown.value)
    with pytest.raises(quarry.service.config.ServiceError, match="cannot reach the server"):
        quarry.connect("http://127.0.0.1:1").datasets()


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "quarry.cli.main", *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_quarry_query_server_prints_what_the_local_command_prints(served):
    url, root, columns, px = served
    query = "energy > 1.3 && q != 7"
    here = _cli("query", os.path.join(root, "run", "p.h5"), query, "--count", "--json")
    there = _cli("query", "--server", url, "run/p.h5", query, "--count", "--json")
    assert there.returncode == 0, there.stderr
    mine, theirs = json.loads(there.stdout), json.loads(here.stdout)
    assert (mine["query"], mine["file"], mine["count"]) == (query, "run/p.h5", theirs["count"])
    assert mine["server"] == url
    assert _cli("query", "--server", url, "run/p.h5", query).stdout == f"{theirs['count']}\n"
    ids = _cli("query", "--server", url, "run/p.h5", "q == 3", "--ids").stdout.split()
    assert [int(i) for i in ids] == np.flatnonzero(columns["q"] == 3).tolist()
    values = _cli("query", "--server", url, "run/p.h5", "q == 3", "--values", "q,id").stdout
    assert (
        values
        == _cli("query", os.path.join(root, "run", "p.h5"), "q == 3", "--values", "q,id").stdout
    )
    steps = _cli("query", "--server", url, "steps.h5", "px > 1", "--per-step").stdout
    assert [s["count"] for s in json.loads(steps)["per_step"]] == [
        int(np.count_nonzero(p > 1)) for p in px
    ]
    bad = _cli("query", "--server", url, "run/p.h5", "energy >")
    assert bad.returncode == 2
    assert bad.stderr == _cli("query", os.path.join(root, "run", "p.h5"), "energy >").stderr
    refused = _cli("query", "--server", url, "run/p.h5", "q == 3", "--out", "x.npy")
    assert (refused.returncode, refused.stderr) == (
        2,
        "quarry: error: --out cannot be used with --server\n",
    )


def test_connecting_and_the_count_path_import_no_server_modules():
    script = (
        "import sys, quarry\n"
        "conn = quarry.connect('http://127.0.0.1:1')\n"
        "from quarry.cli.main import main\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('starlette', 'uvicorn', 'pyarrow', 'anyio', 'httpx') or m == 'quarry.service.app'))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.stdout.strip() == "[]", done.stderr


MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")


@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install 'quarry-index[mpi]')")
def test_under_mpi_rank_0_asks_and_every_rank_gets_the_answer(served, tmp_path):
    pytest.importorskip("mpi4py")
    # As tests/parallel/test_mpi.py runs mpiexec: no hwloc file left in /tmp.
    missing = os.path.join(str(tmp_path), "no-hwloc-topology-file.xml")
    url, _, columns, _ = served
    # Rank 1 is given an address where nothing listens: it can only answer
    # through rank 0's broadcast.
    script = tmp_path / "ranks.py"
    script.write_text(
        "import json, sys, quarry\n"
        "from mpi4py import MPI\n"
        "comm = MPI.COMM_WORLD\n"
        "url = sys.argv[1] if comm.rank == 0 else 'http://127.0.0.1:1'\n"
        "sel = quarry.connect(url, comm=comm).open('run/p.h5').query('q < 20')\n"
        "ids = sel.ids()\n"
        "try:\n"
        "    sel2 = quarry.connect(url, comm=comm).open('run/p.h5').query('q <').count()\n"
        "except quarry.QuerySyntaxError as exc:\n"
        "    bad = exc.position\n"
        "every = comm.gather([comm.rank, sel.count(), ids.tolist(), bad], root=0)\n"
        "if comm.rank == 0:\n"
        "    print(json.dumps(every))\n"
    )
    done = subprocess.run(
        [MPIEXEC, "-n", "2", sys.executable, str(script), url],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HWLOC_XMLFILE": missing},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    expected = np.flatnonzero(columns["q"] < 20).tolist()
    assert json.loads(done.stdout) == [[r, len(expected), expected, 3] for r in (0, 1)]


def test_a_url_that_answers_html_is_said_not_to_be_a_quarry_server():
    """A proxy's login page or another program on the port: a one-line error,
    not a JSONDecodeError's traceback."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Page(BaseHTTPRequestHandler):
        def answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<html>log in first</html>")

        do_GET = do_POST = answer  # noqa: N815 (BaseHTTPRequestHandler's names)

        def log_message(self, *args: object) -> None:
            pass

    page = HTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=page.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{page.server_port}"
        proc = subprocess.run(
            [sys.executable, "-m", "quarry.cli.main", "query", "--server", url, "p.h5", "x > 1"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.strip() == (
            f"quarry: error: {url} answered /api/v1/datasets/p.h5 with text/html, not "
            "Quarry's JSON: is it a Quarry server (quarry serve prints its URL)?"
        )
    finally:
        page.shutdown()
        page.server_close()
