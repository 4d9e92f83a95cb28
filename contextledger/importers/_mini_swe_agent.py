"""mini-swe-agent trajectories (``.traj.json``) into events.

Two layouts: the legacy bare list of ``{role, content}`` messages, and the current object
``{"info": {...}, "messages": [...], "trajectory_format": "mini-swe-agent-1"}``. Rules:

- ``system``: not a turn; its text becomes ``config["system_prompt"]``;
- ``assistant``: one assistant message. Its fenced bash block (`` ```mswea_bash_command `` or
  `` ```bash ``; the first, when there are several) is one call of the tool ``bash`` with input
  ``{"command": <the block>}`` and call id ``mini-<n>``; the text around the block is the
  message's text. Usage comes from ``extra.response.usage`` when present;
- ``user``: the first user message after a call is its result (normally
  ``<returncode>N</returncode><output>…</output>``, or the final submission); every other one
  is a user turn.

No times: the synthetic clock of ``contextledger.importers._builder`` is used; the session id is
derived from the file's content. A second system message, an orphan result and content items
of other kinds are listed in ``left_out`` with their position.
``info.exit_status``, ``info.model_stats`` and ``info.mini_version`` are kept in
``SessionStarted.config``. Malformed messages raise ``TraceImportError`` (``line`` the
message's 1-based position, field a path such as ``messages[2].content``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final

from contextledger.events._parts import ModelRef, Usage
from contextledger.importers._builder import ChatBuilder, ToolCall
from contextledger.importers._errors import TraceImportError
from contextledger.importers._imported import ImportedSession
from contextledger.importers._openai_chat import (
    LATER_SYSTEM,
    chat_content,
    chat_messages,
    document_key,
    openai_usage,
    record_unread,
)
from contextledger.importers._records import load_json, require_object, require_str

FORMAT: Final = "mini-swe-agent"
#: The tool a fenced bash block calls.
ACTION_TOOL: Final = "bash"
#: An action: a fenced ``mswea_bash_command`` or ``bash`` block.
ACTION_BLOCK: Final = re.compile(
    r"```(?:mswea_bash_command|bash)[ \t]*\n(?P<command>.*?)\n?```", re.S
)


def import_mini_swe_agent(
    path: str | Path, *, session_id: str | None = None, lenient: bool = False
) -> ImportedSession:
    """Import the mini-swe-agent trajectory at ``path``."""
    return import_mini_swe_agent_data(
        load_json(path), source=str(path), session_id=session_id, lenient=lenient
    )


def import_mini_swe_agent_data(
    data: Any, *, source: str = "<data>", session_id: str | None = None, lenient: bool = False
) -> ImportedSession:
    """Import a decoded trajectory; pure. See the module docstring for the rules. With
    ``lenient`` a malformed message is left out (``ChatBuilder.record``) instead of refusing
    the trajectory."""
    messages, at = chat_messages(data, source)
    builder = ChatBuilder(
        fmt=FORMAT, session_id=session_id, config=_config(data), key=document_key(data)
    )
    trajectory = _Trajectory(builder, source)
    for i, raw in enumerate(messages):
        with builder.record(lenient=lenient, state=trajectory):
            trajectory.message(raw, i + 1, f"{at}[{i}]")
    return builder.build()


class _Trajectory:
    """Reads a trajectory's messages; ``pending`` is the action call a user message answers."""

    def __init__(self, builder: ChatBuilder, source: str) -> None:
        self.builder = builder
        self.source = source
        self.pending: str | None = None
        self.actions = 0

    def message(self, raw: Any, line: int, where: str) -> None:
        builder, source = self.builder, self.source
        message = require_object(raw, source, line, where)
        role = require_str(message, "role", source, line, where)
        builder.read[role] += 1
        content = chat_content(message.get("content"), source, line, f"{where}.content")
        record_unread(builder, content, line, media=True)
        text = content.text
        if role == "system":
            if "system_prompt" in builder.config:
                builder.leave_out(line, "system", LATER_SYSTEM, where)
                return
            builder.skipped["system"] += 1
            builder.config["system_prompt"] = text
        elif role == "assistant":
            self.pending = None
            command, rest = split_action(text)
            calls: list[ToolCall] = []
            if command is not None:
                self.actions += 1
                self.pending = f"mini-{self.actions}"
                calls = [ToolCall(self.pending, ACTION_TOOL, {"command": command})]
            usage, model = _extra(message)
            builder.assistant(
                now=builder.tick(),
                line=line,
                texts=[rest] if rest else [],
                calls=calls,
                usage=usage,
                model=model,
            )
        elif role == "user":
            now = builder.tick()
            if self.pending is not None:
                builder.result(self.pending, text, now=now, line=line)
                self.pending = None
            else:
                builder.user([text], now=now)
        else:
            raise TraceImportError(source, line, f"{where}.role", f"unknown role {role!r}")


def split_action(text: str) -> tuple[str | None, str]:
    """The command of the first fenced bash block of ``text`` (``None`` without one) and the
    text with that block removed, stripped."""
    match = ACTION_BLOCK.search(text)
    if match is None:
        return None, text.strip()
    rest = (text[: match.start()] + text[match.end() :]).strip()
    return match.group("command"), rest


def _config(data: Any) -> dict[str, Any]:
    info = data.get("info") if isinstance(data, dict) else None
    if not isinstance(info, dict):
        return {}
    keys = ("exit_status", "model_stats", "mini_version")
    return {key: info[key] for key in keys if key in info}


def _extra(message: dict[str, Any]) -> tuple[Usage | None, ModelRef | None]:
    extra = message.get("extra")
    response = extra.get("response") if isinstance(extra, dict) else None
    if not isinstance(response, dict):
        return None, None
    model = response.get("model")
    ref = ModelRef(provider_id="openai", model_id=model) if isinstance(model, str) else None
    return openai_usage(response.get("usage")), ref
