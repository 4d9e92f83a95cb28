"""OpenAI chat-completions message lists into events, and the builder the chat-shaped importers
(SWE-agent, OpenHands, mini-swe-agent) share.

A chat log is ``[{role, content, tool_calls?, tool_call_id?}, ...]`` or ``{"messages": [...]}``:

- ``system``/``developer`` messages are not turns: the first becomes the session's
  ``config["system_prompt"]``, every one is counted in ``skipped``;
- ``user`` → a user message (text content, or the text items of a content list);
- ``assistant`` → one assistant message: step start, its text, a pending ``ToolPart`` per
  ``tool_calls`` item (``call_id`` the original id, input the decoded ``arguments``), step
  finish, ``AssistantFinished`` (``tool-calls`` when it called tools, else ``stop``);
- ``tool`` → completes the call named by ``tool_call_id``.

Chat logs carry no times: a synthetic clock starts at ``SYNTHETIC_START_MS`` and advances one
second (``SYNTHETIC_STEP_MS``) per message. A malformed message raises ``TraceImportError``
whose ``line`` is the message's 1-based position and whose field is a path such as
``messages[3].tool_calls[0].function.arguments``.
"""

from __future__ import annotations

import ast
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import msgspec

from contextledger.events.catalogue import (
    AssistantFinished,
    Event,
    MessageAdded,
    PartAdded,
    SessionStarted,
    ToolStateChanged,
    UsageReported,
)
from contextledger.events.ids import IdGenerator
from contextledger.events.parts import (
    ModelRef,
    ReasoningPart,
    StepFinishPart,
    StepStartPart,
    TextPart,
    ToolCompleted,
    ToolErrored,
    ToolPart,
    ToolPending,
    Usage,
)
from contextledger.importers.claude_code import ApiCall, ImportedSession
from contextledger.importers.errors import TraceImportError

#: Where the synthetic clock of a format without timestamps starts (2023-11-14T22:13:20Z).
SYNTHETIC_START_MS: Final = 1_700_000_000_000
#: How far the synthetic clock advances per message.
SYNTHETIC_STEP_MS: Final = 1000

_SYSTEM_ROLES: Final = frozenset({"system", "developer"})


class ToolCall(msgspec.Struct, frozen=True):
    """One tool call of an assistant message: the original call id, tool name and input."""

    call_id: str
    tool: str
    input: dict[str, Any]


class _Pending(msgspec.Struct):
    message_id: str
    part_id: str
    tool: str
    input: dict[str, Any]
    started_ms: int


