"""Builders, parsers and checks the per-format tests share (the golden-file check is
``harness.check_golden``)."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from contextledger.events._parts import ModelRef
from contextledger.providers._base import WireFormat
from contextledger.vocabulary._messages import ModelContent, ModelMessage, ModelRole, ModelText
from contextledger.vocabulary._requests import CacheMark, Request
from tests.providers.fixtures import golden_request

#: The ``cache_control`` of a mark without a lifetime.
EPHEMERAL = {"type": "ephemeral"}


def view_message(role: ModelRole, *content: ModelContent, source_id: str = "m") -> ModelMessage:
    """A view message of ``content``."""
    return ModelMessage(role=role, content=content, source_id=source_id)


def text_message(role: ModelRole, value: str, source_id: str = "m") -> ModelMessage:
    """A view message holding one text part."""
    return view_message(role, ModelText(text=value), source_id=source_id)


def small_request(model: ModelRef, *messages: ModelMessage, **fields: Any) -> Request:
    """A request of session ``s`` with ``messages`` and any other ``fields``."""
    return Request(model=model, session_id="s", messages=messages, **fields)


def body_of(wire: WireFormat, request: Request) -> dict[str, Any]:
    """The encoded body of ``request``, parsed."""
    parsed: dict[str, Any] = json.loads(wire.encode(request).body)
    return parsed


def items_of(wire: WireFormat, message: ModelMessage, mark: CacheMark | None = None) -> list[Any]:
    """The wire items of one message (content items, for a format that wraps them in turns),
    parsed."""
    parsed: list[Any] = json.loads(b"[" + wire.encode_message(message, mark) + b"]")
    return parsed


def controls(value: Any) -> list[Any]:
    """Every ``cache_control`` value in a JSON document, in document order."""
    if isinstance(value, dict):
        own = [value["cache_control"]] if "cache_control" in value else []
        return own + [c for v in value.values() for c in controls(v)]
    if isinstance(value, list):
        return [c for v in value for c in controls(v)]
    return []


def assert_deterministic(wire: type[WireFormat], model: ModelRef) -> None:
    """The same encoding (body, offsets, end of the messages) from the memo, from a fresh
    instance, and from equal but fresh messages."""
    request = golden_request(model)
    fresh = golden_request(model)
    assert fresh == request and fresh.messages[0] is not request.messages[0]
    encoder = wire()
    first = encoder.encode(request)
    assert encoder.encode(request) == first
    assert encoder.encode(fresh) == first
    assert wire().encode(fresh) == first


def assert_steps_only_change_the_closing(wire: type[WireFormat], model: ModelRef) -> None:
    """Output cap, tool choice, stream and options never move a byte before the closing."""
    request = golden_request(model)
    step = msgspec.structs.replace(
        request,
        max_output_tokens=123,
        tool_choice="required",
        stream=True,
        options={"temperature": 0.2},
    )
    encoder = wire()
    a, b = encoder.encode(request), encoder.encode(step)
    assert a.messages_end == b.messages_end
    assert a.message_offsets == b.message_offsets
    assert a.body[: a.messages_end] == b.body[: b.messages_end]
    assert a.body != b.body
