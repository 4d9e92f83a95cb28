"""The mini-swe-agent importer: fenced bash blocks as calls, ``<returncode>`` replies as results."""

from __future__ import annotations

from typing import Any

import pytest

from contextledger.events._catalogue import SessionStarted, ToolStateChanged, UsageReported
from contextledger.events._parts import ToolCompleted, Usage
from contextledger.importers import (
    TraceImportError,
    import_mini_swe_agent,
    import_mini_swe_agent_data,
)
from contextledger.importers._mini_swe_agent import split_action
from tests.importers.test_openai_chat import (
    answered,
    assert_imported,
    messages,
    of_type,
    tool_parts,
    trace_dir,
)

LEGACY: list[dict[str, Any]] = [
    {"role": "system", "content": "You can run bash."},
    {"role": "user", "content": "Please solve this issue."},
    {"role": "assistant", "content": "THOUGHT: look.\n\n```mswea_bash_command\nls -la\n```"},
    {"role": "user", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>"},
    {"role": "assistant", "content": "I forgot the block."},
    {"role": "user", "content": "Please always provide EXACTLY ONE action."},
]


def test_a_fenced_block_is_a_bash_call_answered_by_the_next_user_message() -> None:
    session = import_mini_swe_agent_data(LEGACY)
    assert_imported(session)
    assert [m.role for m in messages(session)] == ["user", "assistant", "assistant", "user"]
    (call,) = tool_parts(session)
    assert (call.call_id, call.tool, call.state.input) == ("mini-1", "bash", {"command": "ls -la"})
    (result,) = of_type(session.events, ToolStateChanged)
    assert isinstance(result.state, ToolCompleted)
    assert result.state.output.startswith("<returncode>0</returncode>")
    assert session.skipped == {"system": 1}


def test_split_action_removes_the_block_from_the_text() -> None:
    assert split_action("THOUGHT: x\n\n```bash\necho hi\n```\n") == ("echo hi", "THOUGHT: x")
    assert split_action("no block") == (None, "no block")


def test_the_current_object_layout_keeps_info_and_usage() -> None:
    data = {
        "trajectory_format": "mini-swe-agent-1",
        "info": {"exit_status": "Submitted", "mini_version": "1.0", "model_stats": {}},
        "messages": [
            LEGACY[1],
            {
                "role": "assistant",
                "content": LEGACY[2]["content"],
                "extra": {
                    "response": {
                        "model": "gpt-5",
                        "usage": {"prompt_tokens": 100, "completion_tokens": 7},
                    }
                },
            },
            LEGACY[3],
        ],
    }
    session = import_mini_swe_agent_data(data)
    assert_imported(session)
    started = session.events[0]
    assert isinstance(started, SessionStarted)
    assert started.config["exit_status"] == "Submitted"
    (usage,) = of_type(session.events, UsageReported)
    assert usage.usage == Usage(input=100, output=7)
    assert session.calls[0].model == "gpt-5"


@pytest.mark.parametrize(
    ("data", "line", "field"),
    [
        ("text", 1, "messages"),
        ([{"role": "user"}, {"role": 5}], 2, "[1].role"),
        ({"messages": [{"role": "assistant", "content": 1}]}, 1, "messages[0].content"),
        ([{"role": "wizard", "content": ""}], 1, "[0].role"),
    ],
)
def test_a_malformed_trajectory_names_the_field(data: Any, line: int, field: str) -> None:
    with pytest.raises(TraceImportError) as caught:
        import_mini_swe_agent_data(data)
    assert (caught.value.line, caught.value.field) == (line, field)


def test_the_shared_trajectory_imports_with_the_readme_counts() -> None:
    path = trace_dir("mini-swe-agent") / "github_issue.traj.json"
    session = import_mini_swe_agent(path)
    assert_imported(session)
    # README: 22 records (1 system, 11 user, 10 assistant), 10 tool calls; the system prompt is
    # config and the 10 command outputs are tool results, leaving 1 user + 10 assistant messages.
    assert len(tool_parts(session)) == 10
    assert answered(session) == 10
    assert len(messages(session)) == 11
