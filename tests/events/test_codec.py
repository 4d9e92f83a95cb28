"""The event codec: every event type survives encoding, bytes that cannot be an event are
refused with an error naming where they are stored, and older versions are upcast."""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec
import pytest

from contextledger.events import (
    DEFAULT_CODEC,
    EVENT_TYPES,
    AgentPart,
    AssistantFinished,
    CompactionCompleted,
    CompactionProjection,
    CompactionRequested,
    CompactionRolledBack,
    EnvironmentCaptured,
    EventBase,
    EventCodec,
    EventDecodeError,
    EventEncodeError,
    FilePart,
    FileRange,
    InputLeftOut,
    InstructionLoaded,
    LeftOut,
    MemoryPinned,
    MessageAdded,
    MessageError,
    ModelRef,
    PartAdded,
    PartsStripped,
    PartUpdated,
    PrefixAdvanced,
    PrefixPinned,
    PrefixProfile,
    PrefixRotated,
    PromptMeasure,
    ReasoningPart,
    RequestSent,
    RetryPart,
    SessionStarted,
    StepFinishPart,
    StepStartPart,
    SubtaskPart,
    TextPart,
    ToolCompleted,
    ToolErrored,
    ToolOutputCleared,
    ToolOutputTrimmed,
    ToolPart,
    ToolPending,
    ToolRunning,
    ToolStateChanged,
    UpcasterRegistry,
    Usage,
    UsageReported,
    event_tag,
)

S = "ses_1"
MODEL = ModelRef(provider_id="anthropic", model_id="claude-sonnet", variant="thinking")
PROFILE = PrefixProfile(
    provider_id="anthropic",
    model_id="claude-sonnet",
    agent="build",
    system_mode="anthropic",
    system=("You are a coding agent.", "Environment: linux"),
    tools=("bash", "read", "edit"),
    permissions={"bash": "ask", "edit": {"*.py": "allow"}},
)

