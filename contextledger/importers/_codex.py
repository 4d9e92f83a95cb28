"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``) into events.

Every line is ``{"timestamp", "type", "payload"}``. What the model saw is in the
``response_item`` lines; ``event_msg`` lines mostly mirror them for the UI. Rules:

- ``session_meta``: the session. Its ``id`` (the thread id) gives the session id (derived, so a
  rollout always imports under the same id and its sub-agents can name it); its
  ``base_instructions`` is ``config["system_prompt"]``; ``cwd``, ``cli_version``,
  ``originator`` and ``model_provider`` go to ``config``.
- ``turn_context``: sets the model of the calls that follow.
- One model call is the run of model output items (``reasoning``, assistant ``message``,
  ``function_call``, ``custom_tool_call``, ``local_shell_call``, ``web_search_call``) since the
  previous ``token_count``. It becomes one assistant message, its parts in the order of the
  items; the ``token_count`` that closes it gives its usage (``last_token_usage``: cached input
  is ``cache_read``, ``cache_write_input_tokens`` ``cache_write``, reasoning output
  ``reasoning``). A ``token_count`` repeating the previous totals carries no new usage: the
  call it closes has none, and the line is reported. A user message, a compaction or the end
  of the file also closes a call (without usage).
- ``reasoning``: a reasoning part; its summary (and content) texts are the text, its ``id``
  and ``encrypted_content`` are kept in ``metadata["openai"]`` (``itemId``,
  ``reasoningEncryptedContent``), so it can be sent back.
- ``function_call``: a tool call (input: the ``arguments`` JSON; a string that is not JSON is
  kept as ``{"arguments": …}``); ``custom_tool_call`` (a freeform tool such as ``apply_patch``):
  input ``{"input": <the raw text>}``; ``local_shell_call``: tool ``local_shell``, input its
  ``action``; ``web_search_call``: a provider-executed ``web_search`` call, completed at once
  (rollouts hold no search results). ``*_output`` items complete the call with their
  ``call_id``; images in an output become attachments.
- ``message`` from the user: a user message; those the user typed (mirrored by an
  ``event_msg`` ``user_message``) are plain, the ones Codex injects (``AGENTS.md``, environment
  context, turn-aborted notes) are ``synthetic``. ``developer`` (and ``system``) messages are
  synthetic user messages too (``metadata["codex"]["role"]``): the event model has no such
  role, and they are sent mid-conversation.
- ``agent_message`` items (messages from other agents of a multi-agent session) are
  synthetic user messages; their encrypted payloads are kept in the text part's metadata.
- ``compacted``: a compaction. Its ``replacement_history`` (the kept user messages and the
  encrypted summary) replaces everything before it: the summary message's text is the
  ``message`` and the replacement history's message texts, the encrypted items are kept in
  its metadata.
- A sub-agent's rollout (``session_meta.source.subagent.thread_spawn``) is a child session:
  ``SessionStarted.parent_session_id`` is the parent thread's session id, ``agent`` its role;
  it starts with a copy of the parent's history up to the fork (what the sub-agent was shown),
  ``config["forked_messages"]`` says how many messages that copy made, and
  ``parent_call_id`` is the ``spawn_agent`` call that started it. ``sub_agent_activity`` on the
  parent's side links a ``spawn_agent`` result to the child (its ``metadata["codex"]``).

Every other line (the ``event_msg`` mirrors, turn markers, tool-run details, world state) is
listed in ``left_out`` with its line and reason. A malformed line raises ``TraceImportError``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Final

import msgspec

from contextledger.events._catalogue import LeftOut
from contextledger.events._parts import ModelRef, Usage
from contextledger.importers._builder import (
    AssistantItem,
    Attachment,
    ChatBuilder,
    Reasoning,
    Text,
    ToolCall,
)
from contextledger.importers._errors import TraceImportError
from contextledger.importers._imported import ImportedSession, derived_session_id
from contextledger.importers._openai_chat import DEFAULT_IMAGE_MIME
from contextledger.importers._records import (
    count,
    iso_ms,
    json_lines,
    malformed_record,
    mapping,
    require_object,
    require_str,
    require_time,
    text_or_none,
)

