"""OpenHands V1 conversations (the software-agent-sdk event format) into events.

A conversation is a list of events, each ``{id, timestamp, source, kind, …}``, stored as a JSON
lines file, as a folder of per-event files (``event-00000-<uuid>.json``, directly or under
``events/`` beside ``base_state.json``), or as the ``history`` of an ``output.jsonl`` run.
Rules, by ``kind``:

- ``SystemPromptEvent``: ``config["system_prompt"]`` (its text), ``config["dynamic_context"]``
  and ``config["tools"]`` (the tool definitions as given);
- ``MessageEvent`` from the user: a user message (its ``llm_message`` text and images, then its
  ``extended_content``); from the agent: assistant text (``reasoning_content`` or
  ``thinking_blocks`` as reasoning, signatures kept);
- ``ActionEvent``: a tool call (``tool_call_id``, ``tool_name``, input the model's
  ``tool_call.arguments``, else the ``action`` without its ``kind``); its ``thought`` is text, its
  reasoning reasoning. Events sharing an ``llm_response_id`` form one assistant message;
- ``ObservationEvent``: the result of the call with its ``tool_call_id`` (else the action its
  ``action_id`` names): text items are the output, images attachments, ``is_error`` fails it;
  ``UserRejectObservation`` and ``AgentErrorEvent`` fail it with their reason;
- ``ConversationStateUpdateEvent`` with ``key: stats``: usage. The per-call figures come from
  ``base_state.json`` (``token_usages`` by ``response_id``) when the folder has one; otherwise
  each stats update's change of the agent's accumulated usage is the usage of the next model
  call (an update no call takes is reported).

Everything else (other state updates, a critic's result, unknown kinds, a result whose call is
not in the file) is listed in ``left_out``. Times are the events' (UTC when they name no zone).
The session id is derived from the conversation's id (``base_state.json``), else from its first
event's id.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Final

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
from contextledger.importers._imported import ImportedSession
from contextledger.importers._openai_chat import DEFAULT_IMAGE_MIME, json_arguments
from contextledger.importers._records import (
    count,
    iso_ms,
    json_lines,
    load_json,
    malformed_record,
    mapping,
    require_str,
    text_or_none,
)

FORMAT: Final = "openhands-v1"
#: Where the metadata this importer keeps sits in a part's ``metadata``.
METADATA_KEY: Final = "openhands"
#: The per-event files of a persisted conversation folder.
EVENT_GLOB: Final = "event-*.json"
#: The usage ids of the conversation's own LLM calls are all but the condenser's.
CONDENSER: Final = "condenser"
#: The event kinds that answer a call with an error.
_REFUSALS: Final = {"UserRejectObservation": "rejection_reason", "AgentErrorEvent": "error"}

#: Why each kind of event is left out.
STATE: Final = "a conversation state update, not a message"
CRITIC: Final = "a critic's evaluation of the turn, not sent to the model"
UNREAD_KIND: Final = "an event kind the importer does not read"
LATER_SYSTEM: Final = "a system prompt after the first; only the first is kept"
UNUSED_USAGE: Final = "usage of a model call whose response is not in the file"
NO_NEW_USAGE: Final = "a stats update without new usage of the agent's model"
PER_CALL_USAGE: Final = "accumulated usage; base_state.json gives each call's own"
UNREAD_CONTENT: Final = "a content item of a kind the importer does not read"
NOT_AN_EVENT: Final = "a JSON value that is not an event object"


def is_conversation_folder(path: Path) -> bool:
    """Whether ``path`` is a persisted OpenHands V1 conversation: a folder holding
    ``event-*.json`` files, directly or under ``events/``."""
    return path.is_dir() and bool(_event_files(path))


def is_v1_event(value: Any) -> bool:
    """Whether ``value`` looks like one V1 event: an object with a string ``kind`` ending in
    ``Event`` (or ``Observation``) and an ``id``."""
    if not isinstance(value, dict) or "id" not in value:
        return False
    kind = value.get("kind")
    return isinstance(kind, str) and kind.endswith(("Event", "Observation"))


def import_openhands_v1(
    path: str | Path, *, session_id: str | None = None, lenient: bool = False
) -> ImportedSession:
    """Import the V1 conversation at ``path``: a JSON lines file of events (read a line at a
    time), a folder of per-event files, or one event file. With ``lenient`` an event that is
    malformed is left out (``malformed_record``), and so is an event file of a folder that is
    not JSON (its position and name)."""
    path = Path(path)
    if path.is_dir():
        malformed: list[LeftOut] | None = [] if lenient else None
        numbered = _read_files(_event_files(path), malformed)
        session = import_openhands_v1_events(
            numbered,
            source=str(path),
            session_id=session_id,
            base_state=_base_state(path),
            lenient=lenient,
        )
        session.add_left_out(malformed or [])
        return session
    with path.open("rb") as f:
        first = next((line for line in f if line.strip()), b"")
        try:
            json.loads(first)
        except ValueError:  # not one event per line: one event, written over several lines
            events: Iterable[tuple[int, Any, str]] = [(1, load_json(path), "")]
        else:
            f.seek(0)
            events = ((n, v, "") for n, v in json_lines(f, str(path)))
        return import_openhands_v1_events(
            events, source=str(path), session_id=session_id, lenient=lenient
        )


def _read_files(
    files: list[Path], malformed: list[LeftOut] | None
) -> Iterator[tuple[int, Any, str]]:
    """``(position, event, "name:")`` of each event file; one that is not JSON raises, or,
    given a ``malformed`` list, is added to it."""
    for n, file in enumerate(files, 1):
        try:
            yield n, load_json(file), f"{file.name}:"
        except TraceImportError as error:
            if malformed is None:
                raise
            malformed.append(malformed_record(error, line=n, field=file.name))


def import_openhands_v1_events(
    events: Iterable[tuple[int, Any, str]],
    *,
    source: str = "<events>",
    session_id: str | None = None,
    base_state: dict[str, Any] | None = None,
    config: dict[str, Any] | None = None,
    lenient: bool = False,
) -> ImportedSession:
    """Import events given as ``(line, event, field)``; pure. ``line`` and ``field`` say where
    each event is (a line of a JSON lines file, a file's position and name in a folder, or a
    run's line and ``history[i]``); ``base_state`` is the folder's ``base_state.json``. An
    event that is no valid event (a field missing or of the wrong type) raises
    ``TraceImportError`` naming it; with ``lenient`` it is left out (``malformed_record``)."""
    conversation = _Conversation(source, session_id, base_state, config or {})
    for line, event, field in events:
        with conversation.builder.record(lenient=lenient, state=conversation):
            conversation.event(event, line, field)
    return conversation.finish()


def _event_files(folder: Path) -> list[Path]:
    files = sorted(folder.glob(EVENT_GLOB))
    if not files and (folder / "events").is_dir():
        files = sorted((folder / "events").glob(EVENT_GLOB))
    return [f for f in files if f.is_file()]


def _base_state(folder: Path) -> dict[str, Any] | None:
    for candidate in (folder / "base_state.json", folder.parent / "base_state.json"):
        if candidate.is_file():
            value = load_json(candidate)
            return value if isinstance(value, dict) else None
    return None


def model_ref(name: str) -> ModelRef:
    """``provider/model`` as a ``ModelRef`` (a name without ``/`` has no provider)."""
    provider, _, model = name.partition("/")
    if model:
        return ModelRef(provider_id=provider, model_id=model)
    return ModelRef(provider_id="", model_id=name)


class _Response:
    """The events of one LLM response (one ``llm_response_id``), waiting to become one
    assistant message."""

    def __init__(self, response_id: str | None, line: int, time_ms: int | None) -> None:
        self.response_id = response_id
        self.line = line
        self.time_ms = time_ms
        self.items: list[AssistantItem] = []


class _Conversation:
    def __init__(
        self,
        source: str,
        session_id: str | None,
        base_state: dict[str, Any] | None,
        config: dict[str, Any],
    ) -> None:
        self.source = source
        self.builder = ChatBuilder(fmt=FORMAT, session_id=session_id, config=config)
        self.open: _Response | None = None
        self.call_of_action: dict[str, str] = {}
        self.usage_by_response: dict[str, Usage] = {}
        self.accumulated: dict[str, dict[str, Any]] = {}
        self.waiting: tuple[Usage, int, str] | None = None
        self.first_id: str | None = None
        self.conversation_id: str | None = None
        if base_state is not None:
            self._base_state(base_state)

    def _base_state(self, state: dict[str, Any]) -> None:
        conversation = text_or_none(state.get("id"))
        if conversation is not None:
            self.conversation_id = conversation
            self.builder.config["conversation_id"] = conversation
        agent = state.get("agent")
        llm = agent.get("llm") if isinstance(agent, dict) else None
        model = text_or_none(llm.get("model")) if isinstance(llm, dict) else None
        if model is not None:
            self.builder.model = model_ref(model)
            self.builder.config["model"] = model
        stats = state.get("stats")
        metrics = stats.get("usage_to_metrics") if isinstance(stats, dict) else None
        for usage_id, metric in (metrics or {}).items():
            if CONDENSER in usage_id or not isinstance(metric, dict):
                continue
            for usage in metric.get("token_usages") or []:
                if isinstance(usage, dict) and isinstance(usage.get("response_id"), str):
                    self.usage_by_response[usage["response_id"]] = _usage(usage)

    # --- events ---------------------------------------------------------------------------

    def event(self, raw: Any, line: int, field: str) -> None:
        if not isinstance(raw, dict):
            self.builder.read["not an event"] += 1
            self.builder.leave_out(line, "value", NOT_AN_EVENT, field)
            return
        kind = require_str(raw, "kind", self.source, line, field)
        self.builder.read[kind] += 1
        if self.first_id is None and isinstance(raw.get("id"), str):
            self.first_id = raw["id"]
        source = raw.get("source")
        if kind == "ActionEvent":
            self._action(raw, line, field)
        elif kind == "MessageEvent" and source == "agent":
            self._response(raw, line).items.extend(self._message_items(raw, line, field))
            self._critic(raw, line, field)
        else:
            self._flush()
            if kind == "MessageEvent":
                self._user(raw, line, field)
            elif kind == "SystemPromptEvent":
                self._system(raw, line, field)
            elif kind == "ObservationEvent" or kind in _REFUSALS:
                self._observation(raw, kind, line, field)
            elif kind == "ConversationStateUpdateEvent":
                self._state(raw, line, field)
            else:
                self.builder.leave_out(line, kind, UNREAD_KIND, field)

    def finish(self) -> ImportedSession:
        self._flush()
        if self.waiting is not None:
            self.builder.leave_out(self.waiting[1], "stats", UNUSED_USAGE, self.waiting[2])
        key = self.conversation_id or self.first_id
        self.builder.source_session_id = self.conversation_id
        if key is not None:
            self.builder.key = f"openhands-v1:{key}"
        return self.builder.build()

    # --- kinds ----------------------------------------------------------------------------

    def _system(self, raw: dict[str, Any], line: int, field: str) -> None:
        config = self.builder.config
        if "system_prompt" in config:
            self.builder.leave_out(line, "SystemPromptEvent", LATER_SYSTEM, field)
            return
        config["system_prompt"] = _text_of(raw.get("system_prompt"))
        dynamic = raw.get("dynamic_context")
        if dynamic is not None:
            config["dynamic_context"] = _text_of(dynamic)
        if isinstance(raw.get("tools"), list):
            config["tools"] = raw["tools"]

    def _user(self, raw: dict[str, Any], line: int, field: str) -> None:
        texts, files = self._llm_content(raw, line, field)
        extended = raw.get("extended_content")
        for i, item in enumerate(extended if isinstance(extended, list) else []):
            text = item.get("text") if isinstance(item, dict) else None
            if isinstance(text, str):
                texts.append(text)
            else:
                where = _at(field, f"extended_content[{i}]")
                self.builder.leave_out(line, "extended_content", UNREAD_CONTENT, where)
        skills = raw.get("activated_skills")
        metadata = {METADATA_KEY: {"activated_skills": skills}} if skills else None
        synthetic = raw.get("source") != "user"
        self.builder.user(
            texts or [""], now=self._now(raw), files=files, synthetic=synthetic, metadata=metadata
        )
        self._critic(raw, line, field)

    def _action(self, raw: dict[str, Any], line: int, field: str) -> None:
        call_id = text_or_none(raw.get("tool_call_id"))
        tool_call = mapping(raw.get("tool_call"))
        call_id = call_id or text_or_none(tool_call.get("id"))
        if call_id is None:
            raise TraceImportError(self.source, line, _at(field, "tool_call_id"), "missing")
        tool = text_or_none(raw.get("tool_name")) or text_or_none(tool_call.get("name")) or "tool"
        if "arguments" in tool_call:
            at = _at(field, "tool_call")
            arguments = json_arguments(tool_call.get("arguments"), self.source, line, at)
        else:
            action = mapping(raw.get("action"))
            arguments = {k: v for k, v in action.items() if k != "kind"}
        metadata: dict[str, Any] = {}
        action_id = text_or_none(raw.get("id"))
        if action_id is not None:
            self.call_of_action[action_id] = call_id
            metadata[METADATA_KEY] = {"action_id": action_id}
        # The response's items change only once nothing of the event can be refused.
        response = self._response(raw, line)
        response.items.extend(_reasoning(raw))
        response.items.extend(Text(t) for t in _texts(raw.get("thought")) if t)
        response.items.append(ToolCall(call_id, tool, arguments, metadata))
        self._critic(raw, line, field)

    def _observation(self, raw: dict[str, Any], kind: str, line: int, field: str) -> None:
        call_id = text_or_none(raw.get("tool_call_id"))
        action_id = text_or_none(raw.get("action_id"))
        if (call_id is None or call_id not in self.builder.pending) and action_id is not None:
            call_id = self.call_of_action.get(action_id, call_id)
        now = self._now(raw)
        if kind in _REFUSALS:
            reason = raw.get(_REFUSALS[kind])
            output = reason if isinstance(reason, str) else kind
            self.builder.result(call_id or "", output, now=now, line=line, error=True, field=field)
            return
        observation = mapping(raw.get("observation"))
        at = _at(field, "observation")
        texts, files = self._content(observation.get("content"), line, f"{at}.content")
        error = observation.get("is_error") is True
        self.builder.result(
            call_id or "",
            "\n".join(texts),
            now=now,
            line=line,
            error=error,
            attachments=files,
            field=field,
        )

    def _state(self, raw: dict[str, Any], line: int, field: str) -> None:
        if raw.get("key") != "stats" or not isinstance(raw.get("value"), dict):
            self.builder.leave_out(line, f"state:{raw.get('key')}", STATE, field)
            return
        if self.usage_by_response:
            self.builder.leave_out(line, "stats", PER_CALL_USAGE, field)
            return
        metrics = raw["value"].get("usage_to_metrics")
        best: tuple[int, Usage, str] | None = None
        for usage_id, metric in (metrics or {}).items():
            if not isinstance(metric, dict) or not isinstance(
                metric.get("accumulated_token_usage"), dict
            ):
                continue
            now = metric["accumulated_token_usage"]
            before = self.accumulated.get(usage_id, {})
            self.accumulated[usage_id] = now
            if CONDENSER in usage_id:
                continue
            delta = {k: count(now.get(k)) - count(before.get(k)) for k in _USAGE_FIELDS}
            size = delta["prompt_tokens"] + delta["completion_tokens"]
            if size > 0 and (best is None or size > best[0]):
                model = text_or_none(metric.get("model_name"))
                best = (size, _usage(delta), model or "")
        if best is None:
            self.builder.leave_out(line, "stats", NO_NEW_USAGE, field)
            return
        if self.waiting is not None:
            self.builder.leave_out(self.waiting[1], "stats", UNUSED_USAGE, self.waiting[2])
        self.waiting = (best[1], line, field)
        if best[2] and self.builder.model is None:
            self.builder.model = model_ref(best[2])

    # --- responses ------------------------------------------------------------------------

    def _response(self, raw: dict[str, Any], line: int) -> _Response:
        response_id = text_or_none(raw.get("llm_response_id"))
        if self.open is None or response_id is None or self.open.response_id != response_id:
            self._flush()
            self.open = _Response(response_id, line, iso_ms(raw.get("timestamp")))
        return self.open

    def _message_items(self, raw: dict[str, Any], line: int, field: str) -> list[AssistantItem]:
        texts, files = self._llm_content(raw, line, field)
        for _ in files:
            self.builder.leave_out(line, "image", "an image in an assistant message", field)
        return [*_reasoning(raw), *(Text(t) for t in texts)]

    def _flush(self) -> None:
        response, self.open = self.open, None
        if response is None:
            return
        usage = None
        if response.response_id is not None:
            usage = self.usage_by_response.get(response.response_id)
        if usage is None and self.waiting is not None:
            usage, self.waiting = self.waiting[0], None
        self.builder.assistant(
            now=self.builder.tick(response.time_ms),
            line=response.line,
            items=response.items,
            usage=usage,
            api_message_id=response.response_id,
        )

    # --- content --------------------------------------------------------------------------

    def _llm_content(
        self, raw: dict[str, Any], line: int, field: str
    ) -> tuple[list[str], list[Attachment]]:
        message = mapping(raw.get("llm_message"))
        at = _at(field, "llm_message.content")
        return self._content(message.get("content"), line, at)

    def _content(self, content: Any, line: int, at: str) -> tuple[list[str], list[Attachment]]:
        texts: list[str] = []
        files: list[Attachment] = []
        if isinstance(content, str):
            return [content], []
        for i, item in enumerate(content if isinstance(content, list) else []):
            kind = item.get("type") if isinstance(item, dict) else None
            if kind == "text" and isinstance(item, dict) and isinstance(item.get("text"), str):
                texts.append(item["text"])
            elif kind == "image" and isinstance(item, dict):
                urls = item.get("image_urls")
                for url in urls if isinstance(urls, list) else []:
                    if isinstance(url, str):
                        files.append(Attachment(mime=_mime(url), url=url))
            else:
                self.builder.leave_out(line, f"content:{kind}", UNREAD_CONTENT, f"{at}[{i}]")
        return texts, files

    def _critic(self, raw: dict[str, Any], line: int, field: str) -> None:
        if raw.get("critic_result") is not None:
            self.builder.leave_out(line, "critic_result", CRITIC, _at(field, "critic_result"))

    def _now(self, raw: dict[str, Any]) -> int:
        return self.builder.tick(iso_ms(raw.get("timestamp")))


_USAGE_FIELDS: Final = (
    "prompt_tokens",
    "completion_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)


def _usage(raw: dict[str, Any]) -> Usage:
    """An OpenHands token usage as ``Usage``: prompt tokens include the cache reads and
    writes, completion tokens the reasoning; both are split out."""
    cached = count(raw.get("cache_read_tokens"))
    written = count(raw.get("cache_write_tokens"))
    reasoning = count(raw.get("reasoning_tokens"))
    return Usage(
        input=max(count(raw.get("prompt_tokens")) - cached - written, 0),
        output=max(count(raw.get("completion_tokens")) - reasoning, 0),
        reasoning=reasoning,
        cache_read=cached,
        cache_write=written,
    )


def _reasoning(raw: dict[str, Any]) -> list[AssistantItem]:
    """Reasoning: the ``thinking_blocks`` (with their signatures) when there are any, else the
    ``reasoning_content``; an OpenAI ``responses_reasoning_item`` keeps its id and content."""
    items: list[AssistantItem] = []
    blocks = raw.get("thinking_blocks")
    for block in blocks if isinstance(blocks, list) else []:
        if isinstance(block, dict) and isinstance(block.get("thinking"), str):
            signature = block.get("signature")
            metadata = {"anthropic": {"signature": signature}} if signature else {}
            items.append(Reasoning(block["thinking"], metadata))
        elif isinstance(block, dict) and block.get("type") == "redacted_thinking":
            items.append(Reasoning("", {"anthropic": {"redactedData": block.get("data", "")}}))
    if not items and isinstance(raw.get("reasoning_content"), str) and raw["reasoning_content"]:
        items.append(Reasoning(raw["reasoning_content"]))
    item = raw.get("responses_reasoning_item")
    if isinstance(item, dict):
        summary = item.get("summary")
        text = (
            "\n\n".join(s for s in summary if isinstance(s, str))
            if isinstance(summary, list)
            else ""
        )
        openai = {
            "itemId": item.get("id"),
            "reasoningEncryptedContent": item.get("encrypted_content"),
        }
        items.append(Reasoning(text, {"openai": {k: v for k, v in openai.items() if v}}))
    return items


def _at(field: str, path: str) -> str:
    """``path`` inside the event at ``field`` (``history[3]`` → ``history[3].path``; a folder's
    ``event-….json:`` → ``event-….json:path``)."""
    if not field or field.endswith(":"):
        return f"{field}{path}"
    return f"{field}.{path}"


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [i["text"] for i in value if isinstance(i, dict) and isinstance(i.get("text"), str)]
    return []


def _text_of(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("text", ""))
    return "\n".join(_texts(value))


def _mime(url: str) -> str:
    if url.startswith("data:"):
        return url[5:].split(";", 1)[0] or DEFAULT_IMAGE_MIME
    return DEFAULT_IMAGE_MIME
