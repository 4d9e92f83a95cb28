"""The demo's library side: choosing the session, reading what was recorded, the replay
through the runtime and the per-turn table."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import structlog

from contextledger.cli._demo_session import (
    RUNTIME_SERIES,
    Replay,
    claude_code_sessions,
    describe_actions,
    load_session,
    next_session_id,
    recorded_turns,
    replay_session,
    report_results,
    tally,
    totals,
    turn_rows,
)
from contextledger.events._catalogue import MessageAdded
from contextledger.history._projection import History
from contextledger.history._view import is_real_user
from contextledger.importers._errors import TraceImportError
from contextledger.ledger import SessionLog
from contextledger.policy._prune import PrunePlan
from contextledger.simulation._synthetic import synthetic_session
from contextledger.store._memory import MemoryStore

MODEL_ID = "claude-sonnet-4-20250514"


def claude_code_lines(prompt: str) -> list[str]:
    """A Claude Code transcript of one turn: the prompt, a Bash call and its result, an
    answer."""
    records: list[dict[str, Any]] = []

    def record(kind: str, message: dict[str, Any]) -> None:
        records.append(
            {
                "parentUuid": records[-1]["uuid"] if records else None,
                "isSidechain": False,
                "userType": "external",
                "cwd": "/repo",
                "sessionId": "0a725fb5-6378-432a-9e84-9f3f49d4043d",
                "version": "1.0.53",
                "type": kind,
                "uuid": f"uuid-{len(records) + 1:04d}",
                "timestamp": f"2025-07-20T03:51:{len(records):02d}.360Z",
                "message": message,
            }
        )

    usage = {"input_tokens": 4, "cache_creation_input_tokens": 900, "output_tokens": 30}

    def assistant(message_id: str, block: dict[str, Any], stop: str) -> dict[str, Any]:
        return {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-20250514",
            "content": [block],
            "stop_reason": stop,
            "usage": usage,
        }

    record("user", {"role": "user", "content": prompt})
    call = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}
    record("assistant", assistant("msg_A", call, "tool_use"))
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "README.md\nsrc"}
    record("user", {"role": "user", "content": [result]})
    record("assistant", assistant("msg_B", {"type": "text", "text": "Two entries."}, "end_turn"))
    return [json.dumps(r) for r in records]


def write_claude_code_session(path: Path, prompt: str = "list the files") -> Path:
    """``claude_code_lines(prompt)`` written to ``path`` (its folders made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(claude_code_lines(prompt)) + "\n")
    return path


# --- choosing the session --------------------------------------------------------------------


def test_claude_code_sessions_are_the_project_files_newest_first(tmp_path: Path) -> None:
    old = write_claude_code_session(tmp_path / ".claude/projects/a/old.jsonl")
    new = write_claude_code_session(tmp_path / ".claude/projects/b/new.jsonl")
    write_claude_code_session(tmp_path / ".claude/projects/b/new/subagents/agent-1.jsonl")
    os.utime(old, (1_000, 1_000))
    os.utime(new, (2_000, 2_000))
    assert claude_code_sessions(tmp_path) == [new, old]
    assert claude_code_sessions(tmp_path / "nowhere") == []


def test_load_session_prefers_the_trace_then_claude_code_then_synthetic(tmp_path: Path) -> None:
    home = tmp_path / "home"
    source, events = load_session(None, home, seed=3, turns=2)
    assert source.kind == "synthetic" and source.path is None
    assert events == synthetic_session("ses_synthetic", seed=3, turns=2)

    latest = write_claude_code_session(home / ".claude/projects/p/abc.jsonl", "from home")
    source, events = load_session(None, home)
    assert (source.kind, source.path, source.label) == ("claude-code", str(latest), "p/abc.jsonl")
    assert recorded_turns(events)[0].text == "from home"

    trace = write_claude_code_session(tmp_path / "given.jsonl", "given")
    source, events = load_session(trace, home)
    assert (source.kind, source.path) == ("trace", str(trace))
    assert recorded_turns(events)[0].text == "given"


def test_a_claude_code_session_that_does_not_import_is_skipped_with_a_warning(
    tmp_path: Path,
) -> None:
    good = write_claude_code_session(tmp_path / ".claude/projects/p/good.jsonl")
    broken = tmp_path / ".claude/projects/p/broken.jsonl"
    broken.write_text("not a transcript\n")
    os.utime(good, (1_000, 1_000))
    with structlog.testing.capture_logs() as logs:
        source, _ = load_session(None, tmp_path)
    assert source.path == str(good)
    assert [(e["event"], e["path"]) for e in logs] == [("claude code session skipped", str(broken))]
    (skipped,) = source.skipped
    assert skipped.path == str(broken)
    assert skipped.reason.startswith("line 1: unknown trace format")
    assert "skipped 1 Claude Code session that did not import (broken.jsonl: line 1: " in (
        source.describe()
    )


def test_the_header_says_why_a_session_with_an_orphan_result_was_skipped(tmp_path: Path) -> None:
    good = write_claude_code_session(tmp_path / ".claude/projects/p/good.jsonl")
    lines = claude_code_lines("list the files")
    orphan = json.loads(lines[2])
    orphan["uuid"] = "uuid-0099"
    orphan["message"]["content"][0]["tool_use_id"] = "toolu_none"
    own = tmp_path / ".claude/projects/p/own.jsonl"
    own.write_text("\n".join([*lines, json.dumps(orphan)]) + "\n")
    os.utime(good, (1_000, 1_000))
    source, _ = load_session(None, tmp_path)
    assert source.path == str(good)
    said = source.describe()
    assert "skipped 1 Claude Code session that did not import (own.jsonl: line 5: " in said
    assert "(orphan_tool_result)" in said


