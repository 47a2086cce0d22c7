"""Test settings. Hypothesis runs a profile: ``default`` locally (60 examples,
the example database in .hypothesis/ kept between runs so a failure found once
is tried first next time), ``thorough`` (1000 examples), or ``ci`` (no
database on a fresh machine, one seed for the whole run, printed in the header
and the summary). ``QUARRY_HYPOTHESIS_PROFILE`` chooses; ``CI`` in the
environment means ``ci``. ``QUARRY_HYPOTHESIS_SEED=N`` (or ``--hypothesis-seed=N``)
reruns a seed under any profile."""

import os
import random
import sys

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
