"""The ``Session`` actor's protocol: each command's reply and the events it writes, ids that
only grow, invalid commands refused with nothing written, ``SessionWriter`` going through
the mailbox, and commands from several tasks serialised."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from itertools import count
from typing import Any

import pytest
import trio

from contextledger.actors._commands import Append, Seq
from contextledger.actors._session import Session, SessionWriter
from contextledger.events._catalogue import (
    AssistantFinished,
    EnvironmentCaptured,
    Event,
    MemoryPinned,
    MessageAdded,
    PartAdded,
    RecordedEvent,
    SessionStarted,
    ToolStateChanged,
    UsageReported,
)
from contextledger.events._errors import InvalidEvent
from contextledger.events._parts import (
    FilePart,
    MessageError,
    ModelRef,
    ReasoningPart,
    StepFinishPart,
    StepStartPart,
    TextPart,
    ToolCompleted,
    ToolErrored,
    ToolPart,
    ToolPending,
    Usage,
)
from contextledger.ledger import SessionLog
from contextledger.request._context import EditorState
from contextledger.request._recording import (
    AddText,
    AddUser,
    CallTool,
    Finish,
    InvalidCommand,
    StartAssistant,
    StartStep,
    ToolResult,
)
from contextledger.store._memory import MemoryStore
from contextledger.testing import check_history

REF = ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5")
SESSION = "ses_actor"
START_MS = 1_900_000_000_000


def ticking() -> Callable[[], int]:
    ticks = count(START_MS, 1000)
    return lambda: next(ticks)


class Running:
    """A session actor serving on a store, and what it wrote there."""

    def __init__(self, store: MemoryStore, session: Session) -> None:
        self.store = store
        self.session = session

    async def ask(self, command: Any) -> Any:
        return await self.session.mailbox.ask(command)

    async def written(self, after: int = 0) -> list[Event]:
        """The events stored after seq ``after``."""
        return [r.event for r in await self.store.read(SESSION, after + 1)]

    @property
    def seq(self) -> int:
        return self.session.history.seq


async def start(
    nursery: trio.Nursery, clock: Callable[[], int], store: MemoryStore | None = None
) -> Running:
    store = store or MemoryStore()
    log = await SessionLog.open(store, SESSION)
    await log.append([SessionStarted(session_id=SESSION, time_ms=START_MS, model=REF)])
    session = Session(log, clock, default_model=REF)
    nursery.start_soon(session.run)
    return Running(store, session)


@pytest.fixture
async def running() -> AsyncIterator[Running]:
    async with trio.open_nursery() as nursery:
        running = await start(nursery, ticking())
        yield running
        await running.session.mailbox.close()


async def _user(running: Running, text: str = "Fix the bug in src/app.py") -> str:
    message_id: str = await running.ask(AddUser(text=text))
    return message_id


async def _assistant(running: Running) -> tuple[str, str]:
    user = await _user(running)
    assistant: str = await running.ask(StartAssistant(parent_id=user))
    return user, assistant


# --- each command ------------------------------------------------------------------------------


async def test_add_user_writes_the_message_and_its_text(running: Running) -> None:
    before = running.seq
    message_id = await _user(running, "Fix the bug")
    assert message_id.startswith("msg_")
    added, text = await running.written(before)
    assert isinstance(added, MessageAdded) and added.role == "user"
    assert added.message_id == message_id and added.model == REF and added.agent == "build"
    assert isinstance(text, PartAdded) and isinstance(text.part, TextPart)
    assert text.part.text == "Fix the bug" and text.part.message_id == message_id
    assert running.session.history.message(message_id).role == "user"


async def test_add_user_captures_files_and_the_environment(running: Running) -> None:
    before = running.seq
    editor = EditorState(
        time="2030-01-01T10:00:00+00:00", cwd="/repo", visible_files=("src/app.py",)
    )
    message_id: str = await running.ask(
        AddUser(
            text="What is in the screenshot?",
            files=(("image/png", "data:image/png;base64,AA", "shot.png"),),
            editor=editor,
        )
    )
    events = await running.written(before)
    parts = [e.part for e in events if isinstance(e, PartAdded)]
    assert [type(p) for p in parts] == [TextPart, FilePart]
    assert isinstance(parts[1], FilePart) and parts[1].filename == "shot.png"
    (environment,) = [e for e in events if isinstance(e, EnvironmentCaptured)]
    assert environment.user_message_id == message_id and "/repo" in environment.text


async def test_start_assistant_opens_a_message_with_its_first_step(running: Running) -> None:
    user = await _user(running)
    before = running.seq
    assistant: str = await running.ask(StartAssistant(parent_id=user, agent="plan"))
    added, step = await running.written(before)
    assert isinstance(added, MessageAdded) and added.role == "assistant"
    assert added.message_id == assistant and added.parent_id == user
    assert added.agent == "plan" and added.model == REF  # the session's default model
    assert isinstance(step, PartAdded) and isinstance(step.part, StepStartPart)
    assert step.part.message_id == assistant
    assert assistant > user


async def test_start_step_adds_a_step_start(running: Running) -> None:
    _, assistant = await _assistant(running)
    before = running.seq
    part_id: str = await running.ask(StartStep(message_id=assistant))
    (step,) = await running.written(before)
    assert isinstance(step, PartAdded) and isinstance(step.part, StepStartPart)
    assert step.part.id == part_id and step.part.message_id == assistant


async def test_add_text_writes_text_or_reasoning(running: Running) -> None:
    _, assistant = await _assistant(running)
    before = running.seq
    text_id: str = await running.ask(AddText(message_id=assistant, text="Looking."))
    thought_id: str = await running.ask(
        AddText(
            message_id=assistant,
            text="The path is wrong.",
            reasoning=True,
            metadata={"signature": "sig"},
        )
    )
    text, thought = await running.written(before)
    assert isinstance(text, PartAdded) and isinstance(text.part, TextPart)
    assert text.part.id == text_id and text.part.text == "Looking."
    assert isinstance(thought, PartAdded) and isinstance(thought.part, ReasoningPart)
    assert thought.part.id == thought_id and thought.part.metadata == {"signature": "sig"}


async def test_call_tool_writes_a_pending_tool_part(running: Running) -> None:
    _, assistant = await _assistant(running)
    before = running.seq
    first: str = await running.ask(
        CallTool(message_id=assistant, tool="bash", input={"command": "ls"})
    )
    second: str = await running.ask(
        CallTool(message_id=assistant, tool="read", input={"path": "a"}, call_id="toolu_1")
    )
    one, two = await running.written(before)
    assert isinstance(one, PartAdded) and isinstance(one.part, ToolPart)
    assert one.part.id == first and one.part.tool == "bash"
    assert one.part.call_id == f"call_{first.removeprefix('prt_')}"
    assert one.part.state == ToolPending(input={"command": "ls"})
    assert isinstance(two, PartAdded) and isinstance(two.part, ToolPart)
    assert two.part.id == second and two.part.call_id == "toolu_1"


async def test_tool_result_completes_or_fails_the_call(running: Running) -> None:
    _, assistant = await _assistant(running)
    ok: str = await running.ask(CallTool(message_id=assistant, tool="bash", input={"c": 1}))
    bad: str = await running.ask(CallTool(message_id=assistant, tool="bash", input={"c": 2}))
    before = running.seq
    seq = await running.ask(ToolResult(part_id=ok, output="2 files"))
    assert seq == running.seq == before + 1
    assert await running.ask(ToolResult(part_id=bad, output="exit 1", error=True)) == before + 2
    done, failed = await running.written(before)
    assert isinstance(done, ToolStateChanged) and done.part_id == ok
    assert isinstance(done.state, ToolCompleted) and done.state.output == "2 files"
    assert done.state.input == {"c": 1} and done.message_id == assistant
    assert isinstance(failed, ToolStateChanged) and isinstance(failed.state, ToolErrored)
    assert failed.state.error == "exit 1"


async def test_finish_ends_the_message_with_its_usage(running: Running) -> None:
    _, assistant = await _assistant(running)
    before = running.seq
    usage = Usage(input=120, output=30, cache_read=1000)
    seq = await running.ask(Finish(message_id=assistant, finish="tool-calls", usage=usage))
    step, finished, reported = await running.written(before)
    assert seq == running.seq == before + 3
    assert isinstance(step, PartAdded) and isinstance(step.part, StepFinishPart)
    assert step.part.usage == usage and step.part.reason == "tool-calls"
    assert isinstance(finished, AssistantFinished) and finished.usage == usage
    assert isinstance(reported, UsageReported) and reported.usage == usage
    assert reported.message_id == assistant
    assert running.session.history.message(assistant).finish == "tool-calls"


async def test_finish_without_usage_or_with_an_error(running: Running) -> None:
    _, assistant = await _assistant(running)
    before = running.seq
    error = MessageError(name="APIError", message="overloaded")
    await running.ask(Finish(message_id=assistant, finish="error", error=error))
    (finished,) = await running.written(before)
    assert isinstance(finished, AssistantFinished)
    assert finished.error == error and finished.usage == Usage()


async def test_seq_is_the_applied_seq(running: Running) -> None:
    await _assistant(running)
    assert await running.ask(Seq()) == running.seq == await running.store.stream_version(SESSION)


async def test_append_writes_a_batch_and_returns_it_recorded(running: Running) -> None:
    before = running.seq
    pinned = MemoryPinned(session_id=SESSION, time_ms=START_MS, text="Use tabs.")
    recorded: list[RecordedEvent] = await running.ask(Append(events=(pinned,)))
    assert [(r.seq, r.event) for r in recorded] == [(before + 1, pinned)]
    assert running.session.history.state.memory is not None


# --- ids, refusals, serialisation ---------------------------------------------------------


async def test_ids_only_grow_even_when_the_clock_stands_still() -> None:
    async with trio.open_nursery() as nursery:
        running = await start(nursery, lambda: START_MS)
        messages: list[str] = []
        parts: list[str] = []
        for n in range(3):
            user = await _user(running, f"step {n}")
            assistant: str = await running.ask(StartAssistant(parent_id=user))
            messages += [user, assistant]
            parts.append(await running.ask(AddText(message_id=assistant, text="ok")))
            parts.append(await running.ask(CallTool(message_id=assistant, tool="bash")))
            parts.append(await running.ask(StartStep(message_id=assistant)))
            await running.ask(Finish(message_id=assistant))
        await running.session.mailbox.close()
    assert messages == sorted(messages) and len(set(messages)) == len(messages)
    assert parts == sorted(parts) and len(set(parts)) == len(parts)
    assert all(m.startswith("msg_") for m in messages)
    assert all(p.startswith("prt_") for p in parts)
    assert len(set(messages + parts)) == 2 * 3 + 3 * 3


async def test_ids_continue_after_a_reload() -> None:
    store = MemoryStore()
    async with trio.open_nursery() as nursery:
        first = await start(nursery, lambda: START_MS, store)
        _, earlier = await _assistant(first)
        await first.session.mailbox.close()
    log = await SessionLog.open(store, SESSION)
    session = Session(log, lambda: START_MS - 5000, default_model=REF)  # a clock behind
    async with trio.open_nursery() as nursery:
        nursery.start_soon(session.run)
        later: str = await session.mailbox.ask(AddUser(text="again"))
        await session.mailbox.close()
    assert later > earlier


@pytest.mark.parametrize(
    ("command", "error"),
    [
        (StartAssistant(parent_id="msg_000000000000000000"), InvalidEvent),
        (AddText(message_id="msg_000000000000000000", text="lost"), InvalidEvent),
        (ToolResult(part_id="prt_000000000000000000", output="x"), InvalidCommand),
        (Finish(message_id="msg_000000000000000000"), InvalidEvent),
        (StartStep(message_id="msg_000000000000000000"), InvalidEvent),
    ],
)
async def test_an_invalid_command_is_refused_and_nothing_is_written(
    running: Running, command: Any, error: type[Exception]
) -> None:
    await _assistant(running)
    before = running.seq
    with pytest.raises(error):
        await running.ask(command)
    assert running.seq == before == await running.store.stream_version(SESSION)
    assert await _user(running)  # still serving


async def test_a_result_for_a_part_that_is_no_tool_call_is_refused(running: Running) -> None:
    _, assistant = await _assistant(running)
    text: str = await running.ask(AddText(message_id=assistant, text="hi"))
    before = running.seq
    with pytest.raises(InvalidCommand, match="no tool call"):
        await running.ask(ToolResult(part_id=text, output="x"))
    assert await running.written(before) == []


async def test_an_unknown_command_is_refused(running: Running) -> None:
    before = running.seq
    with pytest.raises(TypeError, match="no command"):
        await running.ask(MemoryPinned(session_id=SESSION, time_ms=START_MS, text="x"))
    assert running.seq == before


async def test_an_invalid_batch_is_refused_whole(running: Running) -> None:
    before = running.seq
    good = MemoryPinned(session_id=SESSION, time_ms=START_MS, text="Use tabs.")
    orphan = PartAdded(
        session_id=SESSION,
        time_ms=START_MS,
        part=TextPart(id="prt_000000000000000001", message_id="msg_000000000000000001", text="?"),
    )
    with pytest.raises(InvalidEvent):
        await running.ask(Append(events=(good, orphan)))
    assert running.seq == before and running.session.history.state.memory is None


async def test_the_writer_appends_through_the_mailbox(running: Running) -> None:
    writer = SessionWriter(running.session)
    assert writer.session_id == SESSION and writer.history is running.session.history
    before = running.seq
    pinned = MemoryPinned(session_id=SESSION, time_ms=START_MS, text="Use tabs.")
    recorded = await writer.append([pinned])
    assert [(r.seq, r.event) for r in recorded] == [(before + 1, pinned)]
    assert writer.history.seq == before + 1  # applied when the append returns
    # The append is a command: behind the commands already queued, refused once closed.
    await running.session.mailbox.close()
    with pytest.raises(trio.ClosedResourceError):
        await writer.append([pinned])


async def test_a_writer_append_waits_behind_queued_commands(autojump_clock: Any) -> None:
    store = SlowStore(delay=1.0)
    async with trio.open_nursery() as nursery:
        running = await start(nursery, ticking(), store)
        writer = SessionWriter(running.session)
        order: list[str] = []

        async def user() -> None:
            await _user(running)
            order.append("user")

        nursery.start_soon(user)
        await trio.sleep(0.1)  # the user message is being written (1 s)
        pinned = MemoryPinned(session_id=SESSION, time_ms=START_MS, text="Use tabs.")
        await writer.append([pinned])
        order.append("writer")
        await running.session.mailbox.close()
    assert order == ["user", "writer"]
    assert store.most_concurrent == 1


class SlowStore(MemoryStore):
    """A memory store whose appends take ``delay`` seconds (on the mock clock) and which
    records how many ran at once."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay
        self.concurrent = 0
        self.most_concurrent = 0

    async def append(
        self,
        stream: str,
        expected_version: int,
        events: Sequence[Event],
        *,
        expected_position: int | None = None,
    ) -> list[RecordedEvent]:
        self.concurrent += 1
        self.most_concurrent = max(self.most_concurrent, self.concurrent)
        try:
            await trio.sleep(self.delay)
            return await super().append(
                stream, expected_version, events, expected_position=expected_position
            )
        finally:
            self.concurrent -= 1


