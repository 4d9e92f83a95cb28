"""Which old tool outputs to clear (opencode's prune).

Walk the view's messages newest to oldest; leave the current and the previous turn alone
(everything until the second user message is seen); stop at a summary (never prune across
one) and at an output already cleared (everything older was handled then). Keep the newest
``protect_tokens`` of tool output; the completed outputs beyond that are the candidates, and
they are cleared only if together they free more than ``minimum_tokens``. Outputs of
protected tools (``skill``) are never cleared. The plan is appended as a
``ToolOutputCleared`` event by the caller; nothing is deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from contextledger.events.catalogue import PruneReason
from contextledger.events.parts import ToolCompleted, ToolPart
from contextledger.history.estimate import CHARS_PER_TOKEN
from contextledger.history.projection import Message

#: How many turns, counted in user messages from the newest, are never pruned.
PROTECTED_TURNS: Final = 2


class PrunePlan(msgspec.Struct, frozen=True):
    """Part ids whose outputs to clear, the tokens that frees, and why."""

    part_ids: tuple[str, ...]
    tokens: int
    reason: PruneReason


def output_tokens(output: str) -> int:
    """opencode's estimate of a tool output: four characters per token, halves rounded up
    (JavaScript's ``Math.round``)."""
    return (len(output) + CHARS_PER_TOKEN // 2) // CHARS_PER_TOKEN


def plan_prune(
    messages: Sequence[Message],
    *,
    reason: PruneReason = "normal",
    protect_tokens: int = 40_000,
    minimum_tokens: int = 20_000,
    protected_tools: Sequence[str] = ("skill",),
) -> PrunePlan | None:
    """The outputs of ``messages`` (a view's history messages, oldest first) to clear, or
    None when clearing would free ``minimum_tokens`` or less."""
    users = 0
    kept = 0
    chosen: list[str] = []
    freed = 0
    for message in reversed(messages):
        if message.role == "user":
            users += 1
        if users < PROTECTED_TURNS:
            continue
        if message.role == "assistant" and message.summary:
            break
        for part in reversed(message.parts):
            if not isinstance(part, ToolPart) or not isinstance(part.state, ToolCompleted):
                continue
            if part.tool in protected_tools:
                continue
            if part.state.compacted_ms is not None:
                return _plan(chosen, freed, reason, minimum_tokens)
            tokens = output_tokens(part.state.output)
            kept += tokens
            if kept > protect_tokens:
                chosen.append(part.id)
                freed += tokens
    return _plan(chosen, freed, reason, minimum_tokens)


def _plan(
    chosen: list[str], freed: int, reason: PruneReason, minimum_tokens: int
) -> PrunePlan | None:
    if freed <= minimum_tokens:
        return None
    return PrunePlan(tuple(reversed(chosen)), freed, reason)
