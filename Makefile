# Quarry developer tasks. `make demo` and `make test` are the README's quick start:
# each creates .venv, builds the Rust core and installs the package itself.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?= -q
PY_PATHS := python tests docs $(wildcard benches)

.PHONY: help install demo test test-rust test-python lint fmt bench docs dist test-wheel clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# Before the distribution was renamed quarry-index, `make install` installed the clone
# as "quarry": its record is removed, so that the environment holds one Quarry.
install: $(PY)  ## build the Rust core and install quarry (editable) with test/plot/lint/docs/dist extras
	@$(PY) -c "import importlib.metadata as m, sys; sys.exit(0 if 'Exact, fast range queries' in (m.metadata('quarry')['Summary'] or '') else 1)" 2>/dev/null \
		&& $(PY) -m pip uninstall -y -q quarry || true
	@echo "==> Building quarry's Rust core (cargo, release) and installing quarry into $(VENV)."
	@echo "    The first build compiles the Rust crates: a few minutes on 2 cores. Later runs take seconds."
	$(PY) -m pip install -e '.[test,plot,lint,docs,dist]'

demo: install  ## generate a sample, index it, run queries, draw a histogram (in ./quarry-demo)
	$(VENV)/bin/quarry demo

test: install test-rust test-python  ## the whole test suite: Rust core + Python (incl. doctests)

test-rust:
	cargo test -p quarry-core -q

test-python:
	$(PY) -m pytest tests python/quarry --doctest-modules $(PYTEST_ARGS)

lint: install  ## ruff, mypy, the layers (import-linter), stubtest, cargo fmt, clippy
	$(VENV)/bin/ruff check $(PY_PATHS)
	$(VENV)/bin/ruff format --check $(PY_PATHS)
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(PY) -m mypy.stubtest quarry._core
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings

fmt:  ## format Rust and Python
	cargo fmt --all
	$(VENV)/bin/ruff format $(PY_PATHS)
	$(VENV)/bin/ruff check --fix $(PY_PATHS)

bench: install  ## run the benchmarks; rewrite benches/REPORT*.{json,md} and README's figures
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) benches/run.py
	$(PY) benches/series.py
	$(PY) benches/startup.py
	$(PY) benches/opening.py
	$(PY) benches/reorg.py
	$(PY) benches/parallel.py
	$(PY) benches/insitu.py
	$(PY) benches/workload720.py
	$(PY) benches/service.py
	$(PY) benches/readme_figures.py

docs: install  ## build the documentation (docs/_build/html) and run its examples; warnings are errors
	$(VENV)/bin/sphinx-build -W --keep-going -q -b html docs docs/_build/html
	$(VENV)/bin/sphinx-build -W --keep-going -q -b doctest docs docs/_build/doctest

dist: install  ## build the abi3 manylinux wheel and the sdist into dist/ (reuses target/)
	rm -f dist/quarry_index-*
	$(VENV)/bin/maturin build --release --out dist
	$(VENV)/bin/maturin sdist --out dist

test-wheel: dist  ## install the wheel into a fresh venv with no cargo/rustc on PATH and run it
	$(PY) tests/packaging/check_wheel.py dist

clean:
	rm -rf target $(VENV) python/quarry/*.so quarry-demo dist docs/_build
