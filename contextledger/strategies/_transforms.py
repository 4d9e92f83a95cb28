"""Built-in view transforms (the per-call strategies of the seed, applied on every request).

* ``baseline``: the view unchanged (pi's bare ``Agent`` without ``transformContext``).
* ``truncate(n)``: a sliding window of the last ``n`` messages whose cut never falls inside a
  tool round.
* ``age_truncate(max_chars, keep)``: the seed's ``age-truncate-500-keep-3``: the newest
  ``keep`` tool results verbatim, older ones cut to their first ``max_chars`` characters.
* ``cap_tool_outputs(max_chars)``: the seed's ``truncate-500``: every tool result cut to its
  first ``max_chars`` characters (``age_truncate`` with ``keep = 0``).
* ``per_tool_keep_last(k)``: for each tool, the newest ``k`` results verbatim and older ones
  replaced by opencode's cleared-output placeholder.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Final

import msgspec

from contextledger.history._view import CLEARED_OUTPUT
from contextledger.policy._transform import Transform, TransformContext
from contextledger.vocabulary._messages import ModelContent, ModelMessage, ModelToolResult

#: What follows a shortened tool result (pi's ``serializeConversation`` marker).
TRUNCATED_MARKER: Final = "\n[... {omitted} more characters truncated]"
#: What replaces a tool result a transform drops (opencode's placeholder).
PLACEHOLDER: Final = CLEARED_OUTPUT


def baseline(view: Sequence[ModelMessage], context: TransformContext) -> list[ModelMessage]:
    """The view as it is."""
    return list(view)


def truncate(n: int) -> Transform:
    """Keep the last ``n`` messages. The cut moves forward past tool messages (whose call
    would be cut off), so the window never starts on a tool message and may hold fewer than
    ``n``; if that leaves nothing, it moves back to the call instead."""
    if n < 1:
        raise ValueError(f"the number of messages to keep must be >= 1, got {n}")

    def transform(view: Sequence[ModelMessage], context: TransformContext) -> list[ModelMessage]:
        start = max(0, len(view) - n)
        cut = start
        while cut < len(view) and view[cut].role == "tool":
            cut += 1
        if cut == len(view):
            cut = start
            while cut > 0 and view[cut].role == "tool":
                cut -= 1
        return list(view[cut:])

    transform.__name__ = f"last-{n}"
    return transform


def shorten(output: str, max_chars: int) -> str:
    """``output`` cut to its first ``max_chars`` characters plus the truncation marker."""
    if len(output) <= max_chars:
        return output
    return output[:max_chars] + TRUNCATED_MARKER.format(omitted=len(output) - max_chars)


def _map_results(
    view: Sequence[ModelMessage], change: Callable[[int, ModelToolResult], ModelToolResult]
) -> list[ModelMessage]:
    """``view`` with each tool result replaced by ``change(index, result)``, where ``index``
    counts results from the newest (0)."""
    total = sum(isinstance(c, ModelToolResult) for m in view for c in m.content)
    seen = 0
    out: list[ModelMessage] = []
    for message in view:
        content: list[ModelContent] = []
        for part in message.content:
            if isinstance(part, ModelToolResult):
                part = change(total - 1 - seen, part)
                seen += 1
            content.append(part)
        changed = any(a is not b for a, b in zip(content, message.content, strict=True))
        out.append(msgspec.structs.replace(message, content=tuple(content)) if changed else message)
    return out


def age_truncate(max_chars: int, keep: int) -> Transform:
    """Keep the newest ``keep`` tool results verbatim; cut every older one longer than
    ``max_chars`` to its first ``max_chars`` characters and the marker (seed:
    ``makeAgeAwareTruncate({keepRecent, maxChars})``)."""
    if max_chars < 0 or keep < 0:
        raise ValueError("age_truncate needs max_chars >= 0 and keep >= 0")

    def change(age: int, result: ModelToolResult) -> ModelToolResult:
        if age < keep or len(result.output) <= max_chars:
            return result
        return msgspec.structs.replace(result, output=shorten(result.output, max_chars))

    def transform(view: Sequence[ModelMessage], context: TransformContext) -> list[ModelMessage]:
        return _map_results(view, change)

    transform.__name__ = f"age-truncate-{max_chars}-keep-{keep}"
    return transform


def cap_tool_outputs(max_chars: int) -> Transform:
    """Cut every tool result to ``max_chars`` characters (the seed's ``truncate-500``)."""
    capped = age_truncate(max_chars, 0)

    def transform(view: Sequence[ModelMessage], context: TransformContext) -> list[ModelMessage]:
        return capped(view, context)

    transform.__name__ = f"truncate-{max_chars}"
    return transform


def per_tool_keep_last(k: int) -> Transform:
    """For each tool, keep its newest ``k`` results verbatim and replace older ones (and their
    attachments) by ``PLACEHOLDER``."""
    if k < 0:
        raise ValueError("per_tool_keep_last needs k >= 0")

    def transform(view: Sequence[ModelMessage], context: TransformContext) -> list[ModelMessage]:
        newest: Counter[str] = Counter()
        drop: set[str] = set()
        for message in reversed(view):
            for part in reversed(message.content):
                if isinstance(part, ModelToolResult):
                    newest[part.tool] += 1
                    if newest[part.tool] > k:
                        drop.add(part.call_id)

        def change(age: int, result: ModelToolResult) -> ModelToolResult:
            if result.call_id not in drop or result.output == PLACEHOLDER:
                return result
            return msgspec.structs.replace(result, output=PLACEHOLDER, attachments=())

        return _map_results(view, change)

    transform.__name__ = f"per-tool-keep-last-{k}"
    return transform
