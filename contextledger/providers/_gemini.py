"""Google Gemini API ``generateContent`` (``POST /v1beta/models/{model}:generateContent``).

The system instruction and the function declarations come first, then the contents; the
generation config, the tool config (tool choice) and the options follow them. Gemini caches
prefixes implicitly, so cache marks are ignored. Consecutive view messages of one wire role
(tool results are ``user``) share a content (``turns.AlternatingTurns``). Reasoning text is not
sent back; a function call's ``thoughtSignature`` is, beside the call. A streamed request goes
to ``:streamGenerateContent?alt=sse``.

``usageMetadata.promptTokenCount`` includes ``cachedContentTokenCount``; the thinking tokens
(``thoughtsTokenCount``) are not part of ``candidatesTokenCount``; ``toolUsePromptTokenCount``
(what built-in tools such as search added to the prompt) is input outside the prompt count.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final
from urllib.parse import quote

from contextledger.events._parts import MessageError, ToolSchema, Usage
from contextledger.providers._errors import (
    ContextOverflowError,
    ProviderAuthError,
    ProviderError,
)
from contextledger.providers._shapes import (
    closing_bytes,
    data_url,
    dumps,
    error_fields,
    merge_options,
    opening_bytes,
    tokens,
)
from contextledger.providers._turns import AlternatingTurns, alternating_heads
from contextledger.vocabulary._messages import (
    ModelContent,
    ModelFile,
    ModelMessage,
    ModelRole,
    ModelText,
    ModelToolCall,
    ModelToolResult,
)
from contextledger.vocabulary._requests import CacheMark, Request

#: The JSON-schema keys Gemini's ``Schema`` (an OpenAPI 3.0 subset) accepts; any other key,
#: such as ``$schema``, ``additionalProperties``, ``const`` or ``$ref``, is rejected.
SCHEMA_KEYS: Final = frozenset(
    {
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "items",
        "minItems",
        "maxItems",
        "properties",
        "required",
        "minProperties",
        "maxProperties",
        "propertyOrdering",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "anyOf",
        "default",
        "example",
    }
)
#: Gemini's function-calling modes by tool choice.
CALLING_MODES: Final = {"auto": "AUTO", "none": "NONE", "required": "ANY"}


def gemini_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` with only the keys Gemini accepts, at every level; a type list such as
    ``["string", "null"]`` becomes one type (or ``anyOf``) and ``nullable``."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key not in SCHEMA_KEYS:
            continue
        if key == "properties" and isinstance(value, Mapping):
            out[key] = {name: gemini_schema(sub) for name, sub in value.items()}
        elif key == "items" and isinstance(value, Mapping):
            out[key] = gemini_schema(value)
        elif key == "anyOf" and isinstance(value, list):
            out[key] = [gemini_schema(sub) for sub in value]
        elif key == "type" and isinstance(value, list):
            types = [t for t in value if t != "null"]
            if len(types) == 1:
                out["type"] = types[0]
            elif types:
                out["anyOf"] = [{"type": t} for t in types]
            if "null" in value:
                out["nullable"] = True
        else:
            out[key] = value
    return out


def declaration(tool: ToolSchema) -> dict[str, Any]:
    """A tool as a function declaration; a tool without parameters has no ``parameters``
    (Gemini rejects an object schema with no properties)."""
    function: dict[str, Any] = {"name": tool.name, "description": tool.description}
    parameters = gemini_schema(tool.input_schema)
    if parameters.get("properties"):
        function["parameters"] = parameters
    return function


def file_part(file: ModelFile) -> dict[str, Any]:
    """A file as ``inlineData`` (a data URL) or ``fileData`` (any other URL)."""
    inline = data_url(file.url)
    if inline is not None:
        return {"inlineData": {"mimeType": inline[0] or file.mime, "data": inline[1]}}
    return {"fileData": {"mimeType": file.mime, "fileUri": file.url}}


def _call(part: ModelToolCall) -> dict[str, Any]:
    call: dict[str, Any] = {"functionCall": {"name": part.tool, "args": part.input}}
    meta = part.provider_metadata.get("google")
    if isinstance(meta, dict) and meta.get("thoughtSignature"):
        call["thoughtSignature"] = meta["thoughtSignature"]
    return call


def _response(part: ModelToolResult) -> dict[str, Any]:
    """A result as ``{"output": ...}`` or ``{"error": ...}``, the keys Gemini reads; its
    media, if the view left any, as the response's own ``parts``."""
    response: dict[str, Any] = {"name": part.tool}
    response["response"] = {"error" if part.is_error else "output": part.output}
    if part.attachments:
        response["parts"] = [file_part(f) for f in part.attachments]
    return {"functionResponse": response}