class ChatBuilder:
    """Builds one session's events from chat turns; times are real (``time_ms``) or synthetic."""

    def __init__(
        self,
        *,
        fmt: str,
        session_id: str | None,
        start_ms: int | None = None,
        config: dict[str, Any] | None = None,
    ) -> None:
        self.fmt = fmt
        self.config: dict[str, Any] = {"source": fmt, **(config or {})}
        self.model: ModelRef | None = None
        self.title = ""
        self.skipped: Counter[str] = Counter()
        self._requested_id = session_id
        self._start_ms = start_ms
        self._now: int | None = None
        self._events: list[Event] = []
        self._calls: list[ApiCall] = []
        self._pending: dict[str, _Pending] = {}
        self._used_call_ids: set[str] = set()
        self._messages = IdGenerator("msg")
        self._parts = IdGenerator("prt")
        self._last_user: str | None = None
        self._session_id = session_id or ""

    def tick(self, time_ms: int | None = None) -> int:
        """The time of the next event: ``time_ms`` (never before the last), else one synthetic
        step after the last."""
        if time_ms is None:
            base = self._start_ms if self._start_ms is not None else SYNTHETIC_START_MS
            now = base if self._now is None else self._now + SYNTHETIC_STEP_MS
        else:
            now = time_ms if self._now is None else max(time_ms, self._now)
        self._now = now
        return now

    @property
    def pending(self) -> list[str]:
        """The call ids still waiting for a result, oldest first."""
        return list(self._pending)

    def user(self, texts: Sequence[str], *, now: int, synthetic: bool = False) -> None:
        """A user message with one text part per text."""
        message_id = self._messages.next(now)
        self._last_user = message_id
        self._add(
            MessageAdded(
                session_id=self._session_id,
                time_ms=now,
                message_id=message_id,
                role="user",
                synthetic=synthetic,
            )
        )
        for text in texts:
            part = TextPart(
                id=self._parts.next(now), message_id=message_id, text=text, synthetic=synthetic
            )
            self._part(part, now)

    def assistant(
        self,
        *,
        now: int,
        line: int,
        texts: Sequence[str] = (),
        reasoning: Sequence[str] = (),
        calls: Sequence[ToolCall] = (),
        usage: Usage | None = None,
        model: ModelRef | None = None,
        api_message_id: str | None = None,
    ) -> str:
        """One complete assistant message (one model call); returns its id. ``UsageReported``
        is written only when ``usage`` is given."""
        model = model or self.model
        if self.model is None:
            self.model = model
        message_id = self._messages.next(now)
        self._add(
            MessageAdded(
                session_id=self._session_id,
                time_ms=now,
                message_id=message_id,
                role="assistant",
                parent_id=self._last_user,
                model=model,
            )
        )
        self._part(StepStartPart(id=self._parts.next(now), message_id=message_id), now)
        for text in reasoning:
            self._part(
                ReasoningPart(id=self._parts.next(now), message_id=message_id, text=text), now
            )
        for text in texts:
            self._part(TextPart(id=self._parts.next(now), message_id=message_id, text=text), now)
        for call in calls:
            self._tool_part(message_id, call, now)
        finish = "tool-calls" if calls else "stop"
        reported = usage
        usage = usage or Usage()
        part = StepFinishPart(
            id=self._parts.next(now), message_id=message_id, reason=finish, usage=usage
        )
        self._part(part, now)
        self._add(
            AssistantFinished(
                session_id=self._session_id,
                time_ms=now,
                message_id=message_id,
                finish=finish,
                usage=usage,
            )
        )
        if reported is not None:
            self._add(
                UsageReported(
                    session_id=self._session_id, time_ms=now, message_id=message_id, usage=usage
                )
            )
        self._calls.append(
            ApiCall(
                message_id=message_id,
                api_message_id=api_message_id or message_id,
                model=model.model_id if model else "",
                usage=usage,
                line=line,
                time_ms=now,
            )
        )
        return message_id

    def result(self, call_id: str, output: str, *, now: int, error: bool = False) -> bool:
        """Complete (or fail) the pending call ``call_id``; False when there is none."""
        call = self._pending.pop(call_id, None)
        if call is None:
            self.skipped["orphan_tool_result"] += 1
            return False
        state: ToolCompleted | ToolErrored
        if error:
            state = ToolErrored(
                input=call.input, error=output, started_ms=call.started_ms, ended_ms=now
            )
        else:
            state = ToolCompleted(
                input=call.input, output=output, started_ms=call.started_ms, ended_ms=now
            )
        self._add(
            ToolStateChanged(
                session_id=self._session_id,
                time_ms=now,
                message_id=call.message_id,
                part_id=call.part_id,
                state=state,
            )
        )
        return True

    def build(self, session_ids: IdGenerator | None = None) -> ImportedSession:
        """The finished session; calls never answered stay pending. ``session_ids`` generates
        the session id when none was given (a new generator by default)."""
        first = next((e.time_ms for e in self._events), None)
        start = first if first is not None else (self._start_ms or SYNTHETIC_START_MS)
        session_id = self._requested_id or (session_ids or IdGenerator("ses")).next(start)
        events = [msgspec.structs.replace(e, session_id=session_id) for e in self._events]
        started = SessionStarted(
            session_id=session_id,
            time_ms=start,
            title=self.title,
            model=self.model,
            config=self.config,
        )
        return ImportedSession(
            session_id=session_id,
            events=[started, *events],
            calls=self._calls,
            skipped=dict(sorted(self.skipped.items())),
        )

    def _tool_part(self, message_id: str, call: ToolCall, now: int) -> None:
        if call.call_id in self._pending:
            self.skipped["duplicate_tool_call"] += 1
            return
        part_id = self._parts.next(now)
        self._pending[call.call_id] = _Pending(message_id, part_id, call.tool, call.input, now)
        part = ToolPart(
            id=part_id,
            message_id=message_id,
            call_id=self._unique_call_id(call.call_id),
            tool=call.tool,
            state=ToolPending(input=call.input),
        )
        self._part(part, now)

    def _unique_call_id(self, call_id: str) -> str:
        """``call_id``, or, when an earlier (answered) call used it, ``<call_id>~<n>``."""
        unique, n = call_id, 1
        while unique in self._used_call_ids:
            n += 1
            unique = f"{call_id}~{n}"
        if n > 1:
            self.skipped["renamed_call_id"] += 1
        self._used_call_ids.add(unique)
        return unique

    def _add(self, event: Event) -> None:
        self._events.append(event)

    def _part(self, part: Any, now: int) -> None:
        self._add(PartAdded(session_id=self._session_id, time_ms=now, part=part))


# --- helpers shared by the chat-shaped importers ---------------------------------------------


def openai_usage(raw: Any) -> Usage | None:
    """An OpenAI ``usage`` object (possibly written as a string) as ``Usage``; ``None`` when
    absent or unreadable. Cached prompt tokens count as ``cache_read``, not ``input``."""
    usage = loose_literal(raw)
    if not isinstance(usage, dict):
        return None
    prompt = _count(usage.get("prompt_tokens"))
    details = loose_literal(usage.get("prompt_tokens_details"))
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else 0
    return Usage(
        input=max(prompt - cached, 0),
        output=_count(usage.get("completion_tokens")),
        cache_read=cached,
    )


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def load_json(path: str | Path) -> Any:
    """The JSON document at ``path``; ``TraceImportError`` (line 1) when it is not JSON."""
    path = Path(path)
    data = path.read_bytes()
    try:
        return json.loads(data.decode("utf-8", "replace"))
    except json.JSONDecodeError as e:
        raise TraceImportError(str(path), e.lineno, "", f"not JSON: {e.msg}") from None


