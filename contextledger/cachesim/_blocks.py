"""The simulator's input: requests as ordered blocks with content hashes and token counts.

A block is a stable unit of the prompt (a tool definition, a system block, one content part
of a message). Its ``key`` identifies its content; a prefix of a request is identified by the
chained hash of its blocks' keys, so two requests share a prefix up to a block boundary when
their keys agree up to there.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Literal

import msgspec

from contextledger.vocabulary._requests import CacheTTL, Request

Ttl = Literal["5m", "1h"]


class Block(msgspec.Struct, frozen=True, kw_only=True):
    """One prompt block: a content ``key``, its ``tokens`` and the TTL of the cache breakpoint
    it carries (Anthropic and Bedrock only; None when it carries none)."""

    key: str
    tokens: int
    breakpoint: Ttl | None = None


class SimRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One model call: its prompt ``blocks`` in order, when it was sent (``at``, seconds) and
    how many tokens it produced."""

    blocks: tuple[Block, ...]
    at: float
    output_tokens: int = 0

    @property
    def prompt_tokens(self) -> int:
        """Every prompt token of the call."""
        return sum(b.tokens for b in self.blocks)


def prefixes(blocks: Sequence[Block]) -> list[tuple[str, int]]:
    """The key and cumulative token count of every prefix ending at a block boundary, in
    order: entry ``j`` is the prefix through ``blocks[j]``."""
    out: list[tuple[str, int]] = []
    digest = b""
    total = 0
    for block in blocks:
        digest = hashlib.sha256(digest + block.key.encode()).digest()
        total += block.tokens
        out.append((digest.hex(), total))
    return out


class PrefixChain:
    """``prefixes`` of a session's requests in turn: a request's entries for the leading
    blocks it shares with the request before (equal keys and tokens) are that request's own
    entries, not new ones. A session's requests mostly repeat the prompt before them, so the
    session's prefixes cost, and hold, about what each request adds."""

    __slots__ = ("_blocks", "_entries")

    def __init__(self) -> None:
        self._blocks: Sequence[Block] = ()
        self._entries: list[tuple[str, int]] = []

    def __call__(self, blocks: Sequence[Block]) -> list[tuple[str, int]]:
        """``prefixes(blocks)``."""
        same = 0
        for old, new in zip(self._blocks, blocks, strict=False):
            if old is not new and (old.key != new.key or old.tokens != new.tokens):
                break
            same += 1
        entries = self._entries[:same]
        digest = bytes.fromhex(entries[-1][0]) if entries else b""
        total = entries[-1][1] if entries else 0
        for block in blocks[same:]:
            digest = hashlib.sha256(digest + block.key.encode()).digest()
            total += block.tokens
            entries.append((digest.hex(), total))
        self._blocks, self._entries = blocks, entries
        return entries


def block_of(kind: str, payload: bytes, ttl: Ttl | None = None) -> Block:
    """A block of ``payload`` (JSON) counted at four characters per token, rounded up."""
    key = hashlib.sha256(kind.encode() + b"\x00" + payload).hexdigest()
    chars = len(payload.decode())
    return Block(key=key, tokens=max(1, -(-chars // 4)), breakpoint=ttl)


def _ttl(ttl: CacheTTL | None) -> Ttl:
    return "1h" if ttl == "1h" else "5m"


def _longest(a: Ttl | None, b: Ttl) -> Ttl:
    return "1h" if "1h" in (a, b) else "5m"


def blocks_from_request(request: Request) -> tuple[Block, ...]:
    """The blocks of a builder ``Request``: one per tool, one per system block, one per
    content part of each message (the message's role is part of its parts' keys). A mark on a
    tool or system block puts a breakpoint on that block; a mark on a message puts it on the
    message's last content part (a message without content carries none)."""
    encode = msgspec.json.encode
    tools = request.marked("tool")
    system = request.marked("system")
    messages = request.marked("message")
    blocks: list[Block] = []
    for i, tool in enumerate(request.tools):
        mark = tools.get(i)
        blocks.append(block_of("tool", encode(tool), _ttl(mark.ttl) if mark else None))
    for i, text in enumerate(request.system):
        mark = system.get(i)
        blocks.append(block_of("system", encode(text), _ttl(mark.ttl) if mark else None))
    for i, message in enumerate(request.messages):
        parts = [block_of(f"message:{message.role}", encode(p)) for p in message.content]
        mark = messages.get(i)
        if mark is not None and parts:
            last = parts[-1]
            parts[-1] = msgspec.structs.replace(
                last, breakpoint=_longest(last.breakpoint, _ttl(mark.ttl))
            )
        blocks.extend(parts)
    return tuple(blocks)


def sim_request(request: Request, at: float, output_tokens: int = 0) -> SimRequest:
    """A ``SimRequest`` of a builder ``Request`` sent at ``at`` seconds."""
    return SimRequest(blocks=blocks_from_request(request), at=at, output_tokens=output_tokens)
