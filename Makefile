# Two commands on a fresh machine: `make run` and `make test`. Only python3 and make needed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEVSTAMP := $(VENV)/.installed-dev

.PHONY: run test lint typecheck bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(DEVSTAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(STAMP)

run: $(STAMP)
	$(BIN)/hermes-gateway run

lint: $(DEVSTAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports

typecheck: $(DEVSTAMP)
	$(BIN)/mypy storage core gateway adapters

test: $(DEVSTAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy storage core gateway adapters
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

bench: $(DEVSTAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
