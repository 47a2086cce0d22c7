"""The developer paths a newcomer meets first: make, skips, doctests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from generators import needs_make_data

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_says_that_the_rust_core_is_building_and_shows_it():
    plan = subprocess.run(
        ["make", "-n", "-C", ROOT, "install", "VENV=/nonexistent/venv"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    build = next(i for i, line in enumerate(plan) if "pip install -e" in line)
    said = "\n".join(plan[:build])
    assert "Building quarry's Rust core" in said and "a few minutes" in said
    assert " -q " not in plan[build]  # pip's own lines show the build going on


def test_the_shared_data_skip_says_what_is_skipped_and_why():
    reason = needs_make_data.kwargs["reason"]
    assert reason.startswith("tests on the team's standard data sets")
    assert "are skipped" in reason and "is not part of a clone" in reason


def test_doctests_leave_no_temporary_folders(tmp_path):
    """The examples make folders with tempfile.mkdtemp(); each doctest's are removed."""
    modules = ["python/quarry/dataset.py", "python/quarry/series.py"]
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *modules,
            "--doctest-modules",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert " passed" in done.stdout
    assert os.listdir(tmp_path) == []
