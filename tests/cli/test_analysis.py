"""``contextledger import``, ``replay`` and ``simulate``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from contextledger.cli import _importing
from contextledger.cli._analysis import projection_differences
from contextledger.config import Config, RequestConfig
from contextledger.events._catalogue import Event, MessageAdded, RecordedEvent, RequestSent
from contextledger.events._parts import ModelRef, TextPart
from contextledger.history._projection import SNAPSHOT_SCHEMA, History
from contextledger.ledger import SessionLog
from contextledger.providers._anthropic import AnthropicMessages
from contextledger.request._builder import RequestBuilder, RequestInputs
from contextledger.request._prepare import prepare_request
from contextledger.request._system import SystemSegments
from contextledger.simulation import DEFAULT_STRATEGIES
from contextledger.simulation._synthetic import synthetic_session
from contextledger.store._protocol import Snapshot
from contextledger.store._sqlite import SQLiteStore
from contextledger.testing._builder import SessionBuilder
from tests.cli.generated import run_cli as _run
from tests.cli.generated import write_generated

CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "List the files."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"command": "ls"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "a.py\nb.py"},
    {"role": "assistant", "content": [{"type": "text", "text": "Two files."}]},
]


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    path = tmp_path / "traces" / "chat.json"
    path.parent.mkdir()
    path.write_text(json.dumps(CHAT))
    return path


def test_import_writes_one_session_and_counts_it(
    chat: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "imported.db"
    code, out, _ = _run(capsys, "import", str(chat), "--db", str(db), "--json")
    assert code == 0
    (row,) = json.loads(out)["sessions"]
    assert row["messages"] == 3
    assert row["tool_calls"] == 1
    code, out, _ = _run(capsys, "events", str(db), "--session", row["session"], "--json")
    assert code == 0 and len(json.loads(out)) == row["events"]
    code, out, _ = _run(capsys, "import", str(chat), "--db", str(db), "--json")
    assert code == 0
    assert json.loads(out) | {"reports": []} == {
        "sessions": [],
        "skipped": [str(chat)],
        "failed": [],
        "reports": [],
    }
    code, out, _ = _run(capsys, "import", str(chat), "--db", str(db))
    assert code == 0 and out == f"{chat} was imported before: nothing written\n"
    code, out, _ = _run(capsys, "events", str(db), "--session", row["session"], "--json")
    assert len(json.loads(out)) == row["events"]
    chat.write_text(json.dumps(CHAT[:2]))
    code, _, err = _run(capsys, "import", str(chat), "--db", str(db), "--session", row["session"])
    assert code == 1
    assert f"session {row['session']!r} is in the store and differs" in err
    assert "at seq 4 (stored message.added, transcript no event)" in err


def test_import_prints_what_it_read_wrote_and_left_out(
    chat: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat.write_text(json.dumps([*CHAT, {"role": "tool", "tool_call_id": "nope", "content": "?"}]))
    db = tmp_path / "imported.db"
    code, out, _ = _run(capsys, "import", str(chat), "--db", str(db), "--lenient")
    assert code == 0
    assert "format: openai-chat" in out
    assert "read: 2 assistant, 1 system, 2 tool, 1 user" in out
    assert "left out: 1" in out
    assert "1 × orphan_tool_result: a tool result whose call was never made" in out
    assert "(line 6)" in out
    code, out, _ = _run(
        capsys, "import", str(chat), "--db", str(tmp_path / "b.db"), "--json", "--lenient"
    )
    report = json.loads(out)["report"]
    assert report["format"] == "openai-chat"
    assert report["left_out"] == [
        {
            "line": 6,
            "kind": "orphan_tool_result",
            "reason": "a tool result whose call was never made (or was answered already)",
            "field": "[5]",
        }
    ]
    assert report["written"]["tool calls"] == 1


def test_import_refuses_an_invalid_conversation_unless_lenient(
    chat: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat.write_text(json.dumps([*CHAT, {"role": "tool", "tool_call_id": "nope", "content": "?"}]))
    db = tmp_path / "strict.db"
    code, out, err = _run(capsys, "import", str(chat), "--db", str(db))
    assert code == 1 and not out and not db.exists()
    assert f"{chat}:6 field '[5]'" in err and "orphan_tool_result" in err


def test_view_and_replay_show_what_a_lenient_import_left_out(
    chat: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat.write_text(json.dumps([*CHAT, {"role": "tool", "tool_call_id": "nope", "content": "?"}]))
    db = tmp_path / "lenient.db"
    code, out, _ = _run(capsys, "import", str(chat), "--db", str(db), "--lenient", "--json")
    session = json.loads(out)["sessions"][0]["session"]
    code, out, _ = _run(capsys, "view", str(db), "--session", session, "--json")
    assert code == 0
    (item,) = json.loads(out)["left_out_at_import"]
    assert (item["line"], item["kind"], item["field"]) == (6, "orphan_tool_result", "[5]")
    code, out, _ = _run(capsys, "view", str(db), "--session", session)
    assert "left out at import: 1" in out and "orphan_tool_result" in out
    code, out, _ = _run(capsys, "replay", str(db), "--session", session, "--json")
    result = json.loads(out)
    assert code == 0 and result["ok"] and result["left_out_at_import"] == 1
    code, out, _ = _run(capsys, "replay", str(db), "--session", session)
    assert "left out at import: 1" in out and "(line 6)" in out


def test_two_chat_logs_share_a_store_and_session_names_one(
    chat: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "traces" / "other.json"
    other.write_text(json.dumps([*CHAT[:2], {"role": "assistant", "content": "Nothing."}]))
    db = tmp_path / "both.db"
    sessions = []
    for path in (chat, other):
        code, out, _ = _run(capsys, "import", str(path), "--db", str(db), "--json")
        assert code == 0
        sessions.append(json.loads(out)["sessions"][0]["session"])
    assert len(set(sessions)) == 2
    code, out, _ = _run(
        capsys, "import", str(chat), "--db", str(db), "--session", "ses_again", "--json"
    )
    assert code == 0 and json.loads(out)["sessions"][0]["session"] == "ses_again"


def test_import_of_a_truncated_file_says_where_it_stops(
    chat: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat.write_text(json.dumps(CHAT, indent=2)[:200])
    code, out, err = _run(capsys, "import", str(chat), "--db", str(tmp_path / "t.db"))
    assert code == 1 and not out
    assert "not JSON at position" in err and "unknown trace format" not in err


def test_import_of_a_bad_transcript_fails_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"neither": "format"}))
    db = tmp_path / "bad.db"
    code, out, err = _run(capsys, "import", str(bad), "--db", str(db))
    assert code == 1
    assert "unknown trace format" in err and not out
    assert not db.exists()
    code, _, err = _run(capsys, "import", str(tmp_path / "missing.json"), "--db", str(db))
    assert code == 1 and "cannot read" in err
    assert not db.exists()


def test_replay_of_a_demo_session_matches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "demo.db"
    write_generated(db, "ses_demo_001", turns=3)
    code, out, _ = _run(capsys, "replay", str(db), "--session", "ses_demo_001", "--json")
    assert code == 0
    result = json.loads(out)
    assert result["ok"] and result["projection_matches"] and result["requests"] == 0
    code, out, _ = _run(capsys, "replay", str(db), "--session", "ses_demo_001")
    assert code == 0 and "no requests recorded" in out
    code, _, err = _run(capsys, "replay", str(db), "--session", "ses_missing")
    assert code == 1 and "no session" in err


def test_replay_of_an_imported_session_matches(
    chat: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "imported.db"
    code, out, _ = _run(capsys, "import", str(chat), "--db", str(db), "--json")
    session = json.loads(out)["sessions"][0]["session"]
    code, out, _ = _run(capsys, "replay", str(db), "--session", session, "--json")
    assert code == 0 and json.loads(out)["ok"]


async def _session_with_a_wrong_snapshot(db: Path) -> str:
    """A session of two user messages whose snapshot, taken after the first, holds a memory
    and a text no event wrote; the id of the message whose text is wrong."""
    builder = SessionBuilder("ses_snap")
    first = builder.user("hello")
    async with SQLiteStore.open(db) as store:
        log = await SessionLog.open(store, "ses_snap")
        await log.append(builder.events)
        seq = len(builder.events)
        builder.user("again")
        await log.append(builder.events[seq:])
        wrong = History.rebuild("ses_snap", await store.read("ses_snap", 1, seq))
        wrong.state.memory = "remembered from nowhere"
        (part,) = wrong.message(first).parts
        assert isinstance(part, TextPart)
        wrong.message(first).parts[0] = msgspec.structs.replace(part, text="goodbye")
        head, chunks = wrong.snapshot_head(), wrong.snapshot_chunks()
        await store.save_snapshot(Snapshot("ses_snap", seq, SNAPSHOT_SCHEMA, head, chunks))
    return first


def test_replay_exits_1_naming_where_the_snapshot_differs_from_the_events(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "snap.db"
    first = trio.run(_session_with_a_wrong_snapshot, db)
    code, out, err = _run(capsys, "replay", str(db), "--session", "ses_snap", "--json")
    result = json.loads(out)
    assert code == 1 and not result["ok"] and not result["projection_matches"]
    assert result["projection_differences"] == [f"messages[{first}]", "memory"]
    code, out, err = _run(capsys, "replay", str(db), "--session", "ses_snap")
    assert code == 1
    assert (
        "projection from events DIFFERS FROM the one loaded from the snapshot and tail in "
        f"messages[{first}], memory\n"
    ) in out
    assert err == "contextledger: session 'ses_snap' does not replay to what was recorded\n"


def test_projection_differences_name_ids_in_one_only_and_a_new_order() -> None:
    builder = SessionBuilder("ses_order")
    builder.user("one")
    second = builder.user("two")
    recorded = [RecordedEvent("ses_order", i, i, e) for i, e in enumerate(builder.events, 1)]
    both = History.rebuild("ses_order", recorded)
    one = History.rebuild("ses_order", recorded[:3])
    assert projection_differences(both.state, both.state) == []
    (part,) = both.message(second).parts
    assert projection_differences(both.state, one.state) == [
        "seq",
        f"messages[{second}]",
        f"part_tokens[{part.id}]",
    ]
    swapped = msgspec.structs.replace(both.state, messages=both.state.messages[::-1])
    assert projection_differences(both.state, swapped) == ["messages"]


async def _session_with_requests(db: Path, *, corrupt: bool, config: Config | None = None) -> None:
    events = synthetic_session("ses_req", seed=3, turns=1)
    builder = RequestBuilder(AnthropicMessages(), config or Config())
    inputs = RequestInputs(
        model=ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5"),
        segments=SystemSegments(prompt="Be brief.", environment="<env/>"),
    )
    async with SQLiteStore.open(db) as store:
        log = await SessionLog.open(store, "ses_req")
        done = 0
        for index, event in enumerate(events):
            if isinstance(event, MessageAdded) and event.role == "assistant":
                await log.append(events[done:index])
                done = index
                await prepare_request(log, builder, inputs, time_ms=event.time_ms)
        await log.append(events[done:])
        if corrupt:
            sent = log.history.last_request()
            assert sent is not None
            await log.append(
                [
                    RequestSent(
                        **{
                            **{f: getattr(sent, f) for f in sent.__struct_fields__},
                            "prefix_hash": "0" * 64,
                        }
                    )
                ]
            )


def test_replay_reproduces_recorded_prefix_hashes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "requests.db"
    trio.run(lambda: _session_with_requests(db, corrupt=False))
    code, out, _ = _run(capsys, "replay", str(db), "--session", "ses_req", "--json")
    result = json.loads(out)
    assert code == 0, result
    assert result["requests"] > 1 and result["prefix_hashes_matched"] == result["requests"]


def test_replay_takes_the_config_the_requests_were_built_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "native.db"
    native = Config(request=RequestConfig(cache="auto", cache_messages=1))
    trio.run(lambda: _session_with_requests(db, corrupt=False, config=native))
    code, out, _ = _run(capsys, "replay", str(db), "--session", "ses_req", "--json")
    assert code == 1 and json.loads(out)["prefix_hashes_matched"] < json.loads(out)["requests"]
    toml = tmp_path / "native.toml"
    toml.write_text('[request]\ncache = "auto"\ncache_messages = 1\n')
    argv = ["replay", str(db), "--session", "ses_req", "--config", str(toml), "--json"]
    code, out, _ = _run(capsys, *argv)
    assert code == 0 and json.loads(out)["ok"]


def test_replay_exits_1_on_a_prefix_hash_mismatch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "corrupt.db"
    trio.run(lambda: _session_with_requests(db, corrupt=True))
    code, out, err = _run(capsys, "replay", str(db), "--session", "ses_req")
    assert code == 1
    assert "not reproduced at seq" in out and "does not replay" in err


def test_simulate_json_has_the_figures_per_trace_strategy_and_provider(
    chat: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "simulate", str(chat.parent), "--strategy", "baseline", "--json")
    assert code == 0
    result = json.loads(out)
    figures = result["traces/chat.json"]["baseline"]
    assert set(figures) == {"anthropic", "openai"}
    assert set(figures["anthropic"]) == {
        "billed_input_cost",
        "peak_prompt",
        "lower_bound",
        "cost_vs_lower_bound",
        "calls_lower_bound",
        "cost_vs_calls_lower_bound",
        "calls",
        "failed_at",
        "over_window_calls",
        "compactions",
        "summarizer",
        "summary_calls",
        "summary_input_tokens",
        "summary_output_tokens",
        "summary_cost",
        "cost",
        "facts_needed",
        "facts_retained",
        "retention",
        "facts_needed_older",
        "facts_retained_older",
        "retention_older",
    }
    assert figures["anthropic"]["calls"] == 2
    assert figures["anthropic"]["failed_at"] is None
    code, out, _ = _run(capsys, "simulate", str(chat), "--provider", "openai")
    assert code == 0 and "anthropic" not in out and "retention_older" in out
    assert all(name in out for name in DEFAULT_STRATEGIES)


def test_simulate_refuses_bad_input(
    chat: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, "simulate", str(chat), "--strategy", "nope")
    assert code == 1 and "unknown strategy 'nope'" in err and not out
    code, out, err = _run(capsys, "simulate", str(tmp_path / "missing"))
    assert code == 1 and "no transcript or folder" in err and not out
    code, _, err = _run(capsys, "simulate", str(chat), "--window", "0")
    assert code == 1 and "--window" in err


@pytest.mark.parametrize("command", ["simulate", "report", "diff", "view"])
@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("os:getcwd", "strategy 'os:getcwd' raised TypeError: "),
        (
            "tests.strategies._custom:forgets_to_return",
            "strategy 'tests.strategies._custom:forgets_to_return' returned NoneType, expected a "
            "list of ModelMessage",
        ),
        ("last-0", "strategy 'last-0': the number of messages to keep must be >= 1, got 0"),
    ],
)
def test_each_command_says_in_one_line_what_a_strategy_did_wrong_naming_it_as_given(
    chat: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    name: str,
    message: str,
) -> None:
    report = tmp_path / "r.html"
    if command == "simulate":
        argv = [command, str(chat)]
    elif command == "report":
        argv = [command, str(chat), "--out", str(report)]
    else:
        db = tmp_path / "chat.db"
        _, out, _ = _run(capsys, "import", str(chat), "--db", str(db), "--json")
        session = json.loads(out)["sessions"][0]["session"]
        argv = [command, str(db), "--session", session, "--turn", "1"]
    code, out, err = _run(capsys, *argv, "--strategy", name)
    assert code == 1 and not out and not report.exists()
    assert err.startswith(f"contextledger: {message}") and err.count("\n") == 1


AIDER = (
    "# aider chat started at 2024-08-05 19:33:02\n\n#### hello\n\nHi there.\n\n"
    "# aider chat started at 2024-08-05 19:40:00\n\n#### again\n\nSure.\n\n"
    "# aider chat started at 2024-08-05 19:50:00\n\n#### last\n\nDone.\n"
)


def test_import_of_a_folder_writes_each_transcript_once(
    chat: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (chat.parent / "other.json").write_text(json.dumps([*CHAT[:2], CHAT[-1]]))
    (chat.parent / "nested").mkdir()
    (chat.parent / "nested" / "history.md").write_text(AIDER)
    (chat.parent / "notes.txt").write_text("not a transcript")
    db = tmp_path / "folder.db"
    code, out, _ = _run(capsys, "import", str(chat.parent), "--db", str(db), "--json")
    assert code == 0
    result = json.loads(out)
    assert len(result["reports"]) == 3 and result["skipped"] == result["failed"] == []
    sessions = result["sessions"]
    assert len({s["session"] for s in sessions}) == len(sessions) == 1 + 1 + 3
    code, out, _ = _run(capsys, "import", str(chat.parent), "--db", str(db))
    assert (code, out) == (0, "transcripts: 0 imported, 3 imported before, 0 failed\n")
    code, out, _ = _run(capsys, "sessions", str(db), "--json")
    assert len(json.loads(out)) == 5


def test_a_folder_import_lists_what_it_cannot_import_and_a_lenient_run_adds_it(
    chat: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    orphan = chat.parent / "orphan.json"
    orphan.write_text(json.dumps([*CHAT, {"role": "tool", "tool_call_id": "nope", "content": "?"}]))
    db = tmp_path / "folder.db"
    code, out, err = _run(capsys, "import", str(chat.parent), "--db", str(db), "--json")
    assert code == 1 and "1 of 2 transcripts were not imported" in err
    result = json.loads(out)
    assert [f["source"] for f in result["failed"]] == [str(orphan)]
    assert "orphan_tool_result" in result["failed"][0]["error"]
    assert [s["source"] for s in result["sessions"]] == [str(chat)]
    code, out, _ = _run(capsys, "import", str(chat.parent), "--db", str(db), "--lenient", "--json")
    result = json.loads(out)
    assert code == 0 and result["skipped"] == [str(chat)]
    assert [(s["source"], s["left_out"]) for s in result["sessions"]] == [(str(orphan), 1)]


def _interrupted_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Path]:
    """An aider history whose import was interrupted at its second append: the history and
    the database it stopped in."""
    history = tmp_path / "history.md"
    history.write_text(AIDER)
    db = tmp_path / "resumed.db"
    append = SQLiteStore.append
    calls: list[int] = []

    async def interrupted(
        store: SQLiteStore, stream: str, version: int, events: Any, **position: Any
    ) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("interrupted")
        return await append(store, stream, version, events, **position)

    monkeypatch.setattr(SQLiteStore, "append", interrupted)
    with pytest.raises(RuntimeError, match="interrupted"):
        _run(capsys, "import", str(history), "--db", str(db))
    monkeypatch.setattr(SQLiteStore, "append", append)
    return history, db


def test_an_interrupted_import_is_taken_up_where_it_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    history, db = _interrupted_import(tmp_path, capsys, monkeypatch)
    code, out, _ = _run(capsys, "sessions", str(db), "--json")
    assert len(json.loads(out)) == 1  # the session being written when it stopped is gone
    code, out, _ = _run(capsys, "import", str(history), "--db", str(db), "--json")
    assert code == 0
    statuses = [s["status"] for s in json.loads(out)["sessions"]]
    assert statuses == ["present", "written", "written"]
    code, out, _ = _run(capsys, "import", str(history), "--db", str(db), "--json")
    assert json.loads(out)["skipped"] == [str(history)]


def test_export_trace_writes_a_session_that_imports_again(
    chat: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "exported.db"
    code, out, _ = _run(capsys, "import", str(chat), "--db", str(db), "--json")
    (row,) = json.loads(out)["sessions"]
    code, out, _ = _run(
        capsys, "export-trace", str(db), "--session", row["session"], "--format", "openai-chat"
    )
    # the last answer's one text item comes back as a string
    assert code == 0 and json.loads(out) == [*CHAT[:4], {**CHAT[4], "content": "Two files."}]
    jsonl = tmp_path / "back.jsonl"
    args = ["--session", row["session"], "--format", "claude-code", "--out", str(jsonl)]
    code, out, _ = _run(capsys, "export-trace", str(db), *args)
    assert code == 0 and not out
    code, out, _ = _run(capsys, "import", str(jsonl), "--db", str(tmp_path / "b.db"), "--json")
    (again,) = json.loads(out)["sessions"]
    assert code == 0 and json.loads(out)["report"]["format"] == "claude-code"
    assert (again["messages"], again["tool_calls"]) == (row["messages"], row["tool_calls"])
    code, _, err = _run(
        capsys, "export-trace", str(db), "--session", "ses_x", "--format", "claude-code"
    )
    assert code == 1 and "no session 'ses_x'" in err
    for out in (tmp_path / "missing" / "back.jsonl", tmp_path):
        args = ["--session", row["session"], "--format", "claude-code", "--out", str(out)]
        code, printed, err = _run(capsys, "export-trace", str(db), *args)
        assert (code, printed) == (1, "")
        assert (
            err == f"contextledger: cannot write the transcript at {out}: not a file in a folder\n"
        )


def test_an_import_refuses_a_session_written_again_under_it_and_leaves_that_one_be(
    chat: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Between two of the import's appends another writer deletes the session and writes it
    # again to as many events: the import's next append is refused, and the other writer's
    # session is neither extended nor deleted.
    monkeypatch.setattr(_importing, "WRITE_BATCH", 2)
    written = _importing._Target.write
    calls = 0
    theirs: list[Event] = []

    async def racing(target: _importing._Target, batch: list[Event]) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            sid = target.session.session_id
            rows = await target.store.read(sid, 1, 1_000)
            theirs.extend(msgspec.structs.replace(r.event, time_ms=7) for r in rows)
            await target.store.delete_streams([sid])
            await target.store.append(sid, 0, theirs)
        await written(target, batch)

    monkeypatch.setattr(_importing._Target, "write", racing)
    db = tmp_path / "imported.db"
    code, _, err = _run(capsys, "import", str(chat), "--db", str(db))
    assert code == 1
    assert "expected its last event at position" in err
    assert theirs

    async def stored() -> list[Event]:
        async with SQLiteStore.open(db) as store:
            (sid,) = await store.streams()
            return [row.event for row in await store.read(sid, 1, 1_000)]

    assert trio.run(stored) == theirs


def test_an_import_that_takes_up_a_session_deleted_meanwhile_refuses_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    history, db = _interrupted_import(tmp_path, capsys, monkeypatch)
    opened = _importing._Target.open

    async def deleted_once_open(
        store: SQLiteStore, session: Any, source: str
    ) -> _importing._Target:
        target = await opened(store, session, source)
        if target.stored:  # another writer deletes the session the import takes up
            await store.delete_streams([session.session_id])
        return target

    monkeypatch.setattr(_importing._Target, "open", deleted_once_open)
    code, out, err = _run(capsys, "import", str(history), "--db", str(db))
    assert (code, out) == (1, "")
    assert err.startswith("contextledger: ") and err.count("\n") == 1
    assert "is at version 0" in err
