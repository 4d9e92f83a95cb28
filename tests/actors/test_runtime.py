"""The runtime end to end: recording a turn, building requests, compaction that does not
block the session, prune after a turn, retirement and reload, replay."""

from __future__ import annotations

from collections.abc import AsyncIterator
from itertools import count
from typing import Any

import pytest
import trio

from contextledger.actors import CompactionExhausted, Runtime, SessionHandle
from contextledger.compaction._summarizers import SummaryInput
from contextledger.config import Config, PruneConfig
from contextledger.events._parts import MessageError, ModelRef, ToolSchema, Usage
from contextledger.providers._errors import ContextOverflowError
from contextledger.request._builder import RequestInputs
from contextledger.request._system import SystemSegments
from contextledger.store._memory import MemoryStore
from contextledger.testing import check_history, check_tool_pairs
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


def _clock() -> Any:
    ticks = count(1_900_000_000_000, 1000)
    return lambda: next(ticks)


@pytest.fixture
async def runtime() -> AsyncIterator[Runtime]:
    async with Runtime.open(MemoryStore(), model=MODEL, clock=_clock()) as rt:
        yield rt


async def _turn(session: SessionHandle, n: int, output: str = "ok") -> str:
    user = await session.add_user(f"Step {n}: fix src/mod_{n}.py")
    await session.record_assistant(
        user, tool_calls=[("bash", {"command": f"pytest -k {n}"}, output)]
    )
    answer = await session.start_assistant(user)
    await session.add_text(answer, f"Done with step {n}.")
    await session.finish(answer, usage=Usage(input=100, output=20))
    return user


async def test_a_turn_is_recorded_and_its_request_built(runtime: Runtime) -> None:
    session = await runtime.session("ses_a")
    await _turn(session, 1)
    built = await session.build_request(INPUTS)
    assert built.request.messages[-1].role == "assistant"
    history = await session.history()
    check_history(history)
    check_tool_pairs(await session.view())
    assert await session.replay()


async def test_a_compaction_does_not_block_the_session(runtime: Runtime) -> None:
    release = trio.Event()

    class Slow:
        max_input_tokens = None

        async def summarize(self, task: SummaryInput) -> str:
            await release.wait()
            return "## Goal\n- Keep going."

    runtime.summarizer = Slow()
    session = await runtime.session("ses_b")
    for n in range(4):
        await _turn(session, n)
    results: list[Any] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: _collect(results, session.compact()))
        await trio.sleep(0.01)
        # The session keeps taking commands while the summary is written.
        late = await session.add_user("Meanwhile: also update the README.")
        release.set()
    (result,) = results
    assert result.outcome == "completed"
    view = await session.view()
    assert view[1].content[0].text == "## Goal\n- Keep going."  # type: ignore[union-attr]
    assert view[-1].source_id == late


async def _collect(into: list[Any], awaitable: Any) -> None:
    into.append(await awaitable)


async def test_an_overflow_error_compacts_and_replays_the_request(runtime: Runtime) -> None:
    session = await runtime.session("ses_c")
    for n in range(3):
        await _turn(session, n)
    user = await session.add_user(
        "Describe the screenshot.", files=[("image/png", "data:image/png;base64,AA", "s.png")]
    )
    failed = await session.start_assistant(user)
    error = ContextOverflowError(
        "anthropic", MessageError(name="ContextOverflowError", message="too long")
    )
    result = await session.record_error(failed, error)
    assert result is not None and result.outcome == "completed" and result.resumed_with
    history = await session.history()
    replayed = history.message(result.resumed_with)
    assert replayed.synthetic and "[Attached image/png: s.png]" in [
        getattr(p, "text", "") for p in replayed.parts
    ]


