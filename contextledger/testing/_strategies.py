"""Hypothesis strategies that generate valid event sequences of a session.

``session_events()`` draws a whole session: user turns (text, media, captured environment),
assistant turns of several messages, each of one or more steps (step-start parts) with
parallel tool calls and their results, reasoning, errors and aborts (calls left without a
result), prunes, soft trims, stripped media and reasoning, compactions with kept tails (and
turns that arrive while their summary is being written), rollbacks, manual summaries (a
summary message answering a plain user message, with no compaction request: opencode's
``/compact``), usage reports, pinned memory and prefixes, and sub-agent slices; sometimes it
ends with a compaction still open (requested, its summary not written, being written or
written but not yet completed).
Every sequence passes ``validate_events``; shrinking keeps it valid because each draw only
picks among moves that are legal in the state built so far.

    from hypothesis import given
    from contextledger.testing import session_events

    @given(session_events())
    def test_my_strategy_keeps_pairs(events): ...
"""

from __future__ import annotations

import itertools

import hypothesis.strategies as st

from contextledger.events._catalogue import (
    AssistantFinished,
    Event,
    InstructionLoaded,
    MemoryPinned,
    PartAdded,
    PrefixAdvanced,
    PrefixPinned,
    PrefixProfile,
    RequestSent,
    UsageReported,
)
from contextledger.events._parts import (
    FilePart,
    MessageError,
    ModelRef,
    StepFinishPart,
    StepStartPart,
    Usage,
)
from contextledger.testing._builder import DEFAULT_START_MS, SessionBuilder

_TEXT = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=40)
_TOOLS = ("bash", "read", "edit", "grep", "skill", "write")
_MODELS = (
    ModelRef(provider_id="anthropic", model_id="claude-sonnet-4"),
    ModelRef(provider_id="openai", model_id="gpt-5"),
)
_MEDIA = ("image/png", "application/pdf", "text/plain")
_ENDINGS = {
    "ok": None,
    "aborted": MessageError(name="AbortedError", message="aborted"),
    "error": MessageError(name="APIError", message="server error", retryable=True),
}


class _State:
    """What the generated session has so far, so only legal moves are drawn."""

    def __init__(self, builder: SessionBuilder) -> None:
        self.b = builder
        #: Messages a new assistant message may answer (users and completed compaction
        #: requests), by agent: an assistant message answers one of its own agent's.
        self.user_ids: dict[str, list[str]] = {}
        #: The main agent's plain user messages (no compaction part): what a manual summary
        #: may answer.
        self.plain_users: list[str] = []
        #: The main agent's turns (neither compaction requests nor summaries): where a
        #: compaction's kept tail may start.
        self.turns: list[str] = []
        self.completed_tools: list[str] = []
        #: User file parts and reasoning parts not stripped yet.
        self.strippable: list[str] = []
        self.last_assistant: str | None = None
        self.prefix_key: str | None = None
        self.memory_pinned = False
        self.instructions: set[tuple[str, str | None]] = set()


def _user_turn(draw: st.DrawFn, s: _State, agent_id: str) -> None:
    files = []
    if draw(st.integers(0, 4)) == 0:
        files.append((draw(st.sampled_from(_MEDIA)), draw(st.sampled_from(["a.png", "b.pdf"]))))
    first = len(s.b.events)
    message_id = s.b.user(
        draw(_TEXT) or "hi",
        agent_id=agent_id,
        files=files,
        environment=draw(st.none() | _TEXT),
    )
    s.strippable += [
        e.part.id
        for e in s.b.events[first:]
        if isinstance(e, PartAdded) and isinstance(e.part, FilePart)
    ]
    if draw(st.booleans()):
        synthetic = draw(st.booleans())
        s.b.text(
            message_id, draw(_TEXT), agent_id=agent_id, synthetic=synthetic, ignored=not synthetic
        )
    s.user_ids.setdefault(agent_id, []).append(message_id)
    if agent_id == "main":
        s.plain_users.append(message_id)
        s.turns.append(message_id)