#: One example of every event type, with optional fields set and nested values filled in.
EXAMPLES: dict[type[EventBase], EventBase] = {
    SessionStarted: SessionStarted(
        session_id=S,
        agent_id="main",
        time_ms=1_700_000_000_000,
        title="Fix the failing test — ünïcode ✓",
        model=MODEL,
        agent="build",
        parent_session_id="ses_0",
        config={"prune": {"minimum": 20_000, "protect": 40_000}, "factor": 1.3, "on": True},
    ),
    MessageAdded: MessageAdded(
        session_id=S,
        agent_id="sub-1",
        message_id="msg_2",
        role="assistant",
        parent_id="msg_1",
        agent="explore",
        model=MODEL,
        summary=True,
        synthetic=True,
    ),
    PartAdded: PartAdded(
        session_id=S,
        part=ToolPart(
            id="prt_1",
            message_id="msg_2",
            call_id="toolu_1",
            tool="read",
            state=ToolCompleted(
                input={"path": "a.py", "offset": 10},
                output="line\n" * 500,
                title="a.py",
                metadata={"truncated": False},
                started_ms=1,
                ended_ms=2,
                attachments=(
                    FilePart(
                        id="prt_2",
                        message_id="msg_2",
                        mime="image/png",
                        url="data:image/png;base64,iVBORw0KGgo=",
                        filename="shot.png",
                        source_path="/tmp/shot.png",
                    ),
                ),
                compacted_ms=3,
                compacted_reason="normal",
                trimmed=(100, 200),
            ),
            provider_executed=True,
        ),
    ),
    PartUpdated: PartUpdated(
        session_id=S,
        part=ReasoningPart(
            id="prt_3",
            message_id="msg_2",
            text="thinking about it",
            metadata={"anthropic": {"signature": "c2ln"}},
        ),
    ),
    ToolStateChanged: ToolStateChanged(
        session_id=S,
        message_id="msg_2",
        part_id="prt_1",
        state=ToolErrored(
            input={"cmd": "make"},
            error="killed",
            interrupted=True,
            partial_output="building...",
            synthetic=True,
            started_ms=5,
            ended_ms=9,
        ),
    ),
    AssistantFinished: AssistantFinished(
        session_id=S,
        message_id="msg_2",
        finish="error",
        usage=Usage(input=1200, output=300, reasoning=50, cache_read=40_000, cache_write=800),
        cost=0.0421,
        error=MessageError(name="ContextOverflowError", message="too long", retryable=False),
    ),
    ToolOutputCleared: ToolOutputCleared(
        session_id=S, time_ms=7, part_ids=("prt_1", "prt_4"), reason="payload-limit"
    ),
    ToolOutputTrimmed: ToolOutputTrimmed(
        session_id=S, part_id="prt_1", head_chars=2000, tail_chars=500
    ),
    PartsStripped: PartsStripped(
        session_id=S, time_ms=8, part_ids=("prt_2", "prt_3"), reason="pressure"
    ),
    CompactionRequested: CompactionRequested(
        session_id=S,
        message_id="msg_3",
        part_id="prt_5",
        auto=True,
        overflow=True,
        trigger="overflow",
        parent_id="msg_2",
    ),
    CompactionCompleted: CompactionCompleted(
        session_id=S,
        request_message_id="msg_3",
        summary_message_id="msg_4",
        tail_start_id="msg_2",
        projection=CompactionProjection(
            summary="## Goal\nFix the test",
            head_first_id="msg_1",
            head_last_id="msg_1",
            file_manifest=(
                FileRange(path="a.py", action="read", ranges=((1, 40), (90, 120))),
                FileRange(path="b.py", action="write"),
            ),
            template="kilo",
        ),
    ),
    CompactionRolledBack: CompactionRolledBack(
        session_id=S, request_message_id="msg_3", reason="repetitive", detail="same summary"
    ),
    EnvironmentCaptured: EnvironmentCaptured(
        session_id=S, user_message_id="msg_1", text="<env>cwd: /repo</env>"
    ),
    MemoryPinned: MemoryPinned(session_id=S, text="Prefer small diffs."),
    InstructionLoaded: InstructionLoaded(
        session_id=S,
        path="src/AGENTS.md",
        text="Run make test.",
        source="directory",
        message_id="msg_2",
    ),
    PrefixPinned: PrefixPinned(session_id=S, key="a" * 64, profile=PROFILE),
    PrefixRotated: PrefixRotated(
        session_id=S, key="b" * 64, profile=PROFILE, reason="tools changed"
    ),
    PrefixAdvanced: PrefixAdvanced(session_id=S, key="b" * 64, message_id="msg_4"),
    RequestSent: RequestSent(
        session_id=S,
        provider_id="anthropic",
        model_id="claude-sonnet",
        prefix_hash="c" * 64,
        body_hash="d" * 64,
        body_bytes=123_456,
        estimated_tokens=30_000,
        breakpoints=(0, 3, 17),
        last_message_id="msg_4",
    ),
    UsageReported: UsageReported(
        session_id=S, message_id="msg_2", usage=Usage(input=10, output=2), estimated_tokens=11
    ),
    InputLeftOut: InputLeftOut(
        session_id=S,
        source="t.jsonl",
        items=(
            LeftOut(line=3, kind="orphan_tool_result", reason="no call", field="content[0]"),
            LeftOut(line=7, kind="progress", reason="not a message"),
        ),
    ),
}

#: Every other part and tool state, carried by ``part.added`` / ``tool.state_changed``.
PART_EXAMPLES = [
    TextPart(id="prt_a", message_id="m", text="hi", synthetic=True, ignored=True, metadata={}),
    StepStartPart(id="prt_b", message_id="m", snapshot="abc"),
    StepFinishPart(id="prt_c", message_id="m", reason="tool-calls", usage=Usage(input=1)),
    SubtaskPart(
        id="prt_d",
        message_id="m",
        prompt="look",
        description="explore",
        agent="explore",
        model=MODEL,
        command="/explore",
        child_session_id="ses_2",
    ),
    AgentPart(id="prt_e", message_id="m", name="plan"),
    RetryPart(id="prt_f", message_id="m", attempt=2, error="overloaded"),
    ToolPart(id="prt_g", message_id="m", call_id="c", tool="bash", state=ToolPending(raw="{")),
    ToolPart(
        id="prt_h",
        message_id="m",
        call_id="d",
        tool="bash",
        state=ToolRunning(input={"cmd": "ls"}, title="ls", started_ms=1),
    ),
]


def round_trip(event: EventBase, codec: EventCodec = DEFAULT_CODEC) -> EventBase:
    return codec.decode(codec.tag_of(event), event.v, codec.encode(event))


def test_there_is_an_example_of_every_event_type() -> None:
    assert set(EXAMPLES) == set(EVENT_TYPES)


@pytest.mark.parametrize("event", EXAMPLES.values(), ids=lambda e: event_tag(type(e)))
def test_every_event_type_round_trips(event: EventBase) -> None:
    assert round_trip(event) == event


@pytest.mark.parametrize("part", PART_EXAMPLES, ids=lambda p: f"{type(p).__name__}")
def test_every_part_kind_round_trips(part: Any) -> None:
    event = PartAdded(session_id=S, part=part)

    assert round_trip(event) == event


