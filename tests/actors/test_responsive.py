"""An extractive compaction runs off the event loop: another session keeps recording while
the facts of a large head are being extracted."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import trio

from contextledger.actors import Runtime, SessionHandle
from contextledger.compaction import _summarizers
from contextledger.compaction._facts import SessionFacts, extract_facts
from contextledger.history._projection import Message
from contextledger.store._memory import MemoryStore
from tests.actors.test_runtime import MODEL, _clock


async def _fill(session: SessionHandle, turns: int) -> None:
    for n in range(turns):
        user = await session.add_user(f"Step {n}: read src/mod_{n}.py")
        await session.record_assistant(
            user,
            text="Read it.",
            tool_calls=[("read", {"path": f"src/mod_{n}.py"}, "x = 1\n" * 300)],
        )


async def test_other_sessions_record_while_a_large_head_is_summarised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorded: list[str] = []
    progressed = trio.Event()
    seen_during: list[int] = []

    def extract_when_others_progress(messages: Sequence[Message]) -> SessionFacts:
        # Runs in a worker thread: it asks the loop how far the other session got, then
        # waits until it has recorded three more messages (impossible if the extraction held
        # the loop; from the loop's own thread trio.from_thread refuses to run at all).
        start = trio.from_thread.run_sync(len, recorded)
        trio.from_thread.run(_wait_for, recorded, start + 3)
        seen_during.append(trio.from_thread.run_sync(len, recorded) - start)
        return extract_facts(messages)

    monkeypatch.setattr(_summarizers, "extract_facts", extract_when_others_progress)
    async with Runtime.open(MemoryStore(), model=MODEL, clock=_clock()) as rt:
        big, other = await rt.session("ses_big"), await rt.session("ses_other")
        await _fill(big, 200)
        async with trio.open_nursery() as nursery:

            async def keep_recording() -> None:
                while not progressed.is_set():
                    recorded.append(await other.add_user(f"still here {len(recorded)}"))

            nursery.start_soon(keep_recording)
            result = await big.compact()
            progressed.set()
    assert result.outcome == "completed"
    assert seen_during and seen_during[0] >= 3


async def _wait_for(recorded: list[str], count: int) -> None:
    while len(recorded) < count:
        await trio.sleep(0)
