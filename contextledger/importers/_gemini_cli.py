"""Gemini CLI chat recordings (``~/.gemini/tmp/<project>/chats/session-*.json``) into events.

A recording is one JSON object ``{sessionId, projectHash, startTime, lastUpdated, kind,
messages}``. Rules, per message ``type``:

- ``user``: a user message, one text part per item of ``content`` (the parts sent to the
  model, ``@``-file expansions included) and inline data as file parts; ``displayContent``
  (what the user typed, when the expansion changed it) is kept in the parts' metadata;
- ``gemini``: one assistant message (one model call): its ``thoughts`` as reasoning
  (``**subject**`` and the description), its ``content`` as text, a tool call per
  ``toolCalls`` entry (``id``, ``name``, ``args``); usage from ``tokens`` (``cached`` is
  ``cache_read``, ``thoughts`` ``reasoning``, ``tool`` prompt tokens count as input). Each call
  carries its result: ``functionResponse.response.output`` completes it, ``…error`` (status
  ``error``) fails it, status ``cancelled`` marks it interrupted;
- ``info``, ``error`` and ``warning`` (notices the CLI shows, never sent to the model) and
  unknown types: left out, with the message's position.

Times are the messages' (ISO-8601). The session id is derived from ``sessionId``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

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
from contextledger.importers._records import (
    count,
    iso_ms,
    load_json,
    mapping,
    require_list,
    require_object,
    require_str,
    text_or_none,
)

FORMAT: Final = "gemini-cli"
#: Every model of a Gemini CLI session is Google's.
PROVIDER_ID: Final = "google"
#: Where the metadata this importer keeps sits in a part's ``metadata``.
METADATA_KEY: Final = "gemini_cli"
#: The message types that are notices of the CLI.
NOTICES: Final = frozenset({"info", "error", "warning"})
#: Why each kind of message is left out.
NOTICE: Final = "a notice the CLI shows, never sent to the model"
UNREAD_TYPE: Final = "a message type the importer does not read"
UNREAD_PART: Final = "a content part of a kind the importer does not read"


def is_gemini_cli(document: Any) -> bool:
    """Whether a JSON document is a Gemini CLI recording."""
    return (
        isinstance(document, dict)
        and isinstance(document.get("sessionId"), str)
        and isinstance(document.get("messages"), list)
        and ("projectHash" in document or "startTime" in document)
    )


def import_gemini_cli(
    path: str | Path, *, session_id: str | None = None, lenient: bool = False
) -> ImportedSession:
    """Import the Gemini CLI recording at ``path``."""
    return import_gemini_cli_data(
        load_json(path), source=str(path), session_id=session_id, lenient=lenient
    )


def import_gemini_cli_data(
    data: Any, *, source: str = "<data>", session_id: str | None = None, lenient: bool = False
) -> ImportedSession:
    """Import a decoded recording; pure. See the module docstring for the rules. With
    ``lenient`` a malformed message is left out (``ChatBuilder.record``) instead of refusing
    the recording."""
    document = require_object(data, source, 1, "")
    source_id = require_str(document, "sessionId", source, 1, "")
    messages = require_list(document.get("messages"), source, 1, "messages")
    builder = ChatBuilder(fmt=FORMAT, session_id=session_id, key=f"gemini-cli:{source_id}")
    builder.source_session_id = source_id
    builder.config["source_session_id"] = source_id
    for key in ("projectHash", "kind"):
        if isinstance(document.get(key), str):
            builder.config[key] = document[key]
    builder.started_ms = iso_ms(document.get("startTime"))
    for i, raw in enumerate(messages):
        with builder.record(lenient=lenient):
            _message(builder, raw, source, i + 1, f"messages[{i}]")
    return builder.build()


def _message(builder: ChatBuilder, raw: Any, source: str, line: int, at: str) -> None:
    message = require_object(raw, source, line, at)
    kind = require_str(message, "type", source, line, at)
    builder.read[kind] += 1
    now = builder.tick(iso_ms(message.get("timestamp")))
    if kind == "user":
        texts, files = _parts(builder, message.get("content"), source, line, f"{at}.content")
        display = message.get("displayContent")
        metadata = None
        if display is not None:
            shown, _ = _parts(builder, display, source, line, f"{at}.displayContent")
            metadata = {METADATA_KEY: {"displayContent": "".join(shown)}}
        builder.user(texts or [""], now=now, files=files, metadata=metadata)
    elif kind == "gemini":
        _gemini(builder, message, source, line, at, now)
    elif kind in NOTICES:
        builder.leave_out(line, kind, NOTICE, at)
    else:
        builder.leave_out(line, kind, UNREAD_TYPE, at)


def _gemini(
    builder: ChatBuilder, message: dict[str, Any], source: str, line: int, at: str, now: int
) -> None:
    items: list[AssistantItem] = []
    thoughts = message.get("thoughts")
    for thought in thoughts if isinstance(thoughts, list) else []:
        if isinstance(thought, dict):
            items.append(Reasoning(_thought(thought)))
    texts, files = _parts(builder, message.get("content"), source, line, f"{at}.content")
    items.extend(Text(t) for t in texts if t)
    items.extend(files)
    calls = message.get("toolCalls")
    answers: list[tuple[str, str, str, int | None]] = []
    for j, raw in enumerate(calls if isinstance(calls, list) else []):
        where = f"{at}.toolCalls[{j}]"
        call = require_object(raw, source, line, where)
        call_id = require_str(call, "id", source, line, where)
        name = require_str(call, "name", source, line, where)
        args = call.get("args")
        items.append(ToolCall(call_id, name, mapping(args)))
        status = call.get("status")
        output = _response(call.get("result"))
        if output is not None or status in ("error", "cancelled"):
            answers.append((call_id, output or "", str(status), iso_ms(call.get("timestamp"))))
    model = text_or_none(message.get("model"))
    builder.assistant(
        now=now,
        line=line,
        items=items,
        usage=_usage(message.get("tokens")),
        model=ModelRef(provider_id=PROVIDER_ID, model_id=model) if model else None,
        api_message_id=text_or_none(message.get("id")),
    )
    for call_id, output, status, time_ms in answers:
        builder.result(
            call_id,
            output,
            now=builder.tick(time_ms),
            line=line,
            error=status == "error",
            interrupted=status == "cancelled",
        )


def _parts(
    builder: ChatBuilder, content: Any, source: str, line: int, at: str
) -> tuple[list[str], list[Attachment]]:
    """The texts and inline data of a content: a string, or a list of Gemini parts."""
    if content is None:
        return [], []
    if isinstance(content, str):
        return [content], []
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        raise TraceImportError(source, line, at, "must be a string or a list of parts")
    texts: list[str] = []
    files: list[Attachment] = []
    for i, part in enumerate(content):
        where = f"{at}[{i}]"
        if not isinstance(part, dict):
            raise TraceImportError(source, line, where, "must be an object")
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(part.get("inlineData"), dict):
            data = part["inlineData"]
            mime = str(data.get("mimeType") or "application/octet-stream")
            files.append(Attachment(mime=mime, url=f"data:{mime};base64,{data.get('data', '')}"))
        elif isinstance(part.get("fileData"), dict):
            data = part["fileData"]
            mime = str(data.get("mimeType") or "application/octet-stream")
            files.append(Attachment(mime=mime, url=str(data.get("fileUri", ""))))
        else:
            kind = next(iter(part), "empty")
            builder.leave_out(line, f"part:{kind}", UNREAD_PART, where)
    return texts, files


def _thought(thought: dict[str, Any]) -> str:
    subject = thought.get("subject")
    description = thought.get("description")
    body = description if isinstance(description, str) else ""
    return f"**{subject}**\n{body}" if isinstance(subject, str) and subject else body


def _response(result: Any) -> str | None:
    """The output a tool call's ``result`` gives the model: ``response.output`` (or
    ``response.error``), else the whole response as JSON; ``None`` without a result."""
    if not isinstance(result, list) or not result:
        return None
    outputs: list[str] = []
    for item in result:
        response = item.get("functionResponse") if isinstance(item, dict) else None
        body = response.get("response") if isinstance(response, dict) else None
        if isinstance(body, dict) and isinstance(body.get("output"), str):
            outputs.append(body["output"])
        elif isinstance(body, dict) and isinstance(body.get("error"), str):
            outputs.append(body["error"])
        else:
            outputs.append(json.dumps(body if body is not None else item, ensure_ascii=False))
    return "\n".join(outputs)


def _usage(tokens: Any) -> Usage | None:
    """Gemini's counts as ``Usage``: the prompt count includes the cached tokens, which are
    split out; tool-use prompt tokens are input too."""
    if not isinstance(tokens, dict):
        return None
    cached = count(tokens.get("cached"))
    return Usage(
        input=max(count(tokens.get("input")) - cached, 0) + count(tokens.get("tool")),
        output=count(tokens.get("output")),
        reasoning=count(tokens.get("thoughts")),
        cache_read=cached,
    )