def test_a_broken_trace_raises(tmp_path: Path) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text("not a transcript\n")
    with pytest.raises(ValueError, match="cannot read"):
        load_session(tmp_path / "missing.jsonl", tmp_path)
    with pytest.raises(TraceImportError, match=str(broken)):
        load_session(broken, tmp_path)


# --- what was recorded -----------------------------------------------------------------------


def test_recorded_turns_follow_the_user_messages_and_their_calls() -> None:
    events = synthetic_session("s", seed=5, turns=3)
    users = [e for e in events if isinstance(e, MessageAdded) and e.role == "user"]
    answers = [e for e in events if isinstance(e, MessageAdded) and e.role == "assistant"]
    turns = recorded_turns(events)
    assert [t.time_ms for t in turns] == [u.time_ms for u in users]
    assert [len(t.calls) for t in turns] == [
        sum(1 for a in answers if a.parent_id == u.message_id) for u in users
    ]
    last = turns[0].calls[-1]
    assert last.finish == "stop" and last.output_tokens > 0


# --- the replay ------------------------------------------------------------------------------


async def _replay(events: list[Any], window: int) -> tuple[Replay, History]:
    store = MemoryStore()
    replay = await replay_session(store, "ses_demo_001", events, model_id=MODEL_ID, window=window)
    return replay, (await SessionLog.open(store, "ses_demo_001")).history


async def test_the_replay_stores_every_turn_and_call_and_stays_in_the_window() -> None:
    events = synthetic_session("s", seed=7, turns=2)
    replay, history = await _replay(events, 32_000)
    turns = recorded_turns(events)
    assert replay.result.calls == sum(len(t.calls) for t in turns) == len(replay.call_turns)
    assert len(replay.turn_actions) == len(turns)
    users = [m for m in history.messages if is_real_user(m)]
    assert len(users) == len(turns)
    for index, user in enumerate(users):
        answers = [
            m
            for m in history.messages
            if m.role == "assistant" and m.parent_id == user.id and not m.summary
        ]
        assert len(answers) == replay.call_turns.count(index)
    # The runtime compacts before the context outgrows the window.
    assert "compacted" in " ".join(replay.turn_actions)
    assert replay.result.peak_prompt < 32_000


async def test_finish_reports_the_simulated_prompt_of_the_request_it_answered() -> None:
    events = synthetic_session("s", seed=7, turns=1)
    replay, history = await _replay(events, 32_000)
    answers = [m for m in history.messages if m.role == "assistant" and not m.summary]
    assert [m.usage.input if m.usage else None for m in answers] == list(
        replay.result.prompt_tokens
    )


async def test_a_smaller_window_compacts_more() -> None:
    events = synthetic_session("s", seed=7, turns=2)
    wide, _ = await _replay(events, 32_000)
    narrow, history = await _replay(events, 16_000)
    completed = [c for c in history.state.compactions.values() if c.status == "completed"]
    assert sum(a.count("compacted") for a in narrow.result.actions) == len(completed)
    assert len(completed) > sum(a.count("compacted") for a in wide.result.actions)
    assert narrow.result.peak_prompt < wide.result.peak_prompt


# --- the table -------------------------------------------------------------------------------


async def test_turn_rows_sum_the_calls_of_each_turn_and_totals_sum_the_rows() -> None:
    replay, _ = await _replay(synthetic_session("s", seed=7, turns=3), 32_000)
    rows = turn_rows(replay)
    result = replay.result
    assert [r["turn"] for r in rows] == [1, 2, 3]
    assert [r["actions"] for r in rows] == list(replay.turn_actions)
    for index, row in enumerate(rows):
        calls = [i for i, t in enumerate(replay.call_turns) if t == index]
        assert row["calls"] == len(calls)
        assert row["peak_prompt"] == max(result.prompt_tokens[i] for i in calls)
        assert row["cache_read"] == sum(result.cache_read[i] for i in calls)
    total = totals(rows)
    assert total["calls"] == result.calls
    assert total["peak_prompt"] == result.peak_prompt
    for column in ("cache_read", "cache_write", "uncached"):
        assert total[column] == sum(getattr(result, column))
    assert total["input_cost_usd"] == pytest.approx(result.billed_input_cost)


def test_describe_actions_reuses_the_strategy_wording() -> None:
    assert describe_actions([], []) == ""
    plans = [PrunePlan(part_ids=("p1", "p2", "p3"), tokens=12_400, reason="cost")]
    assert describe_actions(["compacted"], plans) == "compacted; cleared 3 outputs (12,400 tokens)"


def test_next_session_id_takes_the_first_free_number() -> None:
    assert next_session_id([]) == "ses_demo_001"
    assert next_session_id(["ses_demo_001", "other", "ses_demo_003"]) == "ses_demo_002"


async def test_report_results_put_the_replay_beside_the_strategies() -> None:
    replay, _ = await _replay(synthetic_session("s", seed=7, turns=1), 32_000)
    results = report_results("label", {"default": replay.result}, replay)
    assert list(results) == ["label"]
    assert list(results["label"]) == ["default", RUNTIME_SERIES]
    assert results["label"][RUNTIME_SERIES] == {"anthropic": replay.result}


def test_tally_counts_repeated_actions() -> None:
    assert tally(["compacted", "", "cleared 2 outputs (900 tokens)", "compacted"]) == (
        "compacted x2; cleared 2 outputs (900 tokens)"
    )
    assert tally([]) == ""
