"""OpenAI Responses API (``POST /v1/responses``), stateless (``store: false``).

The model and tools open the body; system blocks are the first ``input`` items; the output
cap, tool choice, stream flag, ``prompt_cache_key``, ``store`` and options follow the input
array. Reasoning goes back as ``reasoning`` items only when its OpenAI item id and encrypted
content were recorded (request them with the option ``include:
["reasoning.encrypted_content"]``); other reasoning is dropped. Cache marks are ignored:
OpenAI caches prefixes on its own.
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
    ModelFile,
    ModelMessage,
    ModelReasoning,
    ModelText,
    ModelToolCall,
    ModelToolResult,
)
from contextledger.vocabulary._requests import CacheMark, Request

#: Where the item id and the encrypted content of reasoning sit in its OpenAI metadata:
#: the AI SDK's keys (as opencode and Kilo record them), then the Responses API's.
ITEM_ID_KEYS = ("itemId", "item_id")
ENCRYPTED_KEYS = ("reasoningEncryptedContent", "encrypted_content")


def _input_part(part: ModelText | ModelFile) -> dict[str, Any]:
    if isinstance(part, ModelText):
        return {"type": "input_text", "text": part.text}
    if part.mime.startswith("image/"):
        return {"type": "input_image", "image_url": part.url, "detail": "auto"}
    if part.mime == "application/pdf":
        if data_url(part.url) is None:
            return {"type": "input_file", "file_url": part.url}
        return {
            "type": "input_file",
            "filename": part.filename or "document.pdf",
            "file_data": part.url,
        }
    return {"type": "input_text", "text": file_note(part)}


def _first(meta: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    return next((meta[k] for k in keys if meta.get(k)), None)


def _output(part: ModelToolResult) -> str | list[dict[str, Any]]:
    if not part.attachments:
        return part.output
    return [{"type": "input_text", "text": part.output}, *map(_input_part, part.attachments)]


def _add_reasoning(
    part: ModelReasoning, items: list[dict[str, Any]], by_id: dict[str, dict[str, Any]]
) -> None:
    meta = part.provider_metadata.get("openai")
    if not isinstance(meta, Mapping):
        return
    item_id = _first(meta, ITEM_ID_KEYS)
    if not isinstance(item_id, str):
        return
    item = by_id.get(item_id)
    if item is None:
        item = by_id[item_id] = {"type": "reasoning", "id": item_id, "summary": []}
        items.append(item)
    encrypted = _first(meta, ENCRYPTED_KEYS)
    if encrypted is not None:
        item.setdefault("encrypted_content", encrypted)
    if part.text:
        item["summary"].append({"type": "summary_text", "text": part.text})


def _assistant(message: ModelMessage) -> list[dict[str, Any]]:
    """The items of an assistant message in order. Reasoning parts sharing an item id (the
    summary parts of one item) make one item; reasoning without an item id and encrypted
    content is dropped."""
    items: list[dict[str, Any]] = []
    by_id: dict[str, dict[str, Any]] = {}
    for part in message.content:
        match part:
            case ModelText(text=text):
                content = [{"type": "output_text", "text": text}]
                items.append({"role": "assistant", "content": content})
            case ModelReasoning():
                _add_reasoning(part, items, by_id)
            case ModelToolCall():
                items.append(
                    {
                        "type": "function_call",
                        "call_id": part.call_id,
                        "name": part.tool,
                        "arguments": arguments(part),
                    }
                )
    return [i for i in items if i.get("type") != "reasoning" or "encrypted_content" in i]


def responses_items(message: ModelMessage) -> list[dict[str, Any]]:
    """The Responses ``input`` items of one view message."""
    if message.role == "assistant":
        return _assistant(message)
    if message.role == "tool":
        return [
            {"type": "function_call_output", "call_id": p.call_id, "output": _output(p)}
            for p in message.content
            if isinstance(p, ModelToolResult)
        ]
    parts = [_input_part(p) for p in message.content if isinstance(p, ModelText | ModelFile)]
    return [{"role": "user", "content": parts}] if parts else []


class OpenAIResponses(WireFormat):
    """The OpenAI Responses wire format.

    System blocks are sent as ``developer`` items: in OpenAI's chain of command the caller's
    instructions have the developer role (``system`` belongs to the platform), and the
    reasoning models this API serves take ``system`` as ``developer`` anyway. Tools are sent
    with ``strict: false``: the API defaults to strict schemas, which ordinary tool schemas
    (optional properties, no ``additionalProperties: false``) do not satisfy.
    """

    name: ClassVar[str] = "openai-responses"

    def opening(self, request: Request) -> bytes:
        body: dict[str, Any] = {"model": request.model.model_id}
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.input_schema or NO_PARAMETERS,
                    "strict": False,
                }
                for tool in request.tools
            ]
        return opening_bytes(body, "input")

    def leading_items(self, request: Request) -> list[bytes]:
        return [dumps({"role": "developer", "content": text}) for text in request.system]

    def encode_message(self, message: ModelMessage, mark: CacheMark | None) -> bytes:
        return b",".join(map(dumps, responses_items(message)))

    def closing(self, request: Request) -> bytes:
        tail = step_fields(request, "max_output_tokens")
        tail["prompt_cache_key"] = request.session_id
        tail["store"] = False
        tail.update(request.options)
        return closing_bytes(tail)

    def path(self, request: Request) -> str:
        return "/v1/responses"

    def headers(self, api_key: str | None) -> dict[str, str]:
        return bearer_headers(api_key)

    def decode_usage(self, response: Mapping[str, Any]) -> Usage:
        usage = response.get("usage")
        return split_usage(
            prompt=tokens(usage, "input_tokens"),
            cached=tokens(usage, "input_tokens_details", "cached_tokens"),
            written=tokens(usage, "input_tokens_details", "cache_write_tokens"),
            completion=tokens(usage, "output_tokens"),
            reasoning=tokens(usage, "output_tokens_details", "reasoning_tokens"),
        )

    def error_details(self, response: Any) -> tuple[str, str | None]:
        return error_fields(response, ("error",))
