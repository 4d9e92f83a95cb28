"""Amazon Bedrock Converse API (``POST /model/{modelId}/converse``).

The system blocks and the tool table come first, then the messages; the inference config and
the options follow them. Cache marks become ``cachePoint`` blocks placed right after the
marked system block, after the marked tool entry, and at the end of the marked message's
content. Converse wants user and assistant messages to alternate, so consecutive view
messages of one role share a wire message (``AlternatingTurns``, which Gemini reuses).

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

from contextledger.events.parts import ToolSchema, Usage
from contextledger.history.messages import (
    ModelContent,
    ModelFile,
    ModelMessage,
    ModelReasoning,
    ModelRole,
    ModelText,
    ModelToolCall,
    ModelToolResult,
)
from contextledger.providers.base import (
    EncodedRequest,
    WireFormat,
    data_url,
    dumps,
    error_fields,
)
from contextledger.providers.openai_chat import (
    NO_PARAMETERS,
    bearer_headers,
    close,
    file_note,
    tokens,
)
from contextledger.request.types import CacheMark, Request

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


def turn_head(role: str, items_key: str) -> bytes:
    """The bytes that open a turn: ``{"role":...,"<items_key>":[``."""
    return dumps({"role": role})[:-1] + b"," + dumps(items_key) + b":["


def opening_bytes(fields: dict[str, Any], array_key: str) -> bytes:
    """``fields`` as the start of a JSON object, left open at the ``array_key`` array."""
    key = dumps(array_key) + b":"
    return dumps(fields)[:-1] + b"," + key if fields else b"{" + key


def merge_options(fields: dict[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` updated with ``options``, where an object option merges into the object
    field of the same name (``{"inferenceConfig": {"temperature": 0}}`` keeps the output
    cap)."""
    merged = dict(fields)
    for key, value in options.items():
        current = merged.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            value = {**current, **value}
        merged[key] = value
    return merged


class AlternatingTurns(WireFormat):
    """A wire format whose API wants user and model turns to alternate (Converse, Gemini).

    ``encode_message`` gives a message's content items only; ``encode`` wraps them in turns,
    and consecutive messages of one wire role (a tool message and the user message after
    it, say) share a turn. Fragments still depend only on the message and its mark; only the
    joins between them depend on the neighbours' roles, and a join never changes the bytes
    before the message that follows it.
    """

    #: The bytes that open a turn, by view role; roles with equal heads share turns. A turn
    #: ends with ``]}``.
    turn_heads: ClassVar[Mapping[ModelRole, bytes]]

    def encode(self, request: Request) -> EncodedRequest:
        marks = request.message_marks()
        opening = self.opening(request)
        parts = [opening, b"["]
        size = len(opening) + 1
        offsets: list[int] = []
        turn: bytes | None = None
        get = self._fragments.get
        for index, message in enumerate(request.messages):
            items = get(self, message, marks.get(index))
            if not items:
                offsets.append(size)
                continue
            head = self.turn_heads[message.role]
            if head == turn:
                parts.append(b",")
                size += 1
                offsets.append(size)
            else:
                if turn is not None:
                    parts.append(b"]},")
                    size += 3
                offsets.append(size)
                parts.append(head)
                size += len(head)
                turn = head
            parts.append(items)
            size += len(items)
        if turn is not None:
            parts.append(b"]}")
            size += 2
        parts.append(b"]")
        parts.append(self.closing(request))
        self._fragments.trim(len(request.messages))
        return EncodedRequest(b"".join(parts), tuple(offsets), size)


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


def _signature(part: ModelReasoning) -> str:
    for provider in ("bedrock", "anthropic"):
        meta = part.provider_metadata.get(provider)
        if isinstance(meta, dict) and meta.get("signature"):
            return str(meta["signature"])
    return ""


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
            signature = _signature(part)
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
    turn_heads: ClassVar[Mapping[ModelRole, bytes]] = {
        "user": turn_head("user", "content"),
        "tool": turn_head("user", "content"),
        "assistant": turn_head("assistant", "content"),
    }

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
        """The message's content blocks (its turn is opened by ``encode``)."""
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
        return close(merge_options(tail, request.options))

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
