"""Running ``quarry`` as a user does, from the shell: in a process of its own."""

from __future__ import annotations

import subprocess
import sys

QUARRY = [sys.executable, "-m", "quarry.cli.main"]


def run(*args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    """``quarry ARGS...``, which must exit ``code``, with no traceback."""
    proc = subprocess.run([*QUARRY, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    return proc