def _note(draw: st.DrawFn, s: _State) -> None:
    """A user message the client sent on its own (an attachment, a hook's output): synthetic,
    it starts no turn."""
    message_id = s.b.user(
        draw(_TEXT) or "note", synthetic=True, environment=draw(st.none() | _TEXT)
    )
    s.user_ids.setdefault("main", []).append(message_id)


def _tool_outcome(draw: st.DrawFn, s: _State, part_id: str, agent_id: str) -> None:
    outcome = draw(
        st.sampled_from(
            ["completed", "completed", "completed", "error", "abandoned", "running", "interrupted"]
        )
    )
    if outcome == "abandoned":
        return
    if outcome == "running":
        s.b.tool_running(part_id, agent_id=agent_id)
    elif outcome == "completed":
        attachments = [("image/png", "shot.png")] if draw(st.integers(0, 5)) == 0 else []
        size = draw(st.sampled_from([0, 10, 500, 5000, 60_000]))
        s.b.tool_result(
            part_id, draw(_TEXT) + "x" * size, attachments=attachments, agent_id=agent_id
        )
        s.completed_tools.append(part_id)
    else:
        s.b.tool_error(
            part_id,
            draw(_TEXT) or "failed",
            agent_id=agent_id,
            partial_output="partial" if outcome == "interrupted" else None,
        )


def _step(draw: st.DrawFn, s: _State, message_id: str, agent_id: str) -> list[str]:
    """One model call's content: reasoning, text, tool calls and their outcomes."""
    if draw(st.booleans()):
        reasoning = s.b.reasoning(
            message_id,
            draw(_TEXT),
            agent_id=agent_id,
            signature=draw(st.none() | st.just("sig")),
        )
        s.strippable.append(reasoning)
    if draw(st.booleans()):
        s.b.text(message_id, draw(_TEXT), agent_id=agent_id)
    calls = [
        s.b.tool_call(
            message_id, draw(st.sampled_from(_TOOLS)), {"arg": draw(_TEXT)}, agent_id=agent_id
        )
        for _ in range(draw(st.integers(0, 3)))
    ]
    for part_id in calls:
        _tool_outcome(draw, s, part_id, agent_id)
    return calls


def _assistant_turn(draw: st.DrawFn, s: _State, agent_id: str) -> None:
    if not s.user_ids.get(agent_id):
        _user_turn(draw, s, agent_id)
    model = draw(st.sampled_from(_MODELS))
    for _ in range(draw(st.integers(1, 3))):
        message_id = s.b.assistant(s.user_ids[agent_id][-1], agent_id=agent_id, model=model)
        s.last_assistant = message_id
        if agent_id == "main":
            s.turns.append(message_id)
        calls = _step(draw, s, message_id, agent_id)
        # More model calls in the same message (the AI SDK's multi-step loop): each opens
        # with a step-start part, the previous one sometimes closed by a step-finish part.
        for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
            if draw(st.booleans()):
                s.b.part(
                    StepFinishPart(
                        id=s.b.new_part_id(), message_id=message_id, reason="tool-calls"
                    ),
                    agent_id,
                )
            s.b.part(StepStartPart(id=s.b.new_part_id(), message_id=message_id), agent_id)
            calls += _step(draw, s, message_id, agent_id)
        ending = draw(st.sampled_from(["ok", "ok", "ok", "aborted", "error", "unfinished"]))
        if ending != "unfinished":
            usage = Usage(
                input=draw(st.integers(0, 50_000)),
                output=draw(st.integers(0, 4000)),
                cache_read=draw(st.integers(0, 50_000)),
            )
            error = _ENDINGS[ending]
            finish = "tool-calls" if calls else ("stop" if error is None else "error")
            s.b.finish(message_id, finish, usage=usage, error=error, agent_id=agent_id)
            if draw(st.booleans()):
                s.b.add(
                    UsageReported,
                    agent_id,
                    message_id=message_id,
                    usage=usage,
                    estimated_tokens=draw(st.integers(0, 60_000)),
                )
        if ending != "ok" or not calls:
            break


