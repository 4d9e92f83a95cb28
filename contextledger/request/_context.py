"""Per-turn context: what is added at the end of the request rather than to the system prompt.

The editor state (``<environment_details>``), mode reminders, the wrapper for a user message
sent while the assistant was still working, and the closing message of a turn that ran out of
steps. Each is a pure function of its arguments, so a block recomputed for an old message has
the bytes it had when that message was first sent.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Final

import msgspec

from contextledger.vocabulary._messages import ModelMessage, ModelText


class EditorState(msgspec.Struct, frozen=True, kw_only=True):
    """The editor as the caller saw it when a user message was sent.

    ``time`` is ISO 8601 with seconds (and preferably an offset), captured by the caller.
    """

    time: str
    cwd: str
    workspace_root: str | None = None
    active_file: str | None = None
    visible_files: tuple[str, ...] = ()
    open_tabs: tuple[str, ...] = ()


def environment_details(state: EditorState) -> str:
    """The ``<environment_details>`` block for ``state``; blank fields and paths leave no line.

    Files keep the caller's order. The caller computes the block once per user message and
    records it (``EnvironmentCaptured``), so every step of the turn sends the same bytes.
    """
    lines = ["<environment_details>"]
    for label, value in (
        ("Current time", state.time),
        ("Working directory", state.cwd),
        ("Workspace root folder", state.workspace_root),
        ("Active file", state.active_file),
    ):
        if value and value.strip():
            lines.append(f"{label}: {value}")
    for label, paths in (("Visible files", state.visible_files), ("Open tabs", state.open_tabs)):
        listed = [path for path in paths if path.strip()]
        if listed:
            lines.append(f"{label}:")
            lines.extend(f"- {path}" for path in listed)
    lines.append("</environment_details>")
    return "\n".join(lines)


# --- mid-turn user messages -----------------------------------------------------------------

#: Wraps a user message that arrived while the assistant was working; ``{text}`` is the message.
MID_TURN_TEMPLATE: Final = (
    "<system-reminder>\n"
    "While you were working, the user sent the following message:\n"
    "{text}\n"
    "\n"
    "Please address this message and continue with your tasks.\n"
    "</system-reminder>"
)


def wrap_mid_turn(text: str) -> str:
    """``text`` inside ``MID_TURN_TEMPLATE``."""
    return MID_TURN_TEMPLATE.format(text=text)


def arrived_mid_turn(*, assistant_finished: bool, step: int) -> bool:
    """Whether a user message interrupted a running assistant turn (and so is wrapped).

    Judged for a user message added after the turn's latest assistant message, from the state
    of that assistant message when the user message was appended, both read from the event
    log: ``assistant_finished`` is whether it had already finished (an ``AssistantFinished``
    came first) and ``step`` how many model steps it had started by then. The message
    interrupted the turn when the assistant message was unfinished and at least one step had
    started. One that came before the first step is simply part of the turn's opening; one
    that came after the finish starts a new turn.
    """
    return not assistant_finished and step >= 1


# --- mode reminders -------------------------------------------------------------------------

#: Added to each user message sent to a plan agent.
PLAN_REMINDER: Final = (
    "Plan mode is active. Explore the code, ask about anything unclear and design the change, "
    "but do not make it: do not create, edit, move or delete files, and do not run commands "
    "that change the project, its dependencies or its version control. When the plan is "
    "ready, present it and ask the user to switch to a building agent to carry it out."
)

#: Follows ``PLAN_REMINDER`` when the plan has a file; ``{path}`` is its path.
PLAN_FILE_NOTE: Final = (
    "The one exception is the plan file: write the plan to {path} and keep it up to date. "
    "It is the only file you may write."
)

#: Added to the first user message after a switch from a plan agent to a building one.
CODE_SWITCH_REMINDER: Final = (
    "The session has moved from planning to building, and tools that change files are "
    "available again. Carry out the plan agreed above step by step and verify each change. "
    "If the plan turns out to be wrong, say so instead of silently departing from it."
)

#: Follows ``CODE_SWITCH_REMINDER`` when the plan file exists; ``{path}`` is its path.
PLAN_EXISTS_NOTE: Final = "The plan is saved in {path}: read it before you start, and follow it."


def mode_reminders(
    previous_agents: Sequence[str],
    agent: str,
    *,
    plan_agents: Collection[str] = ("plan",),
    plan_path: str | None,
    plan_exists: bool,
) -> tuple[str, ...]:
    """The reminders for a user message sent to ``agent``, each in ``<system-reminder>`` tags.

    ``previous_agents`` are the agents of the session's earlier user messages, oldest first.
    A plan agent gets ``PLAN_REMINDER`` on every message (with ``PLAN_FILE_NOTE`` when there
    is a ``plan_path``). Any other agent gets ``CODE_SWITCH_REMINDER`` when the previous user
    message went to a plan agent: once per switch, since the next message follows a message
    of its own agent (with ``PLAN_EXISTS_NOTE`` when the plan file exists). Recomputing the
    reminders of an old message therefore gives the same text.
    """
    if agent in plan_agents:
        note = PLAN_FILE_NOTE.format(path=plan_path) if plan_path else None
        return (_reminder(PLAN_REMINDER, note),)
    if previous_agents and previous_agents[-1] in plan_agents:
        note = PLAN_EXISTS_NOTE.format(path=plan_path) if plan_path and plan_exists else None
        return (_reminder(CODE_SWITCH_REMINDER, note),)
    return ()


def _reminder(text: str, note: str | None) -> str:
    body = f"{text} {note}" if note else text
    return f"<system-reminder>\n{body}\n</system-reminder>"


# --- step limit -----------------------------------------------------------------------------

#: The last request of a turn that reached its step limit.
MAX_STEPS_PROMPT: Final = (
    "You have reached the maximum number of steps for this task, and tools are now disabled: "
    "any tool call will fail. Reply with text only. Summarise what you have done, what is "
    "still left to do, and what the user should do or decide next to finish it."
)


def max_steps_message(source_id: str) -> ModelMessage:
    """The synthetic user message that closes a turn at its step limit.

    A user message rather than an assistant prefill: not every provider accepts a request
    that ends with an assistant message. ``source_id`` is the history message it belongs to.
    """
    return ModelMessage(
        role="user",
        content=(ModelText(text=MAX_STEPS_PROMPT, synthetic=True),),
        source_id=source_id,
        synthetic=True,
    )
