"""OpenHands ``output.jsonl`` (evaluation and resolver output, one run per line) into events:
one session per run.

A run's ``history[]`` is a list of events. Rules:

- ``system`` action: not a turn; its text becomes ``config["system_prompt"]``;
- ``message`` action: a user message (``source: user``) or assistant text (``source: agent``).
  The older resolver schema has no ``source``: its first message is the user's, later ones the
  agent's;
- ``finish`` action: assistant text (its ``final_thought``, else ``thought``, else
  ``message``); it is never answered, so it is no tool call;
- every other action (``run``, ``read``, ``edit``, ``think``, ``run_ipython``, …) is a tool call:
  the tool is ``tool_call_metadata.function_name`` (else the action's name), the call id
  ``tool_call_metadata.tool_call_id`` (else ``oh-<event id or position>``), the input its
  ``args`` without ``thought``; the thought becomes the message's text. Consecutive actions of
  one model response (same ``model_response.id``) form one assistant message, whose usage is
  ``model_response.usage`` when present;
- an observation answers the action its ``cause`` names (else the call with its
  ``tool_call_id``, else the oldest unanswered call) with its ``content``; an ``error``
  observation fails the call. An ``error`` observation that answers nothing becomes a
  synthetic user message (OpenHands shows such errors to the model);
- ``recall`` actions and observations, other observations answering nothing, and unknown
  events: skipped and counted.

A run whose ``history`` holds V1 events (``kind: ActionEvent``, …) is imported by
``contextledger.importers._openhands_v1``, with the run's fields in ``config``.

Times are the events' ``timestamp`` (UTC); the resolver schema has none and gets the synthetic
clock of ``contextledger.importers._builder``. Each run's session id is derived from its
content. What is not imported is listed in ``left_out`` with the run's line and the event's
path (``history[7]``). ``instance_id``, ``metadata.agent_class`` and
the model (``metadata.llm_config.model``) go to ``SessionStarted.config``. A malformed run
raises ``TraceImportError`` naming its line and a field such as ``history[3].args``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

from contextledger.events._catalogue import LeftOut
from contextledger.events._ids import IdGenerator
from contextledger.events._parts import ModelRef
from contextledger.importers._builder import ChatBuilder, ToolCall
from contextledger.importers._errors import TraceImportError
from contextledger.importers._imported import ImportedSession
from contextledger.importers._openai_chat import LATER_SYSTEM, document_key, openai_usage
from contextledger.importers._openhands_v1 import import_openhands_v1_events, is_v1_event
from contextledger.importers._records import (
    iso_ms,
    json_lines,
    loose_literal,
    malformed_record,
    require_object,
)

FORMAT: Final = "openhands"
#: Event fields of the older, flattened schema that are no tool input.
_NOT_INPUT: Final = frozenset(
    {"action", "thought", "id", "timestamp", "source", "message", "tool_call_metadata"}
)
#: Why each kind of event is left out.
RECALL: Final = "a recall event (workspace context, microagent knowledge): not imported"
UNANSWERED: Final = "an observation that answers no action"
UNKNOWN_EVENT: Final = "an event that is neither an action nor an observation"


def import_openhands(path: str | Path, *, session_id: str | None = None) -> list[ImportedSession]:
    """Import every run of the OpenHands ``output.jsonl`` at ``path``; ``session_id`` names the
    first run's session (the others get generated ids)."""
    path = Path(path)
    with path.open("rb") as f:
        return import_openhands_lines(f, source=str(path), session_id=session_id)


def import_openhands_lines(
    lines: Iterable[bytes | str],
    *,
    source: str = "<lines>",
    session_id: str | None = None,
    lenient: bool = False,
) -> list[ImportedSession]:
    """Import runs given as JSON lines; pure. See the module docstring for the rules. With
    ``lenient`` a line that is not JSON, or a run that is malformed, is left out (reported
    with the first run)."""
    sessions: list[ImportedSession] = []
    session_ids = IdGenerator("ses")
    malformed: list[LeftOut] | None = [] if lenient else None
    for number, value in json_lines(lines, source, malformed):
        given = session_id if not sessions else None
        try:
            run = require_object(value, source, number, "")
            sessions.append(_Run(run, source, number, given).run(session_ids, lenient=lenient))
        except TraceImportError as error:
            if malformed is None:
                raise
            malformed.append(malformed_record(error))
    if sessions:
        sessions[0].add_left_out(malformed or [])
    return sessions


