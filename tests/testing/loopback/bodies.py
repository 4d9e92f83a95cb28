"""Request bodies and headers for the loopback provider's tests, as the APIs take them."""

from __future__ import annotations

from typing import Any

import msgspec

from contextledger.testing.loopback import LoopbackCore, Reaction
from contextledger.vocabulary._models import Model, ModelLimits

ANTHROPIC_HEADERS = {
    "content-type": "application/json",
    "anthropic-version": "2023-06-01",
    "x-api-key": "test-key",
}
CHAT_HEADERS = {"content-type": "application/json", "authorization": "Bearer test-key"}
SONNET = "claude-sonnet-4-5"
GPT = "gpt-5"
#: A small window, to reach its limits with short requests.
SMALL = Model(
    provider_id="anthropic",
    model_id="claude-sonnet-4-small-window",
    limits=ModelLimits(context=2_000, output=1_000),
)
SMALL_GPT = Model(
    provider_id="openai",
    model_id="gpt-5-small-window",
    limits=ModelLimits(context=2_000, output=1_000),
)
MODELS = (
    Model(
        provider_id="anthropic", model_id=SONNET, limits=ModelLimits(context=200_000, output=64_000)
    ),
    Model(provider_id="openai", model_id=GPT, limits=ModelLimits(context=400_000, output=128_000)),
    SMALL,
    SMALL_GPT,
)
BASH = {"name": "bash", "description": "Run a command.", "input_schema": {"type": "object"}}
CHAT_BASH = {
    "type": "function",
    "function": {"name": "bash", "description": "Run a command.", "parameters": {"type": "object"}},
}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def tool_use(call_id: str, command: str = "ls", text: str = "") -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    blocks.append(
        {"type": "tool_use", "id": call_id, "name": "bash", "input": {"command": command}}
    )
    return {"role": "assistant", "content": blocks}


def tool_result(call_id: str, output: str = "ok") -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": call_id, "content": output}],
    }


def anthropic(*messages: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """An Anthropic Messages body with the bash tool; ``fields`` override or add fields."""
    body: dict[str, Any] = {
        "model": SONNET,
        "system": [{"type": "text", "text": "Be brief."}],
        "tools": [BASH],
        "messages": list(messages) or [user("hello")],
        "max_tokens": 1024,
    }
    body.update(fields)
    return body


def chat_call(call_id: str, command: str = "ls") -> dict[str, Any]:
    arguments = msgspec.json.encode({"command": command}).decode()
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "bash", "arguments": arguments},
            }
        ],
    }


def chat_result(call_id: str, output: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": output}


def chat(*messages: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A Chat Completions body with the bash tool; ``fields`` override or add fields."""
    body: dict[str, Any] = {
        "model": GPT,
        "tools": [CHAT_BASH],
        "messages": [{"role": "system", "content": "Be brief."}, *messages]
        if messages
        else [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"}],
        "max_completion_tokens": 1024,
    }
    body.update(fields)
    return body


def post(
    core: LoopbackCore,
    body: Any,
    *,
    api: str = "anthropic",
    at: float = 0.0,
    headers: dict[str, str] | None = None,
) -> tuple[Reaction, Any]:
    """Hand ``body`` (JSON, or raw bytes) to ``core`` as a request to ``api``
    (``"anthropic"`` or ``"chat"``); the reaction and its JSON answer."""
    path = "/v1/chat/completions" if api == "chat" else "/v1/messages"
    default = CHAT_HEADERS if api == "chat" else ANTHROPIC_HEADERS
    raw = body if isinstance(body, bytes) else msgspec.json.encode(body)
    reaction = core.handle("POST", path, default if headers is None else headers, raw, at)
    return reaction, msgspec.json.decode(reaction.body) if reaction.body else None