def _prune(draw: st.DrawFn, s: _State) -> None:
    if s.completed_tools:
        chosen = draw(
            st.lists(st.sampled_from(s.completed_tools), min_size=1, max_size=4, unique=True)
        )
        s.b.tick()
        s.b.prune(chosen, draw(st.sampled_from(["normal", "payload-limit", "post-compaction"])))
        s.completed_tools = [p for p in s.completed_tools if p not in chosen]


def _trim(draw: st.DrawFn, s: _State) -> None:
    if s.completed_tools:
        s.b.trim(draw(st.sampled_from(s.completed_tools)))


def _strip(draw: st.DrawFn, s: _State) -> None:
    if s.strippable:
        chosen = draw(st.lists(st.sampled_from(s.strippable), min_size=1, max_size=3, unique=True))
        s.b.strip(chosen, draw(st.sampled_from(["pressure", "payload-limit"])))
        s.strippable = [p for p in s.strippable if p not in chosen]


def _last_main_user(s: _State) -> str | None:
    """What the main agent's next message would answer, if anything."""
    answerable = s.user_ids.get("main")
    return answerable[-1] if answerable else None


def _late_turn(draw: st.DrawFn, s: _State) -> None:
    """A turn that arrives while a compaction is being summarised (the compactor does not
    block the session)."""
    _user_turn(draw, s, "main")
    if draw(st.booleans()):
        _assistant_turn(draw, s, "main")


def _compaction(draw: st.DrawFn, s: _State) -> None:
    request_id = s.b.request_compaction(
        trigger=draw(st.sampled_from(["auto", "manual", "overflow"])),
        parent_id=_last_main_user(s),
    )
    outcome = draw(
        st.sampled_from(["completed", "completed", "rolled_back_early", "rolled_back_late"])
    )
    # Turns may arrive while the summary is being written: before its message is created,
    # or between its creation and its end.
    late = draw(st.sampled_from(["none", "none", "none", "before_summary", "while_summarising"]))
    if late == "before_summary":
        _late_turn(draw, s)
    if outcome == "rolled_back_early":
        s.b.roll_back(request_id, "cancelled")
        return
    text = "## Goal\n" + draw(_TEXT)
    if late == "while_summarising":
        summary_id = s.b.assistant(request_id, summary=True, step_start=False)
        _late_turn(draw, s)
        s.b.text(summary_id, text)
        s.b.add(AssistantFinished, message_id=summary_id, finish="stop")
    else:
        summary_id = s.b.summary(request_id, text)
    if outcome == "rolled_back_late":
        s.b.roll_back(request_id, draw(st.sampled_from(["overflow", "empty", "repetitive"])))
        return
    tail_start = draw(st.sampled_from([None, *[t for t in s.turns if t < request_id][-2:]]))
    s.b.complete_compaction(request_id, summary_id, tail_start, text)
    s.user_ids.setdefault("main", []).append(request_id)


def _manual_summary(draw: st.DrawFn, s: _State) -> None:
    """opencode's manual ``/compact`` of a plain user message: a summary message answers it
    directly, with no compaction request (what Kilo's ``trimBeforeLastSummary`` is for)."""
    if not s.plain_users:
        return
    parent_id = draw(st.sampled_from(s.plain_users[-2:]))
    message_id = s.b.assistant(parent_id, summary=True, model=draw(st.sampled_from(_MODELS)))
    s.b.text(message_id, "## Goal\n" + draw(_TEXT))
    ending = draw(st.sampled_from(["ok", "ok", "ok", "error", "unfinished"]))
    if ending != "unfinished":
        error = _ENDINGS[ending]
        s.b.finish(message_id, "stop" if error is None else "error", error=error)


def _open_compaction(draw: st.DrawFn, s: _State) -> None:
    """A compaction still in progress when the session ends: requested, its summary not
    written, being written, or written but the compaction not yet completed; sometimes with
    a turn that arrived meanwhile."""
    request_id = s.b.request_compaction(
        trigger=draw(st.sampled_from(["auto", "manual", "overflow"])),
        parent_id=_last_main_user(s),
    )
    stage = draw(st.sampled_from(["requested", "summarising", "summarised"]))
    text = "## Goal\n" + draw(_TEXT)
    if stage == "summarising":
        summary_id = s.b.assistant(request_id, summary=True, step_start=False)
        if draw(st.booleans()):
            s.b.text(summary_id, text)
    elif stage == "summarised":
        s.b.summary(request_id, text)
    if draw(st.integers(0, 2)) == 2:
        _late_turn(draw, s)


