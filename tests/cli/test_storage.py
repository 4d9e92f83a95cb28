"""``contextledger check``: every problem of a database with where it is, and the exit
status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.generated import run_cli, write_generated
from tests.store._rows import insert_row, raw_connection


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "agent.db"
    write_generated(path, "ses_a", turns=3)
    write_generated(path, "ses_b", turns=2, seed=8)
    return path


def test_check_of_a_sound_database_says_ok(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "check", str(db))
    assert (code, err) == (0, "")
    assert out.startswith("ok: 2 sessions")

    code, out, _ = run_cli(capsys, "check", str(db), "--json")
    assert code == 0
    assert json.loads(out) == {"ok": True, "sessions": 2, "problems": []}


def test_check_reports_a_damaged_row_and_exits_non_zero(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conn = raw_connection(db)
    conn.execute("UPDATE events SET data = zeroblob(length(data)) WHERE position = 4")
    conn.close()

    code, out, _ = run_cli(capsys, "check", str(db), "--json")
    assert code == 1
    report = json.loads(out)
    assert report["ok"] is False
    assert report["problems"][0] == {
        "kind": "checksum",
        "detail": "the event's row does not match its checksum",
        "stream": "ses_a",
        "position": 4,
        "seq": 4,
    }

    code, out, _ = run_cli(capsys, "check", str(db))
    assert code == 1
    assert "checksum  ses_a   4         4" in out


@pytest.mark.parametrize(
    ("stream_id", "seq", "detail"),
    [(2, 1, "session.started: names another session"), (1, 2, "message.added: ")],
    ids=["another-sessions-event", "repeated-message-id"],
)
def test_check_reports_an_event_that_may_not_follow(
    db: Path, capsys: pytest.CaptureFixture[str], stream_id: int, seq: int, detail: str
) -> None:
    # An event copied to the end of the first session, with a sound checksum.
    conn = raw_connection(db)
    data, v = conn.execute(
        "SELECT data, v FROM events WHERE stream = ? AND seq = ?", (stream_id, seq)
    ).fetchone()
    conn.close()
    position = insert_row(db, "ses_a", v, data)

    code, out, _ = run_cli(capsys, "check", str(db), "--json")
    assert code == 1
    (problem,) = json.loads(out)["problems"]
    assert (problem["kind"], problem["stream"], problem["position"]) == ("event", "ses_a", position)
    assert problem["detail"].startswith(detail)


def test_check_of_a_file_that_is_not_a_store_is_one_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"not a database at all" * 100)
    code, out, _ = run_cli(capsys, "check", str(path), "--json")
    assert code == 1
    (problem,) = json.loads(out)["problems"]
    assert problem["kind"] == "sqlite"
