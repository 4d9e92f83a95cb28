"""SWE-agent trajectories (``.traj``, one JSON object) into events.

The conversation is ``history[]``, the chat SWE-agent sent to the model (``trajectory[]``
repeats it step by step and is not read). Rules, per history message:

- ``system``: not a turn; its text becomes ``config["system_prompt"]`` (counted in
  ``skipped["system"]``);
- demonstrations (``is_demo`` true, or ``message_type: demonstration``): skipped and counted;
- ``assistant``: one assistant message whose text is its ``thought`` (else its ``content``).
  Function-calling variant: each of its ``tool_calls`` (OpenAI format, possibly written as a
  Python literal string) is a tool part. Old variant: its ``action`` is one call of the tool
  ``bash`` with input ``{"command": action}`` and call id ``swe-<n>``;
- ``tool``: the result of the calls named by ``tool_call_ids``;
- ``user``: in the old variant the first user message after an action is that action's
  result; every other user message is a user turn.

A demonstration file (``sweagent traj-to-demo`` output, as JSON) is a document with only a
``history`` list (``config["demonstration"]`` is then true). Its assistant messages may lack
``action``: the last fenced block of their content is then the action (SWE-agent's own
thought-action parser takes the last one), the text before it the thought.

``.traj`` files have no per-message times: the synthetic clock of
``contextledger.importers._builder`` is used; the session id is derived from the file's
content. What is not imported (demonstrations inside a run, a second system message, an
orphan observation, content items of other kinds) is listed in ``left_out`` with its
position. ``info.model_stats`` and ``info.exit_status``
are kept in ``SessionStarted.config``. A malformed message raises ``TraceImportError`` whose
``line`` is its 1-based position in ``history`` and whose field is a path like
``history[4].tool_call_ids``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final

from contextledger.importers._builder import ChatBuilder, ToolCall
from contextledger.importers._errors import TraceImportError
from contextledger.importers._imported import ImportedSession
from contextledger.importers._openai_chat import (
    LATER_SYSTEM,
    chat_content,
    document_key,
    openai_tool_calls,
    record_unread,
)
from contextledger.importers._records import load_json, loose_literal, require_object, require_str

#: The tool an old-variant ``action`` calls.
ACTION_TOOL: Final = "bash"
FORMAT: Final = "swe-agent"
#: A fenced block of an assistant message without ``action``: the last one is the action.
FENCED_ACTION: Final = re.compile(r"```[^\n]*\n(?P<command>.*?)\n?```", re.S)
#: Why demonstrations are left out.
DEMONSTRATION: Final = (
    "a demonstration (an in-context example shown to the model), not this run's own turns"
)


def import_swe_agent(
    path: str | Path, *, session_id: str | None = None, lenient: bool = False
) -> ImportedSession:
    """Import the SWE-agent trajectory at ``path``."""
    return import_swe_agent_data(
        load_json(path), source=str(path), session_id=session_id, lenient=lenient
    )


def import_swe_agent_data(
    data: Any, *, source: str = "<data>", session_id: str | None = None, lenient: bool = False
) -> ImportedSession:
    """Import a decoded trajectory; pure. See the module docstring for the rules. With
    ``lenient`` a malformed history message is left out (``ChatBuilder.record``) instead of
    refusing the trajectory."""
    traj = require_object(data, source, 1, "")
    history = traj.get("history")
    if not isinstance(history, list):
        raise TraceImportError(source, 1, "history", "missing or not a list")
    builder = ChatBuilder(
        fmt=FORMAT, session_id=session_id, config=_config(traj), key=document_key(traj)
    )
    if "trajectory" not in traj and "info" not in traj:
        builder.config["demonstration"] = True
    importer = _Importer(builder, source)
    for i, raw in enumerate(history):
        with builder.record(lenient=lenient, state=importer):
            importer.message(raw, i + 1, f"history[{i}]")
    return builder.build()


def _config(traj: dict[str, Any]) -> dict[str, Any]:
    info = traj.get("info")
    if not isinstance(info, dict):
        return {}
    return {key: info[key] for key in ("exit_status", "model_stats") if key in info}


def _fenced_action(text: str) -> tuple[str | None, str]:
    """The last fenced block of ``text`` (``None`` without one) and the text before it."""
    blocks = list(FENCED_ACTION.finditer(text))
    if not blocks:
        return None, text
    last = blocks[-1]
    return last.group("command"), text[: last.start()].strip()


def _is_demo(message: dict[str, Any]) -> bool:
    flag = message.get("is_demo")
    demo = flag is True or (isinstance(flag, str) and flag.lower() == "true")
    return demo or message.get("message_type") == "demonstration"


class _Importer:
    def __init__(self, builder: ChatBuilder, source: str) -> None:
        self.builder = builder
        self.source = source
        self.action_call: str | None = None
        self.actions = 0

    def message(self, raw: Any, line: int, at: str) -> None:
        message = require_object(raw, self.source, line, at)
        role = require_str(message, "role", self.source, line, at)
        self.builder.read[role] += 1
        if _is_demo(message):
            self.builder.leave_out(line, "demonstration", DEMONSTRATION, at)
            return
        content = chat_content(message.get("content"), self.source, line, f"{at}.content")
        record_unread(self.builder, content, line, media=True)
        text = content.text
        if role == "system":
            if "system_prompt" in self.builder.config:
                self.builder.leave_out(line, "system", LATER_SYSTEM, at)
                return
            self.builder.skipped["system"] += 1
            self.builder.config["system_prompt"] = text
        elif role == "assistant":
            self._assistant(message, text, line, at)
        elif role == "tool":
            self._tool(message, text, line, at)
        elif role == "user":
            self._user(text, line)
        else:
            raise TraceImportError(self.source, line, f"{at}.role", f"unknown role {role!r}")

    def _assistant(self, message: dict[str, Any], text: str, line: int, at: str) -> None:
        self.action_call = None
        calls = openai_tool_calls(message.get("tool_calls"), self.source, line, f"{at}.tool_calls")
        action = message.get("action")
        if action is not None and not isinstance(action, str):
            raise TraceImportError(self.source, line, f"{at}.action", "must be a string")
        thought = message.get("thought")
        if not calls and "action" not in message:
            action, thought = _fenced_action(text)
        if not calls and action and action.strip():
            self.actions += 1
            self.action_call = f"swe-{self.actions}"
            calls = [ToolCall(self.action_call, ACTION_TOOL, {"command": action})]
        shown = thought if isinstance(thought, str) and thought else text
        self.builder.assistant(
            now=self.builder.tick(), line=line, texts=[shown] if shown else [], calls=calls
        )

    def _tool(self, message: dict[str, Any], text: str, line: int, at: str) -> None:
        ids = loose_literal(message.get("tool_call_ids", message.get("tool_call_id")))
        if isinstance(ids, str):
            ids = [ids]
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise TraceImportError(
                self.source, line, f"{at}.tool_call_ids", "missing or not a list of call ids"
            )
        now = self.builder.tick()
        for call_id in ids:
            self.builder.result(call_id, text, now=now, line=line, field=at)

    def _user(self, text: str, line: int) -> None:
        now = self.builder.tick()
        if self.action_call is not None:
            self.builder.result(self.action_call, text, now=now, line=line)
            self.action_call = None
        else:
            self.builder.user([text], now=now)