def content_part(part: ModelContent) -> dict[str, Any] | None:
    """One part as a Gemini part (None for reasoning, which is not sent back)."""
    match part:
        case ModelText(text=text):
            return {"text": text}
        case ModelFile():
            return file_part(part)
        case ModelToolCall():
            return _call(part)
        case ModelToolResult():
            return _response(part)
    return None


class GeminiGenerateContent(AlternatingTurns):
    """The Gemini ``generateContent`` wire format."""

    name: ClassVar[str] = "gemini"
    turn_heads: ClassVar[Mapping[ModelRole, bytes]] = alternating_heads("model", "parts")

    def opening(self, request: Request) -> bytes:
        fields: dict[str, Any] = {}
        if request.system:
            fields["systemInstruction"] = {"parts": [{"text": text} for text in request.system]}
        if request.tools:
            fields["tools"] = [{"functionDeclarations": list(map(declaration, request.tools))}]
        return opening_bytes(fields, "contents")

    def encode_message(self, message: ModelMessage, mark: CacheMark | None) -> bytes:
        """The message's parts (``encode`` puts them in a content); marks are ignored."""
        parts = [p for p in map(content_part, message.content) if p is not None]
        return dumps(parts)[1:-1] if parts else b""

    def closing(self, request: Request) -> bytes:
        tail: dict[str, Any] = {}
        if request.max_output_tokens is not None:
            tail["generationConfig"] = {"maxOutputTokens": request.max_output_tokens}
        if request.tool_choice is not None and request.tools:
            mode = CALLING_MODES[request.tool_choice]
            tail["toolConfig"] = {"functionCallingConfig": {"mode": mode}}
        return closing_bytes(merge_options(tail, request.options))

    def path(self, request: Request) -> str:
        model = quote(request.model.model_id, safe="")
        if request.stream:
            return f"/v1beta/models/{model}:streamGenerateContent?alt=sse"
        return f"/v1beta/models/{model}:generateContent"

    def headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if api_key:
            headers["x-goog-api-key"] = api_key
        return headers

    def decode_usage(self, response: Mapping[str, Any]) -> Usage:
        meta = response.get("usageMetadata")
        cached = tokens(meta, "cachedContentTokenCount")
        prompt = tokens(meta, "promptTokenCount") + tokens(meta, "toolUsePromptTokenCount")
        return Usage(
            input=max(prompt - cached, 0),
            output=tokens(meta, "candidatesTokenCount"),
            reasoning=tokens(meta, "thoughtsTokenCount"),
            cache_read=cached,
        )

    def error_details(self, response: Any) -> tuple[str, str | None]:
        """The ``error`` object's message and code (a streamed answer wraps it in a list)."""
        if isinstance(response, list) and response:
            response = response[0]
        return error_fields(response, ("error",))

    def error(self, status: int, body: bytes) -> ProviderError:
        """As the base, except that a rejected key, which Gemini answers with a 400
        ``INVALID_ARGUMENT`` whose reason is ``API_KEY_INVALID``, is an auth error."""
        error = super().error(status, body)
        if isinstance(error, ContextOverflowError) or b'"API_KEY_INVALID"' not in body:
            return error
        auth = MessageError(name="AuthError", message=error.detail)
        return ProviderAuthError(self.name, auth, status=status, detail=error.detail)
