"""``contextledger bench``: the registered benchmarks, run from the command line."""

from __future__ import annotations

import json

import pytest

from contextledger.cli._main import main
from tests.bench.test_bench_ledger import FIGURES, RATIOS


def test_bench_json_prints_the_benchmarks_figures(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "ledger", "--events", "200", "--json"]) == 0
    out, _ = capsys.readouterr()
    figures = json.loads(out)
    assert figures["benchmark"] == "ledger"
    assert figures["events"] == 200
    for key in FIGURES:
        assert figures[key] > 0, key
    assert set(RATIOS) <= set(figures)


def test_bench_prints_the_benchmarks_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "ledger", "--events", "200"]) == 0
    out, _ = capsys.readouterr()
    assert "SQLite" in out and "appends" in out
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)


def test_bench_needs_no_database_and_rejects_a_bad_size(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["bench", "ledger", "--events", "0"]) == 1
    _, err = capsys.readouterr()
    assert "--events must be at least 1" in err


def test_bench_rejects_an_unknown_benchmark(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "nonesuch"])
    assert "invalid choice" in capsys.readouterr().err
