"""The model view before and after a context strategy at one model call, as a line diff.

At call N of a session replayed under a strategy (``simulation.strategy_steps``), "before" is
the plain model view of the same replay under ``baseline`` (no prune, compaction or
transform) at that call and "after" is the view the strategy actually sent.
``view_lines`` renders a view to stable text lines (a header per message, then its content),
``diff_views`` compares two views line by line: ``removed`` lines were dropped by the
strategy, ``added`` lines are new or replaced, ``same`` lines are on both sides. Under
``baseline`` both sides are identical.
"""

from __future__ import annotations

import difflib
from collections.abc import AsyncGenerator, Collection, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Literal, cast

import msgspec

from contextledger.events._catalogue import Event, MessageAdded
from contextledger.simulation import (
    DEFAULT_WINDOW,
    PROVIDERS,
    Provider,
    ReplayedCall,
    raw_events,
    recorded_turns,
    strategy_steps,
)
from contextledger.strategies import Strategy, StrategyError, estimate_view_tokens, strategy
from contextledger.vocabulary._messages import (
    ModelFile,
    ModelMessage,
    ModelReasoning,
    ModelText,
    ModelToolCall,
    ModelToolResult,
)

DiffKind = Literal["same", "removed", "added"]

#: Tool inputs are rendered as one line of JSON with sorted keys, so equal inputs render
#: to equal lines whatever order their keys were recorded in.
_json = msgspec.json.Encoder(order="sorted")


class DiffLine(msgspec.Struct, frozen=True):
    """One line of a view diff: ``same`` on both sides, ``removed`` (only before) or
    ``added`` (only after)."""

    kind: DiffKind
    text: str


class Elided(msgspec.Struct, frozen=True):
    """A run of ``count`` identical lines left out of a collapsed diff."""

    count: int


class DiffSummary(msgspec.Struct, frozen=True, kw_only=True):
    """How much a diff changed: lines per kind, and the estimated tokens of both views."""

    removed: int
    added: int
    same: int
    tokens_before: int
    tokens_after: int


def _file_line(file: ModelFile) -> str:
    # The URL is left out: a data URL is the whole file, and it says nothing to a reader.
    return f"[file {file.mime}{' ' + file.filename if file.filename else ''}]"


def _header(message: ModelMessage, summaries: Collection[str]) -> str:
    label = message.role.upper()
    if message.source_id in summaries:
        label += " (summary)"
    if message.synthetic:
        label += " (synthetic)"
    return f"=== {label} ==="


def view_lines(
    messages: Sequence[ModelMessage], *, summaries: Collection[str] = frozenset()
) -> list[str]:
    """``messages`` as text lines: ``=== USER ===`` / ``=== ASSISTANT ===`` before each user
    and assistant message and ``=== TOOL RESULT (tool, call id) ===`` (``TOOL ERROR`` for an
    error) before each tool result, then the content's lines: text as it is, reasoning after a
    ``[reasoning]`` line, a tool call as ``[tool call TOOL CALL_ID] {input as JSON}``, a file
    as ``[file MIME NAME]``. Messages built from a history message in ``summaries`` (source
    ids) are headed ``(summary)``, messages the runtime wrote ``(synthetic)``. Deterministic:
    equal views give equal lines."""
    lines: list[str] = []
    for message in messages:
        if message.role != "tool":
            lines.append(_header(message, summaries))
        for content in message.content:
            match content:
                case ModelText(text=text):
                    lines.extend(text.splitlines())
                case ModelReasoning(text=text):
                    lines.append("[reasoning]")
                    lines.extend(text.splitlines())
                case ModelToolCall(call_id=call_id, tool=tool, input=tool_input):
                    lines.append(
                        f"[tool call {tool} {call_id}] {_json.encode(tool_input).decode()}"
                    )
                case ModelToolResult(call_id=call_id, tool=tool, output=output, is_error=error):
                    lines.append(
                        f"=== TOOL {'ERROR' if error else 'RESULT'} ({tool}, {call_id}) ==="
                    )
                    lines.extend(output.splitlines())
                    lines.extend(_file_line(f) for f in content.attachments)
                case ModelFile():
                    lines.append(_file_line(content))
    return lines


def diff_lines(before: Sequence[str], after: Sequence[str]) -> list[DiffLine]:
    """The line diff of ``before`` and ``after`` (``difflib.SequenceMatcher`` without its
    junk heuristic, which would hide repeated lines such as headers). The ``same`` and
    ``removed`` lines, in order, are ``before``; the ``same`` and ``added`` lines are
    ``after``; a replaced run is its removed lines, then its added lines."""
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    out: list[DiffLine] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out.extend(DiffLine("same", line) for line in before[i1:i2])
            continue
        out.extend(DiffLine("removed", line) for line in before[i1:i2])
        out.extend(DiffLine("added", line) for line in after[j1:j2])
    return out


def diff_views(
    before: Sequence[ModelMessage],
    after: Sequence[ModelMessage],
    *,
    summaries: Collection[str] = frozenset(),
) -> list[DiffLine]:
    """``diff_lines`` of the two views' ``view_lines``."""
    return diff_lines(
        view_lines(before, summaries=summaries), view_lines(after, summaries=summaries)
    )


