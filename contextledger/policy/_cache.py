"""Where prompt-cache breakpoints go.

Two placements, both pure:

* ``ai_sdk_marks``: the rule opencode applies through the AI SDK for Anthropic-like models:
  the first two system blocks and the last two other messages (at most four, Anthropic's
  limit).
* ``auto_marks``: the native automatic policy: the last tool definition, the last system
  block, and the chosen message: by default the latest user message, which stays put across
  every step of a tool loop, so each intra-turn call reads what the first one wrote.

``place_marks`` puts explicit hints first (a hint always wins over an automatic mark at the
same place) and fills up with automatic marks, never beyond the provider's limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from contextledger.events._parts import ModelRef
from contextledger.vocabulary._messages import ModelMessage
from contextledger.vocabulary._requests import CacheMark, CachePolicy, CacheTTL, MessageTarget

#: Anthropic and Bedrock accept at most four breakpoints per request.
MAX_MARKS: Final = 4

#: Anthropic and Bedrock look for a cached prefix at a breakpoint and at most 20 content-block
#: boundaries before it; a prefix cached further back is not read.
LOOKBACK_BLOCKS: Final = 20


def ai_sdk_marks(
    system_blocks: int, messages: Sequence[ModelMessage], ttl: CacheTTL | None = None
) -> tuple[CacheMark, ...]:
    """The first two system blocks and the last two messages."""
    marks = [CacheMark(target="system", index=i, ttl=ttl) for i in range(min(2, system_blocks))]
    first = max(0, len(messages) - 2)
    marks.extend(CacheMark(target="message", index=i, ttl=ttl) for i in range(first, len(messages)))
    return tuple(marks)


def marked_messages(messages: Sequence[ModelMessage], target: MessageTarget | int) -> list[int]:
    """The indices of the messages ``target`` selects (newest last)."""
    if isinstance(target, int):
        return list(range(max(0, len(messages) - target), len(messages)))
    role = "user" if target == "latest-user-message" else "assistant"
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == role and (role != "user" or not message.synthetic):
            return [index]
    return []


def auto_marks(
    tools: int, system_blocks: int, messages: Sequence[ModelMessage], policy: CachePolicy
) -> tuple[CacheMark, ...]:
    """The native policy's marks, most valuable first: tools, system, then messages."""
    ttl = policy.ttl
    marks: list[CacheMark] = []
    if policy.tools and tools:
        marks.append(CacheMark(target="tool", index=tools - 1, ttl=ttl))
    if policy.system and system_blocks:
        marks.append(CacheMark(target="system", index=system_blocks - 1, ttl=ttl))
    marks.extend(
        CacheMark(target="message", index=i, ttl=ttl)
        for i in reversed(marked_messages(messages, policy.messages))
    )
    return tuple(marks)


def place_marks(
    policy: CachePolicy,
    *,
    tools: int,
    system_blocks: int,
    messages: Sequence[ModelMessage],
    hints: Sequence[CacheMark] = (),
    limit: int = MAX_MARKS,
) -> tuple[CacheMark, ...]:
    """The breakpoints of a request: the explicit ``hints`` (in order, up to ``limit``), then
    the policy's marks at places no hint took, while fewer than ``limit``. Sorted by place.

    Anthropic wants longer lifetimes before shorter ones, so an automatic mark placed before
    a one-hour mark gets one hour too (hints are left as given)."""
    if policy.mode == "none":
        automatic: tuple[CacheMark, ...] = ()
    elif policy.mode == "ai-sdk":
        automatic = ai_sdk_marks(system_blocks, messages, policy.ttl)
    else:
        automatic = auto_marks(tools, system_blocks, messages, policy)
    chosen: dict[tuple[str, int], CacheMark] = {}
    for mark in (*hints, *automatic):
        if len(chosen) >= limit:
            break
        chosen.setdefault((mark.target, mark.index), mark)
    hinted = {id(m) for m in hints}
    order = {"tool": 0, "system": 1, "message": 2}
    placed = sorted(chosen.values(), key=lambda m: (order[m.target], m.index))
    later_hour = False
    for i in range(len(placed) - 1, -1, -1):
        mark = placed[i]
        if mark.ttl == "1h":
            later_hour = True
        elif later_hour and id(mark) not in hinted:
            placed[i] = msgspec.structs.replace(mark, ttl="1h")
    return tuple(placed)


def writes_at_the_end(policy: CachePolicy) -> bool:
    """Whether ``policy`` marks a request's last message, so that a successful request
    leaves its whole prompt cached: ``ai-sdk``, or ``auto`` marking the last N messages."""
    if policy.mode == "ai-sdk":
        return True
    return policy.mode == "auto" and isinstance(policy.messages, int) and policy.messages > 0


def watermark_mark(
    messages: Sequence[ModelMessage],
    watermark: str | None,
    marks: Sequence[CacheMark],
    ttl: CacheTTL | None = None,
) -> CacheMark | None:
    """A mark on the end of the prompt the last successful step sent, when no message mark
    of ``marks`` would find it: ``watermark`` is the id of the history message that request
    ended with (where the pinned prefix advanced to), its last model message in ``messages``
    is where that prompt was cached; a mark after it reads it only within
    ``LOOKBACK_BLOCKS`` content blocks. None when a mark reaches it, when the watermark is
    not in the view (compacted away), or when it is the last message (nothing new)."""
    if watermark is None:
        return None
    end = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i].source_id == watermark),
        None,
    )
    if end is None or end == len(messages) - 1:
        return None
    blocks = 0
    reach = {m.index for m in marks if m.target == "message"}
    for index in range(end, len(messages)):
        if index > end:
            blocks += len(messages[index].content)
        if index in reach:
            if blocks <= LOOKBACK_BLOCKS:
                return None
            break
    return CacheMark(target="message", index=end, ttl=ttl)


def anthropic_like(model: ModelRef) -> bool:
    """Whether opencode's AI-SDK path would apply caching to ``model``: an Anthropic provider
    or a model id naming Claude (any gateway routing to one)."""
    provider = model.provider_id.lower()
    model_id = model.model_id.lower()
    return (
        provider in ("anthropic", "google-vertex-anthropic")
        or "anthropic" in model_id
        or "claude" in model_id
    )
