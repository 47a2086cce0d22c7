"""README: every --json prints strict JSON (NaN as null, infinities as the
strings "inf" and "-inf"); values, aggregates and tracks printed bare NaN
tokens, which jq and JSON.parse refuse, and aggregates the string "nan"."""

from __future__ import annotations

import json
import subprocess
import sys

import h5py
import numpy as np
import pytest


def strict(text: str) -> object:
    def refuse(token: str) -> object:
        raise AssertionError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def steps(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("json") / "n.h5")
    with h5py.File(path, "w") as f:
        for s in range(2):
            f[f"Step#{s}/id"] = np.array([1, 2, 3])
            f[f"Step#{s}/e"] = np.array([1.0, 2.0, 3.0])
            f[f"Step#{s}/x"] = np.array([np.nan, np.inf, -np.inf])
    return path


def quarry(*args: str) -> object:
    cli = [sys.executable, "-m", "quarry.cli.main", *args]
    run = subprocess.run(cli, capture_output=True, text=True, check=True, timeout=120)
    return strict(run.stdout)


def test_values_and_tracks_are_strict_json(steps):
    per_step = quarry("query", steps, "e > 0", "--values", "x", "--json", "--quiet")["per_step"]
    assert [m["values"]["x"] for m in per_step] == [[None, "inf", "-inf"]] * 2
    tracks = quarry("track", steps, "e > 0", "--at-step", "0", "--values", "x", "--json")
    assert [s["values"]["x"] for s in tracks["steps"]] == [[None, "inf", "-inf"]] * 2
    one = quarry("query", steps, "e > 0", "--path", "Step#1", "--values", "x", "--json")
    assert one["values"]["x"] == [None, "inf", "-inf"]


def test_aggregates_are_strict_json(steps):
    """Missing values are left out of aggregates: x's are inf and -inf."""
    query = "e > max(x) || e < min(x) || e > sum(x)"
    result = quarry("query", steps, query, "--path", "Step#0", "--json", "--quiet")
    values = {a["expr"]: a["value"] for a in result["aggregates"]}
    assert list(values.values()) == ["inf", "-inf", None]  # max, min, and inf + -inf: NaN
    assert result["count"] == 0


def test_info_and_histograms_are_strict_json(steps):
    strict(json.dumps(quarry("info", steps, "--json")))
    hist = quarry("hist", steps, "e", "--bins", "2", "--json")
    assert sum(hist["counts"]) == 6
