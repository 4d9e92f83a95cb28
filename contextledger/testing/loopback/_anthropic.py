"""The Anthropic Messages API (``POST /v1/messages``) as the loopback provider speaks it.

Requests are checked as the API checks them, with its wordings: required headers and
fields, no unknown top-level field, roles, non-empty text, the first message from the user,
every ``tool_use`` answered by a ``tool_result`` in the next message (and every result
answering a call of the message before it), tools defined when the history uses them, at
most four ``cache_control`` markers with one-hour TTLs before five-minute ones, the output
cap within the model's, and the prompt (with the cap) within the window. Errors are
``{"type": "error", "error": {"type", "message"}, "request_id"}``; usage reports
``input_tokens`` (uncached), ``cache_creation_input_tokens``, ``cache_read_input_tokens``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

from contextledger.cachesim._wire import anthropic_prefix, blocks_from_anthropic_body
from contextledger.prices._tables import Family
from contextledger.testing.loopback._dialect import (
    Answer,
    ApiError,
    Dialect,
    ParsedRequest,
    ToolResultText,
    ToolUse,
    Turn,
    asks_for_summary,
    merged,
    text_of,
)
from contextledger.testing.loopback._faults import Fault
from contextledger.vocabulary._models import Model

#: The top-level fields the Messages API takes; any other is "Extra inputs are not permitted".
KNOWN_FIELDS: Final = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "system",
        "tools",
        "tool_choice",
        "metadata",
        "stop_sequences",
        "stream",
        "temperature",
        "top_k",
        "top_p",
        "thinking",
        "cache_control",
        "service_tier",
        "container",
        "mcp_servers",
        "context_management",
    }
)
#: Content block types a message may hold.
BLOCK_TYPES: Final = frozenset(
    {
        "text",
        "image",
        "document",
        "search_result",
        "tool_use",
        "tool_result",
        "server_tool_use",
        "web_search_tool_result",
        "thinking",
        "redacted_thinking",
    }
)
#: Anthropic honours at most four cache breakpoints per request.
MAX_CACHE_MARKS: Final = 4
INVALID: Final = "invalid_request_error"


def _invalid(message: str) -> ApiError:
    return ApiError(status=400, type=INVALID, message=message)


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def _marks(body: Mapping[str, Any]) -> list[str]:
    """The TTL of every ``cache_control`` marker, in prompt order (tools, system,
    messages), the automatic one last."""
    items: list[Any] = list(body.get("tools") or [])
    system = body.get("system")
    if isinstance(system, list):
        items.extend(system)
    for message in body.get("messages") or []:
        if isinstance(message, Mapping):
            items.extend(b for b in _blocks(message.get("content")))
    found = [
        item["cache_control"]
        for item in items
        if isinstance(item, Mapping) and isinstance(item.get("cache_control"), Mapping)
    ]
    if isinstance(body.get("cache_control"), Mapping):
        found.append(body["cache_control"])
    return ["1h" if c.get("ttl") == "1h" else "5m" for c in found]


class AnthropicMessages(Dialect):
    """The Messages API's rules and shapes."""

    api: ClassVar[str] = "anthropic"
    path: ClassVar[str] = "/v1/messages"
    family: ClassVar[Family] = "anthropic"
    request_id_header: ClassVar[str] = "request-id"

    def conversation(self, body: Any) -> str:
        metadata = body.get("metadata") if isinstance(body, Mapping) else None
        user = metadata.get("user_id") if isinstance(metadata, Mapping) else None
        return user if isinstance(user, str) else ""

    def authenticate(self, headers: Mapping[str, str], api_key: str | None) -> ApiError | None:
        key = headers.get("x-api-key")
        if not key:
            return ApiError(
                status=401, type="authentication_error", message="x-api-key header is required"
            )
        if api_key is not None and key != api_key:
            return ApiError(status=401, type="authentication_error", message="invalid x-api-key")
        if not headers.get("anthropic-version"):
            return _invalid("anthropic-version: header is required")
        return None

    def read(self, body: Any, *, require_user_first: bool) -> ParsedRequest | ApiError:
        if not isinstance(body, Mapping):
            return _invalid("Input should be a valid dictionary or object to extract fields from")
        for name in body:
            if name not in KNOWN_FIELDS:
                return _invalid(f"{name}: Extra inputs are not permitted")
        for name in ("model", "messages", "max_tokens"):
            if name not in body:
                return _invalid(f"{name}: Field required")
        model, max_tokens, messages = body["model"], body["max_tokens"], body["messages"]
        if not isinstance(model, str):
            return _invalid("model: Input should be a valid string")
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
            return _invalid("max_tokens: Input should be a valid integer")
        if max_tokens < 1:
            return _invalid("max_tokens: Input should be greater than or equal to 1")
        if not isinstance(messages, list):
            return _invalid("messages: Input should be a valid list")
        if not messages:
            return _invalid("messages: at least one message is required")
        tools = body.get("tools") or []
        if not isinstance(tools, list):
            return _invalid("tools: Input should be a valid list")
        names = [t.get("name") for t in tools if isinstance(t, Mapping)]
        if len(set(names)) != len(names):
            return _invalid("tools: Tool names must be unique.")
        if body.get("tool_choice") is not None and not tools:
            return _invalid("tool_choice may only be specified while providing tools")
        turns = self._turns(messages, require_user_first)
        if isinstance(turns, ApiError):
            return turns
        uses_tools = any(t.tool_uses or t.tool_results for t in turns)
        if uses_tools and not tools:
            return _invalid(
                "Requests which include `tool_use` or `tool_result` blocks must define tools."
            )
        error = _pairing_error(messages) or _marks_error(body)
        if error is not None:
            return error
        choice, prefix_blocks = anthropic_prefix(body)
        return ParsedRequest(
            model=model,
            max_tokens=max_tokens,
            conversation=self.conversation(body),
            tools_allowed=bool(tools) and choice != "none" and not asks_for_summary(body),
            stream=body.get("stream") is True,
            turns=merged(list(turns)),
            blocks=blocks_from_anthropic_body(body),
            tool_choice=choice,
            prefix_blocks=prefix_blocks,
        )

    def _turns(self, messages: list[Any], require_user_first: bool) -> list[Turn] | ApiError:
        turns: list[Turn] = []
        for i, message in enumerate(messages):
            if not isinstance(message, Mapping):
                return _invalid(f"messages.{i}: Input should be a valid dictionary")
            role = message.get("role")
            if role not in ("user", "assistant"):
                return _invalid(f"messages.{i}.role: Input should be 'user' or 'assistant'")
            if i == 0 and role != "user" and require_user_first:
                return _invalid('messages: first message must use the "user" role')
            content = message.get("content")
            if not isinstance(content, str | list):
                return _invalid(f"messages.{i}.content: Input should be a valid list")
            blocks = _blocks(content)
            last = i == len(messages) - 1
            if not blocks and not (last and role == "assistant"):
                return _invalid(
                    f"messages.{i}: all messages must have non-empty content except for the "
                    "optional final assistant message"
                )
            uses: list[ToolUse] = []
            results: list[ToolResultText] = []
            for j, block in enumerate(blocks):
                if not isinstance(block, Mapping) or block.get("type") not in BLOCK_TYPES:
                    kind = block.get("type") if isinstance(block, Mapping) else None
                    return _invalid(
                        f"messages.{i}.content.{j}: Input tag {kind!r} found using 'type' "
                        "does not match any of the expected tags"
                    )
                kind = block["type"]
                if kind == "text" and not (isinstance(block.get("text"), str) and block["text"]):
                    return _invalid("messages: text content blocks must be non-empty")
                if kind == "tool_use":
                    uses.append(
                        ToolUse(
                            id=str(block.get("id")),
                            name=str(block.get("name")),
                            input=block.get("input"),
                        )
                    )
                elif kind == "tool_result":
                    results.append(
                        ToolResultText(
                            tool_use_id=str(block.get("tool_use_id")),
                            text=text_of(block.get("content")),
                        )
                    )
            if last and role == "assistant" and blocks:
                final = blocks[-1]
                if final.get("type") == "text" and final["text"] != final["text"].rstrip():
                    return _invalid(
                        "messages: final assistant content cannot end with trailing whitespace"
                    )
            turns.append(Turn(role=role, tool_uses=tuple(uses), tool_results=tuple(results)))
        return turns

    def limits(self, request: ParsedRequest, model: Model) -> ApiError | None:
        cap = request.max_tokens or 0
        most = model.limits.output
        if most and cap > most:
            return _invalid(
                f"max_tokens: {cap} > {most}, which is the maximum allowed number of output "
                f"tokens for {request.model}"
            )
        window = model.limits.context
        prompt = request.prompt_tokens
        if window and prompt > window:
            return _invalid(f"prompt is too long: {prompt} tokens > {window} maximum")
        if window and prompt + cap > window:
            return _invalid(
                f"input length and `max_tokens` exceed context limit: {prompt} + {cap} > "
                f"{window}, decrease input length or `max_tokens` and try again"
            )
        return None

    def unknown_model(self, model: str) -> ApiError:
        return ApiError(status=404, type="not_found_error", message=f"model: {model}")

    def invalid(self, message: str, *, status: int = 400) -> ApiError:
        return ApiError(status=status, type=INVALID, message=message)

    def fault(self, fault: Fault, prompt_tokens: int, window: int) -> ApiError:
        headers = fault.headers()
        if fault.kind == "rate_limit":
            return ApiError(
                status=429,
                type="rate_limit_error",
                message="This request would exceed the rate limit for your organization of "
                "50 requests per minute. Please try again later.",
                headers=headers,
            )
        if fault.kind == "overloaded":
            return ApiError(status=529, type="overloaded_error", message="Overloaded")
        if fault.kind == "overflow":
            over = max(prompt_tokens, window + 1)
            return _invalid(f"prompt is too long: {over} tokens > {window} maximum")
        return ApiError(status=500, type="api_error", message="Internal server error")

    def error_body(self, error: ApiError, request_id: str) -> dict[str, Any]:
        return {
            "type": "error",
            "error": {"type": error.type, "message": error.message},
            "request_id": request_id,
        }

    def answer_body(self, answer: Answer) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if answer.text:
            content.append({"type": "text", "text": answer.text})
        for call_id, call in answer.calls:
            content.append(
                {"type": "tool_use", "id": call_id, "name": call.name, "input": call.input}
            )
        cost = answer.cost
        return {
            "id": answer.message_id,
            "type": "message",
            "role": "assistant",
            "model": answer.model,
            "content": content,
            "stop_reason": answer.stop,
            "stop_sequence": None,
            "usage": {
                "input_tokens": cost.uncached,
                "cache_creation_input_tokens": cost.cache_write,
                "cache_read_input_tokens": cost.cache_read,
                "cache_creation": {
                    "ephemeral_5m_input_tokens": cost.cache_write - cost.cache_write_1h,
                    "ephemeral_1h_input_tokens": cost.cache_write_1h,
                },
                "output_tokens": answer.output_tokens,
                "service_tier": "standard",
            },
        }

    def tool_id(self, n: int) -> str:
        return f"toolu_loopback_{n:06d}"

    def message_id(self, n: int) -> str:
        return f"msg_loopback_{n:06d}"


