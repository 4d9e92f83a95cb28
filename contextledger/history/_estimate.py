"""The per-part token estimate kept by the history projection.

The anchors' rule (opencode, Kilo Code, pi, google-adk): about four characters per token.
It is computed once per part version, when the part is added or changed, so totals over a
long history cost nothing per step. A reasoning part whose text is omitted counts by the
thinking its signature seals (``reasoning_payload``). Better counters (calibrated, exact)
refine it later from provider-reported usage; the per-part figure stays the common currency.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from contextledger.events._parts import (
    CompactionPart,
    FilePart,
    Part,
    ReasoningPart,
    SubtaskPart,
    TextPart,
    ToolCompleted,
    ToolErrored,
    ToolPart,
)
from contextledger.vocabulary._defaults import CHARS_PER_TOKEN

#: What one attached image or document is counted as before a provider reports it; Anthropic
#: bills a 1,000 x 1,000 image at about 1,334 tokens, so 1,500 errs on the side of room.
MEDIA_TOKENS: Final = 1500

#: The keys of an Anthropic reasoning part's ``metadata["anthropic"]`` whose value encodes the
#: whole thinking: a ``thinking`` block's signature, a ``redacted_thinking`` block's data.
SEALED_THINKING_KEYS: Final = ("signature", "redactedData")

_json = msgspec.json.Encoder()


def reasoning_payload(text: str, metadata: Mapping[str, Any]) -> str:
    """The string a reasoning part's size is measured by: its text, or, when the text is
    empty, its sealed thinking (``SEALED_THINKING_KEYS``). Claude Code 2.1.150 and later
    write Opus 4.7's thinking blocks with the text omitted; the request sends the signature
    back, and the provider's context holds the whole thinking it seals, which grows with it
    (a redacted block's data likewise). A shown text, full or a summary, is the measure
    itself: a signature's length per token differs from model to model."""
    sealed = metadata.get("anthropic")
    if text or not isinstance(sealed, Mapping):
        return text
    for key in SEALED_THINKING_KEYS:
        payload = sealed.get(key)
        if isinstance(payload, str) and payload:
            return payload
    return text


def input_chars(tool_input: dict[str, Any]) -> int:
    """Characters of a tool call's input as JSON."""
    return len(_json.encode(tool_input))


def part_chars(part: Part, *, tool_input_chars: int | None = None) -> int:
    """The characters of ``part`` that a request would carry, before any view rule.
    ``tool_input_chars``, when known, saves re-encoding a tool call's input."""
    kind = type(part)
    if kind is TextPart:
        return len(part.text)  # type: ignore[union-attr]
    if kind is ReasoningPart:
        return len(reasoning_payload(part.text, part.metadata))  # type: ignore[union-attr]
    if kind is ToolPart:
        state = part.state  # type: ignore[union-attr]
        if tool_input_chars is None:
            tool_input_chars = input_chars(state.input)
        size: int = len(part.tool) + tool_input_chars  # type: ignore[union-attr]
        if type(state) is ToolCompleted:
            size += len(state.output)
        elif type(state) is ToolErrored:
            size += len(state.error) + len(state.partial_output or "")
        return size
    if kind is SubtaskPart:
        return len(part.prompt) + len(part.description)  # type: ignore[union-attr]
    if kind is CompactionPart:
        return len("What did we do so far?")
    return 0


def estimate_part_tokens(part: Part, *, tool_input_chars: int | None = None) -> int:
    """Tokens of ``part`` by the characters / 4 rule, with a fixed charge per media item."""
    tokens = -(-part_chars(part, tool_input_chars=tool_input_chars) // CHARS_PER_TOKEN)
    kind = type(part)
    if kind is FilePart:
        tokens += MEDIA_TOKENS
    elif kind is ToolPart and type(state := part.state) is ToolCompleted:  # type: ignore[union-attr]
        tokens += MEDIA_TOKENS * len(state.attachments)
    return tokens
