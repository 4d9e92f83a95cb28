"""The OpenHands V1 importer: a JSON lines file of events, a folder of per-event files, an
``output.jsonl`` run holding V1 events, and the shared traces against the figures of
``shared/traces/SOURCES-more.md``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contextledger.events._catalogue import (
    MessageAdded,
    PartAdded,
    SessionStarted,
    ToolStateChanged,
    UsageReported,
)
from contextledger.events._parts import ReasoningPart, TextPart, ToolCompleted, ToolErrored, Usage
from contextledger.importers import (
    TraceImportError,
    import_openhands_lines,
    import_openhands_v1,
    import_openhands_v1_events,
)
from contextledger.importers._openhands_v1 import PER_CALL_USAGE
from tests.importers.test_openai_chat import (
    assert_imported,
    messages,
    of_type,
    tool_parts,
    trace_dir,
)


def _at(second: int) -> str:
    return f"2026-02-05T11:24:{second:02d}.000000"


def _text(text: str) -> list[dict[str, Any]]:
    return [{"cache_prompt": False, "type": "text", "text": text}]


def _stats(second: int, prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "cache_read_tokens": cached}
    metric = {"model_name": "openai/gpt-4o-mini", "accumulated_token_usage": usage}
    return {"id": f"s{second}", "timestamp": _at(second), "source": "environment",
            "kind": "ConversationStateUpdateEvent", "key": "stats",
            "value": {"usage_to_metrics": {"agent": metric}}}  # fmt: skip


EVENTS: list[dict[str, Any]] = [
    {"id": "e0", "timestamp": _at(0), "source": "agent", "kind": "SystemPromptEvent",
     "system_prompt": {"type": "text", "text": "You are OpenHands."},
     "tools": [{"name": "terminal"}]},
    {"id": "e1", "timestamp": _at(1), "source": "user", "kind": "MessageEvent",
     "llm_message": {"role": "user", "content": _text("Run pwd.")}, "activated_skills": []},
    {"id": "e2", "timestamp": _at(1), "source": "environment",
     "kind": "ConversationStateUpdateEvent", "key": "execution_status", "value": "running"},
    _stats(2, 100, 10),
    {"id": "e3", "timestamp": _at(2), "source": "agent", "kind": "ActionEvent",
     "thought": _text("Let me check."), "reasoning_content": "pwd prints it",
     "action": {"command": "pwd", "kind": "TerminalAction"}, "tool_name": "terminal",
     "tool_call_id": "call_1",
     "tool_call": {"id": "call_1", "name": "terminal", "arguments": '{"command": "pwd"}'},
     "llm_response_id": "r1"},
    {"id": "e4", "timestamp": _at(3), "source": "environment", "kind": "ObservationEvent",
     "tool_name": "terminal", "tool_call_id": "call_1", "action_id": "e3",
     "observation": {"content": _text("/work"), "is_error": False, "kind": "TerminalObservation"}},
    _stats(4, 250, 30, cached=90),
    {"id": "e5", "timestamp": _at(4), "source": "agent", "kind": "ActionEvent",
     "thought": [], "action": {"message": "Done", "kind": "FinishAction"}, "tool_name": "finish",
     "tool_call_id": "call_2",
     "tool_call": {"id": "call_2", "name": "finish", "arguments": '{"message": "Done"}'},
     "llm_response_id": "r2", "critic_result": {"score": 0.9}},
    {"id": "e6", "timestamp": _at(5), "source": "environment", "kind": "AgentErrorEvent",
     "tool_name": "finish", "tool_call_id": "call_2", "error": "finish failed"},
    {"id": "e7", "timestamp": _at(6), "source": "agent", "kind": "MessageEvent",
     "llm_message": {"role": "assistant", "content": _text("It is /work.")},
     "thinking_blocks": [{"type": "thinking", "thinking": "say it", "signature": "sig"}],
     "llm_response_id": "r3"},
]  # fmt: skip


def _numbered(events: list[dict[str, Any]]) -> list[tuple[int, Any, str]]:
    return [(n, event, "") for n, event in enumerate(events, 1)]


def _import(events: list[dict[str, Any]]) -> Any:
    session = import_openhands_v1_events(_numbered(events), source="events.jsonl")
    assert_imported(session)
    return session


def test_messages_actions_and_observations_become_turns_and_calls() -> None:
    session = _import(EVENTS)
    assert [m.role for m in messages(session)] == ["user", "assistant", "assistant", "assistant"]
    calls = {p.call_id: p for p in tool_parts(session)}
    assert calls["call_1"].tool == "terminal" and calls["call_1"].state.input == {"command": "pwd"}
    assert calls["call_1"].metadata == {"openhands": {"action_id": "e3"}}
    states = [e.state for e in of_type(session.events, ToolStateChanged)]
    assert isinstance(states[0], ToolCompleted) and states[0].output == "/work"
    assert isinstance(states[1], ToolErrored) and states[1].error == "finish failed"


def test_thoughts_are_text_and_reasoning_keeps_signatures() -> None:
    session = _import(EVENTS)
    parts = [e.part for e in of_type(session.events, PartAdded)]
    texts = [p.text for p in parts if isinstance(p, TextPart)]
    assert texts == ["Run pwd.", "Let me check.", "It is /work."]
    reasoning = [(p.text, p.metadata) for p in parts if isinstance(p, ReasoningPart)]
    assert reasoning == [("pwd prints it", {}), ("say it", {"anthropic": {"signature": "sig"}})]


def test_stats_updates_give_each_call_the_change_of_accumulated_usage() -> None:
    session = _import(EVENTS)
    usages = [e.usage for e in of_type(session.events, UsageReported)]
    assert usages == [Usage(input=100, output=10), Usage(input=60, output=20, cache_read=90)]
    started = session.events[0]
    assert isinstance(started, SessionStarted)
    assert started.config["system_prompt"] == "You are OpenHands."
    assert started.config["tools"] == [{"name": "terminal"}]
    assert started.model is not None and started.model.model_id == "gpt-4o-mini"


def test_state_updates_and_critic_results_are_left_out() -> None:
    session = _import(EVENTS)
    assert [(i.line, i.kind, i.field) for i in session.left_out] == [
        (3, "state:execution_status", ""),
        (8, "critic_result", "critic_result"),
    ]
    assert sum(session.read.values()) == len(EVENTS)


def test_an_observation_of_an_action_not_in_the_file_is_left_out() -> None:
    stray = {**EVENTS[5], "tool_call_id": "call_9", "action_id": "gone"}
    session = _import([EVENTS[1], stray])
    assert [(i.line, i.kind) for i in session.left_out] == [(2, "orphan_tool_result")]


def test_a_folder_of_event_files_with_its_base_state(tmp_path: Path) -> None:
    events = tmp_path / "conv" / "events"
    events.mkdir(parents=True)
    for n, event in enumerate(EVENTS):
        (events / f"event-{n:05d}-{event['id']}.json").write_text(json.dumps(event))
    (events / ".eventlog.lock").write_text("")
    usage = {"prompt_tokens": 7, "completion_tokens": 3, "response_id": "r1"}
    state = {
        "id": "cd945624-03b9",
        "agent": {"llm": {"model": "openai/gpt-4o-mini"}},
        "stats": {"usage_to_metrics": {"agent": {"token_usages": [usage]}}},
    }
    (tmp_path / "conv" / "base_state.json").write_text(json.dumps(state))
    session = import_openhands_v1(tmp_path / "conv")
    assert_imported(session)
    assert session.source_session_id == "cd945624-03b9"
    assert [e.usage for e in of_type(session.events, UsageReported)] == [Usage(input=7, output=3)]
    stats = [(i.line, i.reason) for i in session.left_out if i.kind == "stats"]
    assert stats == [(4, PER_CALL_USAGE), (7, PER_CALL_USAGE)]
    assert import_openhands_v1(events).events == session.events
    (critic,) = [i for i in session.left_out if i.kind == "critic_result"]
    assert critic.field == "event-00007-e5.json:critic_result"


def test_a_jsonl_file_of_events_and_a_single_event_file(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    assert import_openhands_v1(path).events == _import(EVENTS).events
    single = tmp_path / "event-00001-e1.json"
    single.write_text(json.dumps(EVENTS[1], indent=2))
    assert [m.role for m in messages(import_openhands_v1(single))] == ["user"]


def test_an_output_jsonl_run_holding_v1_events() -> None:
    run = {"instance_id": "org__repo-1", "history": EVENTS}
    (session,) = import_openhands_lines([json.dumps(run)], source="output.jsonl")
    assert_imported(session)
    started = session.events[0]
    assert isinstance(started, SessionStarted)
    assert started.config["source"] == "openhands-v1"
    assert started.config["instance_id"] == "org__repo-1"
    assert len(tool_parts(session)) == 2
    assert {(i.line, i.field) for i in session.left_out} == {
        (1, "history[2]"),
        (1, "history[7].critic_result"),
    }


def test_an_action_without_a_call_id_names_it() -> None:
    action = {k: v for k, v in EVENTS[4].items() if k not in ("tool_call_id", "tool_call")}
    with pytest.raises(TraceImportError) as caught:
        import_openhands_v1_events(_numbered([action]), source="events.jsonl")
    assert (caught.value.line, caught.value.field) == (1, "tool_call_id")


# --- the shared traces -------------------------------------------------------------------------

#: ``shared/traces/SOURCES-more.md``, openhands_v1 rows: events / distinct llm_response_id /
#: MessageEvent with source=user / ActionEvent.
SOURCES: dict[str, tuple[int, int, int, int]] = {
    "software-agent-sdk__goal-fixture-events.jsonl": (10, 2, 0, 2),
    "openhands-cli__cli447_hi_followup_iterative_case_a": (14, 6, 4, 3),
    "openhands-cli__confirmation_mode": (13, 6, 3, 3),
    "software-agent-sdk__conv-cd94562403b9": (8, 3, 2, 2),
}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_each_shared_conversation_has_the_documented_counts(name: str) -> None:
    session = import_openhands_v1(trace_dir("openhands-v1") / name)
    assert_imported(session)
    events, responses, users, actions = SOURCES[name]
    assert sum(session.read.values()) == events
    assert len(messages(session, "assistant")) == responses
    assert len(messages(session, "user")) == users
    assert len(tool_parts(session)) == actions


def test_the_persisted_conversation_has_per_call_usage() -> None:
    path = trace_dir("openhands-v1") / "software-agent-sdk__conv-cd94562403b9"
    session = import_openhands_v1(path)
    # SOURCES-more.md: base_state.stats.usage_to_metrics has per-call token_usages, one per
    # llm_response_id (3).
    assert len(of_type(session.events, UsageReported)) == 3
    assert session.events[0].model is not None  # type: ignore[union-attr]


def test_the_excerpt_reports_the_observation_of_the_action_it_lacks() -> None:
    path = trace_dir("openhands-v1") / "software-agent-sdk__goal-fixture-events.jsonl"
    session = import_openhands_v1(path)
    # SOURCES-more.md: "10 of 11 observations match an action in the same file; the
    # goal-fixture excerpt starts after one action".
    orphans = [i for i in session.left_out if i.kind == "orphan_tool_result"]
    assert len(orphans) == 1
    assert len(of_type(session.events, ToolStateChanged)) == 2
    assert not [m for m in of_type(session.events, MessageAdded) if m.role == "user"]
