"""The OpenHands ``output.jsonl`` importer: one session per run, both event schemas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contextledger.events._catalogue import (
    AssistantFinished,
    MessageAdded,
    SessionStarted,
    ToolStateChanged,
    UsageReported,
)
from contextledger.events._parts import ToolCompleted, ToolErrored, Usage
from contextledger.importers import TraceImportError, import_openhands, import_openhands_lines
from tests.importers.test_openai_chat import (
    answered,
    assert_imported,
    messages,
    of_type,
    tool_parts,
    trace_dir,
)


def _metadata(call_id: str, response_id: str, name: str = "execute_bash") -> dict[str, Any]:
    usage = "{'completion_tokens': 10, 'prompt_tokens': 100, 'total_tokens': 110}"
    return {
        "function_name": name,
        "tool_call_id": call_id,
        "model_response": {"id": response_id, "model": "llama-4", "usage": usage},
        "total_calls_in_response": 1,
    }


def _at(second: int) -> str:
    return f"2025-04-30T16:32:{second:02d}.000000"


RUN: dict[str, Any] = {
    "instance_id": "org__repo-1",
    "metadata": {"agent_class": "CodeActAgent", "llm_config": {"model": "openai/llama-4"}},
    "history": [
        {"id": 0, "timestamp": _at(0), "source": "agent", "action": "system",
         "args": {"content": "You are OpenHands."}},
        {"id": 1, "timestamp": _at(1), "source": "user", "action": "message",
         "args": {"content": "Fix the bug."}},
        {"id": 2, "timestamp": _at(1), "source": "user", "action": "recall", "args": {}},
        {"id": 3, "timestamp": _at(1), "source": "environment", "observation": "recall",
         "cause": 2, "content": ""},
        {"id": 4, "timestamp": _at(2), "source": "agent", "action": "run",
         "args": {"command": "ls", "thought": "Look around."},
         "tool_call_metadata": _metadata("toolu_01", "r1")},
        {"id": 5, "timestamp": _at(3), "source": "agent", "observation": "run", "cause": 4,
         "content": "a.c", "tool_call_metadata": _metadata("toolu_01", "r1")},
        {"id": 6, "timestamp": _at(4), "source": "agent", "action": "read",
         "args": {"path": "a.c", "thought": ""},
         "tool_call_metadata": _metadata("toolu_02", "r2", "str_replace_editor")},
        {"id": 7, "timestamp": _at(4), "source": "agent", "action": "read",
         "args": {"path": "b.c", "thought": ""},
         "tool_call_metadata": _metadata("toolu_03", "r2", "str_replace_editor")},
        {"id": 8, "timestamp": _at(5), "source": "agent", "observation": "read", "cause": 6,
         "content": "int a;"},
        {"id": 9, "timestamp": _at(5), "source": "agent", "observation": "error", "cause": 7,
         "content": "no such file"},
        {"id": 10, "timestamp": _at(6), "source": "agent", "observation": "error",
         "content": "Agent got stuck in a loop"},
        {"id": 11, "timestamp": _at(7), "source": "agent", "action": "finish",
         "args": {"final_thought": "Fixed."}, "tool_call_metadata": _metadata("toolu_04", "r3")},
    ],
}  # fmt: skip

RESOLVER: dict[str, Any] = {
    "issue_type": "issue",
    "history": [
        {"content": "Fix the issue.", "wait_for_response": False, "action": "message"},
        {"command": "touch LICENSE", "thought": "Create it.", "action": "run"},
        {"content": "", "command": "touch LICENSE", "exit_code": 0, "observation": "run"},
        {"outputs": {}, "thought": "Done.", "action": "finish"},
    ],
}


def _lines(*runs: dict[str, Any]) -> list[str]:
    return [json.dumps(run) for run in runs]


def test_each_run_is_a_session() -> None:
    sessions = import_openhands_lines(_lines(RUN, RESOLVER, RUN))
    assert len(sessions) == 3
    assert len({s.session_id for s in sessions}) == 3
    for session in sessions:
        assert_imported(session)


def test_actions_become_calls_answered_by_their_cause() -> None:
    (session,) = import_openhands_lines(_lines(RUN))
    calls = tool_parts(session)
    assert [(c.call_id, c.tool) for c in calls] == [
        ("toolu_01", "execute_bash"),
        ("toolu_02", "str_replace_editor"),
        ("toolu_03", "str_replace_editor"),
    ]
    assert calls[0].state.input == {"command": "ls"}
    states = [e.state for e in of_type(session.events, ToolStateChanged)]
    assert isinstance(states[0], ToolCompleted) and states[0].output == "a.c"
    assert isinstance(states[2], ToolErrored) and states[2].error == "no such file"


def test_actions_of_one_response_share_an_assistant_message_with_its_usage() -> None:
    (session,) = import_openhands_lines(_lines(RUN))
    roles = [(m.role, m.synthetic) for m in messages(session)]
    assert roles == [
        ("user", False),
        ("assistant", False),
        ("assistant", False),
        ("user", True),
        ("assistant", False),
    ]
    usages = [u.usage for u in of_type(session.events, UsageReported)]
    assert usages == [Usage(input=100, output=10)] * 3
    assert [c.api_message_id for c in session.calls] == ["r1", "r2", "r3"]
    assert [f.finish for f in of_type(session.events, AssistantFinished)] == [
        "tool-calls",
        "tool-calls",
        "stop",
    ]


def test_times_config_and_skipped() -> None:
    (session,) = import_openhands_lines(_lines(RUN))
    started = session.events[0]
    assert isinstance(started, SessionStarted)
    assert started.time_ms == of_type(session.events, MessageAdded)[0].time_ms
    assert started.config == {
        "source": "openhands",
        "instance_id": "org__repo-1",
        "agent_class": "CodeActAgent",
        "model": "openai/llama-4",
        "system_prompt": "You are OpenHands.",
    }
    assert started.model is not None and started.model.model_id == "llama-4"
    assert session.skipped == {"recall": 2, "system": 1}


def test_the_resolver_schema_pairs_by_order() -> None:
    (session,) = import_openhands_lines(_lines(RESOLVER))
    assert_imported(session)
    assert [m.role for m in messages(session)] == ["user", "assistant", "assistant"]
    (call,) = tool_parts(session)
    assert (call.tool, call.state.input) == ("run", {"command": "touch LICENSE"})
    assert answered(session) == 1


def test_session_id_names_the_first_run() -> None:
    sessions = import_openhands_lines(_lines(RUN, RUN), session_id="ses_first")
    assert sessions[0].session_id == "ses_first"
    assert sessions[1].session_id != "ses_first"


@pytest.mark.parametrize(
    ("line", "number", "field"),
    [
        ("[1]", 1, ""),
        ("{not json", 1, ""),
        ('{"instance_id": "x"}', 1, "history"),
        ('{"history": [3]}', 1, "history[0]"),
        ('{"history": [{"action": "run", "args": "ls"}]}', 1, "history[0].args"),
        (
            '{"history": [{"action": "run", "args": {}, "tool_call_metadata": 1}]}',
            1,
            "history[0].tool_call_metadata",
        ),
    ],
)
def test_a_malformed_run_names_its_line_and_field(line: str, number: int, field: str) -> None:
    with pytest.raises(TraceImportError) as caught:
        import_openhands_lines(["", line], source="output.jsonl")
    assert (caught.value.line, caught.value.field) == (number + 1, field)


#: Tool calls per run: the README's figures (``finish`` is no call: it is never answered).
README_TOOL_CALLS = {
    "multi_swe_bench_output.jsonl": [22, 32, 49],
    "resolver_mock_output.jsonl": [3, 21],
}
#: Messages per run, verified: the user's task, one assistant message per model response
#: (and ``finish``), and in two runs an error shown to the model as a user message.
MESSAGES = {
    "multi_swe_bench_output.jsonl": [24, 35, 51],
    "resolver_mock_output.jsonl": [5, 23],
}


def test_every_shared_output_imports_with_the_readme_counts() -> None:
    folder = trace_dir("openhands")
    for name, expected in README_TOOL_CALLS.items():
        sessions = import_openhands(folder / name)
        for session in sessions:
            assert_imported(session)
            assert answered(session) == len(tool_parts(session)), name
        assert [len(tool_parts(s)) for s in sessions] == expected, name
        assert [len(messages(s)) for s in sessions] == MESSAGES[name], name


def test_multi_swe_bench_runs_carry_per_call_usage() -> None:
    path = trace_dir("openhands") / "multi_swe_bench_output.jsonl"
    sessions = import_openhands(Path(path))
    assert [len(s.calls) for s in sessions] == [23, 33, 49]
    for session in sessions:
        assert all(call.api_message_id.startswith("gen-") for call in session.calls)
        assert all(call.usage.input > 0 and call.usage.output > 0 for call in session.calls)