FORMAT: Final = "codex"
#: The provider when ``session_meta`` names none (Codex's default).
DEFAULT_PROVIDER: Final = "openai"
#: Where the metadata this importer keeps sits in a part's ``metadata``.
METADATA_KEY: Final = "codex"
#: The tool a hosted web search is recorded under.
WEB_SEARCH_TOOL: Final = "web_search"
#: The tool Codex spawns sub-agents with.
SPAWN_TOOL: Final = "spawn_agent"
#: The agent of a sub-agent whose rollout names no role.
SUBAGENT: Final = "subagent"
#: The response items a model call produces.
MODEL_OUTPUT: Final = frozenset(
    {"reasoning", "function_call", "custom_tool_call", "local_shell_call", "web_search_call"}
)
_OUTPUTS: Final = frozenset(
    {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}
)

#: Why each kind of line is left out.
MIRROR: Final = {
    "agent_message": "mirrors an assistant message item",
    "agent_reasoning": "mirrors a reasoning item's summary",
    "agent_reasoning_raw_content": "mirrors a reasoning item's content",
    "user_message": "mirrors a user message item",
    "task_started": "marks the start of a turn",
    "task_complete": "marks the end of a turn (its last_agent_message mirrors an item)",
    "turn_aborted": "marks an interrupted turn (the note Codex sends is a user message item)",
    "context_compacted": "marks the compaction its compacted line carries",
    "thread_settings_applied": "a settings change; each call's model comes from turn_context",
}
TOOL_RUN: Final = "details of a tool run; the call's output item carries its result"
NO_USAGE: Final = "a token count without usage (info is null)"
REPEATED_USAGE: Final = "repeats the previous totals: no new usage"
STRAY_USAGE: Final = "usage of a model call whose output items are not in the file"
REPEATED_META: Final = "repeats the session's meta"
OTHER_META: Final = "the meta of another thread"
UNREAD_LINE: Final = "a line type the importer does not read"
UNREAD_ITEM: Final = "a response item type the importer does not read"
UNREAD_EVENT: Final = "an event the importer does not read"
UNREAD_CONTENT: Final = "a content item of a kind the importer does not read"
UNLINKED_ACTIVITY: Final = "sub-agent activity for a call whose result is not in the file"
STATE_LINE: Final = "Codex's environment and agent state, not a message"


def import_codex(
    path: str | Path, *, session_id: str | None = None, lenient: bool = False
) -> ImportedSession:
    """Import the Codex rollout at ``path``, reading it twice (see ``_import_rollout``) so
    that no more than one record is held at a time. ``session_id`` overrides the derived id;
    with ``lenient`` a malformed line is left out instead of refused."""
    path = Path(path)

    def read() -> Iterator[bytes]:
        with path.open("rb") as f:
            yield from f

    return _import_rollout(read, str(path), session_id, lenient)


def import_codex_lines(
    lines: Iterable[bytes | str],
    *,
    source: str = "<lines>",
    session_id: str | None = None,
    lenient: bool = False,
) -> ImportedSession:
    """Import a rollout given as its lines; pure. See the module docstring for the rules."""
    held = list(lines)
    return _import_rollout(lambda: iter(held), source, session_id, lenient)


def _import_rollout(
    read: Callable[[], Iterator[bytes | str]], source: str, session_id: str | None, lenient: bool
) -> ImportedSession:
    """Import the rollout whose lines each call of ``read`` gives: read twice, first for the
    user items a later event mirrors (``_typed_user_items``), then to build the session, so
    no more than one record is held at a time."""
    typed = _typed_user_items(_records(read(), source, [] if lenient else None))
    malformed: list[LeftOut] | None = [] if lenient else None
    session = _Rollout(_records(read(), source, malformed), typed, source, session_id).run()
    session.add_left_out(malformed or [])
    return session


def _records(
    lines: Iterable[bytes | str], source: str, malformed: list[LeftOut] | None
) -> Iterator[_Line]:
    """The records of ``lines``; a malformed one raises, or, given a ``malformed`` list, is
    added to it."""
    for number, value in json_lines(lines, source, malformed):
        try:
            yield _record(value, source, number)
        except TraceImportError as e:
            if malformed is None:
                raise
            malformed.append(malformed_record(e))


