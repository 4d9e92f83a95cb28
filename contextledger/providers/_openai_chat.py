"""OpenAI Chat Completions (``POST /v1/chat/completions``), the base of the gateway formats.

The model and tools open the body; system blocks are the first ``system`` items of the
message array; the output cap, tool choice, stream flag, ``prompt_cache_key`` and options
follow the array, so the bytes before the last message never depend on them. OpenAI caches
prefixes on its own: cache marks are ignored here, and honoured by the gateway subclasses
(``openrouter``, ``openai_compatible``) through ``cache_control``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from contextledger.events._parts import Usage
from contextledger.providers._base import WireFormat
from contextledger.providers._shapes import (
    NO_PARAMETERS,
    arguments,
    bearer_headers,
    closing_bytes,
    data_url,
    dumps,
    error_fields,
    file_note,
    opening_bytes,
    split_usage,
    step_fields,
    tokens,
)
from contextledger.vocabulary._messages import (
    ModelContent,
    ModelFile,
    ModelMessage,
    ModelText,
    ModelToolCall,
    ModelToolResult,
)
from contextledger.vocabulary._requests import CacheMark, Request

#: The text before the media of a tool result, in the user message that carries it.
ATTACHMENT_NOTE = "Attached media from tool result {call_id}:"


def with_cache_control(item: dict[str, Any], control: dict[str, str]) -> dict[str, Any]:
    """``item`` with ``control`` on its last content part (text content becomes one text
    part); unchanged when it has no content to carry it (an assistant item of tool calls)."""
    content = item.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}] if content else None
    if not content:
        return item
    return {**item, "content": [*content[:-1], {**content[-1], "cache_control": control}]}


def _file_part(file: ModelFile) -> dict[str, Any]:
    if file.mime.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": file.url}}
    if file.mime == "application/pdf" and data_url(file.url) is not None:
        return {
            "type": "file",
            "file": {"filename": file.filename or "document.pdf", "file_data": file.url},
        }
    return {"type": "text", "text": file_note(file)}


def _user_part(part: ModelContent) -> dict[str, Any] | None:
    match part:
        case ModelText(text=text):
            return {"type": "text", "text": text}
        case ModelFile():
            return _file_part(part)
    return None


def _assistant(message: ModelMessage) -> list[dict[str, Any]]:
    texts = [p.text for p in message.content if isinstance(p, ModelText)]
    calls = [
        {
            "id": p.call_id,
            "type": "function",
            "function": {"name": p.tool, "arguments": arguments(p)},
        }
        for p in message.content
        if isinstance(p, ModelToolCall)
    ]
    if not texts and not calls:
        return []
    item: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if calls:
        item["tool_calls"] = calls
    return [item]


def _tool_results(message: ModelMessage) -> list[dict[str, Any]]:
    """One ``tool`` item per result; the media of the results (which ``tool`` items cannot
    carry) in one user message after them, so no item comes between the ``tool`` items."""
    items: list[dict[str, Any]] = []
    media: list[dict[str, Any]] = []
    for part in message.content:
        if not isinstance(part, ModelToolResult):
            continue
        items.append({"role": "tool", "tool_call_id": part.call_id, "content": part.output})
        if part.attachments:
            media.append({"type": "text", "text": ATTACHMENT_NOTE.format(call_id=part.call_id)})
            media.extend(_file_part(f) for f in part.attachments)
    if media:
        items.append({"role": "user", "content": media})
    return items


def chat_items(message: ModelMessage) -> list[dict[str, Any]]:
    """The Chat Completions items of one view message (reasoning is not sent back)."""
    if message.role == "assistant":
        return _assistant(message)
    if message.role == "tool":
        return _tool_results(message)
    parts = [p for p in map(_user_part, message.content) if p is not None]
    return [{"role": "user", "content": parts}] if parts else []


class OpenAIChat(WireFormat):
    """The OpenAI Chat Completions wire format. Subclasses for gateways set the output cap
    field, whether ``prompt_cache_key`` is sent, and how marks become ``cache_control``."""

    name: ClassVar[str] = "openai-chat"
    #: The body field of the output cap.
    cap_field: ClassVar[str] = "max_completion_tokens"
    #: Whether ``prompt_cache_key`` (the session id) is sent.
    sends_cache_key: ClassVar[bool] = True

    def cache_control(self, mark: CacheMark) -> dict[str, str] | None:
        """The ``cache_control`` a mark puts on the last content part of the marked system
        block or message; None when the API takes no markers (OpenAI caches implicitly)."""
        return None

    def _marked(self, items: list[dict[str, Any]], mark: CacheMark | None) -> list[dict[str, Any]]:
        control = self.cache_control(mark) if mark is not None else None
        if control is not None and items:
            items[-1] = with_cache_control(items[-1], control)
        return items

    def opening(self, request: Request) -> bytes:
        body: dict[str, Any] = {"model": request.model.model_id}
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.input_schema or NO_PARAMETERS,
                    },
                }
                for tool in request.tools
            ]
        return opening_bytes(body, "messages")

    def leading_items(self, request: Request) -> list[bytes]:
        marks = request.marked("system")
        return [
            dumps(self._marked([{"role": "system", "content": text}], marks.get(index))[0])
            for index, text in enumerate(request.system)
        ]

    def encode_message(self, message: ModelMessage, mark: CacheMark | None) -> bytes:
        return b",".join(map(dumps, self._marked(chat_items(message), mark)))

    def closing(self, request: Request) -> bytes:
        tail = step_fields(request, self.cap_field)
        if request.stream:
            tail["stream_options"] = {"include_usage": True}
        if self.sends_cache_key:
            tail["prompt_cache_key"] = request.session_id
        tail.update(request.options)
        return closing_bytes(tail)

    def path(self, request: Request) -> str:
        return "/v1/chat/completions"

    def headers(self, api_key: str | None) -> dict[str, str]:
        return bearer_headers(api_key)

    def decode_usage(self, response: Mapping[str, Any]) -> Usage:
        usage = response.get("usage")
        written = tokens(usage, "prompt_tokens_details", "cache_write_tokens") or tokens(
            usage, "cache_write_tokens"
        )
        return split_usage(
            prompt=tokens(usage, "prompt_tokens"),
            cached=tokens(usage, "prompt_tokens_details", "cached_tokens"),
            written=written,
            completion=tokens(usage, "completion_tokens"),
            reasoning=tokens(usage, "completion_tokens_details", "reasoning_tokens"),
        )

    def error_details(self, response: Any) -> tuple[str, str | None]:
        return error_fields(response, ("error",))
