"""The typed commands a ``Session`` actor accepts. Each is answered by the reply its
docstring names; a command that cannot apply (an unknown message, an invalid event) is
answered by the error, raised in the caller, and nothing is written."""

from __future__ import annotations

from typing import Any

import msgspec

from contextledger.events.catalogue import MAIN_AGENT, Event
from contextledger.events.parts import MessageError, ModelRef, Usage
from contextledger.request.context import EditorState


class _Command(msgspec.Struct, frozen=True, kw_only=True):
    agent_id: str = MAIN_AGENT


class Append(_Command, frozen=True):
    """Append these events as one batch. Reply: the events as recorded (``RecordedEvent``)."""

    events: tuple[Event, ...]


class AddUser(_Command, frozen=True):
    """A user message typed now (wrapped when it interrupts a running turn, with its mode
    reminders and its captured environment). ``files`` are ``(mime, url, filename)``.
    Reply: the message id."""

    text: str
    agent: str = "build"
    model: ModelRef | None = None
    files: tuple[tuple[str, str, str | None], ...] = ()
    editor: EditorState | None = None
    plan_path: str | None = None
    plan_exists: bool = False


class StartAssistant(_Command, frozen=True):
    """An assistant message answering ``parent_id``, with its first step started.
    Reply: the message id."""

    parent_id: str
    agent: str = "build"
    model: ModelRef | None = None


class StartStep(_Command, frozen=True):
    """A new model step of an assistant message. Reply: the step-start part's id."""

    message_id: str


class AddText(_Command, frozen=True):
    """Text (or, with ``reasoning``, reasoning with its provider ``metadata``) the model
    wrote. Reply: the part id."""

    message_id: str
    text: str
    reasoning: bool = False
    metadata: dict[str, Any] = {}


class CallTool(_Command, frozen=True):
    """A tool call the model made. Reply: the tool part's id."""

    message_id: str
    tool: str
    input: dict[str, Any] = {}
    call_id: str | None = None


class ToolResult(_Command, frozen=True):
    """The result of a tool call: its output, or with ``error`` its error text.
    Reply: the session's new seq."""

    part_id: str
    output: str
    error: bool = False


class Finish(_Command, frozen=True):
    """An assistant message ended: its finish reason, usage and error, if any.
    Reply: the session's new seq."""

    message_id: str
    finish: str = "stop"
    usage: Usage | None = None
    error: MessageError | None = None


class Seq(_Command, frozen=True):
    """Reply: the session's seq (every command before this one is applied)."""