def loose_literal(value: Any) -> Any:
    """``value``, or, for a string, the JSON or Python literal it spells (several formats write
    lists and dicts with ``str()``); unparseable strings are returned unchanged."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        pass
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return value


def content_text(content: Any, source: str, line: int, at: str) -> str:
    """The text of a chat ``content``: a string, ``None``, or a list of ``{type, text}`` items
    (text items joined with ``"\\n"``; other item kinds ignored)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise TraceImportError(source, line, at, "must be a string or a list of content items")
    texts: list[str] = []
    for i, item in enumerate(content):
        if not isinstance(item, dict):
            raise TraceImportError(source, line, f"{at}[{i}]", "must be an object")
        if item.get("type", "text") == "text":
            text = item.get("text")
            if not isinstance(text, str):
                raise TraceImportError(source, line, f"{at}[{i}].text", "missing or not a string")
            texts.append(text)
    return "\n".join(texts)


def require_str(obj: dict[str, Any], key: str, source: str, line: int, at: str) -> str:
    """``obj[key]`` as a string, or ``TraceImportError`` naming ``at.key``."""
    value = obj.get(key)
    if not isinstance(value, str):
        raise TraceImportError(
            source, line, f"{at}.{key}" if at else key, "missing or not a string"
        )
    return value


def require_object(value: Any, source: str, line: int, at: str) -> dict[str, Any]:
    """``value`` when it is a JSON object, else ``TraceImportError`` naming ``at``."""
    if not isinstance(value, dict):
        raise TraceImportError(source, line, at, "must be a JSON object")
    return value


def openai_tool_calls(raw: Any, source: str, line: int, at: str) -> list[ToolCall]:
    """OpenAI ``tool_calls`` (``[{id, type, function: {name, arguments}}]``, possibly written as
    a string) as ``ToolCall``s; ``arguments`` is a JSON string or an object."""
    calls = loose_literal(raw)
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise TraceImportError(source, line, at, "must be a list of tool calls")
    out: list[ToolCall] = []
    for i, item in enumerate(calls):
        where = f"{at}[{i}]"
        call = require_object(item, source, line, where)
        call_id = require_str(call, "id", source, line, where)
        function = require_object(call.get("function"), source, line, f"{where}.function")
        name = require_str(function, "name", source, line, f"{where}.function")
        out.append(
            ToolCall(call_id, name, _arguments(function.get("arguments"), source, line, where))
        )
    return out


def _arguments(raw: Any, source: str, line: int, at: str) -> dict[str, Any]:
    where = f"{at}.function.arguments"
    if raw is None or raw == "":
        return {}
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        raise TraceImportError(source, line, where, "must be a JSON string or an object")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        raise TraceImportError(source, line, where, f"not JSON: {e.msg}") from None
    return value if isinstance(value, dict) else {"value": value}


# --- the OpenAI chat importer ------------------------------------------------------------------


def import_openai_chat(path: str | Path, *, session_id: str | None = None) -> ImportedSession:
    """Import the chat log (a JSON list of messages, or ``{"messages": [...]}``) at ``path``."""
    return import_openai_chat_data(load_json(path), source=str(path), session_id=session_id)


def import_openai_chat_data(
    data: Any, *, source: str = "<data>", session_id: str | None = None
) -> ImportedSession:
    """Import a decoded chat log; pure. See the module docstring for the rules."""
    messages, at = chat_messages(data, source)
    builder = ChatBuilder(fmt="openai-chat", session_id=session_id)
    if isinstance(data, dict) and isinstance(data.get("model"), str):
        builder.model = ModelRef(provider_id="openai", model_id=data["model"])
    for i, raw in enumerate(messages):
        _chat_message(builder, raw, source, i + 1, f"{at}[{i}]")
    return builder.build()


def chat_messages(data: Any, source: str) -> tuple[list[Any], str]:
    """The message list of a chat log and its JSON path (``""`` or ``messages``)."""
    if isinstance(data, list):
        return data, ""
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        return data["messages"], "messages"
    raise TraceImportError(source, 1, "messages", "expected a list of messages")


def _chat_message(builder: ChatBuilder, raw: Any, source: str, line: int, at: str) -> None:
    message = require_object(raw, source, line, at)
    role = require_str(message, "role", source, line, at)
    text = content_text(message.get("content"), source, line, f"{at}.content")
    if role in _SYSTEM_ROLES:
        builder.skipped[role] += 1
        builder.config.setdefault("system_prompt", text)
        return
    now = builder.tick()
    if role == "user":
        builder.user([text], now=now)
    elif role == "assistant":
        calls = openai_tool_calls(message.get("tool_calls"), source, line, f"{at}.tool_calls")
        builder.assistant(now=now, line=line, texts=[text] if text else [], calls=calls)
    elif role == "tool":
        call_id = require_str(message, "tool_call_id", source, line, at)
        builder.result(call_id, text, now=now)
    else:
        raise TraceImportError(source, line, f"{at}.role", f"unknown role {role!r}")
