"""Beside the Minecraft library ``quarry`` (same import name), Quarry refuses
to run, naming both, instead of importing a mixture of the two.

The clash is rebuilt here as pip leaves it: a copy of our package with the
Minecraft library's files (``quarry/net/protocol.py``...) in the same
directory, and, when the Minecraft library was installed last, its empty
``quarry/__init__.py`` in place of ours.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

import quarry

# What pip generates for the console script `quarry = quarry.cli.main:main`.
CONSOLE_SCRIPT = f"""#!{sys.executable}
import sys
from quarry.cli.main import main
sys.exit(main())
"""


@pytest.fixture
def clashing_site(tmp_path):
    site = tmp_path / "site-packages"
    ours = os.path.dirname(quarry.__file__)
    shutil.copytree(ours, site / "quarry", ignore=shutil.ignore_patterns("__pycache__"))
    (site / "quarry" / "net").mkdir()
    for name in ("net/__init__.py", "net/protocol.py"):
        (site / "quarry" / name).write_text("")
    script = tmp_path / "bin" / "quarry"
    script.parent.mkdir()
    script.write_text(CONSOLE_SCRIPT)
    script.chmod(0o755)
    return site, script


def _env(site) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(site)}


def _names_both(text: str) -> bool:
    return all(
        s in text
        for s in ("two packages named 'quarry'", "'quarry-index'", "Minecraft protocol library")
    )


def test_importing_beside_the_minecraft_library_raises_naming_both(clashing_site):
    site, _ = clashing_site
    done = subprocess.run(
        [sys.executable, "-c", "import quarry"], env=_env(site), capture_output=True, text=True
    )
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1
    assert last.startswith("quarry._clash.PackageClashError: ") and _names_both(last)
    assert "pip uninstall quarry quarry-index && pip install quarry-index" in last


@pytest.mark.parametrize("installed_last", ["quarry-index", "minecraft quarry"])
def test_the_command_prints_one_line_and_exits_1(clashing_site, installed_last):
    site, script = clashing_site
    if installed_last == "minecraft quarry":
        (site / "quarry" / "__init__.py").write_text("")  # theirs replaced ours
    done = subprocess.run(
        [str(script), "--version"], env=_env(site), capture_output=True, text=True
    )
    assert done.returncode == 1 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("quarry: ") and _names_both(lines[0])


def test_without_the_minecraft_library_the_same_copy_runs(clashing_site):
    site, script = clashing_site
    shutil.rmtree(site / "quarry" / "net")
    done = subprocess.run(
        [str(script), "--version"], env=_env(site), capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout == f"quarry {quarry.__version__}\n"
