"""The simulator's input: requests as ordered blocks with content hashes and token counts.

A block is a stable unit of the prompt (a tool definition, a system block, one content part
of a message). Its ``key`` identifies its content; a prefix of a request is identified by the
chained hash of its blocks' keys, so two requests share a prefix up to a block boundary when
their keys agree up to there. What a model reads of a request is ``processed_blocks``: all of
them, but on the Claude models that drop the thinking of earlier turns.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from functools import cache
from operator import attrgetter
from typing import Generic, Literal, TypeVar

import msgspec

from contextledger.vocabulary._messages import (
    ModelFile,
    ModelMessage,
    ModelReasoning,
    ModelText,
)
from contextledger.vocabulary._models import BEDROCK_PROVIDERS
from contextledger.vocabulary._requests import CacheTTL, Request

K = TypeVar("K")
V = TypeVar("V")

Ttl = Literal["5m", "1h"]
#: What the rule on earlier thinking (``processed_blocks``) reads of a message block: a
#: ``"thinking"`` block of the model's, or a ``"user_input"`` block (the user's text, image or
#: document: any user block but a tool result).
BlockPart = Literal["thinking", "user_input"]

#: The first Opus and Sonnet versions that keep the thinking of earlier turns; earlier ones
#: and every Haiku drop it (Anthropic's prompt-caching page, "What invalidates the cache":
#: "On Opus 4.5+ and Sonnet 4.6+, thinking blocks are preserved by default ... On earlier
#: Opus/Sonnet models and all Haiku models, all previously-cached thinking blocks are
#: stripped from context").
KEEPS_EARLIER_THINKING = {"opus": (4, 5), "sonnet": (4, 6)}
#: A Claude model id's tier and version, in either naming: ``claude-3-7-sonnet-20250219``
#: and ``claude-sonnet-4-5-20250929`` (a minor version is one digit; a date is not one).
_CLAUDE = re.compile(
    r"claude-(?:(?P<old>\d+)(?:[-.](?P<old_minor>\d)(?!\d))?-(?P<old_tier>opus|sonnet|haiku)"
    r"|(?P<tier>opus|sonnet|haiku)-(?P<major>\d+)(?:[-.](?P<minor>\d)(?!\d))?)"
)


class Block(msgspec.Struct, frozen=True, kw_only=True):
    """One prompt block: a content ``key``, its ``tokens``, the TTL of the cache breakpoint
    it carries (Anthropic and Bedrock only; None when it carries none) and, for a thinking or
    user input block, its ``part`` (None for any other block)."""

    key: str
    tokens: int
    breakpoint: Ttl | None = None
    part: BlockPart | None = None


#: A block's ``part`` (read in C, over every block of a request).
_PART = attrgetter("part")


class SimRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One model call: its prompt ``blocks`` in order, when it was sent (``at``, seconds) and
    how many tokens it produced; its ``tool_choice`` as sent (None: unset) and how many of its
    leading blocks are tool definitions and system blocks (``prefix_blocks``): on Anthropic,
    a cached prefix longer than those is read only by a request with the same tool choice;
    the ``model`` it was sent to (``""``: unknown), which tells whether the thinking of
    earlier turns is dropped from it (``processed_blocks``)."""

    blocks: tuple[Block, ...]
    at: float
    output_tokens: int = 0
    tool_choice: str | None = None
    prefix_blocks: int = 0
    model: str = ""

    @property
    def prompt_tokens(self) -> int:
        """Every prompt token the model reads: those of the ``processed_blocks``."""
        return sum(b.tokens for b in processed_blocks(self))


@cache
def drops_earlier_thinking(model: str) -> bool:
    """Whether Anthropic drops the thinking blocks of earlier turns from a request to
    ``model`` (a Claude model id, Bedrock's and Vertex's included): every Haiku, and Opus and
    Sonnet before ``KEEPS_EARLIER_THINKING``. False for any other id, unknown ones included."""
    found = _CLAUDE.search(model.lower())
    if found is None:
        return False
    tier = found["tier"] or found["old_tier"]
    major = int(found["major"] or found["old"])
    minor = int(found["minor"] or found["old_minor"] or 0)
    return tier == "haiku" or (major, minor) < KEEPS_EARLIER_THINKING[tier]


def processed_blocks(req: SimRequest) -> tuple[Block, ...]:
    """The blocks of ``req`` as its model reads them. On a model that drops the thinking of
    earlier turns (``drops_earlier_thinking``), a user input block ends the turns before it:
    the thinking blocks before the last one are left out, neither cached nor counted as
    input; the thinking after it, of the turn under way, stays. Otherwise all its blocks."""
    blocks = req.blocks
    if not drops_earlier_thinking(req.model):
        return blocks
    parts = list(map(_PART, blocks))
    if "thinking" not in parts or "user_input" not in parts:
        return blocks
    last = len(parts) - 1 - parts[::-1].index("user_input")
    if "thinking" not in parts[:last]:
        return blocks
    return tuple(b for b in blocks[:last] if b.part != "thinking") + blocks[last:]


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


