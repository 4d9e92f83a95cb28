"""OpenAI Chat Completions (``POST /v1/chat/completions``) as the loopback provider speaks it.

Requests are checked as the API checks them, with its wordings: a bearer key, no unknown
top-level field, known roles, every ``tool`` message answering a call of the assistant
message before its run of tool messages, every call of an assistant message answered by the
tool messages right after it, the output cap within the model's and the prompt (with the
cap) within the window (``context_length_exceeded``). The first message may come from any
role, as on the real API. Errors are ``{"error": {"message", "type", "param", "code"}}``;
usage reports ``prompt_tokens`` (the whole prompt) with ``prompt_tokens_details.
cached_tokens``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

import msgspec

from contextledger.cachesim._wire import blocks_from_chat_body
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

#: The top-level fields Chat Completions takes; any other is an "Unrecognized request
#: argument".
KNOWN_FIELDS: Final = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "max_completion_tokens",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "stream",
        "stream_options",
        "temperature",
        "top_p",
        "n",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "user",
        "safety_identifier",
        "seed",
        "response_format",
        "prompt_cache_key",
        "prompt_cache_retention",
        "reasoning_effort",
        "service_tier",
        "store",
        "metadata",
        "modalities",
        "audio",
        "prediction",
        "verbosity",
        "web_search_options",
        "functions",
        "function_call",
    }
)
ROLES: Final = ("system", "assistant", "user", "function", "tool", "developer")
INVALID: Final = "invalid_request_error"
#: A fixed epoch for ``created`` (2026-01-01T00:00:00Z), so answers are deterministic.
CREATED_EPOCH: Final = 1_767_225_600


def _invalid(message: str, *, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(status=400, type=INVALID, message=message, param=param, code=code)


def _arguments(text: Any) -> Any:
    """A call's arguments as JSON when they parse, else the raw string."""
    if not isinstance(text, str):
        return text
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return text


class OpenAIChat(Dialect):
    """Chat Completions' rules and shapes."""

    api: ClassVar[str] = "openai-chat"
    path: ClassVar[str] = "/v1/chat/completions"
    family: ClassVar[Family] = "openai"
    request_id_header: ClassVar[str] = "x-request-id"

    def conversation(self, body: Any) -> str:
        if not isinstance(body, Mapping):
            return ""
        for name in ("prompt_cache_key", "safety_identifier", "user"):
            value = body.get(name)
            if isinstance(value, str) and value:
                return value
        return ""

    def authenticate(self, headers: Mapping[str, str], api_key: str | None) -> ApiError | None:
        scheme, _, key = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            return ApiError(
                status=401,
                type=INVALID,
                message="You didn't provide an API key. You need to provide your API key in "
                "an Authorization header using Bearer auth (i.e. Authorization: Bearer "
                "YOUR_KEY).",
            )
        if api_key is not None and key.strip() != api_key:
            return ApiError(
                status=401,
                type=INVALID,
                message="Incorrect API key provided.",
                code="invalid_api_key",
            )
        return None

    def read(self, body: Any, *, require_user_first: bool) -> ParsedRequest | ApiError:
        if not isinstance(body, Mapping):
            return _invalid("Invalid type for request body: expected an object.")
        for name in body:
            if name not in KNOWN_FIELDS:
                return _invalid(f"Unrecognized request argument supplied: {name}")
        model = body.get("model")
        if not isinstance(model, str) or not model:
            return _invalid("you must provide a model parameter")
        if "messages" not in body:
            return _invalid(
                "Missing required parameter: 'messages'.",
                param="messages",
                code="missing_required_parameter",
            )
        messages = body["messages"]
        if not isinstance(messages, list):
            return _invalid("Invalid type for 'messages': expected an array.", param="messages")
        if not messages:
            return _invalid(
                "Invalid 'messages': empty array. Expected an array with minimum length 1, "
                "but got an empty array instead.",
                param="messages",
                code="empty_array",
            )
        cap = body.get("max_completion_tokens", body.get("max_tokens"))
        if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap < 1):
            return _invalid(
                f"Invalid 'max_completion_tokens': expected an integer of at least 1, got {cap!r}.",
                param="max_completion_tokens",
                code="invalid_value",
            )
        tools = body.get("tools") or []
        if body.get("tool_choice") is not None and not tools:
            return _invalid(
                "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' "
                "are specified.",
                param="tool_choice",
            )
        turns = _turns(messages)
        if isinstance(turns, ApiError):
            return turns
        return ParsedRequest(
            model=model,
            max_tokens=cap,
            conversation=self.conversation(body),
            tools_allowed=bool(tools)
            and body.get("tool_choice") != "none"
            and not asks_for_summary(body),
            stream=body.get("stream") is True,
            turns=merged(turns),
            blocks=blocks_from_chat_body(body),
        )

    def limits(self, request: ParsedRequest, model: Model) -> ApiError | None:
        cap = request.max_tokens or 0
        most = model.limits.output
        if most and cap > most:
            return _invalid(
                f"max_tokens is too large: {cap}. This model supports at most {most} "
                f"completion tokens, whereas you provided {cap}.",
                param="max_tokens",
                code="invalid_value",
            )
        window = model.limits.context
        prompt = request.prompt_tokens
        if window and prompt > window:
            return _overflow(window, prompt)
        if window and prompt + cap > window:
            return _invalid(
                f"This model's maximum context length is {window} tokens. However, you "
                f"requested {prompt + cap} tokens ({prompt} in the messages, {cap} in the "
                "completion). Please reduce the length of the messages or completion.",
                param="messages",
                code="context_length_exceeded",
            )
        return None

    def unknown_model(self, model: str) -> ApiError:
        return ApiError(
            status=404,
            type=INVALID,
            message=f"The model `{model}` does not exist or you do not have access to it.",
            code="model_not_found",
        )

    def invalid(self, message: str, *, status: int = 400) -> ApiError:
        return ApiError(status=status, type=INVALID, message=message)

    def fault(self, fault: Fault, prompt_tokens: int, window: int) -> ApiError:
        headers = fault.headers()
        if fault.kind == "rate_limit":
            return ApiError(
                status=429,
                type="tokens",
                message="Rate limit reached for requests per min (RPM): Limit 50, Used 50, "
                "Requested 1. Please try again later.",
                code="rate_limit_exceeded",
                headers=headers,
            )
        if fault.kind == "overloaded":
            return ApiError(
                status=503,
                type="server_error",
                message="The engine is currently overloaded, please try again later",
            )
        if fault.kind == "overflow":
            return _overflow(window, max(prompt_tokens, window + 1))
        return ApiError(
            status=500,
            type="server_error",
            message="The server had an error while processing your request. Sorry about that!",
        )

    def error_body(self, error: ApiError, request_id: str) -> dict[str, Any]:
        return {
            "error": {
                "message": error.message,
                "type": error.type,
                "param": error.param,
                "code": error.code,
            }
        }

    def answer_body(self, answer: Answer) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": answer.text or None,
            "refusal": None,
        }
        if answer.calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": msgspec.json.encode(call.input).decode(),
                    },
                }
                for call_id, call in answer.calls
            ]
        finish = {"tool_use": "tool_calls", "end_turn": "stop", "max_tokens": "length"}
        cost = answer.cost
        prompt = cost.uncached + cost.cache_read + cost.cache_write
        details: dict[str, int] = {"cached_tokens": cost.cache_read, "audio_tokens": 0}
        if cost.cache_write:
            details["cache_write_tokens"] = cost.cache_write
        return {
            "id": answer.message_id,
            "object": "chat.completion",
            "created": CREATED_EPOCH + answer.created,
            "model": answer.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": finish[answer.stop],
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": answer.output_tokens,
                "total_tokens": prompt + answer.output_tokens,
                "prompt_tokens_details": details,
                "completion_tokens_details": {
                    "reasoning_tokens": 0,
                    "audio_tokens": 0,
                    "accepted_prediction_tokens": 0,
                    "rejected_prediction_tokens": 0,
                },
            },
            "service_tier": "default",
        }

    def tool_id(self, n: int) -> str:
        return f"call_loopback_{n:06d}"

    def message_id(self, n: int) -> str:
        return f"chatcmpl-loopback-{n:06d}"


