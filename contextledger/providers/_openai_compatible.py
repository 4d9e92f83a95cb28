"""OpenAI-compatible servers (``POST /chat/completions``; the base URL includes the version).

The Chat Completions format with ``cache_control: {"type": "ephemeral"}`` on the last content
part of marked system blocks and messages, as opencode's ``openaiCompatible`` provider
option sends it (servers that cache explicitly read it, the others ignore it). The output cap
is ``max_tokens``, the field these servers share; ``prompt_cache_key`` is sent only when the
request's options carry it. Usage is the chat shape, or DeepSeek's
``prompt_cache_hit_tokens`` / ``prompt_cache_miss_tokens`` when the server reports both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import msgspec

from contextledger.events._parts import Usage
from contextledger.providers._openai_chat import OpenAIChat
from contextledger.providers._shapes import tokens
from contextledger.vocabulary._requests import CacheMark, MarkTarget, Request

#: DeepSeek's split of ``prompt_tokens``: cache hits and the uncached rest.
_DEEPSEEK_FIELDS = ("prompt_cache_hit_tokens", "prompt_cache_miss_tokens")


class OpenAICompatible(OpenAIChat):
    """The wire format of OpenAI-compatible chat servers."""

    name: ClassVar[str] = "openai-compatible"
    max_marks: ClassVar[int] = 4
    markable: ClassVar[frozenset[MarkTarget]] = frozenset({"system", "message"})
    cap_field: ClassVar[str] = "max_tokens"
    sends_cache_key: ClassVar[bool] = False

    def cache_control(self, mark: CacheMark) -> dict[str, str]:
        return {"type": "ephemeral"}

    def path(self, request: Request) -> str:
        return "/chat/completions"

    def decode_usage(self, response: Mapping[str, Any]) -> Usage:
        usage = super().decode_usage(response)
        raw = response.get("usage")
        if not isinstance(raw, Mapping) or any(raw.get(k) is None for k in _DEEPSEEK_FIELDS):
            return usage
        return msgspec.structs.replace(
            usage,
            input=tokens(raw, "prompt_cache_miss_tokens"),
            cache_read=tokens(raw, "prompt_cache_hit_tokens"),
        )