@pytest.mark.parametrize("event", EXAMPLES.values(), ids=lambda e: event_tag(type(e)))
def test_an_event_is_stored_under_its_tag_and_current_version(event: EventBase) -> None:
    tag = DEFAULT_CODEC.tag_of(event)

    assert tag == event_tag(type(event))
    assert DEFAULT_CODEC.version_of(tag) == event.v == type(event).VERSION


def test_the_tag_is_part_of_the_encoded_bytes() -> None:
    raw = msgspec.msgpack.decode(DEFAULT_CODEC.encode(EXAMPLES[MemoryPinned]))

    assert raw["type"] == "memory.pinned"


@pytest.mark.parametrize("reserve", [0, 24])
def test_a_batch_is_encoded_into_one_buffer_as_each_event_alone(reserve: int) -> None:
    events = list(EXAMPLES.values())
    batch = DEFAULT_CODEC.encode_batch(events, reserve)
    datas = [DEFAULT_CODEC.encode(event) for event in events]

    assert batch.data == bytes(reserve) + b"".join(datas)
    assert batch.datas() == datas
    assert batch.lengths == list(map(len, datas))
    assert batch.versions == [event.v for event in events]
    assert batch.nbytes == sum(map(len, datas))


def test_an_event_of_a_batch_that_cannot_be_encoded_is_named() -> None:
    bad = MemoryPinned(session_id=S, text=object())  # type: ignore[arg-type]

    with pytest.raises(EventEncodeError, match=r"memory\.pinned"):
        DEFAULT_CODEC.encode_batch([EXAMPLES[PartAdded], bad])
    with pytest.raises(EventEncodeError, match="not an event type"):
        DEFAULT_CODEC.encode_batch([EXAMPLES[PartAdded], object()])  # type: ignore[list-item]


# --- what cannot be decoded ---------------------------------------------------------------


def decode_error(tag: str, version: int, data: bytes, codec: EventCodec = DEFAULT_CODEC) -> str:
    """Decode at stream "s" position 42; return the error's message after checking it names
    both."""
    with pytest.raises(EventDecodeError) as caught:
        codec.decode(tag, version, data, stream="s", position=42)
    assert (caught.value.stream, caught.value.position) == ("s", 42)
    message = str(caught.value)
    assert "'s'" in message
    assert "42" in message
    return message


def test_an_unknown_type_raises_decode_error_naming_stream_and_position() -> None:
    message = decode_error("no.such.event", 1, DEFAULT_CODEC.encode(EXAMPLES[MemoryPinned]))

    assert "no.such.event" in message


@pytest.mark.parametrize(
    "data",
    [b"", b"\xc1", b"\x92\x01\x02", b"\x81\xa4type\xadmemory.pinned"],
    ids=["empty", "reserved-byte", "not-a-map", "missing-fields"],
)
def test_malformed_bytes_raise_decode_error_naming_stream_and_position(data: bytes) -> None:
    decode_error("memory.pinned", 1, data)


def test_a_field_of_the_wrong_type_raises_decode_error() -> None:
    data = msgspec.msgpack.encode({"type": "memory.pinned", "session_id": "s", "text": 7})

    decode_error("memory.pinned", 1, data)


def test_a_version_newer_than_the_codec_knows_raises_decode_error() -> None:
    message = decode_error("memory.pinned", 2, DEFAULT_CODEC.encode(EXAMPLES[MemoryPinned]))

    assert "newer" in message


# --- upcasting ----------------------------------------------------------------------------


class NoteTaken(EventBase, tag="test.note_taken", frozen=True):
    """A test-only event at version 3. v1 held ``body``; v2 renamed it ``text``; v3 added
    ``author``."""

    VERSION: ClassVar[int] = 3

    text: str
    author: str


TAG = "test.note_taken"
V1 = msgspec.msgpack.encode({"type": TAG, "session_id": "s", "body": "hello"})
V2 = msgspec.msgpack.encode({"type": TAG, "session_id": "s", "text": "hello"})


def rename_body(raw: dict[str, Any]) -> dict[str, Any]:
    raw = dict(raw)
    raw["text"] = raw.pop("body")
    return raw


def add_author(raw: dict[str, Any]) -> dict[str, Any]:
    return {**raw, "author": "unknown"}


def codec_with(upcasters: dict[tuple[str, int], Any]) -> EventCodec:
    return EventCodec(
        NoteTaken | MemoryPinned, (NoteTaken, MemoryPinned), UpcasterRegistry(upcasters)
    )


FULL_CHAIN = {(TAG, 1): rename_body, (TAG, 2): add_author}


