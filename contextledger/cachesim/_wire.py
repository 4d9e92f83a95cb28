"""Blocks of a request as a provider API receives it: from its JSON body, not a ``Request``.

A server that answers requests as they arrive (the loopback provider of
``contextledger.testing``), or a tool reading captured bodies, sees only the JSON. The blocks
are cut as ``blocks_from_request`` cuts a ``Request``: one per tool, one per system block,
one per content block of each message (the role is part of the key), so a marked block of
the body is the marked block of the request it was encoded from. Keys and token counts are
those of the block's JSON without its ``cache_control`` (moving a marker does not change what
is cached), at four characters per token, rounded up.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from contextledger.cachesim._blocks import Block, BlockPart, Ttl, block_of

#: The Anthropic content blocks of the model's thinking.
THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})


def _ttl(control: Any) -> Ttl | None:
    """The TTL a ``cache_control`` value asks for; None when there is none."""
    if not isinstance(control, Mapping):
        return None
    return "1h" if control.get("ttl") == "1h" else "5m"


def _part(kind: str, item: Any) -> BlockPart | None:
    """The ``part`` of the block of an Anthropic item: ``"thinking"`` for a thinking or
    redacted thinking block, ``"user_input"`` for a user block that is not a tool result."""
    block_type = item.get("type") if isinstance(item, Mapping) else None
    if kind == "message:assistant" and block_type in THINKING_TYPES:
        return "thinking"
    if kind == "message:user" and block_type != "tool_result":
        return "user_input"
    return None


def _block(kind: str, item: Any, part: BlockPart | None = None) -> Block:
    """The block of one JSON item, its marker (if any) taken off for the key and count."""
    ttl: Ttl | None = None
    if isinstance(item, Mapping) and "cache_control" in item:
        ttl = _ttl(item["cache_control"])
        item = {k: v for k, v in item.items() if k != "cache_control"}
    return block_of(kind, msgspec.json.encode(item), ttl, part)


def _parts(content: Any) -> list[Any]:
    """Content as a list of blocks: a string is one text block; an empty string, none."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content) if isinstance(content, list) else []


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def blocks_from_anthropic_body(body: Mapping[str, Any]) -> tuple[Block, ...]:
    """The blocks of an Anthropic Messages body: ``tools``, then ``system`` (a string is one
    block), then each message's content blocks, in the order the API caches them; a thinking
    block is a ``"thinking"`` block, a user block but a tool result a ``"user_input"`` one. A
    top-level ``cache_control`` (automatic caching) puts a breakpoint on the last block."""
    blocks = [_block("tool", tool) for tool in _list(body.get("tools"))]
    blocks.extend(_block("system", part) for part in _parts(body.get("system")))
    for message in _list(body.get("messages")):
        if isinstance(message, Mapping):
            kind = f"message:{message.get('role')}"
            blocks.extend(
                _block(kind, part, _part(kind, part)) for part in _parts(message.get("content"))
            )
    automatic = _ttl(body.get("cache_control"))
    if automatic is not None and blocks:
        blocks[-1] = msgspec.structs.replace(blocks[-1], breakpoint=automatic)
    return tuple(blocks)


def anthropic_prefix(body: Mapping[str, Any]) -> tuple[str | None, int]:
    """What an Anthropic Messages body's cached messages depend on beside its blocks: its
    tool choice (its ``type``; None when unset, and without tools, where the API takes none)
    and how many of its blocks are tools and system blocks (``SimRequest.tool_choice`` and
    ``prefix_blocks``)."""
    tools = _list(body.get("tools"))
    choice = body.get("tool_choice") if tools else None
    kind = choice.get("type") if isinstance(choice, Mapping) else None
    head = len(tools) + len(_parts(body.get("system")))
    return (kind if isinstance(kind, str) else None), head


def blocks_from_chat_body(body: Mapping[str, Any]) -> tuple[Block, ...]:
    """The blocks of an OpenAI Chat Completions body: each tool, then each message's content
    parts (a string is one part) and tool calls; a ``tool`` message is one block (its call
    id and content). OpenAI caches implicitly, so no block carries a breakpoint."""
    blocks = [_block("tool", tool) for tool in _list(body.get("tools"))]
    for message in _list(body.get("messages")):
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        kind = f"message:{role}"
        if role == "tool":
            item = {k: v for k, v in message.items() if k != "role"}
            blocks.append(_block(kind, item))
            continue
        items = [*_parts(message.get("content")), *_list(message.get("tool_calls"))]
        blocks.extend(_block(kind, item) for item in items)
    return tuple(msgspec.structs.replace(b, breakpoint=None) if b.breakpoint else b for b in blocks)
