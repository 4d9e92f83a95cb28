"""OpenAI chat-completions message lists into events, and the chat helpers the chat-shaped
importers (SWE-agent, OpenHands, mini-swe-agent) share.

A chat log is ``[{role, content, tool_calls?, tool_call_id?}, ...]`` or ``{"messages": [...]}``:

- ``system``/``developer`` messages are not turns: the first becomes the session's
  ``config["system_prompt"]``, every one is counted in ``skipped``; a later one is left out
  (reported with its position);
- ``user`` → a user message: its text (a string, or the text items of a content list) and its
  media (``image_url``, ``input_audio``, ``file`` items with data) as file parts;
- ``assistant`` → one assistant message: step start, its text, its media as file parts, a
  pending ``ToolPart`` per ``tool_calls`` item (``call_id`` the original id, input the decoded
  ``arguments``), step finish, ``AssistantFinished`` (``tool-calls`` when it called tools,
  else ``stop``);
- ``tool`` → completes the call named by ``tool_call_id`` (its media as attachments); a result
  whose call was never made or was answered already is left out and reported.

The session id comes from the file: derived from its ``id`` when the log has one, else from its
content, so two logs never share a session (unless they are the same log). Chat logs carry no
times: a synthetic clock starts at ``SYNTHETIC_START_MS`` and advances one second
(``SYNTHETIC_STEP_MS``) per message. A malformed message raises ``TraceImportError`` whose
``line`` is the message's 1-based position and whose field is a path such as
``messages[3].tool_calls[0].function.arguments``.
"""

from __future__ import annotations

import hashlib
import json
import mimetypes
from pathlib import Path
from typing import Any, Final

import msgspec

from contextledger.events._parts import ModelRef, Usage
from contextledger.importers._builder import (
    SYNTHETIC_START_MS,
    SYNTHETIC_STEP_MS,
    Attachment,
    ChatBuilder,
    Text,
    ToolCall,
)
from contextledger.importers._errors import TraceImportError
from contextledger.importers._imported import HashedKey, ImportedSession
from contextledger.importers._records import (
    count,
    load_json,
    loose_literal,
    require_object,
    require_str,
)

__all__ = [
    "SYNTHETIC_START_MS",
    "SYNTHETIC_STEP_MS",
    "ChatBuilder",
    "ChatContent",
    "ToolCall",
    "chat_content",
    "chat_messages",
    "content_text",
    "document_key",
    "import_openai_chat",
    "import_openai_chat_data",
    "load_json",
    "loose_literal",
    "openai_tool_calls",
    "openai_usage",
    "require_object",
    "require_str",
]

FORMAT: Final = "openai-chat"
_SYSTEM_ROLES: Final = frozenset({"system", "developer"})
#: The MIME type of an image whose URL names none (Claude Code's importer assumes the same).
DEFAULT_IMAGE_MIME: Final = "image/png"
#: Why a system message after the first is left out.
LATER_SYSTEM: Final = "a system message after the first; only the first is kept (the system prompt)"
#: Why a content item is left out.
UNREAD_ITEM: Final = "a content item of a kind the importer does not read"
#: Why media in an assistant or system message is left out.
MEDIA_NOT_CARRIED: Final = "media in an assistant or system message, which no part carries"


class ChatContent(msgspec.Struct, frozen=True):
    """A chat ``content``: its text items, its media (JSON path and attachment), and the JSON
    paths and kinds of the items it does not read."""

    texts: list[str]
    media: list[tuple[str, Attachment]]
    unread: list[tuple[str, str]]

    @property
    def text(self) -> str:
        """The text items joined with ``"\\n"``."""
        return "\n".join(self.texts)

    @property
    def files(self) -> list[Attachment]:
        """The media as attachments."""
        return [file for _, file in self.media]


# --- helpers shared by the chat-shaped importers ---------------------------------------------


