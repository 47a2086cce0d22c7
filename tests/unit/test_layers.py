"""The package's layers, beyond what import-linter checks in `make lint`
(pyproject.toml, [tool.importlinter]): no stage imports the root package for
anything but the compiled core, and no module imports another package's
private names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "quarry"
#: What a module may take from the root package itself: the compiled core and the
#: guard against the unrelated PyPI "quarry" (both modules, not the API above them).
FROM_ROOT = {"_core", "_clash"}


def _modules() -> list[tuple[str, ast.Module]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out.append((name, ast.parse(path.read_text(encoding="utf-8"))))
    return out


def _package(module: str, is_init: bool = False) -> str:
    return module if is_init else module.rpartition(".")[0]


@pytest.mark.parametrize(
    ("name", "tree"), _modules(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_stages_take_only_the_core_from_the_root_package(name: str, tree: ast.Module) -> None:
    if name == "quarry" or name.startswith("quarry.cli"):
        return  # the API and the command line stand on top of everything
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            assert all(a.name != "quarry" for a in node.names), f"{name}: import quarry"
        elif isinstance(node, ast.ImportFrom) and node.module == "quarry":
            taken = {a.name for a in node.names}
            assert taken <= FROM_ROOT, f"{name} imports {taken - FROM_ROOT} from quarry"


@pytest.mark.parametrize(
    ("name", "tree"), _modules(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_no_private_names_cross_packages(name: str, tree: ast.Module) -> None:
    home = name if (PACKAGE.parent / Path(*name.split("."), "__init__.py")).exists() else None
    own = home or name.rpartition(".")[0]
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("quarry"):
            continue
        source = node.module or ""
        crossing = source != own and source.rpartition(".")[0] != own
        private = [a.name for a in node.names if a.name.startswith("_") and a.name not in FROM_ROOT]
        assert not (crossing and private), f"{name} imports private {private} from {source}"
