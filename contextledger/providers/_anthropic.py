"""Anthropic Messages API (``POST /v1/messages``).

The model, system blocks and tools come first, then the messages; the output cap (always
sent: the field is required), tool choice, stream flag and options follow the messages, so the
bytes before the last message never depend on them.
Cache marks become ``cache_control`` on the marked tool, system block, or the last content
block of the marked message (Anthropic has no message-level marker).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from contextledger.events._parts import Usage
from contextledger.providers._base import WireFormat
from contextledger.providers._shapes import (
    NO_PARAMETERS,
    cache_control,
    closing_bytes,
    data_url,
    dumps,
    error_fields,
    file_note,
    opening_bytes,
    tokens,
)
from contextledger.vocabulary._messages import (
    ModelContent,
    ModelFile,
    ModelMessage,
    ModelReasoning,
    ModelText,
    ModelToolCall,
    ModelToolResult,
)
from contextledger.vocabulary._requests import CacheMark, MarkTarget, Request

API_VERSION = "2023-06-01"
#: The output cap sent when the request names none (the field is required).
DEFAULT_MAX_TOKENS = 4096


def file_block(file: ModelFile) -> dict[str, Any]:
    """An image or PDF as a content block; any other file as a text note naming it."""
    inline = data_url(file.url)
    if file.mime.startswith("image/"):
        kind = "image"
    elif file.mime == "application/pdf":
        kind = "document"
    else:
        return {"type": "text", "text": file_note(file)}
    if inline is not None:
        source = {"type": "base64", "media_type": inline[0] or file.mime, "data": inline[1]}
    else:
        source = {"type": "url", "url": file.url}
    return {"type": kind, "source": source}


def _reasoning(part: ModelReasoning) -> dict[str, Any] | None:
    """A ``redacted_thinking`` block with its data, or a ``thinking`` block with Anthropic's
    signature; None for other reasoning, which Anthropic cannot take back."""
    if part.redacted_data:
        return {"type": "redacted_thinking", "data": part.redacted_data}
    signature = part.signature("anthropic")
    if not signature:
        return None
    return {"type": "thinking", "thinking": part.text, "signature": signature}


def _result(part: ModelToolResult) -> dict[str, Any]:
    content: str | list[dict[str, Any]] = part.output
    if part.attachments:
        content = [{"type": "text", "text": part.output}]
        content.extend(file_block(f) for f in part.attachments)
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.call_id, "content": content}
    if part.is_error:
        block["is_error"] = True
    return block


def content_block(part: ModelContent) -> dict[str, Any] | None:
    """One part as an Anthropic content block (None for parts Anthropic cannot take back,
    such as unsigned reasoning)."""
    match part:
        case ModelText(text=text):
            return {"type": "text", "text": text}
        case ModelReasoning():
            return _reasoning(part)
        case ModelFile():
            return file_block(part)
        case ModelToolCall():
            kind = "server_tool_use" if part.provider_executed else "tool_use"
            return {"type": kind, "id": part.call_id, "name": part.tool, "input": part.input}
        case ModelToolResult():
            return _result(part)
    return None


class AnthropicMessages(WireFormat):
    """The Anthropic Messages wire format."""

    name: ClassVar[str] = "anthropic"
    max_marks: ClassVar[int] = 4
    markable: ClassVar[frozenset[MarkTarget]] = frozenset({"tool", "system", "message"})

    def opening(self, request: Request) -> bytes:
        body: dict[str, Any] = {"model": request.model.model_id}
        system_marks = request.marked("system")
        if request.system:
            blocks = []
            for index, text in enumerate(request.system):
                block: dict[str, Any] = {"type": "text", "text": text}
                if index in system_marks:
                    block["cache_control"] = cache_control(system_marks[index])
                blocks.append(block)
            body["system"] = blocks
        if request.tools:
            tool_marks = request.marked("tool")
            tools = []
            for index, tool in enumerate(request.tools):
                spec: dict[str, Any] = {
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.input_schema or NO_PARAMETERS,
                }
                if index in tool_marks:
                    spec["cache_control"] = cache_control(tool_marks[index])
                tools.append(spec)
            body["tools"] = tools
        return opening_bytes(body, "messages")

    def encode_message(self, message: ModelMessage, mark: CacheMark | None) -> bytes:
        blocks = [b for b in map(content_block, message.content) if b is not None]
        if not blocks:
            return b""
        if mark is not None:
            blocks[-1] = {**blocks[-1], "cache_control": cache_control(mark)}
        role = "assistant" if message.role == "assistant" else "user"
        return dumps({"role": role, "content": blocks})

    def closing(self, request: Request) -> bytes:
        tail: dict[str, Any] = {"max_tokens": request.max_output_tokens or DEFAULT_MAX_TOKENS}
        if request.tool_choice is not None and request.tools:
            tail["tool_choice"] = {
                "auto": {"type": "auto"},
                "none": {"type": "none"},
                "required": {"type": "any"},
            }[request.tool_choice]
        if request.stream:
            tail["stream"] = True
        tail.update(request.options)
        return closing_bytes(tail)

    def path(self, request: Request) -> str:
        return "/v1/messages"

    def headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"content-type": "application/json", "anthropic-version": API_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def decode_usage(self, response: Mapping[str, Any]) -> Usage:
        usage = response.get("usage") or {}
        return Usage(
            input=tokens(usage, "input_tokens"),
            output=tokens(usage, "output_tokens"),
            cache_read=tokens(usage, "cache_read_input_tokens"),
            cache_write=tokens(usage, "cache_creation_input_tokens"),
        )

    def error_details(self, response: Any) -> tuple[str, str | None]:
        return error_fields(response, ("error",))
