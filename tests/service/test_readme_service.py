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
