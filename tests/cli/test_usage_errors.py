"""Command-line misuse: one line ``quarry: error: ...`` and exit 2, also with
--debug (a traceback would point into the CLI, not at the mistake), where
a problem with the data exits 1."""

from __future__ import annotations

import subprocess
import sys

import h5py
import numpy as np
import pytest

from quarry.cli.main import main
from quarry.errors import QuarryError, UsageError

QUARRY = [sys.executable, "-m", "quarry.cli.main"]


@pytest.fixture(scope="module")
def run_h5(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("usage") / "run.h5")
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(100.0)
        f["y"] = np.arange(100.0)[::-1]
    return path


MISTAKES = [
    (["query", "{f}", "{f}", "x > 1", "--explain"], "--explain takes one file and one query"),
    (
        ["query", "{f}", "x > 1", "--explain", "--per-step"],
        "--explain explains one query on one file, not with --per-step; run it without (a "
        "file of steps gets each step's plan)",
    ),
    (["query", "{f}"], "give the data file(s) and then a query, e.g. quarry query run.h5 'x > 1'"),
    (["query", "{f}", "--batch", "-", "--ids"], "--ids cannot be used with --batch (counts only)"),
    (
        ["query", "{f}", "x > 1", "--out", "n.h5"],
        "--out writes the hits' ids, coordinates or values: give it with --ids, --coords or "
        "--values (a count is printed, not written)",
    ),
    (["hist", "{f}", "x,y,x,y"], "give one to three variables"),
    (
        ["hist", "{f}", "x", "--edges", "0,a"],
        "--edges and --range take numbers separated by commas",
    ),
    (["plot", "{f}", "x", "y", "--where", "x > 1"], "give --png FILE or --svg FILE"),
    (["track", "x > 1", "--at-step", "0"], "give the data file(s), then the query"),
    (
        ["register", "{f}", "--dtype", "<f4", "--shape", "4,x"],
        "--shape must be integers separated by commas, got '4,x'",
    ),
    # A name's place can matter (--at's give the axes in order): an empty one
    # is refused, not dropped.
    (
        ["interp", "{f}", "--field", "b={f}", "--at", "x,,y"],
        "--at 'x,,y': name 2 is empty; give a variable between each two commas",
    ),
    (
        ["query", "{f}", "x > 1", "--values", ",x"],
        "--values ',x': name 1 is empty; give a variable between each two commas",
    ),
    (
        ["reorg", "{f}", "--vars", "x, ,y", "--bins", "4"],
        "--vars 'x, ,y': name 2 is empty; give a variable between each two commas",
    ),
]


@pytest.mark.parametrize(("argv", "says"), MISTAKES, ids=lambda v: " ".join(v)[:40])
@pytest.mark.parametrize("debug", [False, True], ids=["plain", "debug"])
def test_misuse_prints_one_line_and_exits_2(run_h5, argv, says, debug):
    argv = [a.format(f=run_h5) for a in argv]
    done = subprocess.run(
        [*QUARRY, *(["--debug"] if debug else []), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert (done.returncode, done.stderr, done.stdout) == (2, f"quarry: error: {says}\n", "")


@pytest.mark.parametrize(
    ("argv", "prog", "says"),
    [
        (
            ["--ids", "--coords"],
            "quarry query",
            "argument --coords: not allowed with argument --ids",
        ),
        (
            ["--jobs", "two"],
            "quarry query",
            "argument --jobs/-j: expected a whole number, got 'two'",
        ),
        (["--frob"], "quarry", "unrecognized arguments: --frob"),  # found by the top parser
    ],
)
def test_options_argparse_refuses_print_one_line_too(run_h5, argv, prog, says):
    """argparse printed its 8-line usage block before the error."""
    done = subprocess.run(
        [*QUARRY, "query", run_h5, "x > 1", *argv], capture_output=True, text=True, timeout=120
    )
    said = f"{prog}: error: {says}; see '{prog} --help'\n"
    assert (done.returncode, done.stderr, done.stdout) == (2, said, "")


def test_misuse_is_a_usage_error_and_data_errors_exit_1(run_h5, capsys):
    assert issubclass(UsageError, QuarryError)
    assert main(["plot", run_h5, "x", "y", "--where", "x > 1"]) == 2
    assert main(["query", run_h5, "nothere > 1"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "quarry: error: give --png FILE or --svg FILE"
    assert err[1].startswith("quarry: error: ") and "nothere" in err[1]


def test_misuse_under_mpiexec_is_agreed_on_before_the_work(run_h5, monkeypatch, capsys):
    """Under mpiexec a usage error takes the path of every error found before
    the work: the ranks agree on it (quarry.parallel.mpi.agree_to_start) and
    rank 0 prints it once, with the serial exit code. The launch and the
    collective call are stood in for here; tests/parallel runs the real one."""
    import quarry.parallel.mpi as mpi

    class RankZero:
        rank, size = 0, 2

    offered = []

    def agree_to_start(comm, failure):
        offered.append(failure)
        return failure

    monkeypatch.setattr(mpi, "launched_ranks", lambda: 2)
    monkeypatch.setattr(mpi, "world", RankZero)
    monkeypatch.setattr(mpi, "agree_to_start", agree_to_start)
    assert main(["query", run_h5, run_h5, "x > 1", "--explain"]) == 2
    assert offered == [(2, "error: --explain takes one file and one query")]
    assert capsys.readouterr().err == "quarry: error: --explain takes one file and one query\n"


def test_a_loaded_selection_refuses_another_path(tmp_path):
    """--load with a --path other than the one the selection was made under
    is refused (its rows are that table's), not silently read there."""
    path = str(tmp_path / "s.h5")
    with h5py.File(path, "w") as f:
        for step in range(2):
            f[f"Step#{step}/x"] = np.arange(10.0) + 100 * step
    saved = str(tmp_path / "s.qsel")
    subprocess.run([*QUARRY, "query", path, "x > 104", "--path", "Step#1", "--save", saved],
                   check=True, capture_output=True)  # fmt: skip
    refused = subprocess.run(
        [*QUARRY, "query", path, "--load", saved, "--values", "x", "--path", "Step#0"],
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        f"quarry: error: the selection in {saved} was made under --path Step#1, and its rows "
        "and names are that table's; leave --path off to use it (not --path Step#0)"
    )
    same = subprocess.run(
        [*QUARRY, "query", path, "--load", saved, "--values", "x", "--path", "/Step#1"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert same.stdout.splitlines()[1:] == [f"{r},{100.0 + r}" for r in range(5, 10)]


def test_a_reversing_subarray_step_is_refused_in_the_query_s_words(run_h5):
    """README: subarrays take positive steps; `x[::-1]` is refused (exit 2, a caret)."""
    proc = subprocess.run(
        [*QUARRY, "query", run_h5, "x[::-1] > 1", "--count"], capture_output=True, text=True
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[0] == (
        "quarry: error in query: step -1 on axis 0: only positive steps are supported"
    )
    assert "Traceback" not in proc.stderr
