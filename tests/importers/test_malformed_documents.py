"""A malformed message inside a JSON document: a strict import refuses the document naming the
message and field; a lenient one leaves the message out as if it were absent, and records it
(line, field, reason) in the report and the session's log, as it does a malformed JSON line."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextledger.events._catalogue import InputLeftOut, MessageAdded, PartAdded, ToolStateChanged
from contextledger.events._parts import TextPart, ToolPart
from contextledger.importers import ImportResult, TraceImportError, import_with_report
from tests.importers.test_malformed import _chat, steps

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"
MALFORMED = "malformed_record"


def _import(name: str, data: Any, *, lenient: bool) -> ImportResult:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_text(json.dumps(data))
        return import_with_report(path, lenient=lenient)


def _conversation(result: ImportResult) -> list[tuple[Any, ...]]:
    """What the sessions say, without ids or times: messages by role, texts, tool calls and
    their results."""
    said: list[tuple[Any, ...]] = []
    for session in result.sessions:
        for event in session.events:
            if isinstance(event, MessageAdded):
                said.append(("message", event.role))
            elif isinstance(event, PartAdded) and isinstance(event.part, TextPart):
                said.append(("text", event.part.text))
            elif isinstance(event, PartAdded) and isinstance(event.part, ToolPart):
                said.append(("call", event.part.call_id, event.part.tool))
            elif isinstance(event, ToolStateChanged):
                said.append(("result", type(event.state).__name__))
    return said


def _left_out(result: ImportResult) -> list[tuple[str, str]]:
    return sorted((i.kind, i.reason) for i in result.report.left_out if i.kind != MALFORMED)


#: Ways to spoil a chat message, with the field the error names (``at`` is its JSON path).
SPOILERS = {
    "not an object": (lambda m: 42, lambda at: at),
    "no role": (lambda m: {k: v for k, v in m.items() if k != "role"}, lambda at: f"{at}.role"),
    "an unknown role": (lambda m: {**m, "role": "robot"}, lambda at: f"{at}.role"),
    "content of no known shape": (lambda m: {**m, "content": 7}, lambda at: f"{at}.content"),
}


@settings(max_examples=60, deadline=None)
@given(steps, st.data())
def test_a_malformed_chat_message_is_refused_or_left_out_as_if_absent(
    calls_per_step: list[int], data: st.DataObject
) -> None:
    messages = _chat(calls_per_step)
    i = data.draw(st.integers(min_value=1, max_value=len(messages) - 1))
    how = data.draw(st.sampled_from(sorted(SPOILERS)))
    spoil, field = SPOILERS[how]
    spoiled = [*messages[:i], spoil(messages[i]), *messages[i + 1 :]]
    with pytest.raises(TraceImportError) as caught:
        _import("chat.json", spoiled, lenient=False)
    assert (caught.value.line, caught.value.field) == (i + 1, field(f"[{i}]"))
    lenient = _import("chat.json", spoiled, lenient=True)
    absent = _import("chat.json", [*messages[:i], *messages[i + 1 :]], lenient=True)
    assert _conversation(lenient) == _conversation(absent)
    assert _left_out(lenient) == _left_out(absent)
    malformed = [(m.line, m.field) for m in lenient.report.left_out if m.kind == MALFORMED]
    assert malformed == [(i + 1, field(f"[{i}]"))]
    assert lenient.report.read[MALFORMED] == 1
    (session,) = lenient.sessions
    logged = session.events[-1]
    assert isinstance(logged, InputLeftOut)
    assert (i + 1, MALFORMED) in [(item.line, item.kind) for item in logged.items]


# --- the shared transcripts of every JSON document format -----------------------------------

DOCUMENTS = [
    ("opencode-export/biome-config__f94a4d1e69f1-0__gpt-5.3-codex.json", "messages"),
    ("gemini-cli/session-bridge__c66a5f5ed92d-0__gemini-3-flash.json", "messages"),
    ("swe-agent-traj/marshmallow-1867_function_calling.traj", "history"),
    ("mini-swe-agent/github_issue.traj.json", ""),  # a list of messages
]


@pytest.mark.parametrize(("name", "key"), DOCUMENTS)
def test_a_shared_document_with_a_message_spoiled_imports_leniently(name: str, key: str) -> None:
    path = TRACES / name
    if not path.is_file():
        pytest.skip(f"shared/traces not present: {path} does not exist")
    document = json.loads(path.read_bytes())
    items = document[key] if key else document
    i = len(items) // 2
    clean = import_with_report(path, lenient=True)
    spoiled_items = [*items[:i], 42, *items[i + 1 :]]
    spoiled = {**document, key: spoiled_items} if key else spoiled_items
    with pytest.raises(TraceImportError) as caught:
        _import(path.name, spoiled, lenient=False)
    assert (caught.value.line, caught.value.field) == (i + 1, f"{key}[{i}]")
    assert "must be a JSON object" in caught.value.reason
    result = _import(path.name, spoiled, lenient=True)
    assert result.report.format == clean.report.format
    malformed = [(m.line, m.field) for m in result.report.left_out if m.kind == MALFORMED]
    assert malformed == [(i + 1, f"{key}[{i}]")]
    assert 0 < _messages(result) <= _messages(clean)


def _messages(result: ImportResult) -> int:
    return sum(n for kind, n in result.report.written.items() if kind.endswith(" messages"))


def test_a_broken_event_file_of_an_openhands_v1_folder_is_left_out_when_lenient(
    tmp_path: Path,
) -> None:
    folder = TRACES / "openhands-v1" / "openhands-cli__confirmation_mode"
    if not folder.is_dir():
        pytest.skip(f"shared/traces not present: {folder} does not exist")
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy)
    files = sorted(copy.rglob("event-*.json"))
    broken = files[3]
    broken.write_text(broken.read_text()[:30])
    with pytest.raises(TraceImportError) as caught:
        import_with_report(copy)
    assert caught.value.source == str(broken) and "not JSON" in caught.value.reason
    result = import_with_report(copy, lenient=True)
    malformed = [(m.line, m.field) for m in result.report.left_out if m.kind == MALFORMED]
    assert malformed == [(4, broken.name)]


def test_a_malformed_openhands_run_is_left_out_when_lenient(tmp_path: Path) -> None:
    source = TRACES / "openhands" / "resolver_mock_output.jsonl"
    if not source.is_file():
        pytest.skip(f"shared/traces not present: {source} does not exist")
    lines = [line for line in source.read_text().splitlines() if line.strip()]
    clean = import_with_report(source, lenient=True)
    run = json.loads(lines[1])  # the first run says what the file is
    run["history"] = 7
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join([lines[0], json.dumps(run), *lines[2:]]) + "\n")
    with pytest.raises(TraceImportError) as caught:
        import_with_report(path)
    assert (caught.value.line, caught.value.field) == (2, "history")
    result = import_with_report(path, lenient=True)
    assert [(m.line, m.field) for m in result.report.left_out if m.kind == MALFORMED] == [
        (2, "history")
    ]
    assert result.report.written["sessions"] == clean.report.written["sessions"] - 1