async def test_a_full_context_is_compacted_before_the_request(runtime: Runtime) -> None:
    session = await runtime.session("ses_d")
    for n in range(3):
        await _turn(session, n)
    user = await session.add_user("And now?")
    answer = await session.start_assistant(user)
    await session.finish(answer, usage=Usage(input=190_000, output=100))
    built = await session.build_request(INPUTS)
    history = await session.history()
    assert [c.status for c in history.state.compactions.values()] == ["completed"]
    assert built.request.messages[0].content[0].text == "What did we do so far?"  # type: ignore[union-attr]


async def test_the_after_turn_prune_runs_when_enabled() -> None:
    config = Config(prune=PruneConfig(enabled=True))
    async with Runtime.open(MemoryStore(), model=MODEL, config=config, clock=_clock()) as runtime:
        session = await runtime.session("ses_e")
        for n in range(3):
            await _turn(session, n, output="x" * 120_000)
        plans = await session.prune()
        assert plans == [] or all(
            p.reason in ("normal", "cost", "pressure") for p in plans if hasattr(p, "reason")
        )
        history = await session.history()
        check_history(history)


async def test_idle_sessions_are_retired_and_reloaded(autojump_clock: Any) -> None:
    store = MemoryStore()
    async with Runtime.open(store, model=MODEL, clock=_clock(), idle_seconds=10) as runtime:
        session = await runtime.session("ses_f")
        await _turn(session, 1)
        before = (await session.history()).seq
        await trio.sleep(30)
        assert "ses_f" not in runtime.running
        assert (await session.history()).seq == before
        assert "ses_f" in runtime.running


async def test_a_reopened_store_resumes_every_session(tmp_path: Any) -> None:
    from contextledger.store._sqlite import SQLiteStore

    path = tmp_path / "rt.db"
    async with (
        SQLiteStore.open(path) as store,
        Runtime.open(store, model=MODEL, clock=_clock()) as runtime,
    ):
        for name in ("ses_g", "ses_h"):
            await _turn(await runtime.session(name), 1)
    async with (
        SQLiteStore.open(path) as store,
        Runtime.open(store, model=MODEL, clock=_clock()) as runtime,
    ):
        for name in ("ses_g", "ses_h"):
            session = await runtime.session(name)
            await _turn(session, 2)
            check_history(await session.history())
            assert await session.replay()


async def test_an_invalid_command_is_refused_and_nothing_is_written(runtime: Runtime) -> None:
    session = await runtime.session("ses_i")
    before = (await session.history()).seq
    with pytest.raises(Exception, match="does not exist"):
        await session.start_assistant("msg_000000000000000000")
    assert (await session.history()).seq == before


async def test_a_subtask_is_a_child_session_read_together_with_its_parent(runtime: Runtime) -> None:
    parent = await runtime.session("ses_parent")
    user = await _turn(parent, 1)
    child = await parent.start_subtask("ses_parent_explore", title="Explore the parser")
    await _turn(child, 1)
    grandchild = await child.start_subtask("ses_parent_explore_deep")
    await grandchild.add_user("Look deeper.")
    assert await runtime.children("ses_parent") == ["ses_parent_explore"]
    family = await parent.family()
    assert set(family) == {"ses_parent", "ses_parent_explore", "ses_parent_explore_deep"}
    started = family["ses_parent_explore"].state.started
    assert started is not None and started.parent_session_id == "ses_parent"
    assert user in {m.id for m in family["ses_parent"].messages}
    # Each has its own log: the parent's view holds none of the child's messages.
    child_ids = {m.id for m in family["ses_parent_explore"].messages}
    assert not child_ids & {m.source_id for m in await parent.view()}


async def test_actors_log_their_session_agent_and_seq(runtime: Runtime) -> None:
    import structlog

    session = await runtime.session("ses_logs")
    with structlog.testing.capture_logs() as logs:
        await _turn(session, 1)
        await session.build_request(INPUTS)
        await session.compact()
    by_actor = {entry.get("actor") for entry in logs}
    assert {"session", "request_builder", "compactor"} <= by_actor
    for entry in logs:
        if entry.get("actor") is not None:
            assert entry["session_id"] == "ses_logs"
            assert entry["agent_id"] == "main" and entry["seq"] > 0


