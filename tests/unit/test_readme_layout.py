"""The README's Layout section names every folder and top-level module of the
package, and the layer order it states is the one make lint checks."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "quarry"


def _layout() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Layout\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```", 2)[1]


def test_every_package_folder_and_public_module_is_in_the_layout():
    layout = _layout()
    folders = [p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()]
    modules = [
        p.name for p in PACKAGE.glob("*.py") if not p.name.startswith("_") and p.name != "sample.py"
    ]
    missing = [f"{f}/" for f in folders if f"{f}/" not in layout]
    missing += [m for m in modules if m not in layout]
    assert not missing, f"README Layout does not mention {missing}"


def test_the_layout_lists_layers_in_the_order_import_linter_checks():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = config["tool"]["importlinter"]["contracts"]
    layers = [re.split(r"[ :|]+", layer)[0].removeprefix("quarry.") for layer in contract["layers"]]
    layout = _layout()
    positions = [re.search(rf"\b{name}(/|\.py)", layout).start() for name in layers]  # type: ignore[union-attr]
    assert positions == sorted(positions), layers


def test_make_lint_runs_what_the_readme_says():
    """README: make lint runs ruff, mypy, import-linter, stubtest, cargo fmt and clippy."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    target = makefile.split("\nlint:", 1)[1].split("\n\n", 1)[0]
    for command in (
        "ruff check",
        "ruff format --check",
        "mypy",
        "lint-imports",
        "mypy.stubtest",
        "cargo fmt --all --check",
        "cargo clippy --workspace --all-targets -- -D warnings",
    ):
        assert command in target, command