class _Line(msgspec.Struct, frozen=True):
    number: int
    time_ms: int
    type: str
    payload: dict[str, Any]

    @property
    def kind(self) -> str:
        inner = self.payload.get("type")
        return f"{self.type}:{inner}" if isinstance(inner, str) else self.type


def _record(value: Any, source: str, number: int) -> _Line:
    line = require_object(value, source, number, "")
    kind = require_str(line, "type", source, number, "")
    time_ms = require_time(line.get("timestamp"), source, number, "timestamp")
    payload = require_object(line.get("payload"), source, number, "payload")
    return _Line(number, time_ms, kind, payload)


def uuid7_ms(value: str) -> int | None:
    """The creation time of a version-7 UUID (Codex's thread and turn ids), else ``None``."""
    digits = value.replace("-", "")
    if len(digits) != 32 or digits[12] != "7":
        return None
    try:
        return int(digits[:12], 16)
    except ValueError:
        return None


def thread_session_id(thread_id: str, created_ms: int | None) -> str:
    """The session id of the Codex thread ``thread_id``: derived from the id, at the time the
    id itself holds (UUIDv7), else at ``created_ms``."""
    start = uuid7_ms(thread_id)
    return derived_session_id(
        start if start is not None else (created_ms or 0), f"codex:{thread_id}"
    )


class _Result(msgspec.Struct):
    call_id: str
    output: str
    files: list[Attachment]
    line: int
    time_ms: int


class _Call:
    """The output items of one model call, waiting for the ``token_count`` that closes it."""

    def __init__(self, line: _Line, model: ModelRef | None) -> None:
        self.line = line.number
        self.time_ms = line.time_ms
        self.model = model
        self.items: list[AssistantItem] = []
        self.call_ids: set[str] = set()
        self.results: list[_Result] = []


