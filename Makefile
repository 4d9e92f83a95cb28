PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint typecheck pytest bench demo clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,bench,tokens]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/ruff check contextledger tests
	$(BIN)/ruff format --check contextledger tests
	$(BIN)/mypy --strict contextledger
	$(BIN)/pytest -q

bench: $(STAMP)
	$(BIN)/python -m contextledger.bench all

demo: $(STAMP)
	$(BIN)/contextledger demo

clean:
	rm -rf $(VENV) contextledger-demo.db contextledger-demo.db-wal contextledger-demo.db-shm