def summarize(
    before: Sequence[ModelMessage], after: Sequence[ModelMessage], lines: Sequence[DiffLine]
) -> DiffSummary:
    """The line counts of ``lines`` (the diff of ``before`` and ``after``) and both views'
    token estimates (``estimate_view_tokens``)."""
    kinds = [line.kind for line in lines]
    return DiffSummary(
        removed=kinds.count("removed"),
        added=kinds.count("added"),
        same=kinds.count("same"),
        tokens_before=estimate_view_tokens(before),
        tokens_after=estimate_view_tokens(after),
    )


def collapse(lines: Sequence[DiffLine], context: int) -> list[DiffLine | Elided]:
    """``lines`` with the identical lines more than ``context`` lines away from any change
    replaced by an ``Elided`` count (a run between two changes is kept when it has at most
    ``2 * context`` lines); a negative ``context`` keeps everything."""
    if context < 0:
        return list(lines)
    out: list[DiffLine | Elided] = []
    start = 0
    while start < len(lines):
        end = start
        while end < len(lines) and lines[end].kind == "same":
            end += 1
        if end == start:
            out.append(lines[start])
            start += 1
            continue
        head = context if start > 0 else 0
        tail = context if end < len(lines) else 0
        if end - start > head + tail:
            out.extend(lines[start : start + head])
            out.append(Elided(end - start - head - tail))
            out.extend(lines[end - tail : end])
        else:
            out.extend(lines[start:end])
        start = end
    return out


@dataclass(frozen=True)
class TurnViews:
    """The model view at call ``turn`` (from 1) of ``calls`` under ``strategy``: ``before``,
    the plain view of the conversation before the call (the recorded call is the session's
    event at index ``seq``; prunes and compactions recorded before it are left out), and
    ``after``, the view the strategy sent; ``actions`` says what the strategy did before the
    call (empty when nothing) and ``summaries`` are the source ids of summary messages."""

    strategy: str
    turn: int
    calls: int
    seq: int
    actions: str
    before: tuple[ModelMessage, ...]
    after: tuple[ModelMessage, ...]
    summaries: frozenset[str]

    def diff(self) -> list[DiffLine]:
        """``diff_views(before, after)``."""
        return diff_views(self.before, self.after, summaries=self.summaries)


async def turn_views(
    events: Sequence[Event],
    strategy_name: str,
    turn: int | None = None,
    *,
    provider: Provider = "anthropic",
    window: int = DEFAULT_WINDOW,
) -> TurnViews:
    """The views before and after ``strategy_name`` at call ``turn`` (from 1; None: the last)
    of ``events`` (one session's events, all of them, in order): its conversation
    (``raw_events``: without the prunes and compactions a runtime recorded) replayed with
    ``strategy_steps``; before is the same replay's view under ``baseline`` (no prune, no
    compaction, no transform) at that call. Raises ``ValueError`` for an unknown strategy or
    provider, a window below 1 or a ``turn`` that is not a call of the session."""
    if window < 1:
        raise ValueError("the window must be positive")
    if provider not in PROVIDERS:
        raise ValueError(f"unknown provider {provider!r}; known: {', '.join(PROVIDERS)}")
    try:
        chosen = strategy(strategy_name)
    except StrategyError as exc:
        raise ValueError(str(exc)) from exc
    conversation = raw_events(events)
    recorded = [call for t in recorded_turns(conversation) for call in t.calls]
    calls = len(recorded)
    turn = calls if turn is None else turn
    if not 1 <= turn <= calls:
        raise ValueError(f"turn {turn} is out of range: the session has {calls} model calls")
    after = await _call(conversation, chosen, turn - 1, provider=provider, window=window)
    before = await _call(
        conversation, strategy("baseline"), turn - 1, provider=provider, window=window
    )
    message_id = recorded[turn - 1].message_id
    seq = next(
        i
        for i, e in enumerate(events)
        if isinstance(e, MessageAdded) and e.message_id == message_id
    )
    return TurnViews(
        strategy=chosen.name,
        turn=turn,
        calls=calls,
        seq=seq,
        actions=after.actions,
        before=tuple(before.built.request.messages),
        after=tuple(after.built.request.messages),
        summaries=frozenset(m.id for m in after.history.messages if m.summary),
    )


async def _call(
    events: Sequence[Event], chosen: Strategy, call: int, *, provider: Provider, window: int
) -> ReplayedCall:
    """Call ``call`` (from 0, known to exist) of ``events`` replayed under ``chosen``."""
    # ``strategy_steps`` is an async generator; closing it as soon as the call is found
    # stops the replay there.
    steps = cast(
        AsyncGenerator[ReplayedCall],
        strategy_steps(events, chosen, provider=provider, window=window),
    )
    try:
        async with aclosing(steps):
            async for step in steps:
                if step.call == call:
                    return step
    except StrategyError as exc:
        raise ValueError(str(exc)) from exc
    raise AssertionError(f"the replay made no call {call}")
