"""A compaction racing the session's other commands: its ids come from the session's writer
whatever is queued before its appends, and a runtime cancelled at any point leaves every
compaction completed or rolled back."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import trio
import trio.testing

from contextledger.actors import Runtime, SessionHandle
from contextledger.compaction._summarizers import SummaryInput
from contextledger.config import CompactionConfig, Config
from contextledger.events._catalogue import CompactionRequested, Event, RecordedEvent
from contextledger.events._parts import MessageError, Usage
from contextledger.ledger import SessionLog
from contextledger.providers._errors import ContextOverflowError
from contextledger.store._memory import MemoryStore
from contextledger.testing import check_history
from tests.actors.test_runtime import INPUTS, MODEL, _clock

SUMMARY = "## Goal\n- Keep going."


class GatedStore(MemoryStore):
    """A memory store whose appends wait for ``gate`` while one is set."""

    def __init__(self) -> None:
        super().__init__()
        self.gate: trio.Event | None = None
        self.entered = trio.Event()

    async def append(
        self,
        stream: str,
        expected_version: int,
        events: Sequence[Event],
        *,
        expected_position: int | None = None,
    ) -> list[RecordedEvent]:
        if self.gate is not None:
            self.entered.set()
            await self.gate.wait()
        return await super().append(
            stream, expected_version, events, expected_position=expected_position
        )


class Waiting:
    """A summarizer that answers once ``release`` is set."""

    max_input_tokens = None

    def __init__(self) -> None:
        self.started = trio.Event()
        self.release = trio.Event()

    async def summarize(self, task: SummaryInput) -> str:
        self.started.set()
        await self.release.wait()
        return SUMMARY


async def _turns(session: SessionHandle, n: int) -> None:
    for i in range(n):
        user = await session.add_user(f"Step {i}: fix src/mod_{i}.py")
        await session.record_assistant(
            user,
            tool_calls=[("bash", {"command": f"pytest -k {i}"}, f"{i} passed")],
            usage=Usage(input=1000 + i, output=20),
        )


async def test_a_compaction_appends_after_commands_queued_before_it() -> None:
    store, summarizer = GatedStore(), Waiting()
    async with Runtime.open(store, model=MODEL, clock=_clock(), summarizer=summarizer) as rt:
        session = await rt.session("ses_ids")
        await _turns(session, 3)
        results: list[Any] = []
        async with trio.open_nursery() as nursery:

            async def run(fn: Callable[[], Any]) -> None:
                results.append(await fn())

            nursery.start_soon(run, session.compact)
            await summarizer.started.wait()
            # One user message is being written (its ids issued), a second is queued behind it
            # (its ids are issued when the session comes to it) ...
            store.gate = trio.Event()
            nursery.start_soon(run, lambda: session.add_user("first, while summarising"))
            await store.entered.wait()
            nursery.start_soon(run, lambda: session.add_user("second, while summarising"))
            await trio.testing.wait_all_tasks_blocked()
            # ... when the summary arrives and the compactor queues its completion.
            summarizer.release.set()
            await trio.testing.wait_all_tasks_blocked()
            store.gate.set()
            store.gate = None
        compaction = next(r for r in results if not isinstance(r, str))
        assert compaction.outcome == "completed"
        history = await session.history()
    check_history(history)
    texts = [p.text for m in history.messages for p in m.parts if hasattr(p, "text")]
    assert "first, while summarising" in texts and "second, while summarising" in texts
    assert SUMMARY in texts


def _one_attempt_runtime(summarizer: Waiting) -> AbstractAsyncContextManager[Runtime]:
    """A runtime whose turns get one compaction attempt, summarising through ``summarizer``."""
    config = Config(compaction=CompactionConfig(max_attempts=1, attempts_per="turn"))
    return Runtime.open(
        MemoryStore(), model=MODEL, config=config, clock=_clock(), summarizer=summarizer
    )


async def _full_session(rt: Runtime, session_id: str) -> SessionHandle:
    """A session of a few turns whose last answer reported a context over the window."""
    session = await rt.session(session_id)
    await _turns(session, 3)
    user = await session.add_user("and now?")
    await session.record_assistant(user, text="Done.", usage=Usage(input=190_000, output=50))
    return session


async def test_a_request_queued_behind_a_compaction_that_made_room_is_not_refused() -> None:
    """``build_request`` finds the context full while a manual compaction is summarising and
    queues its own behind it. By its turn the manual one has made room and used the turn's
    only attempt: the queued one is no longer due, so nothing is written and the request is
    built (it was refused as exhausted)."""
    summarizer = Waiting()
    async with _one_attempt_runtime(summarizer) as rt:
        session = await _full_session(rt, "ses_queued")
        built: list[Any] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.compact)
            await summarizer.started.wait()

            async def build() -> None:
                built.append(await session.build_request(INPUTS))

            nursery.start_soon(build)
            # The build found the context full and waits behind the manual compaction.
            await trio.testing.wait_all_tasks_blocked()
            assert not built
            summarizer.release.set()
        assert len(built) == 1
        history = await session.history()
    requests = [
        e for e in (await rt.store.read("ses_queued")) if isinstance(e.event, CompactionRequested)
    ]
    assert [r.event.trigger for r in requests] == ["manual"]
    assert [c.status for c in history.state.compactions.values()] == ["completed"]
    check_history(history)


async def test_a_request_s_compaction_left_queued_does_not_block_its_session_s_retirement() -> None:
    """The caller of ``build_request`` goes away while its compaction waits behind a manual
    one; the session, idle, is retired meanwhile. When the compactor comes to the queued
    compaction it checks it on its own session, not through the runtime (which would wait for
    the retirement, which waits for the compactor), and the session can be used again."""
    summarizer = Waiting()
    async with _one_attempt_runtime(summarizer) as rt:
        session = await _full_session(rt, "ses_retired")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.compact)
            await summarizer.started.wait()
            caller = trio.CancelScope()

            async def build() -> None:
                with caller:
                    await session.build_request(INPUTS)

            nursery.start_soon(build)
            await trio.testing.wait_all_tasks_blocked()
            caller.cancel()  # its compaction stays queued behind the manual one
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(rt._retire, "ses_retired")  # as an idle session is
            await trio.testing.wait_all_tasks_blocked()
            summarizer.release.set()
            with trio.fail_after(5):
                await session.add_user("hello again")
        history = await session.history()
    assert history.messages[-1].role == "user"
    check_history(history)


async def _cancelled_run(store: MemoryStore, rng: random.Random) -> None:
    """A session compacting (on demand, or after an overflow) in a runtime cancelled after
    a random number of checkpoints."""

    class Checkpointing:
        max_input_tokens = None

        async def summarize(self, task: SummaryInput) -> str:
            for _ in range(3):
                await trio.lowlevel.checkpoint()
            return SUMMARY

    with trio.CancelScope() as scope:
        async with Runtime.open(
            store, model=MODEL, clock=_clock(), summarizer=Checkpointing()
        ) as rt:
            session = await rt.session("ses_cancel")
            await _turns(session, 3)
            user = await session.add_user("and now?")
            failed = await session.start_assistant(user)
            checkpoints = rng.randrange(40)

            async def cancel() -> None:
                for _ in range(checkpoints):
                    await trio.lowlevel.checkpoint()
                scope.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel)
                if rng.random() < 0.5:
                    await session.compact()
                else:
                    error = ContextOverflowError(
                        "anthropic", MessageError(name="ContextOverflowError", message="long")
                    )
                    await session.record_error(failed, error)
                await trio.sleep_forever()


async def test_a_runtime_cancelled_at_any_point_leaves_no_compaction_open() -> None:
    rng = random.Random(13)
    outcomes: Counter[str] = Counter()
    for _ in range(300):
        store = MemoryStore()
        await _cancelled_run(store, rng)
        history = (await SessionLog.open(store, "ses_cancel")).history
        check_history(history)
        outcomes.update(c.status for c in history.state.compactions.values())
    assert outcomes["requested"] == 0
    # The trials cut compactions short and let some complete.
    assert outcomes["completed"] > 10 and outcomes["rolled_back"] > 10
    # The last session carries on in a new runtime.
    async with Runtime.open(store, model=MODEL, clock=_clock()) as rt:
        session = await rt.session("ses_cancel")
        await _turns(session, 1)
        built = await session.build_request(INPUTS)
        assert built.request.messages and await session.replay()
