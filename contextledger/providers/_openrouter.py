"""OpenRouter (``POST /api/v1/chat/completions``): the Chat Completions format, with cache
marks passed the way OpenRouter hands them to Anthropic models.

A marked system block or message carries ``cache_control`` (with the mark's ``ttl``) on its
last content part, its content becoming a parts array; tool marks are not sent (OpenRouter
takes markers in message content only). No ``prompt_cache_key``; the output cap is
``max_tokens``. Usage is the chat shape, with ``prompt_tokens_details.cache_write_tokens``
for cache writes (the ``cost`` field is not usage and is ignored).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from contextledger.providers._openai_chat import OpenAIChat
from contextledger.providers._shapes import cache_control
from contextledger.vocabulary._requests import CacheMark, MarkTarget, Request


class OpenRouter(OpenAIChat):
    """The OpenRouter wire format."""

    name: ClassVar[str] = "openrouter"
    max_marks: ClassVar[int] = 4
    markable: ClassVar[frozenset[MarkTarget]] = frozenset({"system", "message"})
    cap_field: ClassVar[str] = "max_tokens"
    sends_cache_key: ClassVar[bool] = False

    def cache_control(self, mark: CacheMark) -> dict[str, str]:
        return cache_control(mark)

    def path(self, request: Request) -> str:
        return "/api/v1/chat/completions"

    def error_details(self, response: Any) -> tuple[str, str | None]:
        """The message, followed by the upstream provider's own error text when OpenRouter
        relays one (``error.metadata.raw``: where an upstream context overflow is said)."""
        message, code = super().error_details(response)
        error = response.get("error") if isinstance(response, Mapping) else None
        metadata = error.get("metadata") if isinstance(error, Mapping) else None
        raw = metadata.get("raw") if isinstance(metadata, Mapping) else None
        if isinstance(raw, str) and raw:
            message = f"{message}: {raw}"
        return message, code
