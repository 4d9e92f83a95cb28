"""The provider-neutral request: what every wire format encodes.

A ``Request`` is the system blocks, the tool table and the model view of one step, plus the
cache marks the breakpoint policy placed. It carries no provider syntax: the encoders in
``contextledger.providers`` turn it into each provider's JSON. ``CachePolicy`` describes how
those marks are placed (``contextledger.policy._cache`` places them; ``request.cache*`` in the
config chooses the policy).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from contextledger.events._parts import ModelRef, ToolChoice, ToolSchema
from contextledger.vocabulary._messages import ModelMessage

CacheTTL = Literal["5m", "1h"]
MarkTarget = Literal["tool", "system", "message"]
#: How automatic breakpoints are placed (``request.cache``; ``contextledger.policy._cache``).
CacheMode = Literal["auto", "ai-sdk", "none"]
#: Which message an automatic breakpoint marks (``request.cache_messages``).
MessageTarget = Literal["latest-user-message", "latest-assistant"]


class CacheMark(msgspec.Struct, frozen=True, gc=False, kw_only=True, omit_defaults=True):
    """A prompt-cache breakpoint: the prefix up to and including ``target[index]`` is cached.

    ``index`` counts tool definitions, system blocks or view messages from zero. ``ttl`` is
    None for the provider's default lifetime (five minutes on Anthropic and Bedrock).
    """

    target: MarkTarget
    index: int
    ttl: CacheTTL | None = None


class Request(msgspec.Struct, frozen=True, kw_only=True):
    """One model call, before encoding.

    ``system`` is the system prompt as at most a few stable blocks; ``tools`` the tool table
    in its pinned order; ``messages`` the model view; ``marks`` the cache breakpoints.
    ``session_id`` becomes OpenAI's ``prompt_cache_key``. ``options`` are extra top-level
    fields passed through to the wire body after the messages (temperature, for example).
    """

    model: ModelRef
    session_id: str
    system: tuple[str, ...] = ()
    tools: tuple[ToolSchema, ...] = ()
    messages: tuple[ModelMessage, ...] = ()
    marks: tuple[CacheMark, ...] = ()
    max_output_tokens: int | None = None
    tool_choice: ToolChoice | None = None
    stream: bool = False
    options: dict[str, Any] = {}

    def message_marks(self) -> dict[int, CacheMark]:
        """The marks on messages, by message index."""
        return {m.index: m for m in self.marks if m.target == "message"}

    def marked(self, target: MarkTarget) -> dict[int, CacheMark]:
        """The marks on ``target``, by index."""
        return {m.index: m for m in self.marks if m.target == target}


class CachePolicy(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How automatic breakpoints are placed.

    ``mode``: ``"auto"`` (the native policy), ``"ai-sdk"`` (first two system blocks, last two
    messages) or ``"none"`` (explicit hints only). For ``"auto"``, ``tools`` and ``system``
    mark the last tool and system block, and ``messages`` names the message to mark: the
    latest user message, the latest assistant message, or the last N messages. ``ttl`` is
    the lifetime written into automatic marks (None: the provider's default, five minutes).
    """

    mode: CacheMode = "auto"
    tools: bool = True
    system: bool = True
    messages: MessageTarget | int = "latest-user-message"
    ttl: CacheTTL | None = None