class _Rollout:
    def __init__(
        self, lines: Iterable[_Line], typed: dict[int, int], source: str, session_id: str | None
    ) -> None:
        self.lines = lines
        self.source = source
        self.builder = ChatBuilder(fmt=FORMAT, session_id=session_id)
        self.meta: dict[str, Any] | None = None
        self.provider = DEFAULT_PROVIDER
        self.model: ModelRef | None = None
        self.open: _Call | None = None
        self.totals: Any = None
        self.typed = typed
        self.mirrors = set(self.typed.values())
        self.web_searches = 0
        self.links: dict[str, dict[str, Any]] = {}
        self.fork: _Fork | None = None

    def run(self) -> ImportedSession:
        for line in self.lines:
            self.builder.read[line.kind] += 1
            if self.fork is not None:
                self.fork.at(line, self.builder)
            self._line(line)
        self._flush(None)
        for call_id in self.links:
            self.builder.leave_out(0, "event_msg:sub_agent_activity", UNLINKED_ACTIVITY, call_id)
        return self._result()

    def _result(self) -> ImportedSession:
        builder = self.builder
        if self.fork is not None:
            builder.config["forked_messages"] = self.fork.messages(builder)
            builder.parent_call_id = self.fork.spawn_call
            if self.fork.spawn_call is not None:
                builder.config["parent_call_id"] = self.fork.spawn_call
        derived = None
        if self.meta is not None:
            derived = thread_session_id(str(self.meta["id"]), builder.started_ms)
        return builder.build(derived_id=derived)

    # --- lines ----------------------------------------------------------------------------

    def _line(self, line: _Line) -> None:
        kind = line.type
        if kind == "session_meta":
            self._meta(line)
        elif kind == "turn_context":
            model = text_or_none(line.payload.get("model"))
            if model is not None:
                self.model = ModelRef(provider_id=self.provider, model_id=model)
                self.builder.model = self.builder.model or self.model
        elif kind == "response_item":
            self._item(line)
        elif kind == "event_msg":
            self._event(line)
        elif kind == "compacted":
            self._compacted(line)
        elif kind in ("world_state", "inter_agent_communication_metadata"):
            self.builder.leave_out(line.number, kind, STATE_LINE)
        else:
            self.builder.leave_out(line.number, kind, UNREAD_LINE)

    def _meta(self, line: _Line) -> None:
        payload = line.payload
        thread_id = require_str(payload, "id", self.source, line.number, "payload")
        if self.meta is None:
            self.meta = payload
            self._start(line, payload, thread_id)
        elif thread_id == self.meta["id"]:
            self.builder.leave_out(line.number, "session_meta", REPEATED_META)
        elif self.fork is not None and thread_id == self.fork.parent_id:
            self.fork.parent_meta(line, payload, self.builder)
        else:
            self.builder.leave_out(line.number, "session_meta", OTHER_META)

    def _start(self, line: _Line, payload: dict[str, Any], thread_id: str) -> None:
        builder = self.builder
        builder.source_session_id = thread_id
        builder.started_ms = iso_ms(payload.get("timestamp")) or line.time_ms
        builder.config["source_session_id"] = thread_id
        self.provider = text_or_none(payload.get("model_provider")) or DEFAULT_PROVIDER
        for key in ("cwd", "cli_version", "originator", "model_provider"):
            if isinstance(payload.get(key), str):
                builder.config[key] = payload[key]
        instructions = payload.get("base_instructions")
        if isinstance(instructions, dict) and isinstance(instructions.get("text"), str):
            builder.config["system_prompt"] = instructions["text"]
        spawn = _thread_spawn(payload)
        if spawn is not None:
            self.fork = _Fork(thread_id, payload, spawn)
            builder.agent = self.fork.role
            builder.parent_session_id = self.fork.parent_session_id(None)
            builder.config.update(self.fork.config())

    def _item(self, line: _Line) -> None:
        payload = line.payload
        kind = payload.get("type")
        role = payload.get("role")
        if kind == "message" and role == "assistant":
            self._call(line).items.append(self._text(line))
        elif kind in MODEL_OUTPUT:
            self._output(line, str(kind))
        elif kind in _OUTPUTS:
            self._tool_output(line)
        elif kind == "message":
            self._flush(None)
            self._user_message(line, str(role))
        elif kind == "agent_message":
            self._flush(None)
            self._agent_message(line)
        else:
            self.builder.leave_out(line.number, f"response_item:{kind}", UNREAD_ITEM)

    def _event(self, line: _Line) -> None:
        kind = str(line.payload.get("type"))
        if kind == "token_count":
            self._token_count(line)
        elif kind == "user_message" and line.number not in self.mirrors:
            self._flush(None)
            text = line.payload.get("message")
            self.builder.user([text if isinstance(text, str) else ""], now=self._now(line))
        elif kind == "sub_agent_activity":
            self._activity(line)
        elif kind in MIRROR:
            self.builder.leave_out(line.number, f"event_msg:{kind}", MIRROR[kind])
        elif kind.endswith("_end"):
            self.builder.leave_out(line.number, f"event_msg:{kind}", TOOL_RUN)
        else:
            self.builder.leave_out(line.number, f"event_msg:{kind}", UNREAD_EVENT)

    # --- model calls ----------------------------------------------------------------------

    def _call(self, line: _Line) -> _Call:
        if self.open is None:
            self.open = _Call(line, self.model)
        return self.open

    def _text(self, line: _Line) -> Text:
        payload = line.payload
        texts, _ = self._content(line, payload.get("content"), "payload.content")
        meta = {k: payload[k] for k in ("id", "phase") if isinstance(payload.get(k), str)}
        return Text("\n".join(texts), {METADATA_KEY: meta} if meta else {})

    def _output(self, line: _Line, kind: str) -> None:
        payload = line.payload
        call = self._call(line)
        if kind == "reasoning":
            call.items.append(_reasoning(payload))
            return
        item = self._tool_call(line, kind)
        item = msgspec.structs.replace(item, line=line.number, field="payload.call_id")
        call.items.append(item)
        call.call_ids.add(item.call_id)
        if kind == "web_search_call":
            call.results.append(_Result(item.call_id, "", [], line.number, line.time_ms))

    def _tool_call(self, line: _Line, kind: str) -> ToolCall:
        payload = line.payload
        meta = {
            k: payload[k] for k in ("id", "namespace", "status") if isinstance(payload.get(k), str)
        }
        if kind == "web_search_call":
            self.web_searches += 1
            action = payload.get("action")
            metadata = {METADATA_KEY: meta} if meta else {}
            return ToolCall(
                f"web-search-{self.web_searches}",
                WEB_SEARCH_TOOL,
                mapping(action),
                metadata,
                provider_executed=True,
            )
        call_id = require_str(payload, "call_id", self.source, line.number, "payload")
        if kind == "custom_tool_call":
            name = require_str(payload, "name", self.source, line.number, "payload")
            raw = payload.get("input")
            meta["type"] = kind
            return ToolCall(
                call_id, name, {"input": raw if isinstance(raw, str) else ""}, {METADATA_KEY: meta}
            )
        if kind == "local_shell_call":
            action = payload.get("action")
            return ToolCall(
                call_id,
                "local_shell",
                mapping(action),
                {METADATA_KEY: meta},
            )
        name = require_str(payload, "name", self.source, line.number, "payload")
        return ToolCall(
            call_id,
            name,
            _arguments(payload.get("arguments")),
            {METADATA_KEY: meta} if meta else {},
        )

    def _tool_output(self, line: _Line) -> None:
        payload = line.payload
        call_id = require_str(payload, "call_id", self.source, line.number, "payload")
        output = payload.get("output")
        if isinstance(output, list):
            texts, files = self._content(line, output, "payload.output")
            text = "\n".join(texts)
        else:
            text, files = (output if isinstance(output, str) else json.dumps(output)), []
        result = _Result(call_id, text, files, line.number, line.time_ms)
        if self.open is not None and call_id in self.open.call_ids:
            self.open.results.append(result)
        else:
            self._complete(result)

    def _token_count(self, line: _Line) -> None:
        info = line.payload.get("info")
        if not isinstance(info, dict):
            self.builder.leave_out(line.number, "event_msg:token_count", NO_USAGE)
            return
        totals = info.get("total_token_usage")
        repeated = totals is not None and totals == self.totals
        self.totals = totals
        if repeated:
            self.builder.leave_out(line.number, "event_msg:token_count", REPEATED_USAGE)
            self._flush(None)
        elif self.open is None:
            self.builder.leave_out(line.number, "event_msg:token_count", STRAY_USAGE)
        else:
            self._flush(_usage(info.get("last_token_usage")))

    def _flush(self, usage: Usage | None) -> None:
        call, self.open = self.open, None
        if call is None:
            return
        self.builder.assistant(
            now=self.builder.tick(call.time_ms),
            line=call.line,
            items=call.items,
            usage=usage,
            model=call.model,
        )
        for result in call.results:
            self._complete(result)

    def _complete(self, result: _Result) -> None:
        link = self.links.pop(result.call_id, None)
        self.builder.result(
            result.call_id,
            result.output,
            now=self.builder.tick(result.time_ms),
            line=result.line,
            attachments=result.files,
            metadata={METADATA_KEY: link} if link else None,
            field="payload.call_id",
        )

    # --- other turns ----------------------------------------------------------------------

    def _user_message(self, line: _Line, role: str) -> None:
        texts, files = self._content(line, line.payload.get("content"), "payload.content")
        typed = role == "user" and line.number in self.typed
        metadata = {} if role == "user" else {METADATA_KEY: {"role": role}}
        self.builder.user(
            ["\n".join(texts)],
            now=self._now(line),
            synthetic=not typed,
            files=files,
            metadata=metadata,
        )

    def _agent_message(self, line: _Line) -> None:
        payload = line.payload
        content = payload.get("content")
        texts: list[str] = []
        sealed: list[Any] = []
        for i, item in enumerate(content if isinstance(content, list) else []):
            if isinstance(item, dict) and item.get("type") == "encrypted_content":
                sealed.append(item.get("encrypted_content"))
            elif isinstance(item, dict) and isinstance(item.get("text"), str):
                texts.append(item["text"])
            else:
                self.builder.leave_out(
                    line.number, "content", UNREAD_CONTENT, f"payload.content[{i}]"
                )
        meta: dict[str, Any] = {
            k: payload[k] for k in ("id", "author", "recipient") if k in payload
        }
        if sealed:
            meta["encrypted_content"] = sealed
        self.builder.user(
            ["\n".join(texts)], now=self._now(line), synthetic=True, metadata={METADATA_KEY: meta}
        )

    def _compacted(self, line: _Line) -> None:
        self._flush(None)
        payload = line.payload
        parts: list[str] = []
        message = payload.get("message")
        if isinstance(message, str) and message:
            parts.append(message)
        sealed: list[dict[str, Any]] = []
        history = payload.get("replacement_history")
        for i, item in enumerate(history if isinstance(history, list) else []):
            at = f"payload.replacement_history[{i}]"
            kind = item.get("type") if isinstance(item, dict) else None
            if kind == "message":
                texts, _ = self._content(line, item.get("content"), f"{at}.content")
                parts.append("\n".join(texts))
            elif kind == "compaction":
                sealed.append({k: v for k, v in item.items() if k in ("id", "encrypted_content")})
            else:
                self.builder.leave_out(line.number, f"replacement_history:{kind}", UNREAD_ITEM, at)
        meta: dict[str, Any] = {
            k: payload[k]
            for k in ("window_id", "window_number", "previous_window_id")
            if k in payload
        }
        if sealed:
            meta["compaction_items"] = sealed
        self.builder.compaction(
            now=self._now(line), summary="\n\n".join(parts), metadata={METADATA_KEY: meta}
        )

    def _activity(self, line: _Line) -> None:
        payload = line.payload
        call_id = payload.get("event_id")
        thread = payload.get("agent_thread_id")
        if not isinstance(call_id, str) or not isinstance(thread, str):
            self.builder.leave_out(line.number, "event_msg:sub_agent_activity", UNREAD_EVENT)
            return
        self.links[call_id] = {
            "agent_thread_id": thread,
            "agent_path": payload.get("agent_path"),
            "activity": payload.get("kind"),
            "child_session_id": thread_session_id(thread, None),
        }

    def _content(self, line: _Line, content: Any, at: str) -> tuple[list[str], list[Attachment]]:
        """The texts and images of a content list (``input_text``/``output_text``,
        ``input_image``); other items are reported."""
        if content is None:
            return [], []
        if isinstance(content, str):
            return [content], []
        if not isinstance(content, list):
            raise TraceImportError(self.source, line.number, at, "must be a list of content items")
        texts: list[str] = []
        files: list[Attachment] = []
        for i, item in enumerate(content):
            where = f"{at}[{i}]"
            if not isinstance(item, dict):
                raise TraceImportError(self.source, line.number, where, "must be an object")
            if isinstance(item.get("text"), str):
                texts.append(item["text"])
            elif item.get("type") == "input_image" and isinstance(item.get("image_url"), str):
                url = item["image_url"]
                mime = url[5:].split(";", 1)[0] if url.startswith("data:") else DEFAULT_IMAGE_MIME
                files.append(Attachment(mime=mime or DEFAULT_IMAGE_MIME, url=url))
            else:
                self.builder.leave_out(
                    line.number, f"content:{item.get('type')}", UNREAD_CONTENT, where
                )
        return texts, files

    def _now(self, line: _Line) -> int:
        return self.builder.tick(line.time_ms)


