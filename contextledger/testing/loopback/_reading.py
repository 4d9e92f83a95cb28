"""Reading a model's answer the way an agent loop does: its text and its tool calls."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from contextledger.testing.loopback._dialect import ToolUse


class ModelStep(msgspec.Struct, frozen=True, kw_only=True):
    """What one answer asks of the loop: the ``text`` the model wrote, the tool ``calls``
    to run (ids as the provider issued them) and the API's stop reason (``tool_use``,
    ``end_turn``, ``max_tokens``; OpenAI's ``tool_calls``, ``stop``, ``length``)."""

    text: str
    calls: tuple[ToolUse, ...]
    stop: str


def read_step(body: Mapping[str, Any]) -> ModelStep:
    """The step of a non-streamed Anthropic Messages or OpenAI Chat Completions answer
    (told apart by their shape: ``content`` blocks or ``choices``). Raises ``ValueError``
    for anything else."""
    if isinstance(body.get("content"), list):
        blocks = [b for b in body["content"] if isinstance(b, Mapping)]
        return ModelStep(
            text="".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text"),
            calls=tuple(
                ToolUse(id=str(b["id"]), name=str(b["name"]), input=b.get("input"))
                for b in blocks
                if b.get("type") == "tool_use"
            ),
            stop=str(body.get("stop_reason")),
        )
    choices = body.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        message = choices[0].get("message") or {}
        calls = tuple(
            ToolUse(
                id=str(c["id"]),
                name=str(c["function"]["name"]),
                input=msgspec.json.decode(c["function"].get("arguments") or "{}"),
            )
            for c in message.get("tool_calls") or []
        )
        return ModelStep(
            text=message.get("content") or "",
            calls=calls,
            stop=str(choices[0].get("finish_reason")),
        )
    raise ValueError("not an Anthropic Messages or OpenAI Chat Completions answer")
