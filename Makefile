# `make run`: set up .venv with what running needs and run every fixture (fixtures/ and its
# folders); `make test`: add the dev tools, then lint, type-check, build the docs site and run
# every test; `make test-fast`: the tests without the slow, PostgreSQL and browser lanes; `make
# bench`: the runner's own cost against its floors (about 1-3 minutes); `make bench-postgres`: the
# durable step on PostgreSQL beside SQLite's, and queued runs per second with 1, 2 and 4 workers
# (starts its own throwaway PostgreSQL); `make bench-peers`: the runner beside Burr, LangGraph and
# pydantic-ai, in a virtual environment of its own (bench/.peers-venv), about 2-5 minutes
# (PEERS_ARGS="--rounds 7 --stat best" to pass options). `make docs`: serve the docs site on
# http://127.0.0.1:8000 while you edit docs/; `make docs-build`: build it into site/ with --strict.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
PEERS_VENV := bench/.peers-venv
PEERS_STAMP := $(PEERS_VENV)/.installed

.PHONY: install run test test-fast lint typecheck docs docs-build bench bench-postgres bench-peers \
	clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Running needs the package and its dependencies, and BM25 for the bundled tool-retrieval fixture.
$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[retrieval]'
	touch $(RUN_STAMP)

# Testing adds the dev tools (pytest, mypy, ruff, hypothesis, the provider SDKs, ...).
$(DEV_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(DEV_STAMP)

install: $(DEV_STAMP)

run: $(RUN_STAMP)
	$(BIN)/runner run fixtures/ fixtures/approval fixtures/completion fixtures/injection fixtures/features

lint: $(DEV_STAMP)
	$(BIN)/ruff check runner tests bench examples docs
	$(BIN)/ruff format --check runner tests bench examples docs

# runner/ (the config's packages), then the docs site's build hooks, as strictly.
typecheck: $(DEV_STAMP)
	$(BIN)/mypy
	$(BIN)/mypy docs/hooks

# The docs site (mkdocs.yml, docs/): offline, no CDN; its hooks generate the CLI and HTTP API
# references from the parser and the OpenAPI document. Material's notice of its own end of life
# is said once here, not on every build: it reaches it on 2027-05-05.
DOCS_ENV := NO_MKDOCS_2_WARNING=1
docs: $(DEV_STAMP)
	$(DOCS_ENV) $(BIN)/mkdocs serve

docs-build: $(DEV_STAMP)
	$(DOCS_ENV) $(BIN)/mkdocs build --strict

# Over every core; a file's tests stay together on one worker, so its module fixtures (a served
# service, a browser) are built once and its tests run in order, as they do serially. The
# `serial` tests (a load test that measures the machine) run alone after the rest.
PARALLEL := -n auto --dist loadfile
PYTEST_ARGS ?=

test: lint typecheck docs-build
	$(BIN)/pytest $(PARALLEL) -m "not serial" $(PYTEST_ARGS)
	$(BIN)/pytest -m serial $(PYTEST_ARGS) || [ $$? -eq 5 ]  # 5: PYTEST_ARGS chose none of them

# The inner loop: no slow, PostgreSQL or browser tests (no lint or type check either).
test-fast: $(DEV_STAMP)
	$(BIN)/pytest $(PARALLEL) -m "not slow and not pg and not browser" $(PYTEST_ARGS)

bench: $(RUN_STAMP)
	$(BIN)/python -m bench

bench-postgres: $(DEV_STAMP)
	$(BIN)/python -m bench.postgres

# The peers never enter the project's own environment: they get one of their own.
$(PEERS_STAMP): bench/peers/requirements.txt pyproject.toml
	$(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PEERS_VENV)/bin/python -m pip install --quiet -r bench/peers/requirements.txt -e .
	touch $(PEERS_STAMP)

bench-peers: $(PEERS_STAMP)
	$(PEERS_VENV)/bin/python -m bench.peers $(PEERS_ARGS)

clean:
	rm -rf $(VENV) $(PEERS_VENV) .mypy_cache .ruff_cache .pytest_cache site
