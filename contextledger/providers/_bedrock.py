"""Amazon Bedrock Converse API (``POST /model/{modelId}/converse``, ``converse-stream`` streamed).

The system blocks and the tool table come first, then the messages; the inference config and
the options follow them. Cache marks become ``cachePoint`` blocks placed right after the
marked system block, after the marked tool entry, and at the end of the marked message's
content. Converse wants user and assistant messages to alternate, so consecutive view
messages of one wire role (a tool message and the user message after it, say) share a wire
message (``turns.AlternatingTurns``).

Tool choice is not sent. Converse keeps ``toolChoice`` inside ``toolConfig``, next to the
tools, so sending it would make the session-stable opening depend on a per-step field and
change every byte after it whenever the choice changes. Converse's default is ``auto``; it has
no ``none``, and ``any`` (our ``required``) exists only for some models.

``usage.inputTokens`` is the uncached input: Converse reports cache reads and writes beside it,
not inside it (``totalTokens`` is their sum with the output).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar
from urllib.parse import quote

from contextledger.events._parts import ToolSchema, Usage
from contextledger.providers._shapes import (
    NO_PARAMETERS,
    bearer_headers,
    closing_bytes,
    data_url,
    dumps,
    error_fields,
    file_note,
    merge_options,
    opening_bytes,
    tokens,
)
from contextledger.providers._turns import AlternatingTurns, alternating_heads
from contextledger.vocabulary._messages import (
    ModelContent,
    ModelFile,
    ModelMessage,
    ModelReasoning,
    ModelRole,
    ModelText,
    ModelToolCall,
    ModelToolResult,
)
from contextledger.vocabulary._requests import CacheMark, MarkTarget, Request

#: Image media types Converse takes, with their ``format`` names.
IMAGE_FORMATS = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/jpg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}
#: Characters a document name may not contain (Converse allows letters, digits, single
#: spaces, hyphens, parentheses and square brackets).
_NAME_FORBIDDEN = re.compile(r"[^A-Za-z0-9\s()\[\]-]+")
#: Converse's wording of an oversized prompt that the shared overflow patterns miss.
_INPUT_OVERFLOW = re.compile(r"too many input tokens", re.IGNORECASE)


def cache_point(mark: CacheMark) -> dict[str, Any]:
    """The ``cachePoint`` block of a mark."""
    point = {"type": "default"}
    if mark.ttl is not None:
        point["ttl"] = mark.ttl
    return {"cachePoint": point}


def with_cache_points(
    items: Iterable[dict[str, Any]], marks: Mapping[int, CacheMark]
) -> list[dict[str, Any]]:
    """``items`` with a ``cachePoint`` after each marked one."""
    out: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        out.append(item)
        if index in marks:
            out.append(cache_point(marks[index]))
    return out


def document_name(file: ModelFile) -> str:
    """A document name Converse accepts: the file name without its extension, other
    characters replaced by hyphens, whitespace runs by one space, the ends trimmed."""
    stem = (file.filename or "").rsplit(".", 1)[0]
    name = " ".join(_NAME_FORBIDDEN.sub("-", stem).split())[:200].strip("- ")
    return name or "document"


def _source(url: str) -> dict[str, Any] | None:
    inline = data_url(url)
    if inline is not None:
        return {"bytes": inline[1]}
    if url.startswith("s3://"):
        return {"s3Location": {"uri": url}}
    return None


def file_block(file: ModelFile) -> dict[str, Any]:
    """An image or PDF as a content block (inline bytes or an S3 location); anything else,
    or a file behind another kind of URL, as a text note naming it."""
    source = _source(file.url)
    image_format = IMAGE_FORMATS.get(file.mime)
    if source is not None and image_format is not None:
        return {"image": {"format": image_format, "source": source}}
    if source is not None and file.mime == "application/pdf":
        return {"document": {"format": "pdf", "name": document_name(file), "source": source}}
    return {"text": file_note(file)}


def _result(part: ModelToolResult) -> dict[str, Any]:
    content = [{"text": part.output}, *map(file_block, part.attachments)]
    result: dict[str, Any] = {"toolUseId": part.call_id, "content": content}
    if part.is_error:
        result["status"] = "error"
    return {"toolResult": result}


def content_block(part: ModelContent) -> dict[str, Any] | None:
    """One part as a Converse content block (None for unsigned reasoning, which Converse
    cannot take back)."""
    match part:
        case ModelText(text=text):
            return {"text": text}
        case ModelReasoning():
            signature = part.signature("bedrock", "anthropic")
            if not signature:
                return None
            return {
                "reasoningContent": {"reasoningText": {"text": part.text, "signature": signature}}
            }
        case ModelFile():
            return file_block(part)
        case ModelToolCall():
            return {"toolUse": {"toolUseId": part.call_id, "name": part.tool, "input": part.input}}
        case ModelToolResult():
            return _result(part)
    return None


def tool_spec(tool: ToolSchema) -> dict[str, Any]:
    """A tool definition as a Converse ``toolSpec`` entry."""
    spec: dict[str, Any] = {"name": tool.name}
    if tool.description:
        spec["description"] = tool.description
    spec["inputSchema"] = {"json": tool.input_schema or NO_PARAMETERS}
    return {"toolSpec": spec}


class BedrockConverse(AlternatingTurns):
    """The Bedrock Converse wire format."""

    name: ClassVar[str] = "bedrock"
    max_marks: ClassVar[int] = 4
    markable: ClassVar[frozenset[MarkTarget]] = frozenset({"tool", "system", "message"})
    turn_heads: ClassVar[Mapping[ModelRole, bytes]] = alternating_heads("assistant", "content")

    def opening(self, request: Request) -> bytes:
        fields: dict[str, Any] = {}
        if request.system:
            system = ({"text": text} for text in request.system)
            fields["system"] = with_cache_points(system, request.marked("system"))
        if request.tools:
            tools = with_cache_points(map(tool_spec, request.tools), request.marked("tool"))
            fields["toolConfig"] = {"tools": tools}
        return opening_bytes(fields, "messages")

    def encode_message(self, message: ModelMessage, mark: CacheMark | None) -> bytes:
        """The message's content blocks (``encode`` puts them in a turn)."""
        blocks = [b for b in map(content_block, message.content) if b is not None]
        if not blocks:
            return b""
        if mark is not None:
            blocks.append(cache_point(mark))
        return dumps(blocks)[1:-1]

    def closing(self, request: Request) -> bytes:
        tail: dict[str, Any] = {}
        if request.max_output_tokens is not None:
            tail["inferenceConfig"] = {"maxTokens": request.max_output_tokens}
        return closing_bytes(merge_options(tail, request.options))

    def path(self, request: Request) -> str:
        action = "converse-stream" if request.stream else "converse"
        return f"/model/{quote(request.model.model_id, safe='')}/{action}"

    def headers(self, api_key: str | None) -> dict[str, str]:
        return bearer_headers(api_key)

    def decode_usage(self, response: Mapping[str, Any]) -> Usage:
        usage = response.get("usage")
        return Usage(
            input=tokens(usage, "inputTokens"),
            output=tokens(usage, "outputTokens"),
            cache_read=tokens(usage, "cacheReadInputTokens"),
            cache_write=tokens(usage, "cacheWriteInputTokens"),
        )

    def error_details(self, response: Any) -> tuple[str, str | None]:
        """The body's ``message`` (the exception type travels in a header); "too many input
        tokens" is passed on as ``context_length_exceeded``, which a 429 still overrides."""
        message, code = error_fields(response, ())
        if _INPUT_OVERFLOW.search(message):
            code = "context_length_exceeded"
        return message, code