def openai_usage(raw: Any) -> Usage | None:
    """An OpenAI ``usage`` object (possibly written as a string) as ``Usage``; ``None`` when
    absent or unreadable. Cached prompt tokens count as ``cache_read``, not ``input``."""
    usage = loose_literal(raw)
    if not isinstance(usage, dict):
        return None
    prompt = count(usage.get("prompt_tokens"))
    details = loose_literal(usage.get("prompt_tokens_details"))
    cached = count(details.get("cached_tokens")) if isinstance(details, dict) else 0
    return Usage(
        input=max(prompt - cached, 0),
        output=count(usage.get("completion_tokens")),
        cache_read=cached,
    )


def chat_content(content: Any, source: str, line: int, at: str) -> ChatContent:
    """A chat ``content``: a string, ``None``, or a list of items. Text items are its texts;
    ``image_url``, ``input_audio`` and ``file`` items with data are its files; any other item
    is listed in ``unread``."""
    if content is None:
        return ChatContent([], [], [])
    if isinstance(content, str):
        return ChatContent([content], [], [])
    if not isinstance(content, list):
        raise TraceImportError(source, line, at, "must be a string or a list of content items")
    texts: list[str] = []
    media: list[tuple[str, Attachment]] = []
    unread: list[tuple[str, str]] = []
    for i, item in enumerate(content):
        where = f"{at}[{i}]"
        if not isinstance(item, dict):
            raise TraceImportError(source, line, where, "must be an object")
        kind = item.get("type", "text")
        if kind == "text":
            text = item.get("text")
            if not isinstance(text, str):
                raise TraceImportError(source, line, f"{where}.text", "missing or not a string")
            texts.append(text)
            continue
        file = _media(item, kind)
        if file is None:
            unread.append((where, str(kind)))
        else:
            media.append((where, file))
    return ChatContent(texts, media, unread)


def _media(item: dict[str, Any], kind: Any) -> Attachment | None:
    if kind == "image_url":
        image = item.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        return (
            Attachment(mime=_mime(url, DEFAULT_IMAGE_MIME), url=url)
            if isinstance(url, str)
            else None
        )
    if kind == "input_audio":
        audio = item.get("input_audio")
        if isinstance(audio, dict) and isinstance(audio.get("data"), str):
            mime = f"audio/{audio.get('format') or 'wav'}"
            return Attachment(mime=mime, url=f"data:{mime};base64,{audio['data']}")
        return None
    if kind == "file":
        file = item.get("file")
        data = file.get("file_data") if isinstance(file, dict) else None
        if isinstance(data, str) and isinstance(file, dict):
            name = file.get("filename")
            return Attachment(
                mime=_mime(data, "application/pdf"),
                url=data,
                filename=name if isinstance(name, str) else None,
            )
    return None


def _mime(url: str, default: str) -> str:
    """The MIME type a ``data:`` URL names, else the one its extension suggests, else
    ``default``."""
    if url.startswith("data:"):
        mime = url[5:].split(";", 1)[0].split(",", 1)[0]
        return mime or default
    guessed, _ = mimetypes.guess_type(url)
    return guessed or default


def content_text(content: Any, source: str, line: int, at: str) -> str:
    """The text of a chat ``content``: a string, ``None``, or a list of ``{type, text}`` items
    (text items joined with ``"\\n"``; other item kinds are not text, see ``chat_content``)."""
    return chat_content(content, source, line, at).text


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
        arguments = json_arguments(function.get("arguments"), source, line, f"{where}.function")
        out.append(ToolCall(call_id, name, arguments, field=where))
    return out


def json_arguments(raw: Any, source: str, line: int, at: str) -> dict[str, Any]:
    """A call's ``arguments`` (at ``at.arguments``): a JSON string or an object; a JSON value
    that is no object becomes ``{"value": …}``."""
    where = f"{at}.arguments"
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


#: How deep ``document_key`` walks a document before it encodes a value whole: to the items of
#: a document's message list, so that no more than one item's text is held at a time.
_KEY_DEPTH: Final = 3


def document_key(data: Any, prefix: bytes = b"") -> HashedKey:
    """What a document's derived session id is made from: ``prefix`` and its content as JSON
    (as ``json.dumps`` writes it), hashed as it is encoded."""
    digest = hashlib.sha256(prefix)
    _hash_json(digest, data, _KEY_DEPTH)
    return HashedKey(digest.hexdigest())


