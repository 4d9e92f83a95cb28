"""A transcript imported again: a grown one (or one whose import was cut short) is appended to,
an edited one refused naming its first difference, nothing of a failed write is left, and a
long session is written in small batches as it was imported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from contextledger.cli import _importing as importing
from contextledger.cli._importing import WRITE_BATCH, WRITE_BYTES
from contextledger.events._catalogue import Event, InputLeftOut, SessionStarted
from contextledger.events._codec import DEFAULT_CODEC
from contextledger.importers import (
    SOURCE_EVENTS,
    SOURCE_HASH,
    first_difference,
    import_claude_code_lines,
    import_with_report,
)
from contextledger.simulation._synthetic import synthetic_session
from contextledger.store._sqlite import SQLiteStore
from tests.cli.generated import run_cli

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"
CLAUDE_CODE = TRACES / "claude-code-jsonl" / "vsla_5f8cbb78-38d3-47e9-9504-baa93bb166c9.jsonl"
EVENTS = synthetic_session("ses_grown", seed=3, turns=3)


def _lines() -> list[bytes]:
    if not CLAUDE_CODE.is_file():
        pytest.skip(f"shared/traces not present: {CLAUDE_CODE} does not exist")
    return CLAUDE_CODE.read_bytes().splitlines(keepends=True)


def _prompt_lines(lines: list[bytes]) -> list[int]:
    """The indexes of the lines that start a user turn of the main session (a prompt given as
    text)."""
    found = []
    for i, raw in enumerate(lines):
        record = json.loads(raw)
        message = record.get("message") or {}
        main = record.get("type") == "user" and not record.get("isSidechain")
        if main and isinstance(message.get("content"), str):
            found.append(i)
    return found


def _stored(db: Path) -> dict[str, list[Any]]:
    async def read() -> dict[str, list[Any]]:
        async with SQLiteStore.open(db, create=False) as store:
            return {
                stream: [msgspec.to_builtins(r.event) for r in await store.read(stream)]
                for stream in await store.streams()
            }

    return trio.run(read)


def _import(
    capsys: pytest.CaptureFixture[str], path: Path, db: Path, *flags: str
) -> tuple[int, Any, str]:
    code, out, err = run_cli(capsys, "import", str(path), "--db", str(db), "--json", *flags)
    return code, json.loads(out) if out else None, err


def _without_marks(stored: dict[str, list[Any]]) -> dict[str, list[Any]]:
    for events in stored.values():
        config = events[0]["config"]
        events[0]["config"] = {
            k: v for k, v in config.items() if k not in (SOURCE_HASH, SOURCE_EVENTS)
        }
    return stored


def test_a_claude_code_session_that_went_on_is_appended_to(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _lines()
    prompts = _prompt_lines(lines)
    cut = prompts[len(prompts) // 2]
    transcript = tmp_path / CLAUDE_CODE.name
    transcript.write_bytes(b"".join(lines[:cut]))
    db = tmp_path / "grown.db"
    code, first, _ = _import(capsys, transcript, db)
    assert code == 0 and {s["status"] for s in first["sessions"]} == {"written"}
    transcript.write_bytes(b"".join(lines))
    code, again, _ = _import(capsys, transcript, db)
    assert code == 0
    # The main session is written last; its sub-agents' sessions come before it.
    top, before = again["sessions"][-1], first["sessions"][-1]
    assert top["status"] == "appended" and top["session"] == before["session"]
    assert top["events"] > before["events"]
    assert {s["status"] for s in again["sessions"]} <= {"present", "appended", "written"}
    whole = tmp_path / "whole.db"
    assert _import(capsys, transcript, whole)[0] == 0
    assert _without_marks(_stored(db)) == _without_marks(_stored(whole))
    code, same, _ = _import(capsys, transcript, db)
    assert code == 0 and {s["status"] for s in same["sessions"]} == {"present"}


def _inside_replies(lines: list[bytes]) -> list[int]:
    """The cuts (numbers of lines kept) that end a transcript inside a reply: after a line of
    the latest reply, more of whose lines follow (Claude Code writes one line per block)."""
    records = [json.loads(raw) for raw in lines]
    replies = [r["message"]["id"] if r.get("type") == "assistant" else None for r in records]
    last = {reply: i for i, reply in enumerate(replies) if reply is not None}
    cuts, latest = [], None
    for i, reply in enumerate(replies):
        latest = reply or latest
        if latest is not None and last[latest] > i:
            cuts.append(i + 1)
    return cuts


def _kept_events(lines: list[bytes], source: str) -> dict[str, list[Event]]:
    """Each session's events imported from ``lines``, but its losses (compared apart)."""
    imported = import_claude_code_lines(lines, source=source)
    return {
        s.session_id: [e for e in s.events if not isinstance(e, InputLeftOut)]
        for s in imported.sessions()
    }


