"""opencode session exports (``opencode export <sessionID>``) into events.

An export is one JSON object ``{info, messages: [{info, parts}]}``. opencode's part model is
the one the event model follows, so the mapping is close to one to one:

- a user message: its ``text`` parts (``synthetic`` and ``ignored`` kept), ``file`` parts,
  ``subtask`` and ``agent`` parts. A user message holding a ``compaction`` part is a compaction
  request (``CompactionRequested``, ``auto`` and ``overflow`` kept);
- an assistant message (``info.parentID``, ``providerID``/``modelID``, ``agent``): its
  ``step-start``, ``reasoning`` (with its provider metadata), ``text``, ``file`` and ``retry``
  parts; a ``tool`` part is a tool call (``callID``, ``tool``, ``state.input``) and, when its
  state is ``completed`` or ``error``, its result (output, title, metadata, attachments, times);
  ``step-finish`` closes one model call: its ``tokens`` (opencode's vocabulary, ours) are the
  call's usage (``UsageReported``) and its cost. ``info.finish``, ``info.tokens``, ``info.cost``
  and ``info.error`` go to ``AssistantFinished``;
- the summary message of a compaction (``info.summary``, answering the request) completes it:
  ``CompactionCompleted`` with the summary's text, no verbatim tail.

``patch`` parts (file snapshots, never sent to the model) and unknown part types are left out
with the message's position and the part's path. Times are opencode's epoch milliseconds; the
session id is derived from ``info.id``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from contextledger.events._parts import (
    AgentPart,
    ErrorName,
    FilePart,
    MessageError,
    ModelRef,
    RetryPart,
    SubtaskPart,
    TextPart,
    Usage,
)
from contextledger.importers._builder import Attachment, ChatBuilder, Reasoning, ToolCall
from contextledger.importers._imported import ImportedSession
from contextledger.importers._records import (
    count,
    load_json,
    mapping,
    require_list,
    require_object,
    require_str,
    text_or_none,
)

FORMAT: Final = "opencode"
#: Why each kind of part is left out.
PATCH: Final = "a file snapshot patch (hash and files), never sent to the model"
UNREAD_PART: Final = "a part type the importer does not read"
UNREAD_ROLE: Final = "a message role the importer does not read"
#: opencode's named errors in our error vocabulary.
ERROR_NAMES: Final[dict[str, ErrorName]] = {
    "MessageAbortedError": "AbortedError",
    "ProviderAuthError": "AuthError",
    "APIError": "APIError",
    "MessageOutputLengthError": "OutputLengthError",
    "ContextOverflowError": "ContextOverflowError",
    "StructuredOutputError": "StructuredOutputError",
}


def _is_message(value: Any) -> bool:
    return isinstance(value, dict) and "info" in value and "parts" in value


def is_opencode_export(document: Any) -> bool:
    """Whether a JSON document is an opencode export (one of its first messages is enough: a
    malformed one is the importer's to report)."""
    if not isinstance(document, dict):
        return False
    info, messages = document.get("info"), document.get("messages")
    return (
        isinstance(info, dict)
        and isinstance(info.get("id"), str)
        and isinstance(messages, list)
        and (not messages or any(_is_message(m) for m in messages[:3]))
    )


def import_opencode(
    path: str | Path, *, session_id: str | None = None, lenient: bool = False
) -> ImportedSession:
    """Import the opencode export at ``path``."""
    return import_opencode_data(
        load_json(path), source=str(path), session_id=session_id, lenient=lenient
    )


def import_opencode_data(
    data: Any, *, source: str = "<data>", session_id: str | None = None, lenient: bool = False
) -> ImportedSession:
    """Import a decoded export; pure. See the module docstring for the rules. With
    ``lenient`` a malformed message is left out (``ChatBuilder.record``) instead of refusing
    the export."""
    document = require_object(data, source, 1, "")
    info = require_object(document.get("info"), source, 1, "info")
    source_id = require_str(info, "id", source, 1, "info")
    messages = require_list(document.get("messages"), source, 1, "messages")
    builder = ChatBuilder(fmt=FORMAT, session_id=session_id, key=f"opencode:{source_id}")
    builder.source_session_id = source_id
    builder.config["source_session_id"] = source_id
    builder.title = str(info.get("title") or "")
    for key in ("version", "directory", "projectID", "slug"):
        if isinstance(info.get(key), str):
            builder.config[key] = info[key]
    time = info.get("time")
    if isinstance(time, dict) and isinstance(time.get("created"), int):
        builder.started_ms = time["created"]
    export = _Export(builder, source)
    for i, raw in enumerate(messages):
        with builder.record(lenient=lenient, state=export):
            export.message(raw, i + 1, f"messages[{i}]")
    return builder.build()


class _Export:
    def __init__(self, builder: ChatBuilder, source: str) -> None:
        self.builder = builder
        self.source = source
        self.requests: dict[str, str] = {}

    def message(self, raw: Any, line: int, at: str) -> None:
        message = require_object(raw, self.source, line, at)
        info = require_object(message.get("info"), self.source, line, f"{at}.info")
        parts = require_list(message.get("parts"), self.source, line, f"{at}.parts")
        role = require_str(info, "role", self.source, line, f"{at}.info")
        self.builder.read[role] += 1
        for part in parts:
            kind = part.get("type") if isinstance(part, dict) else None
            self.builder.read[f"part:{kind}"] += 1
        if role == "user":
            self._user(info, parts, line, at)
        elif role == "assistant":
            self._assistant(info, parts, line, at)
        else:
            self.builder.leave_out(line, role, UNREAD_ROLE, at)

    # --- user -----------------------------------------------------------------------------

    def _user(self, info: dict[str, Any], parts: list[Any], line: int, at: str) -> None:
        now = self.builder.tick(_created(info))
        compaction = next(
            (p for p in parts if isinstance(p, dict) and p.get("type") == "compaction"), None
        )
        agent = text_or_none(info.get("agent"))
        if compaction is not None:
            message_id = self.builder.compaction_requested(
                now=now,
                auto=bool(compaction.get("auto")),
                overflow=bool(compaction.get("overflow")),
            )
            if isinstance(info.get("id"), str):
                self.requests[info["id"]] = message_id
        else:
            message_id = self.builder.open_user(now=now, agent=agent)
        for j, raw in enumerate(parts):
            where = f"{at}.parts[{j}]"
            part = require_object(raw, self.source, line, where)
            kind = part.get("type")
            if kind == "compaction":
                continue
            if kind == "text":
                self.builder.add_part(self._text(part, message_id, now), now)
            elif kind == "file":
                self.builder.add_part(self._file(part, message_id, now), now)
            elif kind == "subtask":
                self.builder.add_part(self._subtask(part, message_id, now), now)
            elif kind == "agent":
                name = str(part.get("name") or "")
                self.builder.add_part(
                    AgentPart(id=self.builder.part_id(now), message_id=message_id, name=name), now
                )
            else:
                self._leave(line, kind, where)

    # --- assistant ------------------------------------------------------------------------

    def _assistant(self, info: dict[str, Any], parts: list[Any], line: int, at: str) -> None:
        builder = self.builder
        now = builder.tick(_created(info))
        request = self.requests.get(str(info.get("parentID")))
        summary_of = request if info.get("summary") is True else None
        model = _model(info)
        message_id = builder.open_assistant(
            now=now,
            model=model,
            summary_of=summary_of,
            agent=text_or_none(info.get("agent")),
            step_start=False,
        )
        texts: list[str] = []
        reason: str | None = None
        for j, raw in enumerate(parts):
            where = f"{at}.parts[{j}]"
            part = require_object(raw, self.source, line, where)
            kind = part.get("type")
            now = builder.tick(_part_start(part))
            if kind == "step-start":
                builder.step_start(message_id, now=now, snapshot=text_or_none(part.get("snapshot")))
            elif kind == "text":
                text_part = self._text(part, message_id, now)
                texts.append(text_part.text)
                builder.add_part(text_part, now)
            elif kind == "reasoning":
                metadata = part.get("metadata")
                reasoning = Reasoning(str(part.get("text") or ""), mapping(metadata))
                builder.add_item(message_id, reasoning, now, line=line)
            elif kind == "tool":
                self._tool(part, message_id, line, where, now)
            elif kind == "step-finish":
                reason = str(part.get("reason") or "stop")
                builder.step_finish(
                    message_id,
                    now=now,
                    line=line,
                    reason=reason,
                    usage=_usage(part.get("tokens")),
                    cost=_cost(part.get("cost")),
                    model=model,
                    api_message_id=text_or_none(info.get("id")),
                )
            elif kind == "file":
                builder.add_part(self._file(part, message_id, now), now)
            elif kind == "retry":
                builder.add_part(self._retry(part, message_id, now), now)
            elif kind == "patch":
                builder.leave_out(line, "part:patch", PATCH, where)
            else:
                self._leave(line, kind, where)
        end = builder.tick(_completed(info))
        finish = text_or_none(info.get("finish")) or reason or "unknown"
        builder.finish(
            message_id,
            now=end,
            finish=finish,
            usage=_usage(info.get("tokens")),
            cost=_cost(info.get("cost")),
            error=_error(info.get("error")),
        )
        if summary_of is not None and info.get("error") is None:
            builder.compaction_completed(summary_of, message_id, "\n".join(texts), now=end)

    def _tool(self, part: dict[str, Any], message_id: str, line: int, at: str, now: int) -> None:
        call_id = require_str(part, "callID", self.source, line, at)
        tool = require_str(part, "tool", self.source, line, at)
        state = require_object(part.get("state"), self.source, line, f"{at}.state")
        raw_input = state.get("input")
        metadata = part.get("metadata")
        call = ToolCall(
            call_id,
            tool,
            mapping(raw_input),
            mapping(metadata),
        )
        self.builder.add_item(message_id, call, now, line=line)
        status = state.get("status")
        if status not in ("completed", "error"):
            return
        times = mapping(state.get("time"))
        end = self.builder.tick(times.get("end") if isinstance(times.get("end"), int) else None)
        state_metadata = state.get("metadata")
        attachments = state.get("attachments")
        files = [
            Attachment(
                mime=str(a.get("mime") or "application/octet-stream"),
                url=str(a.get("url") or ""),
                filename=text_or_none(a.get("filename")),
            )
            for a in (attachments if isinstance(attachments, list) else [])
            if isinstance(a, dict)
        ]
        error = status == "error"
        output = state.get("error" if error else "output")
        self.builder.result(
            call_id,
            output if isinstance(output, str) else "",
            now=end,
            line=line,
            error=error,
            attachments=files,
            title=str(state.get("title") or ""),
            metadata=state_metadata if isinstance(state_metadata, dict) else None,
            started_ms=times.get("start") if isinstance(times.get("start"), int) else None,
            field=at,
        )

    # --- parts ----------------------------------------------------------------------------

    def _text(self, part: dict[str, Any], message_id: str, now: int) -> TextPart:
        metadata = part.get("metadata")
        return TextPart(
            id=self.builder.part_id(now),
            message_id=message_id,
            text=str(part.get("text") or ""),
            synthetic=part.get("synthetic") is True,
            ignored=part.get("ignored") is True,
            metadata=mapping(metadata),
        )

    def _file(self, part: dict[str, Any], message_id: str, now: int) -> FilePart:
        source = part.get("source")
        path = source.get("path") if isinstance(source, dict) else None
        return FilePart(
            id=self.builder.part_id(now),
            message_id=message_id,
            mime=str(part.get("mime") or "application/octet-stream"),
            url=str(part.get("url") or ""),
            filename=text_or_none(part.get("filename")),
            source_path=path if isinstance(path, str) else None,
        )

    def _subtask(self, part: dict[str, Any], message_id: str, now: int) -> SubtaskPart:
        model = part.get("model")
        ref = None
        if isinstance(model, dict) and isinstance(model.get("modelID"), str):
            ref = ModelRef(
                provider_id=str(model.get("providerID") or ""), model_id=model["modelID"]
            )
        return SubtaskPart(
            id=self.builder.part_id(now),
            message_id=message_id,
            prompt=str(part.get("prompt") or ""),
            description=str(part.get("description") or ""),
            agent=str(part.get("agent") or ""),
            model=ref,
            command=text_or_none(part.get("command")),
        )

    def _retry(self, part: dict[str, Any], message_id: str, now: int) -> RetryPart:
        error = part.get("error")
        if isinstance(error, dict):
            data = error.get("data")
            text = data.get("message") if isinstance(data, dict) else None
            error = text if isinstance(text, str) else str(error.get("name") or error)
        return RetryPart(
            id=self.builder.part_id(now),
            message_id=message_id,
            attempt=count(part.get("attempt")),
            error=str(error or ""),
        )

    def _leave(self, line: int, kind: Any, where: str) -> None:
        self.builder.leave_out(line, f"part:{kind}", UNREAD_PART, where)


def _created(info: dict[str, Any]) -> int | None:
    time = info.get("time")
    created = time.get("created") if isinstance(time, dict) else None
    return created if isinstance(created, int) else None


def _completed(info: dict[str, Any]) -> int | None:
    time = info.get("time")
    done = time.get("completed") if isinstance(time, dict) else None
    return done if isinstance(done, int) else None


def _part_start(part: dict[str, Any]) -> int | None:
    time = part.get("time")
    start = time.get("start") if isinstance(time, dict) else None
    return start if isinstance(start, int) else None


def _model(info: dict[str, Any]) -> ModelRef | None:
    model = text_or_none(info.get("modelID"))
    if model is None:
        return None
    variant = text_or_none(info.get("variant"))
    return ModelRef(provider_id=str(info.get("providerID") or ""), model_id=model, variant=variant)


def _usage(tokens: Any) -> Usage | None:
    if not isinstance(tokens, dict):
        return None
    cache = mapping(tokens.get("cache"))
    return Usage(
        input=count(tokens.get("input")),
        output=count(tokens.get("output")),
        reasoning=count(tokens.get("reasoning")),
        cache_read=count(cache.get("read")),
        cache_write=count(cache.get("write")),
    )


def _cost(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _error(error: Any) -> MessageError | None:
    if not isinstance(error, dict):
        return None
    name: ErrorName = ERROR_NAMES.get(str(error.get("name")), "UnknownError")
    data = error.get("data")
    message = data.get("message") if isinstance(data, dict) else None
    return MessageError(name=name, message=message if isinstance(message, str) else "")
