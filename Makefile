# Two commands on a fresh machine: `make run` and `make test`. Only python3 and make needed.
# Installs take the versions pinned in constraints.txt (what CI tested); `make lock` refreshes
# them on purpose, to the newest releases pyproject.toml allows.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEVSTAMP := $(VENV)/.installed-dev
BENCHSTAMP := $(VENV)/.installed-bench
# Worker processes of the test suite (pytest-xdist); TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= 2

.PHONY: run test lint typecheck bench clean lock

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -c constraints.txt -e .
	touch $@

$(DEVSTAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $@ $(STAMP)

# The benchmarks also measure the official openai SDK (the `bench` extra, never in the default install).
$(BENCHSTAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,bench]'
	touch $@ $(DEVSTAMP) $(STAMP)

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
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) $(PYTEST_ARGS)

bench: $(BENCHSTAMP)
	$(BIN)/python -m bench

lock:
	rm -rf .lock-venv
	$(PYTHON) -m venv .lock-venv
	.lock-venv/bin/python -m pip install --quiet --upgrade pip
	.lock-venv/bin/python -m pip install --quiet -e '.[dev,bench]'
	( echo "# Pinned by \`make lock\` from pyproject.toml (runtime, dev and bench extras); make installs with -c."; \
	  .lock-venv/bin/python -m pip freeze --exclude-editable | grep -v '^hermes-gateway' ) > constraints.txt
	rm -rf .lock-venv
	rm -f $(STAMP) $(DEVSTAMP) $(BENCHSTAMP)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
