"""The per-part token estimate kept by the history projection.

The anchors' rule (opencode, Kilo Code, pi, google-adk): about four characters per token.
It is computed once per part version, when the part is added or changed, so totals over a
long history cost nothing per step. Better counters (calibrated, exact) refine it later from
provider-reported usage; the per-part figure stays the common currency.
"""

from __future__ import annotations

from typing import Final

import msgspec

from contextledger.events.parts import (
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

#: Characters per token of the plain estimate (opencode's ``Token.estimate``).
CHARS_PER_TOKEN: Final = 4
#: What one attached image or document is counted as before a provider reports it; Anthropic
#: bills a 1,000 x 1,000 image at about 1,334 tokens, so 1,500 errs on the side of room.
MEDIA_TOKENS: Final = 1500

_json = msgspec.json.Encoder()


def part_chars(part: Part) -> int:
    """The characters of ``part`` that a request would carry, before any view rule."""
    match part:
        case TextPart(text=text) | ReasoningPart(text=text):
            return len(text)
        case ToolPart(state=state, tool=tool):
            size = len(tool) + len(_json.encode(state.input))
            if isinstance(state, ToolCompleted):
                size += len(state.output)
            elif isinstance(state, ToolErrored):
                size += len(state.error) + len(state.partial_output or "")
            return size
        case SubtaskPart(prompt=prompt, description=description):
            return len(prompt) + len(description)
        case CompactionPart():
            return len("What did we do so far?")
        case _:
            return 0


def estimate_part_tokens(part: Part) -> int:
    """Tokens of ``part`` by the characters / 4 rule, with a fixed charge per media item."""
    tokens = -(-part_chars(part) // CHARS_PER_TOKEN)
    if isinstance(part, FilePart):
        tokens += MEDIA_TOKENS
    elif isinstance(part, ToolPart) and isinstance(part.state, ToolCompleted):
        tokens += MEDIA_TOKENS * len(part.state.attachments)
    return tokens
