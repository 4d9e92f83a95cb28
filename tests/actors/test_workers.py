"""The actors that work for a session, on trio's mock clock where time passes:
``RequestBuilderActor`` builds and records requests, ``CompactorActor`` completes or rolls
back a compaction without blocking the session, ``PrunerActor`` prunes by its settings."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from contextledger.actors._session import Session, SessionWriter
from contextledger.actors._workers import (
    Build,
    Compact,
    CompactorActor,
    Prune,
    PrunerActor,
    RequestBuilderActor,
)
from contextledger.compaction._summarizers import ExtractiveSummarizer, Summarizer, SummaryInput
from contextledger.config import Config, PruneConfig
from contextledger.events._catalogue import (
    CompactionCompleted,
    CompactionRolledBack,
    Event,
    InstructionLoaded,
    MemoryPinned,
    PrefixPinned,
    RequestSent,
    SessionStarted,
    ToolOutputCleared,
    ToolOutputTrimmed,
)
from contextledger.events._parts import MessageError, ModelRef, ToolSchema, Usage
from contextledger.history._view import ViewOptions, model_view
from contextledger.ledger import SessionLog
from contextledger.policy._overflow import pressure_level
from contextledger.providers._errors import ProviderError
from contextledger.providers._registry import wire_format
from contextledger.request._builder import BuiltRequest, RequestInputs
from contextledger.request._instructions import InstructionFile
from contextledger.request._recording import (
    AddText,
    AddUser,
    CallTool,
    Finish,
    StartAssistant,
    ToolResult,
)
from contextledger.request._system import SystemSegments
from contextledger.store._memory import MemoryStore
from contextledger.testing import check_history
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
SESSION = "ses_workers"
START_MS = 1_900_000_000_000
#: An output of about 30,000 estimated tokens.
BIG = "x" * 120_000


class Clock:
    """Milliseconds that tick by one second per reading; ``skip`` moves them on."""

    def __init__(self) -> None:
        self.now = START_MS

    def __call__(self) -> int:
        self.now += 1000
        return self.now

    def skip(self, seconds: float) -> None:
        self.now += int(seconds * 1000)


class Actors:
    """A running session and the workers under test, writing through its ``SessionWriter``."""

    def __init__(self, store: MemoryStore, session: Session, clock: Clock) -> None:
        self.store = store
        self.session = session
        self.writer = SessionWriter(session)
        self.clock = clock

    async def ask(self, command: Any) -> Any:
        return await self.session.mailbox.ask(command)

    async def events(self, after: int = 0) -> list[Event]:
        return [r.event for r in await self.store.read(SESSION, after + 1)]

    async def turn(self, n: int, output: str = "ok", usage: Usage | None = None) -> str:
        """A user message, a step calling bash, and the answer."""
        user: str = await self.ask(AddUser(text=f"Step {n}: fix src/mod_{n}.py"))
        step: str = await self.ask(StartAssistant(parent_id=user))
        call: str = await self.ask(
            CallTool(message_id=step, tool="bash", input={"command": f"pytest -k {n}"})
        )
        await self.ask(ToolResult(part_id=call, output=output))
        await self.ask(Finish(message_id=step, finish="tool-calls"))
        answer: str = await self.ask(StartAssistant(parent_id=user))
        await self.ask(AddText(message_id=answer, text=f"Done with step {n}."))
        await self.ask(Finish(message_id=answer, usage=usage or Usage(input=100, output=20)))
        return user


@pytest.fixture
async def actors() -> AsyncIterator[Actors]:
    async with trio.open_nursery() as nursery:
        store = MemoryStore()
        log = await SessionLog.open(store, SESSION)
        await log.append([SessionStarted(session_id=SESSION, time_ms=START_MS, model=REF)])
        clock = Clock()
        session = Session(log, clock, default_model=REF)
        nursery.start_soon(session.run)
        yield Actors(store, session, clock)
        await session.mailbox.close()


# --- RequestBuilderActor ------------------------------------------------------------------------


@pytest.fixture
async def builder(actors: Actors) -> AsyncIterator[RequestBuilderActor]:
    actor = RequestBuilderActor(
        actors.writer, lambda: wire_format("anthropic"), MODEL, Config(), actors.clock
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(actor.run)
        yield actor
        await actor.mailbox.close()


async def test_the_builder_builds_and_records_the_request(
    actors: Actors, builder: RequestBuilderActor
) -> None:
    await actors.turn(1)
    user: str = await actors.ask(AddUser(text="And the docs?"))
    before = actors.session.history.seq
    built: BuiltRequest = await builder.mailbox.ask(Build(inputs=INPUTS))
    pinned, sent = await actors.events(before)
    assert isinstance(pinned, PrefixPinned)
    assert isinstance(sent, RequestSent) and sent.body_bytes == len(built.encoded.body)
    last = built.request.messages[-1]
    assert last.role == "user" and last.source_id == user
    assert b"And the docs?" in built.encoded.body
    # The next request only records itself: the prefix is pinned already.
    again = actors.session.history.seq
    second: BuiltRequest = await builder.mailbox.ask(Build(inputs=INPUTS))
    (sent_again,) = await actors.events(again)
    assert isinstance(sent_again, RequestSent)
    assert second.encoded.body == built.encoded.body
    check_history(actors.session.history)


async def test_the_builder_captures_memory_and_instructions_once(
    actors: Actors, builder: RequestBuilderActor
) -> None:
    await actors.ask(AddUser(text="Hello"))
    rules = (InstructionFile(path="/repo/AGENTS.md", text="Run the tests.", source="project"),)
    before = actors.session.history.seq
    command = Build(inputs=INPUTS, memory="Use tabs.", instructions=rules)
    built: BuiltRequest = await builder.mailbox.ask(command)
    kinds = [type(e) for e in await actors.events(before)]
    assert kinds == [MemoryPinned, InstructionLoaded, PrefixPinned, RequestSent]
    assert b"Use tabs." in built.encoded.body and b"Run the tests." in built.encoded.body
    again = actors.session.history.seq
    await builder.mailbox.ask(command)
    assert [type(e) for e in await actors.events(again)] == [RequestSent]


async def test_the_builder_builds_an_agent_slice(
    actors: Actors, builder: RequestBuilderActor
) -> None:
    await actors.ask(AddUser(text="Main thread"))
    await actors.ask(AddUser(text="Explore the repo", agent_id="sub_1"))
    sub: BuiltRequest = await builder.mailbox.ask(Build(inputs=INPUTS, agent_id="sub_1"))
    assert b"Explore the repo" in sub.encoded.body and b"Main thread" not in sub.encoded.body
    # The main agent is sent its own slice too.
    main: BuiltRequest = await builder.mailbox.ask(Build(inputs=INPUTS))
    assert b"Main thread" in main.encoded.body and b"Explore the repo" not in main.encoded.body


async def test_a_build_that_cannot_be_recorded_raises_in_the_caller(
    actors: Actors, builder: RequestBuilderActor
) -> None:
    await actors.ask(AddUser(text="Hello"))
    await actors.session.mailbox.close()  # the session stops taking commands
    with pytest.raises(trio.ClosedResourceError):
        await builder.mailbox.ask(Build(inputs=INPUTS))


# --- CompactorActor -----------------------------------------------------------------------------


async def _compactor(
    nursery: trio.Nursery, actors: Actors, summarizer: Summarizer
) -> CompactorActor:
    actor = CompactorActor(actors.writer, summarizer, MODEL, Config(), actors.clock)
    nursery.start_soon(actor.run)
    return actor


def _view(actors: Actors) -> list[Any]:
    return model_view(actors.session.history, ViewOptions.from_config(Config(), REF))


async def test_the_compactor_completes_a_compaction(actors: Actors) -> None:
    for n in range(4):
        await actors.turn(n)
    async with trio.open_nursery() as nursery:
        compactor = await _compactor(nursery, actors, ExtractiveSummarizer())
        result = await compactor.mailbox.ask(Compact(trigger="manual"))
        await compactor.mailbox.close()
    assert result.outcome == "completed" and result.summary_message_id is not None
    history = actors.session.history
    (compaction,) = history.state.compactions.values()
    assert compaction.status == "completed"
    assert any(isinstance(e, CompactionCompleted) for e in await actors.events())
    view = _view(actors)
    assert view[1].source_id == result.summary_message_id
    check_history(history)


class Failing:
    max_input_tokens: int | None = None

    async def summarize(self, task: SummaryInput) -> str:
        raise ProviderError("anthropic", MessageError(name="APIError", message="overloaded"))


class Empty:
    max_input_tokens: int | None = None

    async def summarize(self, task: SummaryInput) -> str:
        return "   "


@pytest.mark.parametrize(("summarizer", "reason"), [(Failing(), "error"), (Empty(), "empty")])
async def test_the_compactor_rolls_back_a_failed_summary(
    actors: Actors, summarizer: Summarizer, reason: str
) -> None:
    for n in range(3):
        await actors.turn(n)
    before = _view(actors)
    async with trio.open_nursery() as nursery:
        compactor = await _compactor(nursery, actors, summarizer)
        result = await compactor.mailbox.ask(Compact())
        # A rolled-back compaction leaves the actor serving.
        again = await compactor.mailbox.ask(Compact())
        await compactor.mailbox.close()
    assert result.outcome == again.outcome == "rolled_back" and result.reason == reason
    rolled = [e for e in await actors.events() if isinstance(e, CompactionRolledBack)]
    assert [e.reason for e in rolled] == [reason, reason]
    assert _view(actors) == before  # the view is exactly what it was


class Slow:
    """A summarizer that takes a minute."""

    max_input_tokens: int | None = None

    def __init__(self) -> None:
        self.started: float | None = None

    async def summarize(self, task: SummaryInput) -> str:
        self.started = trio.current_time()
        await trio.sleep(60)
        return "## Goal\n- Keep going."


async def test_the_session_keeps_serving_while_a_summary_is_written(
    actors: Actors, autojump_clock: Any
) -> None:
    for n in range(4):
        await actors.turn(n)
    summarizer = Slow()
    results: list[Any] = []
    async with trio.open_nursery() as nursery:
        compactor = await _compactor(nursery, actors, summarizer)

        async def compact() -> None:
            results.append(await compactor.mailbox.ask(Compact()))

        nursery.start_soon(compact)
        await trio.sleep(1)
        assert summarizer.started is not None and not results
        # The session records a whole turn while the summarizer works.
        start = trio.current_time()
        late = await actors.turn(9)
        assert trio.current_time() == start  # no waiting for the compaction
        assert not results
        await trio.sleep(60)
        assert [r.outcome for r in results] == ["completed"]
        assert trio.current_time() == pytest.approx(61)
        await compactor.mailbox.close()
    view = _view(actors)
    assert view[1].content[0].text == "## Goal\n- Keep going."
    # What arrived meanwhile is the kept tail.
    assert late in [m.source_id for m in view]
    check_history(actors.session.history)


async def test_a_compaction_stopped_half_way_is_rolled_back(
    actors: Actors, autojump_clock: Any
) -> None:
    for n in range(3):
        await actors.turn(n)
    before = _view(actors)
    errors: list[BaseException] = []
    async with trio.open_nursery() as nursery:
        compactor = CompactorActor(actors.writer, Slow(), MODEL, Config(), actors.clock)
        serving = trio.CancelScope()

        async def serve() -> None:
            with serving:
                await compactor.run()

        async def compact() -> None:
            try:
                await compactor.mailbox.ask(Compact())
            except trio.BrokenResourceError as exc:
                errors.append(exc)

        nursery.start_soon(serve)
        nursery.start_soon(compact)
        await trio.sleep(10)
        serving.cancel()  # the compactor stops while the summary is being written
    assert len(errors) == 1  # the caller hears that no answer will come
    (rolled,) = [e for e in await actors.events() if isinstance(e, CompactionRolledBack)]
    assert rolled.reason == "cancelled"
    assert _view(actors) == before


# --- PrunerActor --------------------------------------------------------------------------------


async def _prune(actors: Actors, config: Config, command: Prune) -> list[Any]:
    pruner = PrunerActor(actors.writer, MODEL, config, actors.clock)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pruner.run)
        plans: list[Any] = await pruner.mailbox.ask(command)
        await pruner.mailbox.close()
    return plans


async def _big_turns(actors: Actors, usage: Usage | None = None) -> None:
    for n in range(4):
        await actors.turn(n, output=BIG, usage=usage)


def _cleared(events: list[Event]) -> list[ToolOutputCleared]:
    return [e for e in events if isinstance(e, ToolOutputCleared)]


async def test_the_after_turn_prune_does_nothing_when_disabled(actors: Actors) -> None:
    await _big_turns(actors)
    before = actors.session.history.seq
    assert await _prune(actors, Config(), Prune()) == []
    assert actors.session.history.seq == before


async def test_a_forced_prune_runs_even_when_disabled(actors: Actors) -> None:
    await _big_turns(actors)
    before = actors.session.history.seq
    (plan,) = await _prune(actors, Config(), Prune(force=True))
    (cleared,) = _cleared(await actors.events(before))
    assert cleared.reason == "normal" and tuple(cleared.part_ids) == tuple(plan.part_ids)
    # The oldest outputs, beyond the newest 40,000 tokens and the last two turns.
    first_call = actors.session.history.messages[1].parts[1]
    assert list(cleared.part_ids) == [first_call.id]


async def test_the_opencode_prune_clears_old_outputs(actors: Actors) -> None:
    await _big_turns(actors)
    config = Config(prune=PruneConfig(enabled=True, mode="opencode"))
    before = actors.session.history.seq
    (plan,) = await _prune(actors, config, Prune())
    (cleared,) = _cleared(await actors.events(before))
    assert cleared.reason == "normal" and plan.tokens > 20_000
    # Small outputs free too little: nothing happens.
    assert await _prune(actors, config, Prune()) == []


async def test_the_opencode_prune_leaves_small_sessions_alone(actors: Actors) -> None:
    for n in range(4):
        await actors.turn(n)
    config = Config(prune=PruneConfig(enabled=True))
    before = actors.session.history.seq
    assert await _prune(actors, config, Prune()) == []
    assert actors.session.history.seq == before


async def test_the_mimo_prune_waits_for_a_cold_cache(actors: Actors) -> None:
    usage = Usage(input=160_000, output=100)
    config = Config(prune=PruneConfig(enabled=True, mode="mimo"))
    assert pressure_level(MODEL, usage, config) >= 2
    await _big_turns(actors, usage)
    before = actors.session.history.seq
    assert await _prune(actors, config, Prune()) == []  # the cache is still warm
    assert actors.session.history.seq == before
    actors.clock.skip(config.prune.cache_ttl_ms / 1000 + 1)
    plans = await _prune(actors, config, Prune())
    assert plans and all(p.reason == "pressure" for p in plans)
    (cleared,) = _cleared(await actors.events(before))
    assert cleared.reason == "pressure"


async def test_the_mimo_prune_trims_at_the_first_pressure_level(actors: Actors) -> None:
    usage = Usage(input=100_000, output=100)
    config = Config(prune=PruneConfig(enabled=True, mode="mimo"))
    assert pressure_level(MODEL, usage, config) == 1
    await _big_turns(actors, usage)
    actors.clock.skip(config.prune.cache_ttl_ms / 1000 + 1)
    before = actors.session.history.seq
    plans = await _prune(actors, config, Prune())
    trimmed = [e for e in await actors.events(before) if isinstance(e, ToolOutputTrimmed)]
    assert plans and len(trimmed) == len(plans)
    keep = config.prune.trim_keep_chars
    assert all((e.head_chars, e.tail_chars) == (keep, keep) for e in trimmed)


async def test_the_cost_prune_clears_when_the_cache_is_cold(actors: Actors) -> None:
    usage = Usage(input=2_000, cache_read=120_000, output=100)
    config = Config(prune=PruneConfig(enabled=True, mode="cost"))
    await _big_turns(actors, usage)
    actors.clock.skip(3600)
    before = actors.session.history.seq
    (plan,) = await _prune(actors, config, Prune())
    (cleared,) = _cleared(await actors.events(before))
    assert plan.reason == cleared.reason == "cost"


async def test_the_pruner_prunes_an_agent_slice(actors: Actors) -> None:
    await _big_turns(actors)
    before = actors.session.history.seq
    assert await _prune(actors, Config(), Prune(agent_id="sub_1", force=True)) == []
    assert actors.session.history.seq == before