def _hash_json(digest: Any, value: Any, depth: int) -> None:
    """Feed ``value``'s ``json.dumps`` text to ``digest``, a container's items one by one down
    to ``depth``."""
    if depth and isinstance(value, dict) and value and all(isinstance(k, str) for k in value):
        digest.update(b"{")
        for i, (key, item) in enumerate(value.items()):
            digest.update(b"%s%s: " % (b", " if i else b"", _json_text(key)))
            _hash_json(digest, item, depth - 1)
        digest.update(b"}")
    elif depth and isinstance(value, list) and value:
        digest.update(b"[")
        for i, item in enumerate(value):
            if i:
                digest.update(b", ")
            _hash_json(digest, item, depth - 1)
        digest.update(b"]")
    else:
        digest.update(_json_text(value))


def _json_text(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, default=repr).encode("utf-8", "surrogatepass")


def record_unread(builder: ChatBuilder, content: ChatContent, line: int, *, media: bool) -> None:
    """Report what of ``content`` the message could not carry: items of unknown kinds, and its
    media when ``media`` (an assistant or system message, which has no file parts)."""
    for where, kind in content.unread:
        builder.leave_out(line, f"item:{kind}", UNREAD_ITEM, where)
    if media:
        for where, _ in content.media:
            builder.leave_out(line, "item:media", MEDIA_NOT_CARRIED, where)


# --- the OpenAI chat importer ------------------------------------------------------------------


def import_openai_chat(
    path: str | Path, *, session_id: str | None = None, lenient: bool = False
) -> ImportedSession:
    """Import the chat log (a JSON list of messages, or ``{"messages": [...]}``) at ``path``."""
    return import_openai_chat_data(
        load_json(path), source=str(path), session_id=session_id, lenient=lenient
    )


def import_openai_chat_data(
    data: Any, *, source: str = "<data>", session_id: str | None = None, lenient: bool = False
) -> ImportedSession:
    """Import a decoded chat log; pure. See the module docstring for the rules. With
    ``lenient`` a malformed message is left out (``ChatBuilder.record``) instead of refusing
    the log."""
    messages, at = chat_messages(data, source)
    own_id = data.get("id") if isinstance(data, dict) else None
    key = f"openai-chat:{own_id}" if isinstance(own_id, str) and own_id else document_key(data)
    builder = ChatBuilder(fmt=FORMAT, session_id=session_id, key=key)
    if isinstance(own_id, str) and own_id:
        builder.source_session_id = own_id
        builder.config["source_session_id"] = own_id
    if isinstance(data, dict) and isinstance(data.get("model"), str):
        builder.model = ModelRef(provider_id="openai", model_id=data["model"])
    for i, raw in enumerate(messages):
        with builder.record(lenient=lenient):
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
    builder.read[role] += 1
    content = chat_content(message.get("content"), source, line, f"{at}.content")
    if role in _SYSTEM_ROLES:
        if "system_prompt" in builder.config:
            builder.leave_out(line, role, LATER_SYSTEM, at)
            return
        builder.skipped[role] += 1
        builder.config["system_prompt"] = content.text
        record_unread(builder, content, line, media=True)
        return
    now = builder.tick()
    if role == "user":
        record_unread(builder, content, line, media=False)
        builder.user([content.text], now=now, files=content.files)
    elif role == "assistant":
        record_unread(builder, content, line, media=False)
        calls = openai_tool_calls(message.get("tool_calls"), source, line, f"{at}.tool_calls")
        texts = [Text(content.text)] if content.text else []
        builder.assistant(now=now, line=line, items=[*texts, *content.files, *calls])
    elif role == "tool":
        record_unread(builder, content, line, media=False)
        call_id = require_str(message, "tool_call_id", source, line, at)
        builder.result(
            call_id, content.text, now=now, line=line, field=at, attachments=content.files
        )
    else:
        raise TraceImportError(source, line, f"{at}.role", f"unknown role {role!r}")
