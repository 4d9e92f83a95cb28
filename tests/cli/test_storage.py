"""``contextledger check``: every problem of a database with where it is, and the exit
status."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from contextledger.store._schema import split_batch
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
    # The batch row holding position 4 (a row's position is its last event's).
    last, count = conn.execute(
        "SELECT position, count FROM batches WHERE position >= 4 ORDER BY position LIMIT 1"
    ).fetchone()
    conn.execute("UPDATE batches SET data = zeroblob(length(data)) WHERE position = ?", (last,))
    conn.close()
    first = last - count + 1  # ses_a is the first session: its seqs are its positions

    code, out, _ = run_cli(capsys, "check", str(db), "--json")
    assert code == 1
    report = json.loads(out)
    assert report["ok"] is False
    assert report["problems"][0] == {
        "kind": "checksum",
        "detail": "the batch's row does not match its checksum",
        "stream": "ses_a",
        "position": first,
        "seq": first,
    }

    code, out, _ = run_cli(capsys, "check", str(db))
    assert code == 1
    assert f"checksum  ses_a   {first:<9} {first}" in out


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
    batch, count, last = conn.execute(
        "SELECT data, count, seq FROM batches WHERE stream = ? AND seq >= ? ORDER BY seq LIMIT 1",
        (stream_id, seq),
    ).fetchone()
    conn.close()
    split = split_batch(batch, count)
    assert split is not None
    v, data = split[0][seq - last - 1], split[1][seq - last - 1]
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
    report = json.loads(out)
    (problem,) = report.pop("problems")
    assert report == {"ok": False}  # no session count: keys without a value are left out
    assert problem.keys() == {"kind", "detail"} and problem["kind"] == "sqlite"


def test_delete_removes_a_session_and_says_what_went(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(capsys, "delete", str(db), "--session", "ses_a", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["sessions"] == ["ses_a"]
    assert report["events"] > 0
    _, out, _ = run_cli(capsys, "sessions", str(db), "--json")
    assert [row["session"] for row in json.loads(out)] == ["ses_b"]

    code, _, err = run_cli(capsys, "delete", str(db), "--session", "ses_a")
    assert code == 1
    assert "no session 'ses_a'" in err
    code, out, _ = run_cli(capsys, "delete", str(db), "--session", "ses_b")
    assert code == 0 and "deleted 1 session (" in out


def test_gc_deletes_old_sessions_and_shrinks_the_file(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The generated sessions' clocks are in 2026; a cutoff of 0 days deletes everything
    # older than now, a cutoff of 100 years nothing.
    code, out, _ = run_cli(capsys, "gc", str(db), "--older-than", "36500", "--json")
    assert code == 0
    assert json.loads(out)["sessions"] == []

    code, out, _ = run_cli(capsys, "gc", str(db), "--older-than", "0", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["sessions"] == ["ses_a", "ses_b"]
    assert report["bytes_after"] < report["bytes_before"]

    code, out, _ = run_cli(capsys, "gc", str(db))
    assert code == 0
    assert out.startswith("deleted 0 sessions (0 events)\nfile and WAL: ")


@pytest.mark.parametrize(
    ("days", "problem"),
    [
        *((days, "a finite number of days") for days in ["inf", "-inf", "nan", "1e306", "soon"]),
        ("-1", "0 or more days"),
        ("-0.5", "0 or more days"),
    ],
)
def test_gc_refuses_days_that_are_no_finite_number_or_negative(
    db: Path, capsys: pytest.CaptureFixture[str], days: str, problem: str
) -> None:
    with pytest.raises(SystemExit) as exit_:
        run_cli(capsys, "gc", str(db), f"--older-than={days}")
    assert exit_.value.code == 2
    message = f"argument --older-than: must be {problem}, not {days!r}\n"
    assert capsys.readouterr().err.endswith(message)
    _, out, _ = run_cli(capsys, "sessions", str(db), "--json")
    assert [row["session"] for row in json.loads(out)] == ["ses_a", "ses_b"]


def test_export_then_restore_gives_the_same_events(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exported = tmp_path / "ses_a.jsonl"
    copy = tmp_path / "copy.db"
    code, out, _ = run_cli(capsys, "export", str(db), "--session", "ses_a", "--out", str(exported))
    assert code == 0
    assert out.startswith("exported ")

    code, out, _ = run_cli(capsys, "restore", str(exported), "--db", str(copy), "--json")
    assert code == 0
    assert json.loads(out)["session"] == "ses_a"

    _, original, _ = run_cli(capsys, "events", str(db), "--session", "ses_a", "--json")
    _, restored, _ = run_cli(capsys, "events", str(copy), "--session", "ses_a", "--json")
    strip = [{k: v for k, v in e.items() if k != "position"} for e in json.loads(original)]
    assert strip == [{k: v for k, v in e.items() if k != "position"} for e in json.loads(restored)]

    code, _, err = run_cli(capsys, "restore", str(exported), "--db", str(copy))
    assert (code, err) == (1, f"contextledger: session 'ses_a' is in {copy} already\n")
    code, _, err = run_cli(capsys, "restore", str(tmp_path / "none"), "--db", str(copy))
    assert (code, err) == (1, f"contextledger: no exported session at {tmp_path / 'none'}\n")


@pytest.mark.parametrize("out", ["missing/ses_a.jsonl", "."], ids=["no-folder", "a-folder"])
def test_export_to_no_file_in_a_folder_is_one_line_and_writes_nothing(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], out: str
) -> None:
    path = tmp_path / out
    before = sorted(tmp_path.rglob("*"))
    code, printed, err = run_cli(
        capsys, "export", str(db), "--session", "ses_a", "--out", str(path)
    )
    assert (code, printed) == (1, "")
    assert err == f"contextledger: cannot write the export at {path}: not a file in a folder\n"
    assert sorted(tmp_path.rglob("*")) == before


def test_export_that_fails_to_write_leaves_the_old_file_whole(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ses_b.jsonl"
    path.write_text("an older file\n")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    code, out, err = run_cli(capsys, "export", str(db), "--session", "ses_b", "--out", str(path))
    assert (code, out) == (1, "")
    assert err == f"contextledger: cannot write {path}: [Errno 28] No space left on device\n"
    assert path.read_text() == "an older file\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.db", "ses_b.jsonl"]


def _spoiled(exported: bytes, how: str) -> bytes:
    lines = exported.splitlines(keepends=True)
    if how == "header-only":
        return lines[0]
    if how == "bad-base64":
        return b"".join([*lines[:2], b'{"seq": 2, "v": 1, "data": "not base64!"}\n', *lines[3:]])
    if how == "started-twice":  # decodes, but a session starts once: SessionLog refuses it
        first = json.loads(lines[1])
        again = json.dumps({**first, "seq": 2}).encode() + b"\n"
        return b"".join([*lines[:2], again, *lines[3:]])
    return b"some notes, not an export\n"


@pytest.mark.parametrize("how", ["not-an-export", "header-only", "bad-base64", "started-twice"])
def test_restore_of_a_bad_file_creates_no_database(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    exported = tmp_path / "ses_a.jsonl"
    assert run_cli(capsys, "export", str(db), "--session", "ses_a", "--out", str(exported))[0] == 0
    exported.write_bytes(_spoiled(exported.read_bytes(), how))
    target = tmp_path / "new.db"
    code, out, err = run_cli(capsys, "restore", str(exported), "--db", str(target))
    assert (code, out) == (1, "")
    assert err.startswith("contextledger: ") and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.db", "ses_a.jsonl"]
