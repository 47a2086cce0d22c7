"""README, The data service: what the extra installs."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_service_extra_brings_starlette_uvicorn_and_pyarrow():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extra = config["project"]["optional-dependencies"]["service"]
    assert sorted(re.split(r"[<>=!~ ]", r)[0] for r in extra) == ["pyarrow", "starlette", "uvicorn"]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "`pip install 'quarry-index[service]'` brings Starlette, uvicorn and pyarrow." in readme


def test_the_load_report_says_what_the_readme_says():
    import json

    results = json.loads((ROOT / "benches" / "REPORT-service.json").read_text(encoding="utf-8"))
    phases = [results[p] for p in ("counts", "mixed", "rebuild")]
    assert all(p["clients"] == 256 and p["wrong"] == 0 for p in phases)
    counts = results["counts"]
    assert counts["per_second"] >= 1000 and counts["latency_ms"]["count"]["p99"] < 250
    assert all(p["per_second"] < counts["per_second"] for p in phases[1:])  # "run slower"
    assert results["particles"] == 16_777_216
    assert results["meta"]["cores"] == 2
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "met the goals of 1,000 counts/s and a p99 under 250 ms" in readme