def _prefix(draw: st.DrawFn, s: _State) -> None:
    if s.prefix_key is None or s.last_assistant is None or draw(st.booleans()):
        s.prefix_key = f"key{len(s.b.events)}"
        s.b.add(
            PrefixPinned,
            key=s.prefix_key,
            profile=PrefixProfile(
                provider_id="anthropic",
                model_id="claude-sonnet-4",
                agent="main",
                system_mode="default",
                system=("You are helpful.",),
                tools=_TOOLS,
            ),
        )
    else:
        s.b.add(PrefixAdvanced, key=s.prefix_key, message_id=s.last_assistant)
    s.b.add(
        RequestSent,
        provider_id="anthropic",
        model_id="claude-sonnet-4",
        prefix_hash="p" * 8,
        body_hash="b" * 8,
        body_bytes=draw(st.integers(0, 10**6)),
        estimated_tokens=draw(st.integers(0, 10**5)),
        breakpoints=(0, 1),
    )


def _memory(draw: st.DrawFn, s: _State) -> None:
    if not s.memory_pinned:
        s.memory_pinned = True
        s.b.add(MemoryPinned, text=draw(_TEXT))


def _instruction(draw: st.DrawFn, s: _State) -> None:
    directory = s.last_assistant is not None and draw(st.booleans())
    path = draw(st.sampled_from(["AGENTS.md", "src/AGENTS.md", "docs/CLAUDE.md"]))
    message_id = s.last_assistant if directory else None
    if (path, message_id) in s.instructions:
        return
    s.instructions.add((path, message_id))
    s.b.add(
        InstructionLoaded,
        path=path,
        text=draw(_TEXT),
        source="directory" if directory else draw(st.sampled_from(["project", "global"])),
        message_id=message_id,
    )


_MOVES = {
    "user": lambda draw, s: _user_turn(draw, s, "main"),
    "note": _note,
    "assistant": lambda draw, s: _assistant_turn(draw, s, "main"),
    "subagent": lambda draw, s: _assistant_turn(draw, s, "explore"),
    "prune": _prune,
    "trim": _trim,
    "strip": _strip,
    "compaction": _compaction,
    "manual_summary": _manual_summary,
    "prefix": _prefix,
    "memory": _memory,
    "instruction": _instruction,
}
_MOVE_WEIGHTS = [
    "user",
    "note",
    "assistant",
    "assistant",
    "assistant",
    "prune",
    "trim",
    "strip",
    "compaction",
    "manual_summary",
    "prefix",
    "memory",
    "instruction",
    "subagent",
]


@st.composite
def session_events(
    draw: st.DrawFn,
    session_id: str = "ses_test",
    *,
    max_moves: int = 12,
    start_ms: int = DEFAULT_START_MS,
) -> list[Event]:
    """A valid event sequence of one session, starting with ``SessionStarted``; some end
    with a compaction still open."""
    s = _State(SessionBuilder(session_id, start_ms=start_ms, title=draw(_TEXT), model=_MODELS[0]))
    for move in draw(st.lists(st.sampled_from(_MOVE_WEIGHTS), max_size=max_moves)):
        _MOVES[move](draw, s)
    if draw(st.integers(0, 5)) == 5:
        _open_compaction(draw, s)
    return s.b.events


@st.composite
def split_batches(draw: st.DrawFn, events: list[Event]) -> list[list[Event]]:
    """Cut ``events`` into consecutive non-empty batches, as a writer might append them."""
    if not events:
        return []
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(events) - 1)), max_size=8)))
    bounds = [0, *[c for c in cuts if c < len(events)], len(events)]
    return [events[a:b] for a, b in itertools.pairwise(bounds) if a < b]