def holds_v1_events(run: dict[str, Any]) -> bool:
    """Whether a run's ``history`` is made of V1 events."""
    history = run.get("history")
    return isinstance(history, list) and any(is_v1_event(event) for event in history[:3])


def _model(run: dict[str, Any]) -> str | None:
    metadata = run.get("metadata")
    config = metadata.get("llm_config") if isinstance(metadata, dict) else None
    model = config.get("model") if isinstance(config, dict) else None
    return model if isinstance(model, str) else None


def _model_ref(name: str) -> ModelRef:
    provider, _, model = name.partition("/")
    return (
        ModelRef(provider_id=provider, model_id=model)
        if model
        else ModelRef(provider_id="", model_id=name)
    )


class _Action:
    """Actions of one model response, waiting to become one assistant message."""

    def __init__(self, response_id: str | None, line: int) -> None:
        self.response_id = response_id
        self.line = line
        self.texts: list[str] = []
        self.calls: list[ToolCall] = []
        self.usage: Any = None
        self.model: str | None = None
        self.time_ms: int | None = None


class _Run:
    def __init__(self, run: dict[str, Any], source: str, line: int, session_id: str | None):
        self.run_data = run
        self.source = source
        self.line = line
        history = run.get("history")
        if not isinstance(history, list):
            raise TraceImportError(source, line, "history", "missing or not a list")
        self.history: list[Any] = history
        self.builder = ChatBuilder(
            fmt=FORMAT,
            session_id=session_id,
            config=self._config(),
            key=document_key(run, b"%d:" % line),
        )
        model = _model(run)
        if model is not None:
            self.builder.model = _model_ref(model)
        self.open: _Action | None = None
        self.call_of_event: dict[int, str] = {}
        self.messages_seen = 0

    def _config(self) -> dict[str, Any]:
        config: dict[str, Any] = {}
        for key in ("instance_id", "issue_type"):
            if isinstance(self.run_data.get(key), str):
                config[key] = self.run_data[key]
        metadata = self.run_data.get("metadata")
        if isinstance(metadata, dict) and isinstance(metadata.get("agent_class"), str):
            config["agent_class"] = metadata["agent_class"]
        model = _model(self.run_data)
        if model is not None:
            config["model"] = model
        return config

    def run(self, session_ids: IdGenerator, *, lenient: bool = False) -> ImportedSession:
        """The run's session; a run of V1 events leaves a malformed one out when ``lenient``
        (a malformed run of older events is left out whole by the caller)."""
        if holds_v1_events(self.run_data):
            events = ((self.line, event, f"history[{i}]") for i, event in enumerate(self.history))
            return import_openhands_v1_events(
                events,
                source=self.source,
                session_id=self.builder.requested_id,
                config={**self._config(), "run_line": self.line},
                lenient=lenient,
            )
        for i, raw in enumerate(self.history):
            event = require_object(raw, self.source, self.line, f"history[{i}]")
            self._event(event, i, f"history[{i}]")
        self._flush()
        return self.builder.build(session_ids)

    def _event(self, event: dict[str, Any], index: int, at: str) -> None:
        action = event.get("action")
        observation = event.get("observation")
        if isinstance(action, str):
            self.builder.read[f"action:{action}"] += 1
            self._action(event, action, index, at)
        elif isinstance(observation, str):
            self.builder.read[f"observation:{observation}"] += 1
            self._flush()
            self._observation(event, observation, at)
        else:
            self.builder.read["unknown"] += 1
            self.builder.leave_out(self.line, "unknown_event", UNKNOWN_EVENT, at)

    # --- actions --------------------------------------------------------------------------

    def _args(self, event: dict[str, Any], at: str) -> dict[str, Any]:
        if "args" in event:
            return require_object(event["args"], self.source, self.line, f"{at}.args")
        return {k: v for k, v in event.items() if k not in _NOT_INPUT}

    def _action(self, event: dict[str, Any], action: str, index: int, at: str) -> None:
        args = self._args(event, at)
        thought = args.get("thought", event.get("thought"))
        if action == "recall":
            self.builder.leave_out(self.line, "recall", RECALL, at)
        elif action == "system":
            self._flush()
            if "system_prompt" in self.builder.config:
                self.builder.leave_out(self.line, "system", LATER_SYSTEM, at)
                return
            self.builder.skipped["system"] += 1
            self.builder.config["system_prompt"] = _text(args.get("content"))
        elif action == "message":
            self._message(event, args, at)
        elif action == "finish":
            texts = [args.get("final_thought"), thought, event.get("message")]
            text = next((t for t in texts if isinstance(t, str) and t), "")
            self._group(event, at).texts.append(text)
        else:
            group = self._group(event, at)
            if isinstance(thought, str) and thought:
                group.texts.append(thought)
            group.calls.append(self._call(event, action, args, index, at))

    def _message(self, event: dict[str, Any], args: dict[str, Any], at: str) -> None:
        self.messages_seen += 1
        source = event.get("source")
        text = _text(args.get("content", event.get("message")))
        if source == "user" or (source is None and self.messages_seen == 1):
            self._flush()
            self.builder.user([text], now=self._now(event))
        else:
            self._group(event, at).texts.append(text)

    def _call(
        self, event: dict[str, Any], action: str, args: dict[str, Any], index: int, at: str
    ) -> ToolCall:
        metadata = event.get("tool_call_metadata")
        tool, call_id = action, None
        if metadata is not None:
            metadata = require_object(metadata, self.source, self.line, f"{at}.tool_call_metadata")
            tool = _str(metadata.get("function_name")) or action
            call_id = _str(metadata.get("tool_call_id"))
        event_id = event.get("id")
        if call_id is None:
            call_id = f"oh-{event_id if isinstance(event_id, int) else index}"
        if isinstance(event_id, int):
            self.call_of_event[event_id] = call_id
        tool_input = {k: v for k, v in args.items() if k != "thought"}
        return ToolCall(call_id, tool, tool_input)

    def _group(self, event: dict[str, Any], at: str) -> _Action:
        """The open assistant message this action belongs to (a new one for a new response)."""
        response = _response(event)
        response_id = _str(response.get("id"))
        if self.open is None or response_id is None or self.open.response_id != response_id:
            self._flush()
            self.open = _Action(response_id, self.line)
            self.open.time_ms = iso_ms(event.get("timestamp"))
            self.open.usage = response.get("usage")
            self.open.model = _str(response.get("model"))
        return self.open

    def _flush(self) -> None:
        group, self.open = self.open, None
        if group is None:
            return
        self.builder.assistant(
            now=self.builder.tick(group.time_ms),
            line=group.line,
            texts=group.texts,
            calls=group.calls,
            usage=openai_usage(group.usage),
            model=_model_ref(group.model) if group.model else None,
            api_message_id=group.response_id,
        )

    # --- observations ---------------------------------------------------------------------

    def _observation(self, event: dict[str, Any], observation: str, at: str) -> None:
        if observation == "recall":
            self.builder.leave_out(self.line, "recall", RECALL, at)
            return
        content = _text(event.get("content", event.get("message")))
        call_id = self._answered(event)
        now = self._now(event)
        if call_id is not None:
            error = observation == "error"
            self.builder.result(call_id, content, now=now, line=self.line, error=error, field=at)
        elif observation == "error":
            self.builder.user([content], now=now, synthetic=True)
        else:
            self.builder.leave_out(self.line, f"observation:{observation}", UNANSWERED, at)

    def _answered(self, event: dict[str, Any]) -> str | None:
        pending = self.builder.pending
        cause = event.get("cause")
        if isinstance(cause, int) and self.call_of_event.get(cause) in pending:
            return self.call_of_event[cause]
        metadata = event.get("tool_call_metadata")
        if isinstance(metadata, dict) and metadata.get("tool_call_id") in pending:
            return str(metadata["tool_call_id"])
        if cause is None and "source" not in event and pending:
            return pending[0]
        return None

    def _now(self, event: dict[str, Any]) -> int:
        return self.builder.tick(iso_ms(event.get("timestamp")))


def _response(event: dict[str, Any]) -> dict[str, Any]:
    metadata = event.get("tool_call_metadata")
    response = loose_literal(metadata.get("model_response")) if isinstance(metadata, dict) else None
    return response if isinstance(response, dict) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
