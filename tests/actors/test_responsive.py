"""An extractive compaction does not hold the event loop: it walks the head in slices and
pauses after each, so other sessions (and a host loop the runtime is a guest of) run while
the facts of a large head are being extracted, and a cancellation stops it at a pause.

The summarizer pauses after every step (``slice_seconds=0``), so these tests check ordering,
never timing."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Generator, Sequence

import pytest
import trio

from contextledger.actors import Runtime, SessionHandle, embed_in_asyncio
from contextledger.compaction import ExtractiveSummarizer, SummaryInput, _compactor, _summarizers
from contextledger.compaction._facts import SessionFacts, walk_facts
from contextledger.events._catalogue import CompactionRolledBack
from contextledger.history._projection import Message
from contextledger.policy._compaction import RollbackReason, rollback_reason
from contextledger.store._memory import MemoryStore
from tests.actors.test_runtime import MODEL, _clock

EVERY_STEP = ExtractiveSummarizer(slice_seconds=0)


async def _fill(session: SessionHandle, turns: int) -> None:
    for n in range(turns):
        user = await session.add_user(f"Step {n}: read src/mod_{n}.py")
        await session.record_assistant(
            user,
            text="Read it.",
            tool_calls=[("read", {"path": f"src/mod_{n}.py"}, "x = 1\n" * 300)],
        )


def _watching(
    monkeypatch: pytest.MonkeyPatch, progress: Callable[[], int], seen: list[int]
) -> None:
    """Make the summarizer's walk note ``progress()`` when it starts and when it ends."""

    def watched(messages: Sequence[Message]) -> Generator[None, None, SessionFacts]:
        start = progress()
        facts = yield from walk_facts(messages)
        seen.append(progress() - start)
        return facts

    monkeypatch.setattr(_summarizers, "walk_facts", watched)


async def test_other_sessions_record_while_a_large_head_is_summarised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorded: list[str] = []
    seen: list[int] = []
    _watching(monkeypatch, lambda: len(recorded), seen)
    async with Runtime.open(
        MemoryStore(), model=MODEL, clock=_clock(), summarizer=EVERY_STEP
    ) as rt:
        big, other = await rt.session("ses_big"), await rt.session("ses_other")
        await _fill(big, 200)
        async with trio.open_nursery() as nursery:

            async def keep_recording() -> None:
                while True:
                    recorded.append(await other.add_user(f"still here {len(recorded)}"))

            nursery.start_soon(keep_recording)
            result = await big.compact()
            nursery.cancel_scope.cancel()
    assert result.outcome == "completed"
    assert seen and seen[0] >= 3


def test_the_host_loop_runs_while_an_embedded_runtime_summarises(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ticks: list[int] = []
    seen: list[int] = []
    _watching(monkeypatch, lambda: len(ticks), seen)

    async def main() -> str:
        async def tick() -> None:
            while True:
                ticks.append(len(ticks))
                await asyncio.sleep(0)

        ticking = asyncio.create_task(tick())
        try:
            async with embed_in_asyncio(
                MemoryStore(), model=MODEL, clock=_clock(), summarizer=EVERY_STEP
            ) as bridge:

                async def compact(runtime: Runtime) -> str:
                    session = await runtime.session("ses_big")
                    await _fill(session, 100)
                    return (await session.compact()).outcome

                return await bridge.call(compact)
        finally:
            ticking.cancel()

    assert asyncio.run(main()) == "completed"
    assert seen and seen[0] >= 3


async def test_a_cancelled_runtime_stops_a_summary_at_a_pause_and_rolls_it_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    steps: list[None] = []
    finished: list[SessionFacts] = []
    scope = trio.CancelScope()

    def cancelling(messages: Sequence[Message]) -> Generator[None, None, SessionFacts]:
        walking = walk_facts(messages)
        while True:
            try:
                next(walking)
            except StopIteration as walked:
                finished.append(walked.value)
                return walked.value
            steps.append(None)
            if len(steps) == 5:
                scope.cancel()
            yield

    monkeypatch.setattr(_summarizers, "walk_facts", cancelling)
    store = MemoryStore()
    with scope:
        async with Runtime.open(store, model=MODEL, clock=_clock(), summarizer=EVERY_STEP) as rt:
            session = await rt.session("ses_big")
            await _fill(session, 50)
            await session.compact()
    assert scope.cancelled_caught
    assert len(steps) == 5 and finished == []
    reasons = [
        r.event.reason
        for r in await store.read("ses_big")
        if isinstance(r.event, CompactionRolledBack)
    ]
    assert reasons == ["cancelled"]


class _TaskSteps(trio.abc.Instrument):
    """Counts each task's steps: a task takes a new step after each pause."""

    def __init__(self) -> None:
        self.steps: Counter[trio.lowlevel.Task] = Counter()

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps[task] += 1

    def now(self) -> int:
        return self.steps[trio.lowlevel.current_task()]


class _Noting(ExtractiveSummarizer):
    """Notes the summarizing task's steps when each summary is written."""

    def __init__(self, counter: _TaskSteps, written: list[int]) -> None:
        super().__init__(slice_seconds=0)
        self.counter = counter
        self.written = written

    async def summarize(self, task: SummaryInput) -> str:
        summary = await super().summarize(task)
        self.written.append(self.counter.now())
        return summary


async def _compact_counted(counter: _TaskSteps, written: list[int], rounds: int) -> None:
    """Compact a session ``rounds`` times (60 turns each), its tasks' steps counted."""
    trio.lowlevel.add_instrument(counter)
    async with Runtime.open(
        MemoryStore(), model=MODEL, clock=_clock(), summarizer=_Noting(counter, written)
    ) as rt:
        session = await rt.session("ses_big")
        for _ in range(rounds):
            await _fill(session, 60)
            assert (await session.compact()).outcome == "completed"


async def test_a_summary_is_written_in_steps_after_the_walk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counter = _TaskSteps()
    walked: list[int] = []
    written: list[int] = []

    def watched(messages: Sequence[Message]) -> Generator[None, None, SessionFacts]:
        facts = yield from walk_facts(messages)
        walked.append(counter.now())
        return facts

    monkeypatch.setattr(_summarizers, "walk_facts", watched)
    await _compact_counted(counter, written, 2)  # the second merges the first's identifiers
    # A pause after the walk and one after the new bullets; the second summary pauses after
    # each bullet of the first that a new one supersedes as well.
    first, second = (end - start for start, end in zip(walked, written, strict=True))
    assert first == 2 and second > 2


async def test_a_summary_is_judged_in_a_step_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = _TaskSteps()
    written: list[int] = []
    judged: list[int] = []

    def noted(text: str, *, overflowed: bool) -> RollbackReason | None:
        judged.append(counter.now())
        return rollback_reason(text, overflowed=overflowed)

    monkeypatch.setattr(_compactor, "rollback_reason", noted)
    await _compact_counted(counter, written, 1)
    assert len(written) == 1 and judged[0] > written[0]