def test_an_event_of_the_current_version_decodes_without_upcasting() -> None:
    event = NoteTaken(session_id="s", text="hi", author="me")

    assert round_trip(event, codec_with({})) == event


def test_an_older_version_is_upcast_through_every_step() -> None:
    event = codec_with(FULL_CHAIN).decode(TAG, 1, V1)

    assert event == NoteTaken(session_id="s", text="hello", author="unknown")


def test_upcasting_starts_at_the_stored_version() -> None:
    # v2 bytes have no "body": running the v1 step on them would fail.
    event = codec_with(FULL_CHAIN).decode(TAG, 2, V2)

    assert event == NoteTaken(session_id="s", text="hello", author="unknown")


def test_a_missing_upcaster_raises_decode_error_naming_the_step() -> None:
    message = decode_error(TAG, 1, V1, codec_with({(TAG, 1): rename_body}))

    assert "from v2" in message


def test_an_upcaster_producing_the_wrong_shape_raises_decode_error() -> None:
    decode_error(TAG, 2, V2, codec_with({(TAG, 2): lambda raw: raw}))  # no "author"


def test_malformed_bytes_of_an_older_version_raise_decode_error() -> None:
    decode_error(TAG, 1, b"\xc1", codec_with(FULL_CHAIN))


def test_an_upcaster_that_fails_raises_decode_error() -> None:
    # EventDecodeError's contract: "... or an upcaster that failed", whatever it raised.
    def broken(raw: dict[str, Any]) -> dict[str, Any]:
        raise ValueError("cannot upcast this one")

    decode_error(TAG, 2, V2, codec_with({(TAG, 2): broken}))


def test_registering_a_second_upcaster_for_the_same_step_raises() -> None:
    registry = UpcasterRegistry()
    registry.register(TAG, 1)(rename_body)

    with pytest.raises(ValueError, match="registered already"):
        registry.register(TAG, 1)(rename_body)


def test_registered_upcasters_chain_in_version_order() -> None:
    registry = UpcasterRegistry()
    registry.register(TAG, 2)(add_author)
    registry.register(TAG, 1)(rename_body)

    assert registry.upcast(TAG, 1, 3, {"body": "x"}) == {"text": "x", "author": "unknown"}


def test_a_version_1_prefix_event_reads_as_version_2_with_no_tool_table() -> None:
    profile = PrefixProfile(
        provider_id="anthropic",
        model_id="m",
        agent="build",
        system_mode="default",
        system=("s",),
        tools=("read",),
    )
    for event in (
        PrefixPinned(session_id=S, key="k", profile=profile),
        PrefixRotated(session_id=S, key="k", profile=profile, reason="tools"),
    ):
        raw = msgspec.msgpack.decode(DEFAULT_CODEC.encode(event))
        raw.pop("tool_table", None)
        decoded = DEFAULT_CODEC.decode(DEFAULT_CODEC.tag_of(event), 1, msgspec.msgpack.encode(raw))
        assert decoded == event
        assert decoded.v == 2 and decoded.tool_table == ()


#: A request sent, as version 1 stored it (no measure, no tool choice).
SENT = RequestSent(
    session_id=S,
    provider_id="anthropic",
    model_id="m",
    prefix_hash="p",
    body_hash="b",
    body_bytes=10,
    estimated_tokens=3,
)


def test_a_version_1_request_sent_reads_as_the_current_version_without_a_measure() -> None:
    raw = msgspec.msgpack.decode(DEFAULT_CODEC.encode(SENT))
    assert "measure" not in raw
    decoded = DEFAULT_CODEC.decode(DEFAULT_CODEC.tag_of(SENT), 1, msgspec.msgpack.encode(raw))
    assert decoded == SENT
    assert decoded.v == RequestSent.VERSION and decoded.measure is None


def test_a_version_2_request_sent_reads_as_version_3_with_its_tool_choice_unset() -> None:
    event = msgspec.structs.replace(SENT, measure=PromptMeasure(text_chars=40))
    raw = msgspec.msgpack.decode(DEFAULT_CODEC.encode(event))
    assert "tool_choice" not in raw
    decoded = DEFAULT_CODEC.decode(DEFAULT_CODEC.tag_of(event), 2, msgspec.msgpack.encode(raw))
    assert decoded == event
    assert decoded.v == 3 and decoded.tool_choice is None
    chosen = msgspec.structs.replace(event, tool_choice="none")
    assert DEFAULT_CODEC.decode(DEFAULT_CODEC.tag_of(chosen), 3, DEFAULT_CODEC.encode(chosen)) == (
        chosen
    )
