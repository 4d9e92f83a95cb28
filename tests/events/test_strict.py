"""Strict type checks of events and commands: what msgspec Structs do not check when built."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from contextledger.events import (
    DEFAULT_CODEC,
    AssistantFinished,
    InvalidEvent,
    MemoryPinned,
    MessageAdded,
    PartAdded,
    TextPart,
    ToolCompleted,
    ToolOutputCleared,
    ToolStateChanged,
    Usage,
    WrongType,
    strict_copy,
)


def pinned(**fields: Any) -> MemoryPinned:
    return MemoryPinned(**{"session_id": "s", "text": "memory", **fields})


def text_part(**fields: Any) -> PartAdded:
    part = TextPart(**{"id": "prt_1", "message_id": "msg_1", "text": "hi", **fields})
    return PartAdded(session_id="s", part=part)


def finished(**fields: Any) -> AssistantFinished:
    return AssistantFinished(
        **{"session_id": "s", "message_id": "msg_1", "finish": "stop", **fields}
    )


class Text(str):
    """A ``str`` subclass: msgspec cannot encode it, so it could not be stored."""


def added(**fields: Any) -> MessageAdded:
    return MessageAdded(**{"session_id": "s", "message_id": "msg_1", "role": "user", **fields})


def tool_result(**fields: Any) -> ToolStateChanged:
    state = ToolCompleted(**{"output": "ok", **fields})
    return ToolStateChanged(session_id="s", message_id="msg_1", part_id="prt_1", state=state)


# Each: a wrongly typed event, the field the error must name, and words of the reason.
WRONG: list[tuple[str, Any, str, str]] = [
    ("bytes as text", text_part(text=b"hello"), "part.text", "got `bytes`"),
    ("None as a finish reason", finished(finish=None), "finish", "got `None`"),
    ("a role that is none of the roles", added(role="admin"), "role", "'admin'"),
    ("text as time_ms", pinned(time_ms="yesterday"), "time_ms", "got `str`"),
    ("a float as time_ms", pinned(time_ms=1.5), "time_ms", "got `float`"),
    ("a bool as time_ms", pinned(time_ms=True), "time_ms", "got `bool`"),
    ("None as agent_id", pinned(agent_id=None), "agent_id", "got `None`"),
    ("None as a tool output", tool_result(output=None), "state.output", "got `None`"),
    ("text as a usage count", finished(usage=Usage(input="3")), "usage.input", "got `str`"),  # type: ignore[arg-type]
    ("None as usage", finished(usage=None), "usage", "got `None`"),
    ("a bool as a cost", finished(cost=False), "cost", "got `bool`"),
    ("a number as a metadata key", text_part(metadata={1: "x"}), "part.metadata", "(a key)"),
    ("a dict as usage", finished(usage={"input_tokens": 3}), "usage", "got `dict`"),
    ("a dict as a part", PartAdded(session_id="s", part={"kind": "text"}), "part", "missing"),
    ("a str subclass", pinned(text=Text("x")), "text", "cannot be encoded"),
    ("a lone surrogate", pinned(text="\ud800"), "text", "cannot be encoded"),
    ("an int past 64 bits", pinned(time_ms=2**70), "time_ms", "cannot be encoded"),
]


@pytest.mark.parametrize(("case", "event", "field", "words"), WRONG, ids=[w[0] for w in WRONG])
def test_a_wrongly_typed_event_is_refused_naming_its_index_and_field(
    case: str, event: Any, field: str, words: str
) -> None:
    batch = [pinned(), pinned(text="second"), event]
    with pytest.raises(InvalidEvent) as caught:
        DEFAULT_CODEC.typed_copies(batch)
    assert caught.value.index == 2
    assert caught.value.field == field
    assert words in caught.value.reason
    assert f"at batch index 2: {field}: " in str(caught.value)


def test_well_typed_events_come_back_as_equal_copies() -> None:
    batch = [pinned(), text_part(), finished(usage=Usage(input=3, output=1), cost=0.5)]
    assert DEFAULT_CODEC.typed_copies(batch) == batch


def test_copies_are_what_a_read_gives() -> None:
    # An int for a float is widened, a list for a tuple becomes a tuple, as a read decodes
    # them; the projection then holds the same values as one rebuilt from the store.
    loose = [
        finished(cost=1),
        ToolOutputCleared(session_id="s", part_ids=["prt_1"], reason="normal"),  # type: ignore[arg-type]
    ]
    copies = DEFAULT_CODEC.typed_copies(loose)
    assert copies[0].cost == 1.0 and type(copies[0].cost) is float  # type: ignore[union-attr]
    assert copies[1].part_ids == ("prt_1",)  # type: ignore[union-attr]
    assert copies == [msgspec.msgpack.decode(DEFAULT_CODEC.encode(e), type=type(e)) for e in loose]


def test_a_dict_that_encodes_as_the_struct_would_is_taken_as_that_struct() -> None:
    # The bytes are exactly the struct's: nothing is lost, and the copy holds a Usage.
    (copy,) = DEFAULT_CODEC.typed_copies([finished(usage={"input": 3})])
    assert copy.usage == Usage(input=3)  # type: ignore[union-attr]


def test_an_object_that_is_no_event_is_refused_naming_its_index() -> None:
    as_dict = {"type": "memory.pinned", "session_id": "s", "text": "x"}
    with pytest.raises(InvalidEvent, match="at batch index 1: not an event type") as caught:
        DEFAULT_CODEC.typed_copies([pinned(), as_dict])
    assert caught.value.event_type == "dict"


def test_an_empty_batch_is_fine() -> None:
    assert DEFAULT_CODEC.typed_copies([]) == []


def test_strict_copy_names_the_field_of_any_struct() -> None:
    with pytest.raises(WrongType) as caught:
        strict_copy(Usage(output=b"7"))  # type: ignore[arg-type]
    assert (caught.value.field, caught.value.reason) == ("output", "Expected `int`, got `bytes`")
    assert strict_copy(Usage(output=7)) == Usage(output=7)


def test_strict_copy_names_the_deepest_unencodable_value() -> None:
    with pytest.raises(WrongType) as caught:
        strict_copy(text_part(metadata={"a": {"b": [1, object()]}}))
    assert caught.value.field == "part.metadata['a']['b'][1]"
    assert caught.value.reason.startswith("cannot be encoded: ")