class _Fork:
    """A sub-agent's rollout: who spawned it, and where the copy of the parent's history ends
    (at the first turn the sub-agent itself started: its turn ids, UUIDv7 like its thread
    id, sort at or after that id)."""

    def __init__(self, thread_id: str, payload: dict[str, Any], spawn: dict[str, Any]) -> None:
        self.thread_id = thread_id
        self.spawn = spawn
        forked = payload.get("forked_from_id")
        parent = spawn.get("parent_thread_id")
        self.parent_id = str(forked or parent or "")
        self.role = str(spawn.get("agent_role") or payload.get("agent_role") or SUBAGENT)
        self.nickname = spawn.get("agent_nickname") or payload.get("agent_nickname")
        self.forked_from = forked
        self.parent_created_ms: int | None = None
        self.copying = False
        self.copied: int | None = None
        self.spawn_call: str | None = None
        self._spawn_calls: list[str] = []

    def config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"parent_thread_id": self.parent_id, "agent_role": self.role}
        for key, value in (
            ("agent_nickname", self.nickname),
            ("depth", self.spawn.get("depth")),
            ("forked_from_id", self.forked_from),
        ):
            if value is not None:
                config[key] = value
        return config

    def parent_session_id(self, created_ms: int | None) -> str | None:
        if not self.parent_id:
            return None
        if uuid7_ms(self.parent_id) is None and created_ms is None:
            return None
        return thread_session_id(self.parent_id, created_ms)

    def parent_meta(self, line: _Line, payload: dict[str, Any], builder: ChatBuilder) -> None:
        """The copy of the parent's meta that opens the forked history."""
        self.parent_created_ms = iso_ms(payload.get("timestamp"))
        self.copying = True
        builder.parent_session_id = self.parent_session_id(self.parent_created_ms)
        builder.config["forked_from_meta_line"] = line.number

    def at(self, line: _Line, builder: ChatBuilder) -> None:
        """Follow the copy: note its ``spawn_agent`` calls and where it ends."""
        if not self.copying:
            return
        payload = line.payload
        turn = payload.get("turn_id")
        if isinstance(turn, str) and turn >= self.thread_id:
            self.copying = False
            self.copied = builder.messages
            self.spawn_call = self._spawn_calls[-1] if self._spawn_calls else None
        elif payload.get("type") == "function_call" and payload.get("name") == SPAWN_TOOL:
            call_id = payload.get("call_id")
            if isinstance(call_id, str):
                self._spawn_calls.append(call_id)

    def messages(self, builder: ChatBuilder) -> int:
        return self.copied if self.copied is not None else (builder.messages if self.copying else 0)