def block_of(
    kind: str, payload: bytes, ttl: Ttl | None = None, part: BlockPart | None = None
) -> Block:
    """A block of ``payload`` (JSON) counted at four characters per token, rounded up."""
    key = hashlib.sha256(kind.encode() + b"\x00" + payload).hexdigest()
    chars = len(payload.decode())
    return Block(key=key, tokens=max(1, -(-chars // 4)), breakpoint=ttl, part=part)


def _ttl(ttl: CacheTTL | None) -> Ttl:
    return "1h" if ttl == "1h" else "5m"


def _longest(a: Ttl | None, b: Ttl) -> Ttl:
    return "1h" if "1h" in (a, b) else "5m"


def _part(kind: str, item: object) -> BlockPart | None:
    """The ``part`` of the block of ``item``, a tool, system block or content part of a
    message (``kind``, ``"message:<role>"``)."""
    if isinstance(item, ModelReasoning):
        return "thinking" if item.claude_block else None
    if kind == "message:user" and isinstance(item, ModelText | ModelFile):
        return "user_input"
    return None


def _encoded(kind: str, item: object) -> Block:
    """The block of one tool, system block or content part (without a breakpoint)."""
    return block_of(kind, msgspec.json.encode(item), part=_part(kind, item))


def _message_blocks(
    message: ModelMessage, block: Callable[[str, object], Block] = _encoded
) -> tuple[Block, ...]:
    """The blocks of a message's content parts (without a breakpoint), each made by
    ``block``."""
    kind = f"message:{message.role}"
    return tuple(block(kind, part) for part in message.content)


def _cut(
    request: Request,
    block: Callable[[str, object], Block] = _encoded,
    message_blocks: Callable[[ModelMessage], tuple[Block, ...]] = _message_blocks,
) -> tuple[Block, ...]:
    """The blocks of ``request`` (see ``blocks_from_request``): each tool's and system
    block's made by ``block``, each message's by ``message_blocks``, the marks' breakpoints
    put on them here."""
    tools = request.marked("tool")
    system = request.marked("system")
    messages = request.marked("message")
    blocks: list[Block] = []
    for i, tool in enumerate(request.tools):
        mark = tools.get(i)
        made = block("tool", tool)
        blocks.append(made if mark is None else _marked(made, _ttl(mark.ttl)))
    for i, text in enumerate(request.system):
        mark = system.get(i)
        made = block("system", text)
        blocks.append(made if mark is None else _marked(made, _ttl(mark.ttl)))
    for i, message in enumerate(request.messages):
        parts = message_blocks(message)
        mark = messages.get(i)
        if mark is not None and parts:
            last = parts[-1]
            blocks.extend(parts[:-1])
            blocks.append(_marked(last, _longest(last.breakpoint, _ttl(mark.ttl))))
        else:
            blocks.extend(parts)
    return tuple(blocks)


def _marked(block: Block, ttl: Ttl) -> Block:
    return msgspec.structs.replace(block, breakpoint=ttl)


def blocks_from_request(request: Request) -> tuple[Block, ...]:
    """The blocks of a builder ``Request``: one per tool, one per system block, one per
    content part of each message (the message's role is part of its parts' keys). A mark on a
    tool or system block puts a breakpoint on that block; a mark on a message puts it on the
    message's last content part (a message without content carries none). A reasoning part
    a Claude API takes back (``ModelReasoning.claude_block``: signed or redacted) is a
    ``"thinking"`` block, a user message's text or file a ``"user_input"`` one."""
    return _cut(request)


class _Recent(Generic[K, V]):
    """Values made for objects, kept while the objects recur: ``get`` returns the value made
    for the very same object in the current or the last round, else makes it; ``turn`` starts
    a new round, forgetting the objects the last one did not see."""

    __slots__ = ("_last", "_now")

    def __init__(self) -> None:
        self._last: dict[int, tuple[K, V]] = {}
        self._now: dict[int, tuple[K, V]] = {}

    def get(self, key: K, make: Callable[[K], V]) -> V:
        entry = self._now.get(id(key)) or self._last.get(id(key))
        if entry is None or entry[0] is not key:
            entry = (key, make(key))
        self._now[id(key)] = entry
        return entry[1]

    def turn(self) -> None:
        self._last, self._now = self._now, {}


class BlockMemo:
    """``blocks_from_request`` of a session's requests in turn: a message, content part,
    tool or system block that is the very object of one in the request before (a live view
    hands its unchanged conversions back) keeps that one's blocks, so a request is encoded
    and hashed for what it adds, not for its whole prompt. It holds the items of the last
    request."""

    __slots__ = ("_items", "_messages")

    def __init__(self) -> None:
        self._items: _Recent[object, tuple[str, Block]] = _Recent()
        self._messages: _Recent[ModelMessage, tuple[Block, ...]] = _Recent()

    def __call__(self, request: Request) -> tuple[Block, ...]:
        """``blocks_from_request(request)``."""
        items = self._items

        def block(kind: str, item: object) -> Block:
            made, found = items.get(item, lambda item: (kind, _encoded(kind, item)))
            return found if made == kind else _encoded(kind, item)

        def message_blocks(message: ModelMessage) -> tuple[Block, ...]:
            return self._messages.get(message, lambda m: _message_blocks(m, block))

        blocks = _cut(request, block, message_blocks)
        items.turn()
        self._messages.turn()
        return blocks


def sim_request(
    request: Request, at: float, output_tokens: int = 0, *, memo: BlockMemo | None = None
) -> SimRequest:
    """A ``SimRequest`` of a builder ``Request`` sent at ``at`` seconds, with its model and
    its tool choice as the wire formats send it: none without tools (they send a tool choice
    only with tools, and Anthropic refuses one without) and none to Bedrock
    (``BEDROCK_PROVIDERS``: its Converse API is sent none); its blocks cut by ``memo`` when
    given (the same blocks, made for what changed since its last request)."""
    blocks = memo(request) if memo is not None else blocks_from_request(request)
    return SimRequest(
        blocks=blocks,
        at=at,
        output_tokens=output_tokens,
        tool_choice=(
            request.tool_choice
            if request.tools and request.model.provider_id.lower() not in BEDROCK_PROVIDERS
            else None
        ),
        prefix_blocks=len(request.tools) + len(request.system),
        model=request.model.model_id,
    )
