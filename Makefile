PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint typecheck pytest bench demo report-check clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,bench,tokens]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/ruff check contextledger tests
	$(BIN)/ruff format --check contextledger tests
	$(BIN)/mypy --strict contextledger
	$(BIN)/lint-imports
	$(BIN)/pytest -q

bench: $(STAMP)
	$(BIN)/python -m contextledger.bench all

demo: $(STAMP)
	$(BIN)/contextledger demo

# report.html (and report.png where Chromium is installed) from one recorded Claude Code
# session when the shared traces are beside the checkout, else from a generated session.
REPORT_TRACE := $(firstword $(wildcard ../shared/traces/claude-code-jsonl/*.jsonl))

report-check: $(STAMP)
	$(BIN)/python -m contextledger.cli._report_check --out report.html --png report.png $(REPORT_TRACE)

clean:
	rm -rf $(VENV) contextledger-demo.db contextledger-demo.db-wal contextledger-demo.db-shm
	rm -f report.html report.png
