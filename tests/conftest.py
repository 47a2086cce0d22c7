"""Test settings. Hypothesis runs a profile: ``default`` locally (60 examples,
the example database in .hypothesis/ kept between runs so a failure found once
is tried first next time), ``thorough`` (1000 examples), or ``ci`` (no
database on a fresh machine, one seed for the whole run, printed in the header
and the summary). ``QUARRY_HYPOTHESIS_PROFILE`` chooses; ``CI`` in the
environment means ``ci``. ``QUARRY_HYPOTHESIS_SEED=N`` (or ``--hypothesis-seed=N``)
reruns a seed under any profile.

The session's temporary directory: every temporary file the tests write,
and every process they start (which inherits ``TMPDIR``: the CLI, mpiexec
and its ranks), goes into one new directory of this session, so that what
is left behind can be told from other processes' files in /tmp. At the end,
anything left there besides pytest's own ``tmp_path`` folders fails the run,
named; the directory is removed when the run passes and kept (its path
printed) when it does not."""

import os
import random
import shutil
import sys
import tempfile

import pytest
from hypothesis import HealthCheck, settings

sys.path.insert(0, os.path.dirname(__file__))

_COMMON = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    "print_blob": True,
}
settings.register_profile("default", max_examples=60, **_COMMON)
settings.register_profile("thorough", max_examples=1000, **_COMMON)
settings.register_profile("ci", max_examples=60, database=None, **_COMMON)
PROFILE = os.environ.get("QUARRY_HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "default")
settings.load_profile(PROFILE)

_SEED_TEXT = os.environ.get("QUARRY_HYPOTHESIS_SEED")
#: The run's seed: given, or drawn for a CI run (so it can be printed and
#: rerun); None leaves Hypothesis its own per-test seeds and its database.
SEED = (
    int(_SEED_TEXT)
    if _SEED_TEXT
    else random.SystemRandom().randrange(2**32)
    if PROFILE == "ci"
    else None
)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # Before Hypothesis' own pytest_configure reads the option.
    if SEED is not None and config.getoption("hypothesis_seed", None) is None:
        config.option.hypothesis_seed = str(SEED)


#: The session's temporary directory, and what the tests left in it.
_TEMPORARY = pytest.StashKey[str]()
_LEFT = pytest.StashKey[list[str]]()


def pytest_sessionstart(session: pytest.Session) -> None:
    # Before pytest first asks tempfile where tmp_path's folders go.
    folder = tempfile.mkdtemp(prefix="quarry-tests-")
    os.environ["TMPDIR"] = tempfile.tempdir = folder
    session.config.stash[_TEMPORARY] = folder


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when a test left something in the session's temporary
    directory (pytest's own tmp_path folders, ``pytest-of-USER``, aside)."""
    folder = session.config.stash.get(_TEMPORARY, None)
    if folder is None:
        return
    left = sorted(n for n in os.listdir(folder) if not n.startswith("pytest-of-"))
    session.config.stash[_LEFT] = left
    if left:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    elif exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        shutil.rmtree(folder, ignore_errors=True)


def _seed_line(config: pytest.Config) -> str | None:
    seed = config.getoption("hypothesis_seed", None)
    if seed is None:
        return None
    return f"hypothesis seed {seed} (rerun it: QUARRY_HYPOTHESIS_SEED={seed})"


def pytest_report_header(config: pytest.Config) -> str | None:
    return _seed_line(config)


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    line = _seed_line(config)
    if line is not None:
        terminalreporter.write_line(line)
    folder, left = config.stash.get(_TEMPORARY, None), config.stash.get(_LEFT, [])
    if left:
        terminalreporter.write_line(
            f"tests left {len(left)} file(s) in the temporary directory {folder}: "
            + ", ".join(left),
            red=True,
        )
    elif folder is not None and os.path.isdir(folder):
        terminalreporter.write_line(f"the tests' temporary files are kept in {folder}")
