"""An asyncio application embeds the runtime through trio's guest mode: each test is a plain
function that runs an asyncio program with ``asyncio.run``."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from functools import partial
from itertools import count
from pathlib import Path

import pytest
import trio

from contextledger.actors import Runtime, SessionHandle
from contextledger.actors._guest import EmbeddedRuntimeClosed, RuntimeBridge, embed_in_asyncio
from contextledger.compaction._summarizers import SummaryInput
from contextledger.events._catalogue import CompactionRolledBack, RecordedEvent
from contextledger.events._parts import ModelRef, ToolSchema, Usage
from contextledger.request._builder import BuiltRequest, RequestInputs
from contextledger.request._system import SystemSegments
from contextledger.store._errors import StoreSchemaError
from contextledger.store._memory import MemoryStore
from contextledger.store._sqlite import SQLiteStore
from contextledger.testing import check_history, check_tool_pairs
from contextledger.vocabulary._messages import ModelMessage
from contextledger.vocabulary._models import Model, ModelLimits

MODEL = Model(
    provider_id="anthropic",
    model_id="claude-sonnet-4-5",
    limits=ModelLimits(context=200_000, output=32_000),
)
REF = ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5")
INPUTS = RequestInputs(
    model=REF,
    segments=SystemSegments(prompt="Be brief.", environment="<env/>"),
    tools=(ToolSchema(name="bash", description="Run.", input_schema={"type": "object"}),),
)


def _clock() -> Callable[[], int]:
    ticks = count(1_900_000_000_000, 1000)
    return lambda: next(ticks)


async def _turn(session: SessionHandle, n: int) -> str:
    user = await session.add_user(f"Step {n}: fix src/mod_{n}.py")
    await session.record_assistant(
        user, tool_calls=[("bash", {"command": f"pytest -k {n}"}, f"{n} passed")]
    )
    answer = await session.start_assistant(user)
    await session.add_text(answer, f"Done with step {n}.")
    await session.finish(answer, usage=Usage(input=100, output=20))
    return user


def test_an_asyncio_program_records_a_turn_builds_a_request_and_reads_the_view() -> None:
    async def main() -> tuple[BuiltRequest, list[ModelMessage], bool]:
        async with embed_in_asyncio(MemoryStore(), model=MODEL, clock=_clock()) as bridge:
            await bridge.call_session("ses_a", lambda s: _turn(s, 1))
            built = await bridge.call_session("ses_a", lambda s: s.build_request(INPUTS))
            view = await bridge.call_session("ses_a", lambda s: s.view())
            history = await bridge.call_session("ses_a", lambda s: s.history())
            check_history(history)
            replayed = await bridge.call_session("ses_a", lambda s: s.replay())
            return built, view, replayed

    built, view, replayed = asyncio.run(main())
    assert built.request.messages[-1].role == "assistant"
    assert [m.role for m in view] == ["user", "assistant", "tool", "assistant"]
    check_tool_pairs(view)
    assert replayed


def test_asyncio_tasks_drive_several_sessions_at_once() -> None:
    async def main() -> list[int]:
        async with embed_in_asyncio(MemoryStore(), model=MODEL, clock=_clock()) as bridge:

            async def work(name: str) -> int:
                for n in range(3):
                    await bridge.call_session(name, partial(_turn, n=n))
                return len(await bridge.call_session(name, lambda s: s.view()))

            return await asyncio.gather(*(work(f"ses_{i}") for i in range(4)))

    assert asyncio.run(main()) == [12, 12, 12, 12]


def test_a_compaction_in_trio_does_not_block_the_asyncio_side() -> None:
    class Slow:
        max_input_tokens: int | None = None

        def __init__(self) -> None:
            self.release = trio.Event()

        async def summarize(self, task: SummaryInput) -> str:
            await self.release.wait()
            return "## Goal\n- Keep going."

    slow = Slow()

    async def main() -> tuple[str, str, str | None]:
        async with embed_in_asyncio(
            MemoryStore(), model=MODEL, summarizer=slow, clock=_clock()
        ) as bridge:
            for n in range(4):
                await bridge.call_session("ses_c", partial(_turn, n=n))
            compaction = asyncio.create_task(bridge.call_session("ses_c", lambda s: s.compact()))
            await asyncio.sleep(0.01)
            late = await bridge.call_session(
                "ses_c", lambda s: s.add_user("Meanwhile: also update the README.")
            )

            async def release(runtime: Runtime) -> None:
                slow.release.set()

            await bridge.call(release)
            result = await compaction
            view = await bridge.call_session("ses_c", lambda s: s.view())
            return result.outcome, late, view[-1].source_id

    outcome, late, last = asyncio.run(main())
    assert outcome == "completed"
    assert last == late


def test_a_trio_error_is_raised_in_the_asyncio_caller() -> None:
    async def main() -> None:
        async with embed_in_asyncio(MemoryStore(), model=MODEL, clock=_clock()) as bridge:
            with pytest.raises(Exception, match="does not exist"):
                await bridge.call_session(
                    "ses_d", lambda s: s.start_assistant("msg_000000000000000000")
                )
            # The runtime keeps serving after a refused command.
            await bridge.call_session("ses_d", lambda s: _turn(s, 1))

    asyncio.run(main())


def test_cancelling_the_asyncio_caller_cancels_the_trio_call() -> None:
    cancelled = []

    async def forever(runtime: Runtime) -> None:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled.append(True)
            raise

    async def main() -> None:
        async with embed_in_asyncio(MemoryStore(), model=MODEL, clock=_clock()) as bridge:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(bridge.call(forever), timeout=0.05)
            await bridge.call_session("ses_e", lambda s: _turn(s, 1))

    asyncio.run(main())
    assert cancelled == [True]


def test_an_sqlite_store_opened_in_the_guest_resumes_its_sessions(tmp_path: Path) -> None:
    path = tmp_path / "guest.db"

    async def run_once(n: int) -> int:
        async with embed_in_asyncio(SQLiteStore.open(path), model=MODEL, clock=_clock()) as bridge:
            await bridge.call_session("ses_f", lambda s: _turn(s, n))
            assert await bridge.call_session("ses_f", lambda s: s.replay())
            history = await bridge.call_session("ses_f", lambda s: s.history())
            return len(history.messages)

    async def main() -> list[int]:
        return [await run_once(1), await run_once(2)]

    assert asyncio.run(main()) == [3, 6]


def test_a_call_after_the_block_is_refused() -> None:
    async def main() -> None:
        kept: list[RuntimeBridge] = []
        async with embed_in_asyncio(MemoryStore(), model=MODEL, clock=_clock()) as bridge:
            kept.append(bridge)
        with pytest.raises(EmbeddedRuntimeClosed):
            await kept[0].call_session("ses_g", lambda s: s.view())

    asyncio.run(main())


def test_a_store_that_fails_to_open_raises_in_asyncio(tmp_path: Path) -> None:
    async def main() -> None:
        store = SQLiteStore.open(tmp_path / "missing.db", create=False)
        async with embed_in_asyncio(store, model=MODEL):
            pytest.fail("the block must not run")

    with pytest.raises(StoreSchemaError, match="cannot open"):
        asyncio.run(main())


def test_cancelling_the_asyncio_side_rolls_back_a_running_compaction(tmp_path: Path) -> None:
    path = tmp_path / "cancelled.db"
    summarizing = threading.Event()

    class Stuck:
        max_input_tokens: int | None = None

        async def summarize(self, task: SummaryInput) -> str:
            summarizing.set()
            await trio.sleep_forever()
            raise AssertionError("unreachable")

    async def run_until_cancelled() -> None:
        async with embed_in_asyncio(
            SQLiteStore.open(path), model=MODEL, summarizer=Stuck(), clock=_clock()
        ) as bridge:
            for n in range(4):
                await bridge.call_session("ses_h", partial(_turn, n=n))
            await bridge.call_session("ses_h", lambda s: s.compact())

    async def main() -> None:
        # Cancelled once the compaction runs, however long the turns before it took.
        running = asyncio.ensure_future(run_until_cancelled())
        while not (summarizing.is_set() or running.done()):
            await asyncio.sleep(0.01)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running

    async def stored() -> list[RecordedEvent]:
        async with SQLiteStore.open(path) as store:
            return await store.read("ses_h")

    asyncio.run(main())
    recorded = trio.run(stored)
    (rollback,) = [r.event for r in recorded if isinstance(r.event, CompactionRolledBack)]
    # Written by the cancelled run itself, not rolled back when the session next loads.
    assert (rollback.reason, rollback.detail) == ("cancelled", "")


def test_a_host_task_woken_while_the_runtime_is_busy_waits_for_at_most_one_batch() -> None:
    batches = [0]
    waits: list[int] = []

    async def main() -> None:
        async with embed_in_asyncio(MemoryStore(), model=MODEL, clock=_clock()) as bridge:

            async def busy(runtime: Runtime) -> None:
                # Always ready: one step in each of the guest's batches.
                while True:
                    await trio.lowlevel.checkpoint()
                    batches[0] += 1

            busy_call = asyncio.create_task(bridge.call(busy))
            while batches[0] < 3:
                await asyncio.sleep(0)
            loop = asyncio.get_running_loop()
            for _ in range(30):
                # Woken as by I/O or a timer: a callback resolves the future the task awaits.
                woken: asyncio.Future[None] = loop.create_future()
                loop.call_soon(woken.set_result, None)
                before = batches[0]
                await woken
                waits.append(batches[0] - before)
            busy_call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await busy_call

    asyncio.run(main())
    assert max(waits) <= 1
