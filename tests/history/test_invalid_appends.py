"""Property: an invalid event anywhere in a batch rejects the whole batch before anything is
written; the store's files stay byte-identical and the projection unchanged. The invalid
events refer to things that do not exist, or change things that do in ways that may not (or
no longer) happen: a second result, a cleared output trimmed or cleared again, a part stripped
again or one that is neither a file nor reasoning, a result routed to another message, a
message finished twice, a closed compaction completed."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import event as hypothesis_event
from hypothesis import strategies as st

from contextledger.events import (
    AssistantFinished,
    CompactionCompleted,
    CompactionProjection,
    CompactionRequested,
    CompactionRolledBack,
    EnvironmentCaptured,
    Event,
    FilePart,
    InvalidEvent,
    MemoryPinned,
    MessageAdded,
    Part,
    PartAdded,
    PartsStripped,
    PartUpdated,
    RecordedEvent,
    SessionStarted,
    StepStartPart,
    TextPart,
    ToolCompleted,
    ToolErrored,
    ToolOutputCleared,
    ToolOutputTrimmed,
    ToolPart,
    ToolPending,
    ToolStateChanged,
    struct_tag,
)
from contextledger.history import History, validate_events
from contextledger.ledger import SessionLog
from contextledger.store import SQLiteStore
from contextledger.testing import session_events
from contextledger.testing._builder import SessionBuilder

_NO_MESSAGE = "msg_ffffffffffffffffff"
_NO_PART = "prt_ffffffffffffffffff"

_BAD_EVENTS: list[Event] = [
    ToolStateChanged(
        session_id="ses_test", message_id=_NO_MESSAGE, part_id=_NO_PART, state=ToolCompleted()
    ),
    ToolOutputCleared(session_id="ses_test", part_ids=(_NO_PART,), reason="normal"),
    ToolOutputTrimmed(session_id="ses_test", part_id=_NO_PART, head_chars=1, tail_chars=1),
    PartsStripped(session_id="ses_test", part_ids=(_NO_PART,), reason="pressure"),
    PartUpdated(
        session_id="ses_test", part=TextPart(id=_NO_PART, message_id=_NO_MESSAGE, text="x")
    ),
    PartAdded(
        session_id="ses_test",
        part=TextPart(id="prt_fffffffffffffffffe", message_id=_NO_MESSAGE, text="x"),
    ),
    AssistantFinished(session_id="ses_test", message_id=_NO_MESSAGE, finish="stop"),
    SessionStarted(session_id="ses_test"),
    MessageAdded(session_id="ses_other", message_id=_NO_MESSAGE, role="user"),
    CompactionCompleted(
        session_id="ses_test",
        request_message_id=_NO_MESSAGE,
        summary_message_id=_NO_MESSAGE,
        tail_start_id=None,
        projection=CompactionProjection(summary="s"),
    ),
]


def _backwards_ids(prefix: list[Event]) -> list[Event]:
    """A message and a part whose ids do not follow the greatest ones of ``prefix``."""
    messages = [e.message_id for e in prefix if isinstance(e, MessageAdded)]
    parts = [e.part for e in prefix if isinstance(e, PartAdded)]
    bad: list[Event] = []
    if messages:
        bad.append(MessageAdded(session_id="ses_test", message_id=messages[0], role="user"))
    if parts:
        old = parts[0]
        bad.append(
            PartAdded(
                session_id="ses_test",
                part=TextPart(id=old.id, message_id=old.message_id, text="again"),
            )
        )
    return bad


def _files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.parent.glob(path.name + "*"))}


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session_events(), st.data())
def test_invalid_appends_leave_the_store_byte_identical(
    events: list[Event], data: st.DataObject
) -> None:
    cut = data.draw(st.integers(1, len(events)), label="valid prefix")
    lead = data.draw(st.integers(0, len(events) - cut), label="valid events before the bad one")
    bad = data.draw(st.sampled_from(_BAD_EVENTS + _backwards_ids(events[:cut])), label="bad")
    batch = [*events[cut : cut + lead], bad]

    async def run(path: Path) -> None:
        async with SQLiteStore.open(path) as store:
            log = await SessionLog.open(store, "ses_test")
            await log.append(events[:cut])
            before_files = _files(path)
            before_state = log.history.snapshot()
            with pytest.raises(InvalidEvent) as caught:
                await log.append(batch)
            assert caught.value.index == lead
            assert _files(path) == before_files
            assert log.history.snapshot() == before_state
            assert await store.stream_version("ses_test") == cut

    with tempfile.TemporaryDirectory() as tmp:
        trio.run(run, Path(tmp) / "s.db")


# --- illegal changes to things that do exist ----------------------------------------------------


def _rejected_without_a_trace(prefix: list[Event], batch: list[Event], index: int) -> None:
    """Append ``prefix``, then ``batch``: the batch must be rejected at ``index`` (as the
    event type found there) with the store's files byte-identical and the projection
    unchanged."""

    async def run(path: Path) -> None:
        async with SQLiteStore.open(path) as store:
            log = await SessionLog.open(store, "ses_test")
            await log.append(prefix)
            before_files = _files(path)
            before_state = log.history.snapshot()
            with pytest.raises(InvalidEvent) as caught:
                await log.append(batch)
            assert caught.value.index == index
            assert caught.value.event_type == struct_tag(batch[index])
            assert _files(path) == before_files
            assert log.history.snapshot() == before_state
            assert await store.stream_version("ses_test") == len(prefix)

    with tempfile.TemporaryDirectory() as tmp:
        trio.run(run, Path(tmp) / "s.db")


def _existing_session() -> tuple[SessionBuilder, dict[str, str]]:
    """A session with a completed call, a cleared one, a pending one, a stripped reasoning
    part, two finished assistant messages and a rolled-back compaction whose summary was
    written."""
    b = SessionBuilder()
    user = b.user("go", files=[("image/png", "a.png")])
    (image,) = [
        e.part.id for e in b.events if isinstance(e, PartAdded) and isinstance(e.part, FilePart)
    ]
    reply = b.assistant(user)
    thought = b.reasoning(reply, "thinking")
    b.strip([thought])
    done = b.tool_call(reply, "bash")
    b.tool_result(done, "ok")
    cleared = b.tool_call(reply, "read")
    b.tool_result(cleared, "x" * 5000)
    waiting = b.tool_call(reply, "grep")
    b.finish(reply, "tool-calls")
    b.prune([cleared])
    other = b.assistant(user)
    b.text(other, "done")
    b.finish(other)
    request = b.request_compaction(parent_id=user)
    summary = b.summary(request, "## Goal\nrepetitive")
    b.roll_back(request, "repetitive")
    ids = {
        "reply": reply,
        "done": done,
        "image": image,
        "thought": thought,
        "cleared": cleared,
        "waiting": waiting,
        "other": other,
        "request": request,
        "summary": summary,
    }
    return b, ids


_ILLEGAL_CHANGES: dict[str, Callable[[dict[str, str]], Event]] = {
    "a second result for a completed call": lambda ids: ToolStateChanged(
        session_id="ses_test",
        message_id=ids["reply"],
        part_id=ids["done"],
        state=ToolCompleted(output="again"),
    ),
    "an error after a call completed": lambda ids: ToolStateChanged(
        session_id="ses_test",
        message_id=ids["reply"],
        part_id=ids["done"],
        state=ToolErrored(error="late"),
    ),
    "a result for a cleared call": lambda ids: ToolStateChanged(
        session_id="ses_test",
        message_id=ids["reply"],
        part_id=ids["cleared"],
        state=ToolCompleted(output="again"),
    ),
    "trimming a cleared output": lambda ids: ToolOutputTrimmed(
        session_id="ses_test", part_id=ids["cleared"], head_chars=10, tail_chars=10
    ),
    "clearing a cleared output": lambda ids: ToolOutputCleared(
        session_id="ses_test", part_ids=(ids["cleared"],), reason="normal"
    ),
    "clearing a pending call": lambda ids: ToolOutputCleared(
        session_id="ses_test", part_ids=(ids["waiting"],), reason="normal"
    ),
    "stripping a stripped part": lambda ids: PartsStripped(
        session_id="ses_test", part_ids=(ids["thought"],), reason="pressure"
    ),
    "stripping a tool call": lambda ids: PartsStripped(
        session_id="ses_test", part_ids=(ids["done"],), reason="pressure"
    ),
    "stripping a part twice at once": lambda ids: PartsStripped(
        session_id="ses_test", part_ids=(ids["image"], ids["image"]), reason="pressure"
    ),
    "stripping nothing": lambda ids: PartsStripped(
        session_id="ses_test", part_ids=(), reason="pressure"
    ),
    "a result on another message's call": lambda ids: ToolStateChanged(
        session_id="ses_test",
        message_id=ids["other"],
        part_id=ids["waiting"],
        state=ToolCompleted(output="misrouted"),
    ),
    "finishing an assistant message twice": lambda ids: AssistantFinished(
        session_id="ses_test", message_id=ids["reply"], finish="stop"
    ),
    "finishing a summary twice": lambda ids: AssistantFinished(
        session_id="ses_test", message_id=ids["summary"], finish="stop"
    ),
    "completing a rolled-back compaction": lambda ids: CompactionCompleted(
        session_id="ses_test",
        request_message_id=ids["request"],
        summary_message_id=ids["summary"],
        tail_start_id=None,
        projection=CompactionProjection(summary="## Goal\nrepetitive"),
    ),
    "rolling back a rolled-back compaction": lambda ids: CompactionRolledBack(
        session_id="ses_test", request_message_id=ids["request"], reason="empty"
    ),
    "a tool call on a message that finished": lambda ids: PartAdded(
        session_id="ses_test",
        part=ToolPart(
            id=_NO_PART, message_id=ids["other"], call_id="late", tool="bash", state=ToolPending()
        ),
    ),
    "a new step on a message that finished calling tools": lambda ids: PartAdded(
        session_id="ses_test", part=StepStartPart(id=_NO_PART, message_id=ids["reply"])
    ),
    "an answer to an assistant message": lambda ids: MessageAdded(
        session_id="ses_test", message_id=_NO_MESSAGE, role="assistant", parent_id=ids["other"]
    ),
}


@pytest.mark.parametrize("change", list(_ILLEGAL_CHANGES))
@pytest.mark.parametrize("lead", [0, 2])
def test_an_illegal_change_to_something_that_exists_is_rejected(change: str, lead: int) -> None:
    b, ids = _existing_session()
    valid_lead = [
        MessageAdded(
            session_id="ses_test",
            message_id=b.new_message_id(),
            role="user",
            agent="main",
            model=b.model,
        )
        for _ in range(lead)
    ]
    bad = _ILLEGAL_CHANGES[change](ids)
    _rejected_without_a_trace(b.events, [*valid_lead, bad], lead)


def test_the_misrouted_result_is_rejected_only_for_its_message() -> None:
    b, ids = _existing_session()
    right = ToolStateChanged(
        session_id="ses_test",
        message_id=ids["reply"],
        part_id=ids["waiting"],
        state=ToolCompleted(output="ok"),
    )
    validate_events(History.rebuild("ses_test", _recorded(b.events)).index, [right])


def _recorded(events: list[Event]) -> list[RecordedEvent]:
    return [RecordedEvent("ses_test", i, i, e) for i, e in enumerate(events, 1)]


def _illegal_changes(prefix: list[Event]) -> dict[str, list[Event]]:
    """Changes to what ``prefix`` made that may not (or no longer) happen, by kind, built from
    the events themselves (not from the validator's index). Every fact they rely on only
    ever becomes more final, so they stay illegal after any valid continuation."""
    tools: dict[str, tuple[str, str]] = {}
    calls: dict[str, str] = {}
    messages: dict[str, str] = {}
    finished: dict[str, str] = {}
    #: Assistant messages, and user messages by their agent.
    assistants: list[str] = []
    users: dict[str, str] = {}
    compactions: dict[str, str] = {}
    summaries: dict[str, str] = {}
    environment: list[str] = []
    stripped: list[str] = []
    memory = False
    for event in prefix:
        match event:
            case MessageAdded():
                messages[event.message_id] = event.role
                if event.role == "assistant":
                    assistants.append(event.message_id)
                else:
                    users[event.message_id] = event.agent_id
                if event.summary and event.parent_id is not None:
                    summaries[event.parent_id] = event.message_id
            case CompactionRequested():
                messages[event.message_id] = "user"
                compactions[event.message_id] = "requested"
            case PartAdded(part=ToolPart() as part):
                tools[part.id] = (part.message_id, struct_tag(part.state))
                calls[part.call_id] = part.message_id
            case ToolStateChanged():
                tools[event.part_id] = (event.message_id, struct_tag(event.state))
            case ToolOutputCleared():
                for part_id in event.part_ids:
                    tools[part_id] = (tools[part_id][0], "cleared")
            case PartsStripped():
                stripped.extend(event.part_ids)
            case AssistantFinished():
                finished[event.message_id] = event.finish
            case CompactionCompleted():
                compactions[event.request_message_id] = "completed"
            case CompactionRolledBack():
                compactions[event.request_message_id] = "rolled_back"
            case EnvironmentCaptured():
                environment.append(event.user_message_id)
            case MemoryPinned():
                memory = True
            case _:
                pass
    s = "ses_test"
    bad: dict[str, list[Event]] = {}
    for part_id, (message_id, status) in tools.items():
        if status in ("completed", "error", "cleared"):
            bad.setdefault("second result", []).append(
                ToolStateChanged(
                    session_id=s,
                    message_id=message_id,
                    part_id=part_id,
                    state=ToolCompleted(output="again"),
                )
            )
        if status == "cleared":
            bad.setdefault("cleared again", []).extend(
                [
                    ToolOutputCleared(session_id=s, part_ids=(part_id,), reason="normal"),
                    ToolOutputTrimmed(session_id=s, part_id=part_id, head_chars=1, tail_chars=1),
                ]
            )
        elif status == "error":
            bad.setdefault("no output to clear", []).append(
                ToolOutputCleared(session_id=s, part_ids=(part_id,), reason="normal")
            )
        if status in ("pending", "running"):
            elsewhere = next((m for m in messages if m != message_id), None)
            if elsewhere is not None:
                bad.setdefault("result on another message", []).append(
                    ToolStateChanged(
                        session_id=s,
                        message_id=elsewhere,
                        part_id=part_id,
                        state=ToolCompleted(output="misrouted"),
                    )
                )
    for call_id, message_id in calls.items():
        bad.setdefault("call id reused", []).append(
            PartAdded(
                session_id=s,
                part=ToolPart(
                    id="prt_fffffffffffffffffe",
                    message_id=message_id,
                    call_id=call_id,
                    tool="bash",
                    state=ToolPending(),
                ),
            )
        )
    for message_id, finish in finished.items():
        bad.setdefault("finished twice", []).append(
            AssistantFinished(session_id=s, message_id=message_id, finish="stop")
        )
        # A message that finished calling tools takes later blocks (an importer's), no step.
        late: list[Part] = [StepStartPart(id="prt_fffffffffffffffffe", message_id=message_id)]
        if finish != "tool-calls":
            late.append(TextPart(id="prt_fffffffffffffffffe", message_id=message_id, text="late"))
            late.append(
                ToolPart(
                    id="prt_fffffffffffffffffe",
                    message_id=message_id,
                    call_id="late",
                    tool="bash",
                    state=ToolPending(),
                )
            )
        bad.setdefault("part on a finished message", []).extend(
            PartAdded(session_id=s, part=part) for part in late
        )
    answer = {"session_id": s, "message_id": "msg_fffffffffffffffffe", "role": "assistant"}
    for message_id in assistants:
        bad.setdefault("answer to an assistant message", []).append(
            MessageAdded(**answer, parent_id=message_id)
        )
    for message_id, agent_id in users.items():
        other = "explore" if agent_id == "main" else "main"
        bad.setdefault("answer to another agent", []).append(
            MessageAdded(**answer, parent_id=message_id, agent_id=other)
        )
    for request_id, status in compactions.items():
        if status == "requested":
            continue
        bad.setdefault(f"{status} compaction changed", []).extend(
            [
                CompactionCompleted(
                    session_id=s,
                    request_message_id=request_id,
                    summary_message_id=summaries.get(request_id, request_id),
                    tail_start_id=None,
                    projection=CompactionProjection(summary="s"),
                ),
                CompactionRolledBack(session_id=s, request_message_id=request_id, reason="empty"),
            ]
        )
    for user_id in environment:
        bad.setdefault("environment captured twice", []).append(
            EnvironmentCaptured(session_id=s, user_message_id=user_id, text="again")
        )
    if memory:
        bad["memory pinned twice"] = [MemoryPinned(session_id=s, text="again")]
    if stripped:
        bad["stripped again"] = [
            PartsStripped(session_id=s, part_ids=(part_id,), reason="pressure")
            for part_id in stripped
        ]
    if tools:
        bad["a tool call stripped"] = [
            PartsStripped(session_id=s, part_ids=(part_id,), reason="pressure") for part_id in tools
        ]
    return bad


#: The kinds ``_illegal_changes`` makes, the rarest first (hypothesis favours early choices).
_RARE_FIRST = [
    "stripped again",
    "answer to another agent",
    "cleared again",
    "rolled_back compaction changed",
    "second result",
    "result on another message",
    "completed compaction changed",
    "no output to clear",
    "finished twice",
    "part on a finished message",
    "answer to an assistant message",
    "environment captured twice",
    "memory pinned twice",
    "call id reused",
    "a tool call stripped",
]


@settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(session_events(), st.data())
def test_illegal_changes_to_the_sessions_own_facts_leave_the_store_byte_identical(
    events: list[Event], data: st.DataObject
) -> None:
    # Counted from the end, so that long prefixes (with more to change) come first.
    cut = len(events) - data.draw(st.integers(0, len(events) - 1), label="events not in prefix")
    candidates = _illegal_changes(events[:cut])
    assume(candidates)
    kind = data.draw(st.sampled_from(sorted(candidates, key=_RARE_FIRST.index)), label="kind")
    hypothesis_event(kind)
    bad = data.draw(st.sampled_from(candidates[kind]), label="bad")
    lead = data.draw(st.integers(0, len(events) - cut), label="valid events before the bad one")
    _rejected_without_a_trace(events[:cut], [*events[cut : cut + lead], bad], lead)
