"""JSON pieces several wire formats share: compact encoding, the bytes around the message
array, option merging, headers, data URLs, stand-ins for an empty tool schema and for a file
an API cannot take, Anthropic-style ``cache_control``, usage counts, error fields, and the
OpenAI family's step fields and usage split.

A format module imports what it shares with others from here (the turn framing of Bedrock and
Gemini from ``turns``), never from another format module except to subclass it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from contextledger.events._parts import Usage
from contextledger.vocabulary._messages import ModelFile, ModelToolCall
from contextledger.vocabulary._requests import CacheMark, Request

_encode = msgspec.json.Encoder().encode

#: The parameters of a tool whose schema is empty.
NO_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


def dumps(value: Any) -> bytes:
    """Compact JSON bytes, keys in insertion order."""
    return _encode(value)


# --- body framing ---------------------------------------------------------------------------------


def opening_bytes(fields: dict[str, Any], array_key: str) -> bytes:
    """``fields`` as the start of a JSON object, left open at the ``array_key`` array."""
    key = dumps(array_key) + b":"
    return dumps(fields)[:-1] + b"," + key if fields else b"{" + key


def closing_bytes(tail: dict[str, Any]) -> bytes:
    """The body after the message array: ``tail``'s fields, then ``}``."""
    return b"," + dumps(tail)[1:] if tail else b"}"


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


# --- request parts --------------------------------------------------------------------------------


def bearer_headers(api_key: str | None) -> dict[str, str]:
    """JSON content type and ``authorization: Bearer`` when there is a key."""
    headers = {"content-type": "application/json"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    return headers


def data_url(url: str) -> tuple[str, str] | None:
    """``(media_type, base64 data)`` of a ``data:`` URL, or None for any other URL."""
    if not url.startswith("data:"):
        return None
    header, _, data = url[5:].partition(",")
    media_type = header.split(";", 1)[0]
    return media_type, data


def file_note(file: ModelFile) -> str:
    """The text standing for a file the API cannot take."""
    return f"[Attached file: {file.filename or file.url} ({file.mime})]"


def cache_control(mark: CacheMark) -> dict[str, str]:
    """The Anthropic ``cache_control`` object of a mark (OpenRouter passes it on as is)."""
    control = {"type": "ephemeral"}
    if mark.ttl is not None:
        control["ttl"] = mark.ttl
    return control


# --- responses ------------------------------------------------------------------------------------


def tokens(node: Any, *path: str) -> int:
    """The count at ``path`` in a usage object; missing, null or non-numeric is zero."""
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return int(node) if isinstance(node, int | float) else 0


def error_fields(response: Any, *paths: tuple[str, ...]) -> tuple[str, str | None]:
    """``(message, code)`` from the first ``error``-like object found along ``paths``;
    a text body is the message itself."""
    if isinstance(response, str):
        return response, None
    for path in paths:
        node: Any = response
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        if isinstance(node, Mapping):
            message = node.get("message")
            code = node.get("code") or node.get("type") or node.get("status")
            return (
                str(message) if message is not None else msgspec.json.encode(node).decode(),
                str(code) if code is not None else None,
            )
        if isinstance(node, str):
            return node, None
    return msgspec.json.encode(response).decode(), None


# --- OpenAI family (Chat Completions and Responses) -----------------------------------------------


def arguments(call: ModelToolCall) -> str:
    """A tool call's input as the compact JSON string OpenAI expects, keys in input order."""
    return dumps(call.input).decode()


def step_fields(request: Request, cap_field: str) -> dict[str, Any]:
    """The per-step fields every OpenAI-family API takes: output cap, tool choice, stream."""
    tail: dict[str, Any] = {}
    if request.max_output_tokens is not None:
        tail[cap_field] = request.max_output_tokens
    if request.tool_choice is not None and request.tools:
        tail["tool_choice"] = request.tool_choice
    if request.stream:
        tail["stream"] = True
    return tail


def split_usage(
    *, prompt: int, cached: int, written: int, completion: int, reasoning: int
) -> Usage:
    """``Usage`` from OpenAI-style totals: the prompt count includes cache reads and writes,
    the completion count includes reasoning; both are split out, never counted twice."""
    return Usage(
        input=max(prompt - cached - written, 0),
        output=max(completion - reasoning, 0),
        reasoning=reasoning,
        cache_read=cached,
        cache_write=written,
    )
