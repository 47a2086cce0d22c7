"""The promises about installing, the documentation and CI that a quick test can
check; ``make docs`` and ``make test-wheel`` (run by .ci/run) check the rest."""

from __future__ import annotations

import glob
import importlib.util
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _read(*parts: str) -> str:
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def _texts() -> dict[str, str]:
    """README, docs pages, and every Python file: where an install line can be."""
    paths = ["README.md", "CHANGELOG.md", *glob.glob("docs/**/*.md", root_dir=ROOT, recursive=True)]
    for tree in ("python", "tests", "benches"):
        paths += glob.glob(f"{tree}/**/*.py", root_dir=ROOT, recursive=True)
    return {p: _read(p) for p in paths}


def test_every_install_line_names_quarry_index():
    wrong = re.compile(r"pip install (?:-\S+ )*['\"]?(?:quarry(?![-\w])|\.\[)")
    found = {p: wrong.findall(t) for p, t in _texts().items()}
    assert {p: f for p, f in found.items() if f} == {}


def test_the_quick_start_is_two_commands_for_a_clone():
    readme = _read("README.md")
    block = readme.split("## Quick start (from a clone)\n", 1)[1].split("```sh\n", 1)[1]
    commands = [line.split("#")[0].strip() for line in block.split("```", 1)[0].splitlines()]
    assert commands == ["make demo", "make test"]
    install = readme.split("## Install\n", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    assert install.split("#")[0].strip() == "pip install quarry-index"


def _includes() -> list[tuple[str, str, str]]:
    """(page, start-after, end-before) of every README section a docs page includes."""
    found = []
    for page in glob.glob("docs/*.md", root_dir=ROOT):
        for block in re.findall(r"```\{include\} \.\./README\.md\n(.*?)```", _read(page), re.S):
            start = re.search(r':start-after: "(.*)"', block)
            end = re.search(r':end-before: "(.*)"', block)
            assert start and end, (page, block)
            found.append((page, start[1].replace("\\n", "\n"), end[1]))
    return found


def test_each_docs_page_includes_a_readme_section_that_exists():
    """A renamed README heading fails here, before the docs build does."""
    readme = _read("README.md")
    includes = _includes()
    assert len(includes) >= 12
    for page, start, end in includes:
        assert readme.count(start) == 1, (page, start)
        assert end in readme.split(start, 1)[1], (page, end)


def test_the_docs_have_a_page_per_topic_and_an_api_reference():
    index = _read("docs", "index.md")
    pages = [
        "getting-started",
        "queries",
        "formats",
        "series",
        "reorg",
        "mpi",
        "outputs",
        "semantics",
        "index-format",
        "tunables",
        "api",
        "CHANGELOG",
    ]
    for page in pages:
        assert f"\n{page}\n" in index and os.path.exists(os.path.join(ROOT, "docs", f"{page}.md"))
    assert "autoclass:: quarry.Dataset" in _read("docs", "api.md")
    for page in ("getting-started", "queries", "series", "reorg"):
        assert "```{doctest}" in _read("docs", f"{page}.md")


def test_ci_builds_the_docs_strictly_and_tries_the_wheel():
    ci = _read(".ci", "run").splitlines()
    # the commands, without their environment settings (VAR=value) and comments
    commands = [re.sub(r"^(\w+=\S+\s+)*", "", line.split("#")[0]).strip() for line in ci[-4:]]
    assert commands == ["make test", "make lint", "make docs", "make test-wheel"]
    makefile = _read("Makefile")
    assert "sphinx-build -W --keep-going -q -b html docs" in makefile
    assert "sphinx-build -W --keep-going -q -b doctest docs" in makefile
    assert "maturin build --release --out dist" in makefile


def test_the_wheel_check_leaves_rust_off_path(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location(
        "check_wheel", os.path.join(ROOT, "tests", "packaging", "check_wheel.py")
    )
    assert spec and spec.loader
    check_wheel = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check_wheel)
    rust, plain = tmp_path / "rust", tmp_path / "plain"
    for d in (rust, plain):
        d.mkdir()
    (rust / "rustc").write_text("")
    (plain / "python3").write_text("")
    monkeypatch.setenv("PATH", os.pathsep.join([str(rust), str(plain)]))
    assert check_wheel._path_without_rust() == str(plain)
