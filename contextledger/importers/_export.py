"""A session's events back into a transcript other tools read: an OpenAI chat-completions
message list, or Claude Code JSON lines. Pure: events in, JSON-ready values out; importing what
they return gives the same conversation (the same messages by role, their text, the calls with
their ids, tools and inputs, and each call's result).

What neither format carries: part and message ids (Claude Code records get ids derived from
ours), times in OpenAI chat, reasoning in OpenAI chat (Claude Code keeps it as ``thinking``
with its signature), a result's title and metadata, prunes and compactions (a compaction's
request and summary are exported as the messages they are), usage in OpenAI chat, and a
tool's error flag in OpenAI chat (the error text is the result). A user message with neither
text nor media (a compaction's request) is not exported; its summary is, as the assistant
message it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Final

import msgspec

from contextledger.events._catalogue import (
    AssistantFinished,
    CompactionRequested,
    Event,
    MessageAdded,
    PartAdded,
    PartUpdated,
    SessionStarted,
    ToolStateChanged,
)
from contextledger.events._parts import (
    FilePart,
    ModelRef,
    Part,
    ReasoningPart,
    TextPart,
    ToolCompleted,
    ToolErrored,
    ToolPart,
    Usage,
)

#: The formats ``export_trace`` writes.
EXPORT_FORMATS: Final = ("openai-chat", "claude-code")
#: Our finish reasons in Anthropic's ``stop_reason`` vocabulary (the Claude Code importer's
#: mapping, read backwards).
STOP_REASONS: Final = {
    "stop": "end_turn",
    "tool-calls": "tool_use",
    "length": "max_tokens",
    "content-filter": "refusal",
}


class _Message(msgspec.Struct):
    id: str
    role: str
    synthetic: bool
    model: ModelRef | None
    time_ms: int
    parts: list[Part]
    usage: Usage | None = None
    finish: str | None = None


def conversation(events: Iterable[Event]) -> tuple[SessionStarted | None, list[_Message]]:
    """The session's start and its messages in order, each with its parts as they are last
    (tool calls with their final state)."""
    started: SessionStarted | None = None
    messages: dict[str, _Message] = {}
    where: dict[str, tuple[_Message, int]] = {}
    for event in events:
        match event:
            case SessionStarted():
                started = event
            case MessageAdded():
                messages[event.message_id] = _Message(
                    event.message_id, event.role, event.synthetic, event.model, event.time_ms, []
                )
            case CompactionRequested():
                messages[event.message_id] = _Message(
                    event.message_id, "user", True, None, event.time_ms, []
                )
            case PartAdded(part=part) | PartUpdated(part=part):
                message = messages[part.message_id]
                if part.id in where:
                    message.parts[where[part.id][1]] = part
                else:
                    where[part.id] = (message, len(message.parts))
                    message.parts.append(part)
            case ToolStateChanged():
                message, index = where[event.part_id]
                call = message.parts[index]
                assert isinstance(call, ToolPart)
                message.parts[index] = msgspec.structs.replace(call, state=event.state)
            case AssistantFinished():
                messages[event.message_id].usage = event.usage
                messages[event.message_id].finish = event.finish
    return started, list(messages.values())


def _texts(message: _Message) -> list[str]:
    return [p.text for p in message.parts if isinstance(p, TextPart)]


def _files(message: _Message) -> list[FilePart]:
    return [p for p in message.parts if isinstance(p, FilePart)]


def _calls(message: _Message) -> list[ToolPart]:
    return [p for p in message.parts if isinstance(p, ToolPart)]


def _result(call: ToolPart) -> tuple[str, bool, tuple[FilePart, ...]] | None:
    """A call's result: its output (or error), whether it failed, its attachments."""
    match call.state:
        case ToolCompleted(output=output, attachments=attachments):
            return output, False, attachments
        case ToolErrored(error=error):
            return error, True, ()
    return None


def export_trace(events: Iterable[Event], fmt: str) -> bytes:
    """The session as the file of format ``fmt`` (one of ``EXPORT_FORMATS``): an OpenAI chat
    JSON document, or Claude Code JSON lines. ``ValueError`` for another format."""
    if fmt == "openai-chat":
        return json.dumps(export_openai_chat(events), ensure_ascii=False, indent=1).encode()
    if fmt == "claude-code":
        lines = (json.dumps(r, ensure_ascii=False) + "\n" for r in export_claude_code(events))
        return "".join(lines).encode()
    raise ValueError(f"cannot export to {fmt!r} (formats: {', '.join(EXPORT_FORMATS)})")


# --- OpenAI chat --------------------------------------------------------------------------------


