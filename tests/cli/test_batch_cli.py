"""quarry query --batch: one JSON line per query, errors naming the line."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
from test_cli import run


@pytest.fixture(scope="module")
def beam(tmp_path_factory):
    d = tmp_path_factory.mktemp("batchcli")
    rng = np.random.default_rng(8)
    truth = {}
    for k in (1, 2):
        path = str(d / f"beam_{k}.h5")
        with h5py.File(path, "w") as f:
            for s in range(2):
                t = rng.normal(0, 1, 157 + s + k)
                f[f"Step#{s}/t"] = t
                truth[(path, s)] = t
    run("index", str(d / "beam_*.h5"), "--block-size", "50")
    queries = d / "queries.txt"
    queries.write_text("# slices of t\n-1 <= t < 0\n\n0 <= t < 1\n  t >= 1  \n")
    return str(d), truth, str(queries)


WANT = [("-1 <= t < 0", -1, 0), ("0 <= t < 1", 0, 1), ("t >= 1", 1, np.inf)]


def count(t, lo, hi):
    return int(((t >= lo) & (t < hi)).sum())


def lines(stdout):
    return [json.loads(line) for line in stdout.splitlines()]


def test_batch_on_one_file_with_a_path(beam):
    d, truth, queries = beam
    path = f"{d}/beam_1.h5"
    out = lines(run("query", path, "--batch", queries, "--path", "Step#1").stdout)
    assert out == [{"query": q, "count": count(truth[(path, 1)], lo, hi)} for q, lo, hi in WANT]


def test_batch_over_a_series(beam):
    d, truth, queries = beam
    members = [(f"{d}/beam_{k}.h5", s) for k in (1, 2) for s in range(2)]
    out = lines(run("query", f"{d}/beam_*.h5", "--batch", queries).stdout)
    assert out == [
        {"query": q, "count": sum(count(truth[m], lo, hi) for m in members)} for q, lo, hi in WANT
    ]
    out = lines(run("query", f"{d}/beam_1.h5", "--batch", queries, "--per-step").stdout)
    assert [list(o) for o in out] == [["query", "count", "per_step"]] * 3
    assert out[2]["per_step"] == [
        {
            "file": f"{d}/beam_1.h5",
            "step": s,
            "count": count(truth[(f"{d}/beam_1.h5", s)], 1, np.inf),
        }
        for s in range(2)
    ]


def test_batch_from_stdin(beam):
    import subprocess

    from test_cli import QUARRY

    d, truth, _ = beam
    path = f"{d}/beam_2.h5"
    proc = subprocess.run(
        [*QUARRY, "query", path, "--batch", "-", "--path", "Step#0"],
        input="t >= 1\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert lines(proc.stdout) == [{"query": "t >= 1", "count": count(truth[(path, 0)], 1, np.inf)}]


def test_a_syntax_error_names_its_line_and_shows_the_caret(beam, tmp_path):
    d, _, _ = beam
    bad = tmp_path / "bad.txt"
    bad.write_text("t > 1\n# fine\n\nt < < 2\n")
    proc = run("query", f"{d}/beam_1.h5", "--batch", str(bad), "--path", "Step#0", code=2)
    assert proc.stdout == ""  # nothing runs before every line parses
    assert "line 4: expected a value" in proc.stderr
    assert "  t < < 2\n      ^" in proc.stderr


def test_other_errors_name_the_line(beam, tmp_path):
    d, _, _ = beam
    bad = tmp_path / "bad.txt"
    bad.write_text("t > 1\ntt > 2\n")
    err = run("query", f"{d}/beam_1.h5", "--batch", str(bad), "--path", "Step#0", code=1).stderr
    assert "line 2 (tt > 2): no variable 'tt'" in err and err.count("\n") == 1
    err = run("query", f"{d}/beam_*.h5", "--batch", str(bad), code=1).stderr
    assert "line 2 (tt > 2): " in err and "beam_1.h5, step 0" in err
    err = run("query", f"{d}/beam_1.h5", "--batch", str(tmp_path / "none.txt"), code=1).stderr
    assert "no such batch file" in err
    err = run("query", f"{d}/beam_1.h5", "t > 1", "--batch", str(bad), code=2).stderr
    assert "either a query or --batch" in err
    err = run("query", f"{d}/beam_1.h5", "--batch", str(bad), "--ids", code=2).stderr
    assert "--ids cannot be used with --batch" in err
