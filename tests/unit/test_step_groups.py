"""A file's step groups, found by name (quarry.query.series.step_groups),
against the rule written out here: the top-level groups whose names end in
a number and share the prefix most of them share, in step order."""

from __future__ import annotations

import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from quarry.formats.base import VariableInfo
from quarry.query.series import step_groups

_TOP = st.sampled_from(["Step#0", "Step#1", "Step#10", "Step#2", "run3", "run12", "a", "b7", ""])
_INNER = st.sampled_from(["x", "y", "sub/e", "", "Step#4"])


def _rule(paths: list[str]) -> list[tuple[int, str]]:
    by_prefix: dict[str, dict[str, int]] = {}
    for path in paths:
        parts = [p for p in path.split("/") if p]
        if len(parts) >= 2:
            found = re.fullmatch(r"(.*?)(\d+)", parts[0])
            if found:
                by_prefix.setdefault(found.group(1), {})[parts[0]] = int(found.group(2))
    if not by_prefix:
        return []
    most = max(len(groups) for groups in by_prefix.values())
    prefix = min(p for p, groups in by_prefix.items() if len(groups) == most)
    return sorted((step, "/" + name) for name, step in by_prefix[prefix].items())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_TOP, _INNER, st.sampled_from(["/", "//"])), max_size=20))
def test_step_groups_follow_the_rule(tree):
    paths = [f"{sep}{top}{sep}{inner}".rstrip("/") or "/" for top, inner, sep in tree]
    variables = [VariableInfo(p, (2,), np.dtype("f4")) for p in paths]
    assert step_groups(variables) == _rule(paths)