async def test_a_turn_still_full_after_three_compactions_raises() -> None:
    class Empty:
        max_input_tokens = None

        async def summarize(self, task: SummaryInput) -> str:
            return ""

    async with Runtime.open(MemoryStore(), model=MODEL, summarizer=Empty(), clock=_clock()) as rt:
        session = await rt.session("ses_full")
        await _turn(session, 1)
        user = await session.add_user("And now?")
        answer = await session.start_assistant(user)
        await session.finish(answer, usage=Usage(input=190_000, output=100))
        with pytest.raises(CompactionExhausted):
            await session.build_request(INPUTS)
        history = await session.history()
        statuses = [c.status for c in history.state.compactions.values()]
        assert statuses == ["rolled_back"] * 4  # three attempts, the fourth refused


async def test_preflight_compacts_before_a_request_that_would_not_fit() -> None:
    from contextledger.config import CompactionConfig

    config = Config(compaction=CompactionConfig(threshold_percent=5))
    async with Runtime.open(MemoryStore(), model=MODEL, config=config, clock=_clock()) as rt:
        session = await rt.session("ses_pre")
        for n in range(4):
            await _turn(session, n, output="y" * 12_000)
        await session.add_user("Next task.")
        built = await session.build_request(INPUTS)
        history = await session.history()
        assert [c.status for c in history.state.compactions.values()] == ["completed"]
        assert built.request.messages[0].content[0].text == "What did we do so far?"  # type: ignore[union-attr]


async def test_the_economic_cadence_compacts_early_and_never_raises() -> None:
    from contextledger.strategies import strategy

    config = strategy("default").configure(Config())
    assert config.compaction.cadence == "economic"
    async with Runtime.open(MemoryStore(), model=MODEL, config=config, clock=_clock()) as rt:
        session = await rt.session("ses_econ")
        for n in range(8):
            await _turn(session, n, output="y" * 40_000)  # about 80k tokens: far from full
        await session.add_user("And now?")
        await session.build_request(INPUTS)
        history = await session.history()
        assert [c.status for c in history.state.compactions.values()] == ["completed"]

    class Empty:
        max_input_tokens = None

        async def summarize(self, task: SummaryInput) -> str:
            return ""

    async with Runtime.open(
        MemoryStore(), model=MODEL, config=config, summarizer=Empty(), clock=_clock()
    ) as rt:
        session = await rt.session("ses_econ_empty")
        for n in range(8):
            await _turn(session, n, output="y" * 40_000)
        await session.add_user("And now?")
        built = await session.build_request(INPUTS)  # an early compaction that fails: send
        history = await session.history()
        assert [c.status for c in history.state.compactions.values()] == ["rolled_back"]
        assert len(built.request.messages) == len(await session.view())
        for _ in range(3):  # not tried again, request after request ...
            await session.build_request(INPUTS)
        assert len((await session.history()).state.compactions) == 1
        await _turn(session, 9)  # ... until a step has finished
        await session.build_request(INPUTS)
        assert len((await session.history()).state.compactions) == 2

    async with Runtime.open(MemoryStore(), model=MODEL, clock=_clock()) as rt:
        session = await rt.session("ses_window")
        for n in range(8):
            await _turn(session, n, output="y" * 40_000)
        await session.add_user("And now?")
        await session.build_request(INPUTS)
        assert not (await session.history()).state.compactions  # the window is far


async def test_a_transform_that_cannot_be_loaded_fails_when_the_runtime_opens() -> None:
    from contextledger.config import ViewConfig
    from contextledger.policy._transform import StrategyError

    config = Config(view=ViewConfig(transform="no_such_module:keep"))
    with pytest.raises(StrategyError, match="cannot import"):
        async with Runtime.open(MemoryStore(), model=MODEL, config=config, clock=_clock()):
            pass