def _overflow(window: int, prompt: int) -> ApiError:
    return _invalid(
        f"This model's maximum context length is {window} tokens. However, your messages "
        f"resulted in {prompt} tokens. Please reduce the length of the messages.",
        param="messages",
        code="context_length_exceeded",
    )


def _turns(messages: list[Any]) -> list[Turn] | ApiError:
    """The turns of the messages, or the error for a bad role or a broken call pairing: a
    ``tool`` message must follow (in a run of tool messages) an assistant message whose
    ``tool_calls`` hold its id, and each such call must be answered in that run."""
    turns: list[Turn] = []
    open_calls: dict[str, int] = {}  # the latest assistant's unanswered calls -> its index
    called: set[str] = set()  # every call id of the latest assistant message
    in_run = False  # the previous message was that assistant message or one of its results
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            return _invalid(f"Invalid type for 'messages[{i}]': expected an object.")
        role = message.get("role")
        if role not in ROLES:
            return _invalid(
                f"Invalid value: {role!r}. Supported values are: 'system', 'assistant', "
                "'user', 'function', 'tool', and 'developer'.",
                param=f"messages.[{i}].role",
                code="invalid_value",
            )
        if role != "tool" and open_calls:
            return _unanswered(open_calls)
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not in_run:
                return _invalid(
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                    param=f"messages.[{i}].role",
                )
            if call_id not in called:
                return _invalid(
                    f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in "
                    "'tool_calls' of previous message.",
                    param=f"messages.[{i}].tool_call_id",
                )
            open_calls.pop(str(call_id), None)
            result = ToolResultText(tool_use_id=str(call_id), text=text_of(message.get("content")))
            turns.append(Turn(role="user", tool_results=(result,)))
            continue
        in_run = False
        if role == "assistant":
            calls = [c for c in message.get("tool_calls") or [] if isinstance(c, Mapping)]
            uses = tuple(
                ToolUse(
                    id=str(c.get("id")),
                    name=str((c.get("function") or {}).get("name")),
                    input=_arguments((c.get("function") or {}).get("arguments")),
                )
                for c in calls
            )
            open_calls = {u.id: i for u in uses}
            called = set(open_calls)
            in_run = bool(uses)
            turns.append(Turn(role="assistant", tool_uses=uses))
        elif role in ("user", "function"):
            turns.append(Turn(role="user"))
    if open_calls:
        return _unanswered(open_calls)
    return turns


def _unanswered(open_calls: dict[str, int]) -> ApiError:
    index = next(iter(open_calls.values()))
    return _invalid(
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(open_calls),
        param=f"messages.[{index}].role",
    )
