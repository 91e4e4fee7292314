# Two entry points, both from a fresh clone:
#   make demo   install into .venv and run the main job on the embedded default
#   make test   install everything and run lint, type checks, the docs build and the whole test suite
#   make docs   serve the documentation site on http://127.0.0.1:8000 (mkdocs serve)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: install demo test lint typecheck pytest bench docs docs-check

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# --no-compile: Python compiles a module when it is first imported instead of pip compiling
# every module of every package at install (a minute of a fresh install; most are never run)
install: $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	# CPU torch first: any other torch spec may pull a multi-GB GPU build
	$(BIN)/python -m pip install -q --no-compile torch==2.13.0
	$(BIN)/python -m pip install -q --no-compile -e ".[all,dev]"

demo: install
	$(BIN)/python examples/demo.py

lint:
	$(BIN)/ruff check .

# mypy cannot follow setuptools' folder mapping in an editable install: check a plain copy
# (build/ too: setuptools keeps the files of moved modules there and would copy them in).
# Its cache lives outside the checkout, beside the tests' infinity-emb venv: analysing the
# installed libraries rechunk calls takes about 50 s cold and none warm (mypy re-checks
# whatever changed, by content)
MYPY_CACHE ?= $(abspath $(or $(RECHUNK_TEST_CACHE),$(HOME)/.cache/rechunk/test)/mypy)
typecheck:
	rm -rf .typecheck build
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation --target .typecheck .
	cd .typecheck && ../$(BIN)/mypy -p rechunk --config-file ../pyproject.toml \
		--cache-dir $(MYPY_CACHE)

# pytest exits 5 when it collected no test (e.g. a -k filter that matches nothing): report it
# and do not treat it as a failure of the code. The suite runs in PYTEST_WORKERS processes
# (pytest-xdist), each taking whole test files: a file's module fixtures (a Ray cluster, a
# Chroma server) start once, in one process. A test keeps at most one core busy and often
# waits (on a server, a subprocess, a Ray cluster): on a 2-core machine (2026-12-07) two
# workers kept the cores 71% busy and took 12 min 16 s, three took 10 min 49 s.
# Files are handed out in collection order (the slowest first: tests/conftest.py), not
# xdist's default of the files with the most tests first, which left the Ray tests to last.
PYTEST_WORKERS ?= 3
pytest:
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder \
		$(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; rc=0; fi; exit $$rc

# the documentation site, built strictly (a broken link, a missing page in the nav or an API
# name mkdocstrings cannot find fails) into a throw-away folder; --help texts checked current
docs-check:
	$(BIN)/python docs/gen_cli.py --check
	rm -rf .docs-site
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --quiet -d .docs-site
	rm -rf .docs-site

docs:
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs serve -a 127.0.0.1:8000

test: install lint typecheck docs-check pytest

# the core benchmarks, each rewriting its section of docs/benchmarks.md (run on an idle
# machine); the others (formats, markup, code, scale, watch, distributed...) take longer
# or need ../shared: each section of docs/benchmarks.md names the command that made it
bench: install
	$(BIN)/python benchmarks/churn.py
	$(BIN)/python benchmarks/cache.py
	$(BIN)/python benchmarks/sync.py
	$(BIN)/python benchmarks/retrieval.py
	$(BIN)/python benchmarks/store_reads.py
	$(BIN)/python benchmarks/memory.py
	$(BIN)/python benchmarks/sync_memory.py
	$(BIN)/python benchmarks/embed.py
