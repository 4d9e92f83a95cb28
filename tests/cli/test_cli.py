"""The contextledger command: sessions, history, view and events, as text and JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import structlog
import trio

from contextledger.history import History
from contextledger.ledger import SessionLog
from contextledger.store import SQLiteStore
from contextledger.testing._builder import SessionBuilder
from tests.cli.generated import run_cli as _run
from tests.cli.generated import write_generated


@pytest.fixture
def demo_db(tmp_path: Path) -> Path:
    db = tmp_path / "demo.db"
    write_generated(db, "ses_demo_001", turns=2)
    return db


def test_run_cli_gives_what_the_command_wrote_and_not_what_the_test_logged_before(
    demo_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # As the store's checkpointer may log while a test writes, under structlog's defaults.
    structlog.get_logger().info("checkpoint postponed: the database is busy")
    code, out, err = _run(capsys, "sessions", str(demo_db), "--json")
    assert code == 0 and [row["session"] for row in json.loads(out)] == ["ses_demo_001"]
    assert err == ""


def test_sessions_lists_each_session_with_its_size(
    demo_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_generated(demo_db, "ses_demo_002", turns=1)
    code, out, _ = _run(capsys, "sessions", str(demo_db), "--json")
    rows = json.loads(out)
    assert code == 0
    assert [r["session"] for r in rows] == ["ses_demo_001", "ses_demo_002"]
    assert all(r["events"] > 0 and r["messages"] > 0 for r in rows)


def test_history_at_a_seq_shows_the_session_as_it_was(
    demo_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(
        capsys, "history", str(demo_db), "--session", "ses_demo_001", "--at", "3", "--json"
    )
    state = json.loads(out)
    assert code == 0
    assert state["seq"] == 3
    assert len(state["messages"]) == 1


def test_history_prints_a_table(demo_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "history", str(demo_db), "--session", "ses_demo_001", "--parts")
    assert code == 0
    assert "step-start" in out and "estimated tokens" in out


def test_events_prints_the_raw_log(demo_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        capsys, "events", str(demo_db), "--session", "ses_demo_001", "--limit", "2", "--json"
    )
    events = json.loads(out)
    assert code == 0
    assert [e["seq"] for e in events] == [1, 2]
    assert events[0]["event"]["type"] == "session.started"


def test_a_missing_database_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "sessions", str(tmp_path / "nope.db"))
    assert code == 2
    assert "no database" in err
    assert not (tmp_path / "nope.db").exists()


def test_an_unknown_session_is_an_error(demo_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "history", str(demo_db), "--session", "ses_missing")
    assert code == 1
    assert "no session 'ses_missing'" in err


def test_view_prints_the_model_view_at_a_seq(
    demo_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(
        capsys,
        "view",
        str(demo_db),
        "--session",
        "ses_demo_001",
        "--at",
        "40",
        "--model",
        "anthropic/claude-sonnet-4",
        "--json",
    )
    view = json.loads(out)
    assert code == 0
    assert view["seq"] == 40
    roles = [m["role"] for m in view["messages"]]
    assert roles[0] == "user" and "tool" in roles


def test_view_rejects_a_malformed_model(demo_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(
        capsys, "view", str(demo_db), "--session", "ses_demo_001", "--model", "no-slash"
    )
    assert code == 1
    assert "provider/model" in err


def test_another_applications_database_is_refused_and_left_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import apsw

    foreign = tmp_path / "foreign.db"
    conn = apsw.Connection(str(foreign))
    conn.execute("CREATE TABLE notes (text)")
    conn.close()
    before = foreign.read_bytes()
    code, _, err = _run(capsys, "view", str(foreign), "--session", "x")
    assert code == 1
    assert "is not a contextledger store" in err
    assert foreign.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foreign.db"]


def test_a_file_that_is_not_sqlite_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = tmp_path / "notes.db"
    text.write_text("hello\n")
    code, _, err = _run(capsys, "sessions", str(text))
    assert code == 1
    assert "is not a SQLite database" in err


@pytest.mark.parametrize(
    "command",
    [["sessions"], ["events", "--session", "ses_demo_001"], ["view", "--session", "ses_demo_001"]],
)
def test_a_damaged_database_is_one_line_of_error(
    demo_db: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    with demo_db.open("r+b") as file:
        file.truncate(demo_db.stat().st_size // 2)
    code, _, err = _run(capsys, command[0], str(demo_db), *command[1:])
    assert code == 1
    assert err.count("\n") == 1
    assert err.startswith(f"contextledger: {demo_db} is damaged (CorruptError: ")


@pytest.mark.parametrize(
    "command",
    [["sessions"], ["events", "--session", "ses_demo_001"], ["view", "--session", "ses_demo_001"]],
)
def test_a_read_only_database_is_read_and_left_as_it_was(
    demo_db: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    before = demo_db.read_bytes()
    demo_db.chmod(0o444)
    try:
        code, out, _ = _run(capsys, command[0], str(demo_db), *command[1:], "--json")
    finally:
        demo_db.chmod(0o644)
    assert code == 0
    assert json.loads(out)
    assert sorted(p.name for p in demo_db.parent.iterdir()) == ["demo.db"]
    assert demo_db.read_bytes() == before


def test_writing_to_a_read_only_database_is_one_line_of_error(
    demo_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo_db.chmod(0o444)
    try:
        code, _, err = _run(capsys, "compact", str(demo_db), "--session", "ses_demo_001")
    finally:
        demo_db.chmod(0o644)
    assert code == 1
    assert err == f"contextledger: {demo_db} is read-only: the store was opened for reading\n"


def test_a_negative_seq_is_refused(demo_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "view", str(demo_db), "--session", "ses_demo_001", "--at", "-3")
    assert code == 1
    assert "--at must be a seq of 1 or more" in err


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--limit", "-1", "--limit: must be 0 or more, got -1"),
        ("--from", "-3", "--from: must be 1 or more, got -3"),
        ("--from", "0", "--from: must be 1 or more, got 0"),
        ("--from", "x", "--from: invalid int value: 'x'"),
    ],
)
def test_events_refuses_a_negative_limit_or_a_seq_below_1(
    demo_db: Path, capsys: pytest.CaptureFixture[str], option: str, value: str, message: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        _run(capsys, "events", str(demo_db), "--session", "ses_demo_001", option, value)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_events_limit_0_prints_no_event(demo_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        capsys, "events", str(demo_db), "--session", "ses_demo_001", "--limit", "0", "--json"
    )
    assert code == 0 and json.loads(out) == []


def test_previews_skip_a_reasoning_without_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Codex's reasoning is encrypted: its part holds no text.
    b = SessionBuilder("ses_codex")
    reply = b.assistant(b.user("review the skill"))
    b.reasoning(reply, "")
    b.text(reply, "I'll read the workflow first.")
    b.finish(reply)
    db = tmp_path / "codex.db"

    async def write() -> None:
        async with SQLiteStore.open(db) as store:
            await (await SessionLog.open(store, b.session_id)).append(b.events)

    trio.run(write)
    for command in ("view", "history"):
        code, out, _ = _run(capsys, command, str(db), "--session", "ses_codex")
        (line,) = [line for line in out.splitlines() if " assistant " in line]
        assert code == 0 and line.endswith("  I'll read the workflow first."), (command, line)


def test_events_of_an_unknown_session_is_an_error(
    demo_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "events", str(demo_db), "--session", "ses_missing")
    assert code == 1
    assert "no session 'ses_missing'" in err


def test_a_session_opened_from_its_snapshot_reads_whole(
    demo_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Opening reads only the snapshot's head; what the commands print needs every message.
    async def snapshot_and_rebuild() -> History:
        async with SQLiteStore.open(demo_db) as store:
            log = await SessionLog.open(store, "ses_demo_001")
            await log.save_snapshot()
            return History.rebuild("ses_demo_001", await store.read("ses_demo_001"))

    rebuilt = trio.run(snapshot_and_rebuild)
    tokens = sum(rebuilt.part_tokens(p.id) for m in rebuilt.messages for p in m.parts)
    code, out, _ = _run(capsys, "sessions", str(demo_db), "--json")
    assert code == 0 and json.loads(out)[0]["tokens"] == tokens
    code, out, _ = _run(capsys, "history", str(demo_db), "--session", "ses_demo_001", "--json")
    assert code == 0 and len(json.loads(out)["messages"]) == len(rebuilt.messages)
    code, _, _ = _run(capsys, "replay", str(demo_db), "--session", "ses_demo_001")
    assert code == 0
