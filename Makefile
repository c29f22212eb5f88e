# `make run`: set up .venv with what running needs and run every fixture; `make test`: add the dev
# tools, then lint, type-check and test; `make bench`: the runner's own cost against its floors
# (about 2-3 minutes); `make bench-postgres`: the durable step on PostgreSQL beside SQLite's, and
# queued runs per second with 1, 2 and 4 workers (starts its own throwaway PostgreSQL).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: install run test lint typecheck bench bench-postgres clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Running needs only the package and its dependencies.
$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $(RUN_STAMP)

# Testing adds the dev tools (pytest, mypy, ruff, hypothesis, the provider SDKs, ...).
$(DEV_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(DEV_STAMP)

install: $(DEV_STAMP)

run: $(RUN_STAMP)
	$(BIN)/runner run fixtures/

lint: $(DEV_STAMP)
	$(BIN)/ruff check runner tests bench examples
	$(BIN)/ruff format --check runner tests bench examples

typecheck: $(DEV_STAMP)
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/pytest

bench: $(RUN_STAMP)
	$(BIN)/python -m bench

bench-postgres: $(DEV_STAMP)
	$(BIN)/python -m bench.postgres

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