async def test_commands_from_several_tasks_are_serialised(autojump_clock: Any) -> None:
    store = SlowStore(delay=0.5)
    async with trio.open_nursery() as nursery:
        running = await start(nursery, ticking(), store)
        store.most_concurrent = 0

        async def turn(n: int) -> None:
            user = await _user(running, f"task {n}")
            assistant: str = await running.ask(StartAssistant(parent_id=user))
            call: str = await running.ask(CallTool(message_id=assistant, tool="bash"))
            await running.ask(ToolResult(part_id=call, output=f"out {n}"))
            await running.ask(Finish(message_id=assistant, usage=Usage(input=10, output=n)))

        async with trio.open_nursery() as tasks:
            for n in range(8):
                tasks.start_soon(turn, n)
        await running.session.mailbox.close()
    assert store.most_concurrent == 1  # one write at a time, though each takes 0.5 s
    history = running.session.history
    check_history(history)
    recorded = await store.read(SESSION)
    assert [r.seq for r in recorded] == list(range(1, len(recorded) + 1))
    assert history.seq == len(recorded) == 1 + 8 * 9  # 9 events a turn, its usage report too
    assert sum(m.role == "user" for m in history.messages) == 8


# --- secrets in stored error texts ------------------------------------------------------------

KEY = "sk-proj-SECRETSECRET123456"


async def test_a_finish_error_is_stored_with_its_secrets_masked(running: Running) -> None:
    reply = await running.ask(StartAssistant(parent_id=await _user(running)))
    error = MessageError(name="AuthError", message=f"401: invalid api_key={KEY}")
    await running.ask(Finish(message_id=reply, finish="error", error=error))
    masked = MessageError(name="AuthError", message="401: invalid api_key=[redacted]")
    assert running.session.history.message(reply).error == masked
    assert KEY not in repr(await running.written())


async def test_a_tool_error_is_stored_with_its_secrets_masked(running: Running) -> None:
    reply = await running.ask(StartAssistant(parent_id=await _user(running)))
    call = await running.ask(CallTool(message_id=reply, tool="bash"))
    output = f"curl: (22) 403 with header Authorization: Bearer {KEY}"
    await running.ask(ToolResult(part_id=call, output=output, error=True))
    part = running.session.history.part(call)
    assert isinstance(part, ToolPart) and isinstance(part.state, ToolErrored)
    assert part.state.error == "curl: (22) 403 with header Authorization: Bearer [redacted]"
    assert KEY not in repr(await running.written())
