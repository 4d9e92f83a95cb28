"""The SWE-agent ``.traj`` importer: both history variants, errors, and the shared traces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contextledger.events._catalogue import PartAdded, SessionStarted, ToolStateChanged
from contextledger.events._parts import TextPart, ToolCompleted
from contextledger.importers import TraceImportError, import_swe_agent, import_swe_agent_data
from tests.importers.test_openai_chat import (
    answered,
    assert_imported,
    messages,
    of_type,
    tool_parts,
    trace_dir,
)

OLD: dict[str, Any] = {
    "history": [
        {"role": "system", "content": "SETTING: a shell", "agent": "primary"},
        {"role": "user", "content": "Demo run", "is_demo": "True", "agent": "primary"},
        {"role": "user", "content": "Fix the issue", "agent": "primary"},
        {
            "role": "assistant",
            "content": "Look first.\n```\nls\n```",
            "thought": "Look first.",
            "action": "ls\n",
        },
        {"role": "user", "content": "a.py"},
        {"role": "assistant", "content": "Done.", "thought": "Done.", "action": "submit\n"},
    ],
    "info": {"exit_status": "submitted", "model_stats": {"api_calls": 2}},
    "trajectory": [],
}

FUNCTION_CALLING: dict[str, Any] = {
    "history": [
        {"role": "system", "content": "SETTING", "message_type": "system_prompt"},
        {"role": "user", "content": "Fix it", "message_type": "observation"},
        {
            "role": "assistant",
            "content": "List.",
            "thought": "List.",
            "action": "ls -F",
            "message_type": "action",
            "tool_calls": "[{'function': {'arguments': '{\"command\":\"ls -F\"}', 'name': 'bash'},"
            " 'id': 'call_a', 'type': 'function'}]",
        },
        {
            "role": "tool",
            "content": "src/",
            "message_type": "observation",
            "tool_call_ids": "['call_a']",
        },
    ],
    "trajectory": [],
}

#: Tool calls per shared trace: the README's figures, verified (demonstrations are skipped).
README_TOOL_CALLS = {
    "ctf_crypto_katy.traj": 18,
    "ctf_web_i_got_id_demo.traj": 21,
    "marshmallow-1867_function_calling.traj": 13,
    "pydicom-1458_gpt4.traj": 12,
}
#: Messages per shared trace: history less the system prompt, the demonstration, and the
#: observations that became tool results.
MESSAGES = {
    "ctf_crypto_katy.traj": 19,
    "ctf_web_i_got_id_demo.traj": 22,
    "marshmallow-1867_function_calling.traj": 14,
    "pydicom-1458_gpt4.traj": 13,
}


def test_old_variant_actions_are_bash_calls_answered_by_the_next_user_message() -> None:
    session = import_swe_agent_data(OLD)
    assert_imported(session)
    assert [m.role for m in messages(session)] == ["user", "assistant", "assistant"]
    calls = tool_parts(session)
    assert [(c.call_id, c.tool, c.state.input) for c in calls] == [
        ("swe-1", "bash", {"command": "ls\n"}),
        ("swe-2", "bash", {"command": "submit\n"}),
    ]
    (result,) = of_type(session.events, ToolStateChanged)
    assert isinstance(result.state, ToolCompleted) and result.state.output == "a.py"
    texts = [
        e.part.text for e in of_type(session.events, PartAdded) if isinstance(e.part, TextPart)
    ]
    assert texts == ["Fix the issue", "Look first.", "Done."]


def test_system_prompt_and_info_go_to_config_and_demonstrations_are_skipped() -> None:
    session = import_swe_agent_data(OLD)
    started = session.events[0]
    assert isinstance(started, SessionStarted)
    assert started.config == {
        "source": "swe-agent",
        "exit_status": "submitted",
        "model_stats": {"api_calls": 2},
        "system_prompt": "SETTING: a shell",
    }
    assert session.skipped == {"demonstration": 1, "system": 1}


def test_function_calling_variant_pairs_tool_calls_with_tool_messages() -> None:
    session = import_swe_agent_data(FUNCTION_CALLING)
    assert_imported(session)
    (call,) = tool_parts(session)
    assert (call.call_id, call.tool, call.state.input) == ("call_a", "bash", {"command": "ls -F"})
    (result,) = of_type(session.events, ToolStateChanged)
    assert isinstance(result.state, ToolCompleted) and result.state.output == "src/"


@pytest.mark.parametrize(
    ("history", "line", "field"),
    [
        (None, 1, "history"),
        ([{"content": "x"}], 1, "history[0].role"),
        (
            [{"role": "user", "content": "x"}, {"role": "assistant", "action": 3}],
            2,
            "history[1].action",
        ),
        ([{"role": "tool", "content": "x", "tool_call_ids": 7}], 1, "history[0].tool_call_ids"),
        ([{"role": "user", "content": {"x": 1}}], 1, "history[0].content"),
        (
            [{"role": "assistant", "tool_calls": [{"id": "c", "function": {}}]}],
            1,
            "history[0].tool_calls[0].function.name",
        ),
    ],
)
def test_a_malformed_trajectory_names_the_field(history: Any, line: int, field: str) -> None:
    with pytest.raises(TraceImportError) as caught:
        import_swe_agent_data({"history": history}, source="x.traj")
    assert (caught.value.line, caught.value.field) == (line, field)


def test_every_shared_trajectory_imports_with_the_readme_counts() -> None:
    folder = trace_dir("swe-agent-traj")
    files = sorted(folder.glob("*.traj"))
    assert {p.name for p in files} >= set(README_TOOL_CALLS)
    for path in files:
        session = import_swe_agent(path)
        assert_imported(session)
        if path.name in README_TOOL_CALLS:
            assert len(tool_parts(session)) == README_TOOL_CALLS[path.name], path.name
            assert len(messages(session)) == MESSAGES[path.name], path.name
        # Every call is answered but a final ``submit`` whose output the history never shows.
        assert len(tool_parts(session)) - answered(session) in (0, 1), path.name


def test_a_shared_trajectory_file_path_is_read(tmp_path: Path) -> None:
    path = tmp_path / "bad.traj"
    path.write_text('{"history": [}')
    with pytest.raises(TraceImportError, match="not JSON"):
        import_swe_agent(path)
