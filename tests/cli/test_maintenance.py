"""``contextledger compact`` and ``contextledger prune``: plans, changes, JSON, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.generated import run_cli as _run
from tests.cli.generated import write_generated


@pytest.fixture
def db(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "demo.db"
    write_generated(path, "ses_demo_001", turns=6)
    return path


def _events(capsys: pytest.CaptureFixture[str], db: Path) -> int:
    code, out, _ = _run(capsys, "events", str(db), "--session", "ses_demo_001", "--json")
    assert code == 0
    return len(json.loads(out))


def test_a_dry_run_compaction_prints_the_plan_and_writes_nothing(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _events(capsys, db)
    code, out, _ = _run(
        capsys,
        "compact",
        str(db),
        "--session",
        "ses_demo_001",
        "--context",
        "32000",
        "--dry-run",
        "--json",
    )
    plan = json.loads(out)
    assert code == 0 and plan["dry_run"] is True
    assert plan["plan"]["head_messages"] > 0 and plan["plan"]["tail_start_id"]
    assert _events(capsys, db) == before


def test_a_compaction_shrinks_the_view_and_records_the_summary(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(
        capsys, "compact", str(db), "--session", "ses_demo_001", "--context", "32000", "--json"
    )
    row = json.loads(out)
    assert code == 0 and row["outcome"] == "completed"
    assert row["tokens_after"] < row["tokens_before"]
    code, out, _ = _run(capsys, "view", str(db), "--session", "ses_demo_001", "--json")
    messages = json.loads(out)["messages"]
    assert messages[0]["content"][0]["text"] == "What did we do so far?"
    assert messages[1]["source_id"] == row["summary"]


def test_the_compaction_table_names_the_outcome(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(
        capsys, "compact", str(db), "--session", "ses_demo_001", "--template", "continuation"
    )
    assert code == 0 and "completed" in out


def test_a_dry_run_prune_lists_the_plan_and_writes_nothing(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _events(capsys, db)
    code, out, _ = _run(
        capsys, "prune", str(db), "--session", "ses_demo_001", "--dry-run", "--json"
    )
    result = json.loads(out)
    assert code == 0 and result["dry_run"] is True and result["mode"] == "opencode"
    assert result["plans"], "a six-turn generated session has old outputs worth clearing"
    assert result["plans"][0]["action"] == "clear"
    assert _events(capsys, db) == before


def test_a_prune_clears_outputs_and_reports_the_saving(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "prune", str(db), "--session", "ses_demo_001", "--json")
    result = json.loads(out)
    assert code == 0 and result["plans"]
    assert result["tokens_after"] < result["tokens_before"]
    code, out, _ = _run(capsys, "prune", str(db), "--session", "ses_demo_001")
    assert code == 0 and "nothing to do" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["compact", "--session", "nope"], "no session 'nope'"),
        (
            ["prune", "--session", "ses_demo_001", "--model", "bad"],
            "--model must be provider/model",
        ),
        (["compact", "--session", "ses_demo_001", "--context", "0"], "--context must be positive"),
    ],
)
def test_bad_input_is_refused_with_a_clear_error(
    db: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    before = _events(capsys, db)
    code, _, err = _run(capsys, argv[0], str(db), *argv[1:])
    assert code == 1 and message in err
    assert _events(capsys, db) == before
