"""The events that capture a turn's non-deterministic context, so every step of the turn and
every replay sends the same bytes.

``user_message_events`` records a user message the way the request will show it: the text
(wrapped in ``<system-reminder>`` when it interrupted a running turn, with what the user
typed kept beside it, hidden from the model), the mode reminders as synthetic parts, the
attachments, and the ``<environment_details>`` block computed now, once, for this message.
``directory_rule_events`` captures the rules of the directories of a file the model reads,
once per assistant message, with the text to append to the read tool's output.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from contextledger.events._catalogue import (
    EnvironmentCaptured,
    Event,
    InstructionLoaded,
    MessageAdded,
    PartAdded,
)
from contextledger.events._parts import FilePart, ModelRef, StepStartPart, TextPart
from contextledger.history._projection import History, Message
from contextledger.request._context import (
    EditorState,
    arrived_mid_turn,
    environment_details,
    mode_reminders,
    wrap_mid_turn,
)
from contextledger.request._instructions import (
    DEFAULT_MAX_BYTES,
    InstructionFile,
    directory_rules,
    render_directory_rules,
)


def _latest_assistant(history: History, agent_id: str) -> Message | None:
    for message in reversed(history.messages):
        if message.agent_id == agent_id and message.role == "assistant" and not message.summary:
            return message
    return None


def interrupts_turn(history: History, agent_id: str) -> bool:
    """Whether a user message added now interrupts ``agent_id``'s running turn: its latest
    assistant message is unfinished and has started a step."""
    latest = _latest_assistant(history, agent_id)
    if latest is None:
        return False
    steps = sum(isinstance(p, StepStartPart) for p in latest.parts)
    return arrived_mid_turn(assistant_finished=latest.finish is not None, step=steps)


def previous_agents(history: History, agent_id: str) -> list[str]:
    """The agent the last earlier user message of ``agent_id``'s slice went to (what
    ``mode_reminders`` reads of them), found reading back from the newest message: none or
    one."""
    for m in reversed(history.messages):
        if m.role == "user" and m.agent_id == agent_id and not m.synthetic:
            return [m.agent]
    return []


def user_message_events(
    history: History,
    *,
    message_id: str,
    new_part_id: Callable[[], str],
    text: str,
    agent: str,
    model: ModelRef,
    agent_id: str = "main",
    files: Sequence[tuple[str, str, str | None]] = (),
    editor: EditorState | None = None,
    plan_agents: Collection[str] = ("plan",),
    plan_path: str | None = None,
    plan_exists: bool = False,
    synthetic: bool = False,
    time_ms: int = 0,
) -> list[Event]:
    """The events of a user message typed now, or with ``synthetic`` of one the client sent
    on its own: a synthetic message whose text is one synthetic part, never wrapped as an
    interruption and without mode reminders (the runtime's own synthetic messages are marked
    the same way). ``files`` are ``(mime, url, filename)``; ``new_part_id`` gives increasing
    part ids. Pure in its arguments."""
    session_id = history.session_id
    events: list[Event] = [
        MessageAdded(
            session_id=session_id,
            agent_id=agent_id,
            time_ms=time_ms,
            message_id=message_id,
            role="user",
            agent=agent,
            model=model,
            synthetic=synthetic,
        )
    ]

    def part(value: TextPart | FilePart) -> None:
        events.append(
            PartAdded(session_id=session_id, agent_id=agent_id, time_ms=time_ms, part=value)
        )

    if synthetic:
        part(TextPart(id=new_part_id(), message_id=message_id, text=text, synthetic=True))
    elif interrupts_turn(history, agent_id):
        part(TextPart(id=new_part_id(), message_id=message_id, text=text, ignored=True))
        part(
            TextPart(
                id=new_part_id(), message_id=message_id, text=wrap_mid_turn(text), synthetic=True
            )
        )
    else:
        part(TextPart(id=new_part_id(), message_id=message_id, text=text))
    reminders = (
        ()
        if synthetic
        else mode_reminders(
            previous_agents(history, agent_id),
            agent,
            plan_agents=plan_agents,
            plan_path=plan_path,
            plan_exists=plan_exists,
        )
    )
    for reminder in reminders:
        part(TextPart(id=new_part_id(), message_id=message_id, text=reminder, synthetic=True))
    for mime, url, filename in files:
        part(
            FilePart(id=new_part_id(), message_id=message_id, mime=mime, url=url, filename=filename)
        )
    if editor is not None:
        events.append(
            EnvironmentCaptured(
                session_id=session_id,
                agent_id=agent_id,
                time_ms=time_ms,
                user_message_id=message_id,
                text=environment_details(editor),
            )
        )
    return events


def rule_claims(history: History, message_id: str) -> tuple[list[str], list[str]]:
    """The rule files a read by assistant message ``message_id`` must not load again: those
    in the system prompt (``loaded``) and those already loaded for this message
    (``claimed``), as ``directory_rules`` takes them."""
    state = history.state.instructions
    loaded = [e.path for e in state if e.source != "directory"]
    claimed = [e.path for e in state if e.message_id == message_id]
    return loaded, claimed


def rule_events(
    history: History,
    files: Sequence[InstructionFile],
    *,
    message_id: str,
    agent_id: str = "main",
    time_ms: int = 0,
) -> tuple[list[InstructionLoaded], str]:
    """The ``InstructionLoaded`` events of the directory rule ``files`` read for assistant
    message ``message_id``, leaving out those ``rule_claims`` names now; and the text to
    append to the read tool's output (empty when none is left)."""
    taken = {path for paths in rule_claims(history, message_id) for path in paths}
    fresh = [f for f in files if f.path not in taken]
    events = [
        InstructionLoaded(
            session_id=history.session_id,
            agent_id=agent_id,
            time_ms=time_ms,
            path=f.path,
            text=f.text,
            source="directory",
            message_id=message_id,
        )
        for f in fresh
    ]
    return events, render_directory_rules(fresh)


def directory_rule_events(
    history: History,
    *,
    message_id: str,
    read_path: Path,
    worktree: Path,
    agent_id: str = "main",
    time_ms: int = 0,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> tuple[list[InstructionLoaded], str]:
    """The rules found for a file that assistant message ``message_id`` reads, not already
    in the system prompt nor loaded for this message, as events; and the text to append to
    the read tool's output (empty when there are none). Reads the disk; raises
    ``InstructionPathError`` for a read path outside the worktree."""
    loaded, claimed = rule_claims(history, message_id)
    files = directory_rules(
        read_path, worktree, loaded=loaded, claimed=claimed, max_bytes=max_bytes
    )
    return rule_events(history, files, message_id=message_id, agent_id=agent_id, time_ms=time_ms)