@pytest.mark.parametrize(
    "name",
    [
        "claude-code-jsonl/vsla_d7d349f9-c243-46e2-9a32-4a0eddfc634b.jsonl",  # 1.0: text, tool_use
        "claude-code-more/auth-go__c3e870840354-0__cc-2.1.150.jsonl",  # thinking, text, tool_use
    ],
)
def test_a_transcript_cut_inside_any_reply_is_the_start_of_the_whole(name: str) -> None:
    path = TRACES / name
    if not path.is_file():
        pytest.skip(f"shared/traces not present: {path} does not exist")
    lines = path.read_bytes().splitlines(keepends=True)
    whole = _kept_events(lines, path.name)
    cuts = _inside_replies(lines)
    assert len(cuts) > 50
    for cut in cuts:
        for session_id, events in _kept_events(lines[:cut], path.name).items():
            assert first_difference(events, whole[session_id]) is None, (cut, session_id)


def test_a_session_imported_inside_a_reply_is_viewed_and_appended_to_when_it_grew(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _lines()
    records = [json.loads(raw) for raw in lines]
    cut = next(
        c
        for c in _inside_replies(lines)
        if c > len(lines) // 2
        and records[c - 1]["type"] == "assistant"
        and not records[c - 1]["isSidechain"]
        and records[c - 1]["message"]["content"][0]["type"] == "text"
    )
    text = records[cut - 1]["message"]["content"][0]["text"]
    transcript = tmp_path / CLAUDE_CODE.name
    transcript.write_bytes(b"".join(lines[:cut]))
    db = tmp_path / "open.db"
    code, first, _ = _import(capsys, transcript, db)
    assert code == 0
    session = first["sessions"][-1]["session"]
    # The reply being written is the view's last message, as far as it was written.
    code, out, _ = run_cli(capsys, "view", str(db), "--session", session, "--json")
    assert code == 0
    last = json.loads(out)["messages"][-1]
    assert last["role"] == "assistant" and [c["text"] for c in last["content"]] == [text]
    for command in ("history", "replay"):
        assert run_cli(capsys, command, str(db), "--session", session)[0] == 0
    # A simulation replays the open reply as the last call of the main thread.
    replies = {
        r["message"]["id"]
        for r in records[:cut]
        if r["type"] == "assistant" and not r["isSidechain"]
    }
    code, out, _ = run_cli(
        capsys, "simulate", str(transcript), "--strategy", "default", "--provider", "anthropic",
        "--json",
    )  # fmt: skip
    (simulated,) = json.loads(out).values()
    assert code == 0 and simulated["default"]["anthropic"]["calls"] == len(replies)
    transcript.write_bytes(b"".join(lines))
    code, again, _ = _import(capsys, transcript, db)
    assert code == 0 and again["sessions"][-1]["status"] == "appended"
    whole = tmp_path / "whole.db"
    assert _import(capsys, transcript, whole)[0] == 0
    assert _without_marks(_stored(db)) == _without_marks(_stored(whole))


def test_an_edited_transcript_is_refused_naming_the_first_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _lines()
    second_prompt = _prompt_lines(lines)[1]  # the first line names the session
    transcript = tmp_path / CLAUDE_CODE.name
    transcript.write_bytes(b"".join(lines))
    db = tmp_path / "edited.db"
    assert _import(capsys, transcript, db)[0] == 0
    before = _stored(db)
    record = json.loads(lines[second_prompt])
    record["message"]["content"] = "an edited prompt"
    lines[second_prompt] = json.dumps(record).encode() + b"\n"
    transcript.write_bytes(b"".join(lines))
    code, _, err = _import(capsys, transcript, db)
    assert code == 1
    assert "is in the store and differs from the transcript at seq " in err
    assert "field 'part.text'" in err and "'an edited prompt'" in err
    assert _stored(db) == before


def test_an_import_killed_while_writing_is_completed_on_the_next_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _lines()
    transcript = tmp_path / CLAUDE_CODE.name
    transcript.write_bytes(b"".join(lines))
    whole = tmp_path / "whole.db"
    assert _import(capsys, transcript, whole)[0] == 0
    stored = _stored(whole)
    # The main session is the one whose first event carries the file's hash.
    (session_id,) = [s for s, events in stored.items() if SOURCE_HASH in events[0]["config"]]

    async def killed() -> None:
        # What a run killed after its first appends leaves: the start of the session, marked.
        async with SQLiteStore.open(whole, create=False) as source:
            events = [r.event for r in await source.read(session_id, 1, 300)]
        async with SQLiteStore.open(tmp_path / "killed.db") as store:
            await store.append(session_id, 0, events)

    trio.run(killed)
    code, resumed, _ = _import(capsys, transcript, tmp_path / "killed.db")
    assert code == 0 and resumed["sessions"][-1]["status"] == "appended"
    assert resumed["skipped"] == []
    assert _stored(tmp_path / "killed.db") == stored


def test_a_session_is_all_or_nothing_when_a_write_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _lines()
    append = SQLiteStore.append
    calls: list[int] = []

    async def failing(
        store: SQLiteStore, stream: str, version: int, events: Any, **position: Any
    ) -> Any:
        calls.append(1)
        if len(calls) == 3:
            raise OSError("disk gone")
        return await append(store, stream, version, events, **position)

    monkeypatch.setattr(SQLiteStore, "append", failing)
    db = tmp_path / "failed.db"
    code, _, err = run_cli(capsys, "import", str(CLAUDE_CODE), "--db", str(db))
    assert code == 1 and "disk gone" in err
    assert len(calls) == 3  # two batches were written, then removed
    assert _stored(db) == {}


# --- the comparison ---------------------------------------------------------------------------


@given(st.integers(min_value=0, max_value=len(EVENTS)))
def test_every_start_of_a_session_is_no_difference(n: int) -> None:
    assert first_difference(EVENTS[:n], EVENTS) is None
    assert first_difference(EVENTS[n : n + 5], EVENTS[n:], first_seq=n + 1) is None


@given(st.integers(min_value=0, max_value=len(EVENTS) - 1), st.data())
def test_a_changed_event_is_the_first_difference(i: int, data: st.DataObject) -> None:
    changed = list(EVENTS)
    event = changed[i]
    time_ms = data.draw(st.integers(min_value=0).filter(lambda t: t != event.time_ms))
    changed[i] = msgspec.structs.replace(event, time_ms=time_ms)
    difference = first_difference(changed, EVENTS)
    assert difference is not None
    assert (difference.seq, difference.field) == (i + 1, "time_ms")
    shown = "the default" if time_ms == 0 else repr(time_ms)  # events omit default values
    assert difference.stored == shown and difference.imported == repr(event.time_ms)


@given(st.integers(min_value=0, max_value=len(EVENTS) - 1))
def test_more_stored_events_than_the_transcript_holds_is_a_difference(n: int) -> None:
    difference = first_difference(EVENTS, EVENTS[:n])
    assert difference is not None and (difference.seq, difference.imported) == (n + 1, "no event")


def test_the_import_marks_of_the_first_event_are_no_difference() -> None:
    started = EVENTS[0]
    assert isinstance(started, SessionStarted)
    marked: list[Event] = [
        msgspec.structs.replace(
            started, config={**started.config, SOURCE_HASH: "ab", SOURCE_EVENTS: 9}
        ),
        *EVENTS[1:],
    ]
    assert first_difference(marked, EVENTS) is None
    other = msgspec.structs.replace(started, config={**started.config, "cwd": "/elsewhere"})
    difference = first_difference([other], EVENTS)
    assert difference is not None and difference.field == "config.cwd"


def test_a_long_transcript_is_written_in_small_batches_as_imported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _lines()
    append = SQLiteStore.append
    sizes: list[int] = []

    async def counted(
        store: SQLiteStore, stream: str, version: int, events: Any, **position: Any
    ) -> Any:
        # A batch stops at the event that brings it to WRITE_BYTES.
        sizes.append(sum(len(DEFAULT_CODEC.encode(e)) for e in events[:-1]))
        assert len(events) <= WRITE_BATCH
        return await append(store, stream, version, events, **position)

    monkeypatch.setattr(SQLiteStore, "append", counted)
    db = tmp_path / "batched.db"
    assert _import(capsys, CLAUDE_CODE, db)[0] == 0
    assert len(sizes) > 10 and max(sizes) < WRITE_BYTES
    imported = {
        s.session_id: [msgspec.to_builtins(e) for e in s.events]
        for top in import_with_report(CLAUDE_CODE).sessions
        for s in top.sessions()
    }
    assert _without_marks(_stored(db)) == imported


def test_a_grown_transcript_imported_leniently_is_appended_to_with_its_new_losses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _lines()
    prompts = _prompt_lines(lines)
    cut = prompts[len(prompts) // 2]
    early, late = 10, cut + 2  # a line broken before the cut, one after it
    for i in (early, late):
        lines[i] = lines[i][:40] + b"\n"
    transcript = tmp_path / CLAUDE_CODE.name
    transcript.write_bytes(b"".join(lines[:cut]))
    db = tmp_path / "lenient.db"
    code, _, _ = _import(capsys, transcript, db, "--lenient")
    assert code == 0
    transcript.write_bytes(b"".join(lines))
    code, _, err = _import(capsys, transcript, db)
    assert code == 1 and f":{early + 1}: not JSON" in err  # strict: the broken line is named
    code, again, _ = _import(capsys, transcript, db, "--lenient")
    assert code == 0 and again["sessions"][-1]["status"] == "appended"
    whole = tmp_path / "whole.db"
    assert _import(capsys, transcript, whole, "--lenient")[0] == 0
    stored, fresh = _without_marks(_stored(db)), _without_marks(_stored(whole))
    assert _kept(stored) == _kept(fresh)
    # Each loss is recorded once: the first import's, then only the new one.
    main = again["sessions"][-1]["session"]
    assert _losses(stored[main]) == [[early + 1], [late + 1]]
    assert _losses(fresh[main]) == [[early + 1, late + 1]]
    code, same, _ = _import(capsys, transcript, db, "--lenient")
    assert code == 0 and {s["status"] for s in same["sessions"]} == {"present"}


def _kept(stored: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """Each session's events but its losses (``InputLeftOut``)."""
    return {s: [e for e in events if e["type"] != "input.left_out"] for s, events in stored.items()}


def _losses(events: list[Any]) -> list[list[int]]:
    """The lines each ``InputLeftOut`` of a session records."""
    return [[i["line"] for i in e["items"]] for e in events if e["type"] == "input.left_out"]


def test_a_transcript_written_to_while_imported_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = _lines()
    prompts = _prompt_lines(lines)
    transcript = tmp_path / CLAUDE_CODE.name
    transcript.write_bytes(b"".join(lines[: prompts[-1]]))
    imports: list[Path] = []

    def growing(path: Path, **options: Any) -> Any:
        # The session goes on between the counting import and the writing one.
        imports.append(path)
        if len(imports) == 2:
            transcript.write_bytes(b"".join(lines))
        return import_with_report(path, **options)

    monkeypatch.setattr(importing, "import_with_report", growing)
    db = tmp_path / "changed.db"
    code, _, err = _import(capsys, transcript, db)
    assert code == 1 and "it changed while it was imported" in err
    assert len(imports) == 2 and _stored(db) == {}
    monkeypatch.undo()
    code, again, _ = _import(capsys, transcript, db)
    assert code == 0 and {s["status"] for s in again["sessions"]} == {"written"}


def test_a_loss_the_transcript_no_longer_has_is_a_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = TRACES / "claude-code-jsonl" / "vsla_d7d349f9-c243-46e2-9a32-4a0eddfc634b.jsonl"
    if not source.is_file():
        pytest.skip(f"shared/traces not present: {source} does not exist")
    lines = source.read_bytes().splitlines(keepends=True)
    notice = 157  # a CLI notice (system record): it becomes no event, broken or not
    assert json.loads(lines[notice])["type"] == "system"
    transcript = tmp_path / source.name
    transcript.write_bytes(b"".join([*lines[:notice], b"{broken\n", *lines[notice + 1 :]]))
    db = tmp_path / "repaired.db"
    assert _import(capsys, transcript, db, "--lenient")[0] == 0
    before = _stored(db)
    transcript.write_bytes(b"".join(lines))  # repaired: the line is read, and left out as a notice
    code, _, err = _import(capsys, transcript, db, "--lenient")
    assert code == 1 and "field 'items'" in err and "transcript not left out" in err
    assert _stored(db) == before