def export_openai_chat(events: Iterable[Event]) -> list[dict[str, Any]]:
    """The session as an OpenAI chat-completions message list: its system prompt (from the
    start's ``config["system_prompt"]``), a ``user`` message per user message (text, and media
    as ``image_url``/``file`` items), an ``assistant`` message per assistant message (text,
    media, ``tool_calls``), and after it a ``tool`` message per answered call."""
    started, messages = conversation(events)
    out: list[dict[str, Any]] = []
    system = started.config.get("system_prompt") if started is not None else None
    if isinstance(system, str):
        out.append({"role": "system", "content": system})
    for message in messages:
        content = _chat_content(_texts(message), _files(message))
        if message.role == "user":
            if _texts(message) or _files(message):
                out.append({"role": "user", "content": content})
            continue
        answer: dict[str, Any] = {"role": "assistant", "content": content or None}
        calls = _calls(message)
        if calls:
            answer["tool_calls"] = [
                {
                    "id": call.call_id,
                    "type": "function",
                    "function": {"name": call.tool, "arguments": json.dumps(call.state.input)},
                }
                for call in calls
            ]
        out.append(answer)
        for call in calls:
            result = _result(call)
            if result is not None:
                output, _, attachments = result
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": call.call_id,
                        "content": _chat_content([output], list(attachments)),
                    }
                )
    return out


def _chat_content(texts: list[str], files: list[FilePart]) -> str | list[dict[str, Any]]:
    """One text as a string; several, or any media, as a list of content items."""
    if not files and len(texts) <= 1:
        return texts[0] if texts else ""
    items: list[dict[str, Any]] = [{"type": "text", "text": text} for text in texts]
    for file in files:
        if file.mime.startswith("image/"):
            items.append({"type": "image_url", "image_url": {"url": file.url}})
        else:
            item = {"file_data": file.url, **({"filename": file.filename} if file.filename else {})}
            items.append({"type": "file", "file": item})
    return items


# --- Claude Code --------------------------------------------------------------------------------


def export_claude_code(events: Iterable[Event]) -> list[dict[str, Any]]:
    """The session as Claude Code transcript records (one JSON line each): a ``user`` record
    per user message (``isMeta`` when synthetic), an ``assistant`` record per assistant message
    (``thinking``, ``text``, ``image`` and ``tool_use`` blocks, its usage and stop reason), and
    after it one ``user`` record of ``tool_result`` blocks for its answered calls. Records are
    chained by ``parentUuid``; ``sessionId`` is the original one when the session has it."""
    started, messages = conversation(events)
    session = started.session_id if started is not None else ""
    if started is not None and isinstance(started.config.get("source_session_id"), str):
        session = started.config["source_session_id"]
    records: list[dict[str, Any]] = []

    def add(kind: str, uuid: str, time_ms: int, message: dict[str, Any], **extra: Any) -> None:
        parent = records[-1]["uuid"] if records else None
        stamp = datetime.fromtimestamp(time_ms / 1000, UTC).isoformat().replace("+00:00", "Z")
        record = {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": session}
        records.append({**record, "timestamp": stamp, **extra, "message": message})

    for message in messages:
        if message.role == "user":
            texts = _texts(message)
            blocks = [*map(_text_block, texts), *map(_media_block, _files(message))]
            content: Any = texts[0] if len(blocks) == 1 and texts else blocks
            meta = {"isMeta": True} if message.synthetic else {}
            if blocks:
                user = {"role": "user", "content": content}
                add("user", message.id, message.time_ms, user, **meta)
            continue
        add("assistant", message.id, message.time_ms, _assistant(message))
        results = [
            _result_block(call, result)
            for call in _calls(message)
            if (result := _result(call)) is not None
        ]
        if results:
            answer = {"role": "user", "content": results}
            add("user", f"{message.id}-results", message.time_ms, answer)
    return records


def _assistant(message: _Message) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ReasoningPart):
            signature = part.metadata.get("anthropic", {}).get("signature")
            blocks.append({"type": "thinking", "thinking": part.text, "signature": signature})
        elif isinstance(part, TextPart):
            blocks.append(_text_block(part.text))
        elif isinstance(part, FilePart):
            blocks.append(_media_block(part))
        elif isinstance(part, ToolPart):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": part.call_id,
                    "name": part.tool,
                    "input": part.state.input,
                }
            )
    usage = message.usage or Usage()
    body: dict[str, Any] = {
        "id": message.id,
        "role": "assistant",
        "model": message.model.model_id if message.model else "",
        "content": blocks,
        "usage": {
            "input_tokens": usage.input,
            "cache_creation_input_tokens": usage.cache_write,
            "cache_read_input_tokens": usage.cache_read,
            "output_tokens": usage.output,
        },
    }
    if message.finish is not None:
        body["stop_reason"] = STOP_REASONS.get(message.finish, message.finish)
    return body


def _text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _media_block(file: FilePart) -> dict[str, Any]:
    """An ``image`` (or, for a PDF, ``document``) block: base64 data for a ``data:`` URL, else
    the URL."""
    kind = "document" if file.mime == "application/pdf" else "image"
    head, sep, data = file.url.partition(";base64,")
    if file.url.startswith("data:") and sep:
        source = {"type": "base64", "media_type": head.removeprefix("data:"), "data": data}
    else:
        source = {"type": "url", "media_type": file.mime, "url": file.url}
    return {"type": kind, "source": source}


def _result_block(call: ToolPart, result: tuple[str, bool, tuple[FilePart, ...]]) -> dict[str, Any]:
    output, error, attachments = result
    content: Any = output
    if attachments:
        content = [_text_block(output), *map(_media_block, attachments)]
    return {
        "type": "tool_result",
        "tool_use_id": call.call_id,
        "content": content,
        "is_error": error,
    }
