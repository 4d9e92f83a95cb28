"""Malformed conversations, generated: a valid OpenAI chat log, Claude Code transcript or Codex
rollout with one fault put in (a result answering no call, a second result, a call id used
twice, a line that is no JSON, a record missing a field). A strict import refuses each,
naming the fault's line and field; a lenient one imports the rest and records the fault in the
session's log."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextledger.events._catalogue import InputLeftOut, MessageAdded
from contextledger.importers import (
    INVALID_KINDS,
    ImportResult,
    TraceImportError,
    import_with_report,
)
from tests.importers.test_codex import ROLLOUT, _item
from tests.importers.test_openhands_v1 import EVENTS as V1_EVENTS

#: A conversation: per step, the number of tool calls its assistant message makes.
steps = st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=6)


@dataclass(frozen=True)
class Fault:
    """Where a fault was put (1-based line), the field named there and the left-out kind."""

    line: int
    field: str
    kind: str


def _import(name: str, text: str, *, lenient: bool) -> ImportResult:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_text(text)
        return import_with_report(path, lenient=lenient)


def _check(name: str, text: str, fault: Fault, users: int, *, consequences: bool) -> None:
    """Strict: refused at ``fault``. Lenient: imported with ``users`` user messages and the
    fault in the report and the log (``consequences``: later items may follow from it)."""
    with pytest.raises(TraceImportError) as caught:
        _import(name, text, lenient=False)
    assert (caught.value.line, caught.value.field) == (fault.line, fault.field)
    assert fault.kind in str(caught.value) or fault.kind == "malformed_record"
    result = _import(name, text, lenient=True)
    items = [(i.line, i.field, i.kind) for i in result.report.left_out]
    assert (fault.line, fault.field, fault.kind) in items
    if not consequences:
        assert [i for i in items if i[2] == fault.kind] == [(fault.line, fault.field, fault.kind)]
    (session,) = result.sessions
    logged = session.events[-1]
    assert isinstance(logged, InputLeftOut)
    assert list(logged.items) == session.left_out
    written = [e for e in session.events if isinstance(e, MessageAdded) and e.role == "user"]
    assert len(written) >= users


@settings(max_examples=30, deadline=None)
@given(steps)
def test_the_generated_conversations_import_strictly_with_nothing_left_out(
    calls_per_step: list[int],
) -> None:
    chat = _import("chat.json", json.dumps(_chat(calls_per_step)), lenient=False)
    lines = "".join(json.dumps(r) + "\n" for r in _transcript(calls_per_step))
    transcript = _import("s.jsonl", lines, lenient=False)
    for result in (chat, transcript):
        assert [i.kind for i in result.report.left_out if i.kind != "system"] == []
        assert result.report.written["user messages"] == len(calls_per_step)
        assert result.report.written.get("tool calls", 0) == sum(calls_per_step)


# --- OpenAI chat --------------------------------------------------------------------------------


def _chat(calls_per_step: list[int]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for step, calls in enumerate(calls_per_step):
        messages.append({"role": "user", "content": f"step {step}"})
        ids = [f"call_{step}_{i}" for i in range(calls)]
        tool_calls = [
            {"id": c, "type": "function", "function": {"name": "bash", "arguments": "{}"}}
            for c in ids
        ]
        messages.append(
            {"role": "assistant", "content": f"answer {step}", "tool_calls": tool_calls}
        )
        messages.extend({"role": "tool", "tool_call_id": c, "content": "ok"} for c in ids)
    return messages


@st.composite
def faulty_chats(draw: st.DrawFn) -> tuple[list[dict[str, Any]], Fault, int]:
    """A chat log with one fault, the fault, and the user messages it holds."""
    calls_per_step = draw(steps)
    messages = _chat(calls_per_step)
    results = [i for i, m in enumerate(messages) if m["role"] == "tool"]
    callers = [i for i, m in enumerate(messages) if m.get("tool_calls")]
    kinds = ["orphan"] + (["duplicate_result", "early_result"] if results else [])
    kinds += ["duplicate_call"] if callers else []
    kind = draw(st.sampled_from(kinds))
    if kind == "orphan":
        at = draw(st.integers(min_value=1, max_value=len(messages)))
        messages.insert(at, {"role": "tool", "tool_call_id": "ghost", "content": "?"})
    elif kind == "duplicate_result":
        original = draw(st.sampled_from(results))
        at = draw(st.integers(min_value=original + 1, max_value=len(messages)))
        messages.insert(at, dict(messages[original]))
    elif kind == "early_result":
        result = draw(st.sampled_from(results))
        caller = max(i for i in callers if i < result)
        at = draw(st.integers(min_value=1, max_value=caller))
        messages.insert(at, messages.pop(result))
    else:
        caller = draw(st.sampled_from(callers))
        calls = messages[caller]["tool_calls"]
        calls.append(dict(calls[draw(st.integers(0, len(calls) - 1))]))
        fault = Fault(caller + 1, f"[{caller}].tool_calls[{len(calls) - 1}]", "duplicate_tool_call")
        return messages, fault, len(calls_per_step)
    return messages, Fault(at + 1, f"[{at}]", "orphan_tool_result"), len(calls_per_step)


@settings(max_examples=60, deadline=None)
@given(faulty_chats())
def test_a_faulty_chat_log_is_refused_at_its_fault_or_imported_leniently(
    case: tuple[list[dict[str, Any]], Fault, int],
) -> None:
    messages, fault, users = case
    _check("chat.json", json.dumps(messages), fault, users, consequences=False)


# --- Claude Code JSONL ------------------------------------------------------------------------


def _record(n: int, kind: str, content: Any, **message: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "uuid": f"u{n}",
        "parentUuid": f"u{n - 1}" if n else None,
        "sessionId": "s1",
        "timestamp": f"2025-07-01T10:{n // 60:02d}:{n % 60:02d}.000Z",
        "message": {"role": kind, "content": content, **message},
    }


def _transcript(calls_per_step: list[int]) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for step, calls in enumerate(calls_per_step):
        records.append(_record(len(records), "user", f"step {step}"))
        ids = [f"toolu_{step}_{i}" for i in range(calls)]
        blocks = [{"type": "text", "text": f"answer {step}"}]
        blocks += [{"type": "tool_use", "id": c, "name": "Bash", "input": {}} for c in ids]
        usage = {"input_tokens": 10, "output_tokens": 5}
        records.append(
            _record(len(records), "assistant", blocks, id=f"msg_{step}", model="m", usage=usage)
        )
        for c in ids:
            result = [{"type": "tool_result", "tool_use_id": c, "content": "ok"}]
            records.append(_record(len(records), "user", result))
    return records


def _first_block(record: dict[str, Any]) -> str:
    content = record["message"]["content"]
    return str(content[0]["type"]) if isinstance(content, list) and content else ""


@st.composite
def faulty_transcripts(draw: st.DrawFn) -> tuple[list[str], Fault, int, bool]:
    """Transcript lines with one fault, the fault, the user messages it holds, and whether
    a lenient import may leave more out because of it (a lost line's calls go unanswered)."""
    calls_per_step = draw(steps)
    records = _transcript(calls_per_step)
    lines = [json.dumps(r) for r in records]
    fresh = len(records)
    results = [i for i, r in enumerate(records) if _first_block(r) == "tool_result"]
    kinds = ["orphan", "not_json", "no_message_id"]
    kinds += ["duplicate_result", "duplicate_use"] if results else []
    kind = draw(st.sampled_from(kinds))
    at = draw(st.integers(min_value=1, max_value=len(lines)))
    users = len(calls_per_step)
    if kind == "orphan":
        orphan = [{"type": "tool_result", "tool_use_id": "toolu_ghost", "content": "?"}]
        lines.insert(at, json.dumps(_record(fresh, "user", orphan)))
        return lines, Fault(at + 1, "message.content[0]", "orphan_tool_result"), users, False
    if kind == "duplicate_result":
        original = draw(st.sampled_from(results))
        at = max(at, original + 1)
        copy = {**records[original], "uuid": f"u{fresh}"}
        lines.insert(at, json.dumps(copy))
        return lines, Fault(at + 1, "message.content[0]", "duplicate_tool_result"), users, False
    if kind == "duplicate_use":
        used = records[draw(st.sampled_from(results))]["message"]["content"][0]["tool_use_id"]
        at = max(at, next(i for i, line in enumerate(lines) if f'"id": "{used}"' in line) + 1)
        block = [{"type": "tool_use", "id": used, "name": "Bash", "input": {}}]
        again = _record(fresh, "assistant", block, id="msg_again", model="m")
        lines.insert(at, json.dumps(again))
        return lines, Fault(at + 1, "message.content[0]", "duplicate_tool_use"), users, False
    index = at - 1
    lost_user = records[index]["type"] == "user" and isinstance(
        records[index]["message"]["content"], str
    )
    if kind == "not_json":
        lines[index] = lines[index][: len(lines[index]) // 2]
        fault = Fault(at, "", "malformed_record")
    else:
        broken = json.loads(lines[index])
        broken["type"] = "assistant"
        broken["message"].pop("id", None)
        lines[index] = json.dumps(broken)
        fault = Fault(at, "message.id", "malformed_record")
    return lines, fault, users - lost_user, True


@settings(max_examples=60, deadline=None)
@given(faulty_transcripts())
def test_a_faulty_claude_code_transcript_is_refused_at_its_fault_or_imported_leniently(
    case: tuple[list[str], Fault, int, bool],
) -> None:
    lines, fault, users, consequences = case
    _check("s.jsonl", "\n".join(lines) + "\n", fault, users, consequences=consequences)


# --- Codex ------------------------------------------------------------------------------------


@st.composite
def faulty_rollouts(draw: st.DrawFn) -> tuple[list[str], Fault]:
    """The test rollout with one fault: a result for no call, or a call reusing the id of one
    still unanswered (put right after it)."""
    lines = list(ROLLOUT)
    if draw(st.booleans()):
        at = draw(st.integers(min_value=1, max_value=len(lines)))
        lines.insert(at, _item(5, type="function_call_output", call_id="ghost", output="?"))
        return lines, Fault(at + 1, "payload.call_id", "orphan_tool_result")
    calls = [i for i, line in enumerate(lines) if '"function_call"' in line]
    at = draw(st.sampled_from(calls)) + 1
    lines.insert(at, lines[at - 1])
    return lines, Fault(at + 1, "payload.call_id", "duplicate_tool_call")


@settings(max_examples=40, deadline=None)
@given(faulty_rollouts())
def test_a_faulty_codex_rollout_is_refused_at_its_fault_or_imported_leniently(
    case: tuple[list[str], Fault],
) -> None:
    lines, fault = case
    clean = _import("rollout.jsonl", "\n".join(ROLLOUT) + "\n", lenient=False)
    users = clean.report.written["user messages"]
    _check("rollout.jsonl", "\n".join(lines) + "\n", fault, users, consequences=False)


@pytest.mark.parametrize("name", ["codex", "openhands-v1"])
def test_a_broken_line_of_other_json_lines_formats_is_left_out_when_lenient(name: str) -> None:
    lines = list(ROLLOUT) if name == "codex" else [json.dumps(e) for e in V1_EVENTS]
    lines[2] = lines[2][:20]
    text = "\n".join(lines) + "\n"
    with pytest.raises(TraceImportError) as caught:
        _import("t.jsonl", text, lenient=False)
    assert caught.value.line == 3 and "not JSON" in caught.value.reason
    result = _import("t.jsonl", text, lenient=True)
    assert result.report.format == name
    assert [(i.line, i.kind) for i in result.report.left_out if i.kind in INVALID_KINDS] == [
        (3, "malformed_record")
    ]
    assert result.report.read["malformed_record"] == 1
    logged = result.sessions[0].events[-1]
    assert isinstance(logged, InputLeftOut) and logged.items[0].line <= 3