def _pairing_error(messages: list[Any]) -> ApiError | None:
    """The error for a ``tool_use`` not answered in the next message, or a ``tool_result``
    answering no call of the message before it (consecutive messages of one role count as
    one, as the API combines them), or a ``tool_use`` id used twice."""
    groups: list[tuple[str, list[tuple[int, int, Mapping[str, Any]]]]] = []
    for i, message in enumerate(messages):
        blocks = [(i, j, b) for j, b in enumerate(_blocks(message["content"]))]
        if groups and groups[-1][0] == message["role"]:
            groups[-1][1].extend(blocks)
        else:
            groups.append((message["role"], blocks))
    seen: set[str] = set()
    for g, (role, blocks) in enumerate(groups):
        if role == "assistant":
            calls = [(i, j, b.get("id")) for i, j, b in blocks if b["type"] == "tool_use"]
            for i, j, call_id in calls:
                if call_id in seen:
                    return _invalid(f"messages.{i}.content.{j}: `tool_use` ids must be unique")
                seen.add(str(call_id))
            following = groups[g + 1][1] if g + 1 < len(groups) else []
            answered = {b.get("tool_use_id") for _, _, b in following if b["type"] == "tool_result"}
            missing = [str(c) for _, _, c in calls if c not in answered]
            if missing:
                return _invalid(
                    f"messages.{calls[0][0]}: `tool_use` ids were found without `tool_result` "
                    f"blocks immediately after: {', '.join(missing)}. Each `tool_use` block "
                    "must have a corresponding `tool_result` block in the next message."
                )
        else:
            previous = groups[g - 1][1] if g > 0 else []
            made = {b.get("id") for _, _, b in previous if b["type"] == "tool_use"}
            for i, j, b in blocks:
                if b["type"] == "tool_result" and b.get("tool_use_id") not in made:
                    return _invalid(
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {b.get('tool_use_id')}. Each `tool_result` "
                        "block must have a corresponding `tool_use` block in the previous "
                        "message."
                    )
    return None


def _marks_error(body: Mapping[str, Any]) -> ApiError | None:
    """The error for more than four cache markers, or a one-hour marker after a five-minute
    one (longer TTLs must come first)."""
    ttls = _marks(body)
    if len(ttls) > MAX_CACHE_MARKS:
        return _invalid(
            f"A maximum of {MAX_CACHE_MARKS} blocks with cache_control may be provided. "
            f"Found {len(ttls)}."
        )
    if "5m" in ttls and "1h" in ttls[ttls.index("5m") :]:
        return _invalid(
            "a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block"
        )
    return None
