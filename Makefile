# Two entry points (see README): `make demo` and `make test`. Both create .venv when it is missing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint typecheck bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,ray]'
	@touch $(STAMP)

# The offline default: the whole pipeline on a scratch repository, scripted agents, real git and QA tools.
DEMO_REPO ?= demo-repo
demo: $(STAMP)
	$(BIN)/autodev demo --dir $(DEMO_REPO) --force
	$(BIN)/autodev -C $(DEMO_REPO) ledger verify

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# Two workers: the suite mostly waits on subprocesses. `make test PYTEST_WORKERS=0` runs it in one process.
# tests/conftest.py hands the tests out a few at a time, so both workers finish together (docs/adr/0021).
PYTEST_WORKERS ?= 2
test: lint typecheck $(STAMP)
	$(BIN)/pytest -n $(PYTEST_WORKERS)

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis
