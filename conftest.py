"""Doctests of the quarry package (python/quarry): each runs with its own temporary
directory as ``tempfile``'s default, removed when it ends, so the examples'
``tempfile.mkdtemp()`` calls leave nothing behind in the system's /tmp."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator

import pytest
from _pytest.doctest import DoctestItem


@pytest.fixture(autouse=True)
def _doctest_in_its_own_temporary_directory(request: pytest.FixtureRequest) -> Iterator[None]:
    if not isinstance(request.node, DoctestItem):
        yield
        return
    with tempfile.TemporaryDirectory(prefix="quarry-doctest-", ignore_cleanup_errors=True) as d:
        before, tempfile.tempdir = tempfile.tempdir, d
        try:
            yield
        finally:
            tempfile.tempdir = before
