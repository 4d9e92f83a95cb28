"""``contextledger demo``: the session it picks, what it stores, the table and the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from contextledger.history._projection import History
from contextledger.history._view import is_real_user
from contextledger.ledger import SessionLog
from contextledger.simulation import DEFAULT_STRATEGIES
from contextledger.store._sqlite import SQLiteStore
from tests.cli.generated import run_cli as _run
from tests.cli.test_demo_session import write_claude_code_session

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces" / "claude-code-jsonl"
SUMMED = ("calls", "cache_read", "cache_write", "uncached")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty home folder, and the working folder a temporary one."""
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.chdir(tmp_path)
    return folder


def _demo_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = _run(capsys, "demo", "--turns", "2", "--json", *argv)
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


async def _stored(db: Path, session: str) -> History:
    async with SQLiteStore.open(db, create=False) as store:
        return (await SessionLog.open(store, session)).history


def _number(cell: str) -> float:
    return float(cell.replace(",", ""))


def test_without_sessions_it_replays_a_generated_one_and_prints_the_table(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "demo", "--turns", "2")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "source: a generated coding session (synthetic, seed 7, 2 turns)"
    assert "wrote session ses_demo_001" in out and "32,000-token window" in out
    assert Path("contextledger-demo.db").exists()
    assert Path("report.html").exists() and "report.html" in lines[-2]
    # The table: the turns, then the totals row, each cell the sum of the turns' (the peak
    # prompt their maximum).
    header = next(i for i, line in enumerate(lines) if line.startswith("turn "))
    columns = lines[header].split()
    rows = [line.split() for line in lines[header + 2 : header + 5]]
    assert [r[0] for r in rows] == ["1", "2", "total"]
    for column in (*SUMMED, "input_cost_usd"):
        at = columns.index(column)
        assert _number(rows[2][at]) == pytest.approx(
            sum(_number(r[at]) for r in rows[:2]), abs=0.011
        )
    at = columns.index("peak_prompt")
    assert _number(rows[2][at]) == max(_number(r[at]) for r in rows[:2])


def test_the_json_turns_are_the_stored_session_turns(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = _demo_json(capsys)
    assert set(result) == {
        "source",
        "db",
        "session",
        "window",
        "model",
        "turns",
        "totals",
        "strategies",
        "report",
    }
    assert result["source"]["kind"] == "synthetic"
    assert (result["session"], result["window"]) == ("ses_demo_001", 32_000)
    turns, total = result["turns"], result["totals"]
    for column in SUMMED:
        assert total[column] == sum(t[column] for t in turns)
    assert total["input_cost_usd"] == pytest.approx(sum(t["input_cost_usd"] for t in turns))
    assert total["peak_prompt"] == max(t["peak_prompt"] for t in turns) < 32_000
    history = trio.run(_stored, Path(result["db"]), "ses_demo_001")
    users = [m for m in history.messages if is_real_user(m)]
    assert [t["turn"] for t in turns] == list(range(1, len(users) + 1))
    assert [t["calls"] for t in turns] == [
        sum(
            1
            for m in history.messages
            if m.role == "assistant" and m.parent_id == u.id and not m.summary
        )
        for u in users
    ]
    assert Path(result["report"]).read_text().count(">runtime<") >= 1
    # The strategies the text compares, as simulate --json gives each; under default the
    # simulation decides as the runtime did.
    strategies = result["strategies"]
    assert list(strategies) == list(DEFAULT_STRATEGIES)
    assert strategies["default"]["cost"] == pytest.approx(total["input_cost_usd"])
    assert strategies["default"]["calls"] == total["calls"]


def test_a_second_run_adds_a_session_to_the_same_database(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _demo_json(capsys, "--turns", "1")["session"] == "ses_demo_001"
    assert _demo_json(capsys, "--turns", "1")["session"] == "ses_demo_002"
    code, out, _ = _run(capsys, "sessions", "contextledger-demo.db", "--json")
    assert code == 0
    assert [r["session"] for r in json.loads(out)] == ["ses_demo_001", "ses_demo_002"]


def test_it_picks_the_newest_claude_code_session_under_home(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = write_claude_code_session(home / ".claude/projects/x/abc.jsonl")
    result = _demo_json(capsys)
    assert result["source"] == {
        "kind": "claude-code",
        "path": str(session),
        "label": "x/abc.jsonl",
        "skipped": [],
    }
    assert [(t["turn"], t["calls"]) for t in result["turns"]] == [(1, 2)]


def test_a_real_claude_code_session_prefix_is_replayed(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces = sorted(TRACES.glob("*.jsonl")) if TRACES.is_dir() else []
    if not traces:
        pytest.skip(f"the shared Claude Code traces are not at {TRACES}")
    lines = traces[0].read_text().splitlines()[:60]
    target = home / ".claude/projects/-home-dev-repo/session.jsonl"
    target.parent.mkdir(parents=True)
    target.write_text("\n".join(lines) + "\n")
    result = _demo_json(capsys)
    assert result["source"]["kind"] == "claude-code"
    assert result["totals"]["calls"] > 0


def test_trace_wins_over_the_claude_code_session(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_claude_code_session(home / ".claude/projects/x/abc.jsonl")
    trace = write_claude_code_session(tmp_path / "given.jsonl", "the given one")
    code, out, _ = _run(capsys, "demo", "--trace", str(trace))
    assert code == 0
    assert out.splitlines()[0] == f"source: the transcript {trace}"


def test_a_broken_trace_exits_1_and_writes_nothing(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text("this is not a transcript\n")
    code, out, err = _run(capsys, "demo", "--trace", str(broken))
    assert code == 1
    assert out == ""
    assert err.startswith("contextledger: ") and str(broken) in err
    assert not Path("contextledger-demo.db").exists()
    assert not Path("report.html").exists()


def test_a_report_in_a_missing_folder_is_refused_before_anything_is_written(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "demo", "--turns", "1", "--report", "missing/report.html")
    assert code == 1 and "cannot write the report at missing/report.html" in err
    assert not Path("contextledger-demo.db").exists()


def test_the_demo_session_replays_to_what_was_recorded(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Four turns compact past a snapshot: the replay loads the session from that snapshot,
    # reading the summary's message before the older ones, and rebuilds it from its events.
    code, _, err = _run(capsys, "demo", "--turns", "4")
    assert code == 0, err
    code, out, err = _run(
        capsys, "replay", "contextledger-demo.db", "--session", "ses_demo_001", "--json"
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["ok"] and result["projection_matches"]
    assert result["requests"] > 0 and not result["mismatched_request_seqs"]
