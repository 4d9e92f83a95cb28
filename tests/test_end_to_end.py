"""Real transcripts through the whole pipeline: import, append to SQLite through SessionLog,
reload from snapshot plus tail, and build the model view at every API call of the session."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from contextledger.events import MessageAdded
from contextledger.history import History
from contextledger.history._live_view import LiveView
from contextledger.history._view import ViewOptions, model_view
from contextledger.importers import import_claude_code
from contextledger.ledger import SessionLog
from contextledger.store import SQLiteStore
from contextledger.testing import check_prefix_stable, check_rebuild_matches, check_tool_pairs
from contextledger.vocabulary._messages import ModelMessage

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces" / "claude-code-jsonl"


pytestmark = pytest.mark.skipif(
    not TRACES.is_dir(), reason=f"shared/traces not present: {TRACES} does not exist"
)


def _traces() -> list[Path]:
    return sorted(TRACES.glob("*.jsonl"))


async def test_real_sessions_store_reload_and_view_consistently(tmp_path: Path) -> None:
    for trace in _traces():
        imported = import_claude_code(trace)
        async with SQLiteStore.open(tmp_path / f"{trace.stem}.db") as store:
            log = await SessionLog.open(store, imported.session_id, snapshot_every=200)
            live = LiveView(ViewOptions())
            previous: list[ModelMessage] = []
            prompts = 0
            for event in imported.events:
                if isinstance(event, MessageAdded) and event.role == "assistant":
                    # The view just before a response is added is the prompt of that call.
                    prompt = list(live.update(log.history))
                    check_tool_pairs(prompt)
                    check_prefix_stable(previous, prompt)
                    previous, prompts = prompt, prompts + 1
                await log.append([event])
            assert prompts == len(imported.calls)
            assert list(live.update(log.history)) == model_view(log.history)
            stored = await store.read(imported.session_id)
            check_rebuild_matches(log.history, stored)
            reloaded = await SessionLog.open(store, imported.session_id)
            assert reloaded.history == log.history
            assert History.rebuild(imported.session_id, stored) == log.history
        await trio.lowlevel.checkpoint()