def _thread_spawn(payload: dict[str, Any]) -> dict[str, Any] | None:
    source = payload.get("source")
    subagent = source.get("subagent") if isinstance(source, dict) else None
    spawn = subagent.get("thread_spawn") if isinstance(subagent, dict) else None
    return spawn if isinstance(spawn, dict) else None


def _typed_user_items(lines: Iterable[_Line]) -> dict[int, int]:
    """The user message items the user typed (line → the line of the ``user_message`` event
    that mirrors it): the last user item before each such event, when their texts agree."""
    typed: dict[int, int] = {}
    last_user: _Line | None = None
    for line in lines:
        payload = line.payload
        if line.type == "response_item" and payload.get("type") == "message":
            last_user = line if payload.get("role") == "user" else None
        elif line.type == "event_msg" and payload.get("type") == "user_message":
            text = payload.get("message")
            if last_user is not None and isinstance(text, str):
                content = last_user.payload.get("content")
                items = content if isinstance(content, list) else []
                said = "".join(i.get("text", "") for i in items if isinstance(i, dict))
                if said.strip() == text.strip():
                    typed[last_user.number] = line.number
            last_user = None
    return typed


def _reasoning(payload: dict[str, Any]) -> Reasoning:
    texts: list[str] = []
    for key in ("summary", "content"):
        items = payload.get(key)
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and isinstance(item.get("text"), str):
                texts.append(item["text"])
    openai: dict[str, Any] = {}
    if isinstance(payload.get("id"), str):
        openai["itemId"] = payload["id"]
    if isinstance(payload.get("encrypted_content"), str):
        openai["reasoningEncryptedContent"] = payload["encrypted_content"]
    return Reasoning("\n\n".join(texts), {"openai": openai} if openai else {})


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str) or not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return {"arguments": raw}
    return value if isinstance(value, dict) else {"value": value}


def _usage(raw: Any) -> Usage | None:
    """``last_token_usage`` as ``Usage``: input and output counts include the cached input and
    the reasoning output, which are split out (never counted twice)."""
    if not isinstance(raw, dict):
        return None
    cached = count(raw.get("cached_input_tokens"))
    written = count(raw.get("cache_write_input_tokens"))
    reasoning = count(raw.get("reasoning_output_tokens"))
    return Usage(
        input=max(count(raw.get("input_tokens")) - cached - written, 0),
        output=max(count(raw.get("output_tokens")) - reasoning, 0),
        reasoning=reasoning,
        cache_read=cached,
        cache_write=written,
    )
