"""The runtime as an application embeds it, through the public API only: a runtime opened
with arguments that cannot work, a handle kept after its runtime closed, and wrong input at
each boundary give typed errors with nothing written."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from contextledger import Event, MemoryStore, ModelRef, Runtime, SessionHandle, Usage
from contextledger.actors import RuntimeClosed
from contextledger.events import InvalidEvent, UsageReported
from contextledger.request import InvalidCommand, RequestInputs, SystemSegments
from contextledger.testing import check_tool_pairs
from contextledger.vocabulary import Model, ModelLimits

MODEL = Model(
    provider_id="anthropic",
    model_id="claude-sonnet-4-5",
    limits=ModelLimits(context=32_000, output=8_000),
)
INPUTS = RequestInputs(
    model=ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5"),
    segments=SystemSegments(prompt="Fix what the user asks.", environment="cwd: /repo"),
)


async def _streams(store: MemoryStore) -> dict[str, int]:
    return {stream: len(await store.read(stream)) for stream in await store.streams()}


@pytest.mark.trio
async def test_a_handle_kept_after_its_runtime_closed_raises_and_writes_nothing() -> None:
    store = MemoryStore()
    async with Runtime.open(store, model=MODEL) as runtime:
        session = await runtime.session("ses_1")
        await session.add_user("Fix the test.")
    written = await _streams(store)

    with pytest.raises(RuntimeClosed):
        await session.add_user("One more thing.")
    with pytest.raises(RuntimeClosed):
        await session.history()
    with pytest.raises(RuntimeClosed):
        await runtime.session("ses_2")
    with pytest.raises(RuntimeClosed):
        await SessionHandle(runtime, "ses_3").add_user("hi")
    assert await _streams(store) == written


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"model": "claude-sonnet-4-5"}, "model"),
        ({"config": {"prune": {"enabled": True}}}, "config"),
        ({"idle_seconds": 0}, "idle_seconds"),
        ({"idle_seconds": -1.0}, "idle_seconds"),
        ({"idle_seconds": "300"}, "idle_seconds"),
        ({"summarizer": "extractive"}, "summarizer"),
        ({"clock": 1_900_000_000_000}, "clock"),
        ({"store": "agent.db"}, "store"),
    ],
)
@pytest.mark.trio
async def test_a_runtime_opened_with_an_argument_that_cannot_work_is_refused(
    arguments: dict[str, Any], field: str
) -> None:
    store = MemoryStore()
    opened: dict[str, Any] = {"store": store, "model": MODEL} | arguments
    with pytest.raises(InvalidCommand, match=r"Runtime\.open") as raised:
        async with Runtime.open(**opened):
            pass
    assert raised.value.field == field
    assert await store.streams() == []


@pytest.mark.trio
async def test_an_empty_session_id_is_refused_with_nothing_written() -> None:
    store = MemoryStore()
    async with Runtime.open(store, model=MODEL) as runtime:
        with pytest.raises(InvalidCommand, match="session_id"):
            await runtime.session("")
    assert await store.streams() == []


@pytest.mark.parametrize("session_id", [5, None, b"ses_parent", ""])
@pytest.mark.trio
async def test_children_of_a_session_id_that_is_no_text_are_refused(session_id: Any) -> None:
    async with Runtime.open(MemoryStore(), model=MODEL) as runtime:
        parent = await runtime.session("ses_parent")
        await parent.start_subtask("ses_child")
        with pytest.raises(InvalidCommand, match="session_id"):
            await runtime.children(session_id)
        assert await runtime.children("ses_parent") == ["ses_child"]


@pytest.mark.parametrize(
    "arguments",
    [{"agent_id": 5}, {"model": "claude-sonnet-4-5"}, {"model": {"provider_id": "anthropic"}}],
)
@pytest.mark.trio
async def test_a_view_asked_with_wrongly_typed_arguments_is_refused(
    arguments: dict[str, Any],
) -> None:
    async with Runtime.open(MemoryStore(), model=MODEL) as runtime:
        session = await runtime.session("ses_1")
        user = await session.add_user("Fix the test.")
        await session.record_assistant(user, text="Done.", usage=Usage(input=10, output=2))
        with pytest.raises(InvalidCommand, match=r"agent_id|model"):
            await session.view(**arguments)
        ref = ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5")
        assert len(await session.view(model=ref, agent_id="main")) == 2


@pytest.mark.trio
async def test_a_result_for_a_part_that_is_no_tool_call_is_refused_with_nothing_written() -> None:
    store = MemoryStore()
    async with Runtime.open(store, model=MODEL) as runtime:
        session = await runtime.session("ses_1")
        user = await session.add_user("Fix the test.")
        message = await session.start_assistant(user)
        text = await session.add_text(message, "Looking.")
        written = await _streams(store)
        for part_id in ("prt_000000000000000000", text):
            with pytest.raises(InvalidCommand, match="part_id"):
                await session.record_tool_result(part_id, "3 passed")
        assert await _streams(store) == written


@pytest.mark.parametrize(
    "call_ids",
    [["toolu_1", "toolu_2"], ["toolu_2", "toolu_2"]],
    ids=["an id used already", "one id twice"],
)
@pytest.mark.trio
async def test_a_whole_step_refused_by_the_log_writes_nothing(call_ids: list[str]) -> None:
    store = MemoryStore()
    async with Runtime.open(store, model=MODEL) as runtime:
        session = await runtime.session("ses_1")
        user = await session.add_user("Fix the test.")
        await session.record_assistant(
            user, tool_calls=[("bash", {"command": "ls"}, "src")], call_ids=["toolu_1"]
        )
        written = await _streams(store)
        with pytest.raises(InvalidEvent, match="used already"):
            await session.record_assistant(
                user,
                text="Running both.",
                tool_calls=[("bash", {"command": "a"}, "1"), ("bash", {"command": "b"}, "2")],
                call_ids=call_ids,
                usage=Usage(input=100, output=10),
            )
        assert await _streams(store) == written
        # The session goes on: the next step is recorded whole, and its request is valid.
        await session.record_assistant(user, text="Done.", usage=Usage(input=120, output=5))
        check_tool_pairs(await session.view())
        assert await session.replay()


@pytest.mark.trio
async def test_a_whole_step_writes_the_events_of_the_same_step_streamed() -> None:
    async def record(whole: bool) -> list[Event]:
        store = MemoryStore()
        async with Runtime.open(
            store, model=MODEL, clock=itertools.count(1_900_000_000_000).__next__
        ) as runtime:
            session = await runtime.session("ses_1")
            user = await session.add_user("Fix the test.")
            calls = [
                ("bash", {"command": "pytest"}, "1 failed"),
                ("read", {"path": "a.py"}, "x = 1"),
            ]
            usage = Usage(input=100, output=10)
            if whole:
                await session.record_assistant(
                    user, text="Looking.", tool_calls=calls, call_ids=["c1", "c2"], usage=usage
                )
            else:
                message = await session.start_assistant(user)
                await session.add_text(message, "Looking.")
                for (tool, tool_input, output), call_id in zip(calls, ["c1", "c2"], strict=True):
                    part = await session.call_tool(message, tool, tool_input, call_id=call_id)
                    await session.record_tool_result(part, output)
                await session.finish(message, finish="tool-calls", usage=usage)
        return [recorded.event for recorded in await store.read("ses_1")]

    assert await record(whole=True) == await record(whole=False)


@pytest.mark.trio
async def test_a_finish_with_usage_for_an_unknown_message_is_refused_with_nothing_written() -> None:
    store = MemoryStore()
    async with Runtime.open(store, model=MODEL) as runtime:
        session = await runtime.session("ses_1")
        await session.add_user("Fix the test.")
        written = await _streams(store)
        with pytest.raises(InvalidEvent, match="does not exist"):
            await session.finish("msg_000000000000000000", usage=Usage(input=100, output=10))
        assert await _streams(store) == written


@pytest.mark.trio
async def test_a_subtask_of_a_session_that_is_no_child_is_refused_and_a_child_taken_up_again() -> (
    None
):
    store = MemoryStore()
    async with Runtime.open(store, model=MODEL) as runtime:
        parent = await runtime.session("ses_parent")
        await runtime.session("ses_other")
        child = await parent.start_subtask("ses_child", title="Explore")
        await child.add_user("Find the parser.")
        written = await _streams(store)
        for session_id in ("ses_other", "ses_parent"):
            with pytest.raises(InvalidCommand, match="no subtask"):
                await parent.start_subtask(session_id)
        with pytest.raises(InvalidCommand, match="no subtask"):
            await child.start_subtask("ses_parent")
        again = await parent.start_subtask("ses_child")
        assert len((await again.history()).messages) == 1
        assert await runtime.children("ses_parent") == ["ses_child"]
        assert await _streams(store) == written


@pytest.mark.trio
async def test_recording_into_a_sub_agent_s_message_under_another_agent_is_refused() -> None:
    store = MemoryStore()
    async with Runtime.open(store, model=MODEL) as runtime:
        session = await runtime.session("ses_1")
        user = await session.add_user("Find the parser.", agent_id="explore")
        await session.build_request(INPUTS, agent_id="explore")
        message = await session.start_assistant(user, agent_id="explore")
        call = await session.call_tool(message, "bash", {"command": "ls"}, agent_id="explore")
        written = await _streams(store)
        for forgotten in (
            lambda: session.add_text(message, "Looking."),
            lambda: session.call_tool(message, "bash", {"command": "ls src"}),
            lambda: session.record_tool_result(call, "src"),
            lambda: session.finish(message, finish="tool-calls", usage=Usage(input=90, output=5)),
        ):
            with pytest.raises(InvalidCommand, match="belongs to agent 'explore'"):
                await forgotten()
        assert await _streams(store) == written
        await session.record_tool_result(call, "src", agent_id="explore")
        await session.finish(message, usage=Usage(input=90, output=5), agent_id="explore")
    (report,) = [r.event for r in await store.read("ses_1") if isinstance(r.event, UsageReported)]
    assert report.agent_id == "explore" and report.measure is not None


@pytest.mark.trio
async def test_writes_that_break_the_conversation_s_shape_are_refused() -> None:
    """A tool call on a reply that has finished, a reply to a reply, and a reply of the main
    agent to a sub-agent's user message: the log refuses each, nothing written."""
    store = MemoryStore()
    async with Runtime.open(store, model=MODEL) as runtime:
        session = await runtime.session("ses_1")
        user = await session.add_user("Fix the test.")
        reply = await session.start_assistant(user)
        await session.finish(reply, usage=Usage(input=90, output=5))
        sub_user = await session.add_user("Find the parser.", agent_id="explore")
        written = await _streams(store)
        for broken in (
            lambda: session.start_assistant(reply),
            lambda: session.start_assistant(sub_user),
        ):
            with pytest.raises(InvalidEvent):
                await broken()
        # The recorder refuses a call on a finished reply before the log sees it, whatever
        # the reply's finish (the log takes a late call of a "tool-calls" step from importers).
        with pytest.raises(InvalidCommand, match="has finished"):
            await session.call_tool(reply, "bash", {"command": "ls"})
        assert await _streams(store) == written
        step = await session.start_assistant(user)
        await session.call_tool(step, "bash", {"command": "ls"})
        await session.finish(step, finish="tool-calls")
        written = await _streams(store)
        for late in (
            lambda: session.call_tool(step, "bash", {"command": "pwd"}),
            lambda: session.add_text(step, "one more thing"),
        ):
            with pytest.raises(InvalidCommand, match="has finished"):
                await late()
        assert await _streams(store) == written
        await session.start_assistant(sub_user, agent_id="explore")
