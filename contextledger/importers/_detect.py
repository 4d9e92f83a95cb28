"""``import_trace``: import a transcript of any supported format, chosen by its content.

The file is read once. A folder holding ``event-*.json`` files (directly or under ``events/``)
is an OpenHands V1 conversation. A file whose text does not start with ``{`` or ``[`` is an
aider chat history when it has a ``# aider chat started at`` header. A file that is one JSON
document is:

- a SWE-agent trajectory: an object with ``history`` and ``trajectory`` (or ``info``), or a
  demonstration (an object whose ``history`` holds ``role`` messages; here and below, one
  such message is enough: a malformed one among them is the importer's to report);
- a mini-swe-agent trajectory: an object whose ``trajectory_format`` names mini-swe-agent, or
  a list of ``{role, content}`` messages whose assistant messages hold a
  `` ```mswea_bash_command `` block (or, without any ``tool_calls``, a `` ```bash `` block
  answered by a ``<returncode>``);
- a Gemini CLI recording (``sessionId``, ``projectHash`` or ``startTime``, ``messages``);
- an opencode export (``info.id`` and ``messages`` of ``{info, parts}``);
- one OpenHands V1 event (an object whose ``kind`` ends in ``Event``);
- an OpenAI chat log: a list of messages with a ``role``, or an object with ``messages``.

Otherwise the file is read as JSON lines, by its first record: a record with ``history`` is an
OpenHands run; one with ``timestamp``, ``type`` and a ``payload`` object a Codex rollout line;
a V1 event an OpenHands V1 conversation; one with a ``type`` (``user``, ``assistant``,
``summary``, …) a Claude Code transcript. A file that starts like JSON but is not (a truncated
document) raises ``TraceImportError`` saying where the parser stopped; anything else "unknown
trace format".
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

from contextledger.events._catalogue import LeftOut
from contextledger.importers._aider import HEADER, import_aider
from contextledger.importers._claude_code import import_claude_code_lines, import_subagents
from contextledger.importers._codex import import_codex
from contextledger.importers._errors import TraceImportError
from contextledger.importers._gemini_cli import import_gemini_cli_data, is_gemini_cli
from contextledger.importers._imported import ImportedSession
from contextledger.importers._mini_swe_agent import ACTION_BLOCK, import_mini_swe_agent_data
from contextledger.importers._openai_chat import import_openai_chat_data
from contextledger.importers._opencode import import_opencode_data, is_opencode_export
from contextledger.importers._openhands import import_openhands_lines
from contextledger.importers._openhands_v1 import (
    import_openhands_v1,
    import_openhands_v1_events,
    is_conversation_folder,
    is_v1_event,
)
from contextledger.importers._records import decode_json, json_lines, lazy_document, not_json
from contextledger.importers._report import ImportResult, import_report
from contextledger.importers._strictness import checked
from contextledger.importers._swe_agent import import_swe_agent_data

#: Every format ``detect_format`` names.
FORMATS: Final = (
    "aider",
    "claude-code",
    "codex",
    "gemini-cli",
    "mini-swe-agent",
    "openai-chat",
    "opencode",
    "openhands",
    "openhands-v1",
    "swe-agent",
)
#: The file suffixes a folder's transcripts have (aider histories are ``.md``).
TRANSCRIPT_SUFFIXES: Final = frozenset({".jsonl", ".json", ".traj"})
#: The line types of a Codex rollout.
CODEX_TYPES: Final = frozenset(
    {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}
)
_MINI_MARK: Final = "```mswea_bash_command"
#: How much of a file's start tells whether it can be JSON (its first character that is not
#: blank; a file that starts with more blank space is read as text).
_HEAD: Final = 1 << 12
#: The longest first line read to tell a JSON lines file by its first record: a longer one is
#: most likely a JSON document written on one line, which is not read whole twice.
_FIRST_LINE_MAX: Final = 1 << 20
_LINE_FORMATS: Final = frozenset({"openhands", "claude-code", "codex", "openhands-v1"})
_KNOWN: Final = (
    "Claude Code JSONL, Codex rollout, OpenHands output.jsonl or V1 events, SWE-agent .traj, "
    "mini-swe-agent, Gemini CLI, opencode export, aider history, OpenAI chat"
)


def import_trace(path: str | Path, *, lenient: bool = False) -> list[ImportedSession]:
    """Import the transcript at ``path`` in whichever supported format it is (see
    ``import_with_report``)."""
    return import_with_report(path, lenient=lenient).sessions


def import_with_report(
    path: str | Path, *, session_id: str | None = None, lenient: bool = False
) -> ImportResult:
    """Import the transcript at ``path`` and report what was read, written and left out.
    ``session_id`` names the (first) session; otherwise ids come from the source.

    Strict by default: input that is not a valid conversation (an orphan or duplicate result,
    a duplicate call id, a malformed record) raises ``TraceImportError`` naming its line and
    field; with ``lenient`` the rest is imported (a malformed line of a JSON lines file is left
    out, and so is a malformed message of a JSON document). Input that yields no message is
    an error. Each session that left something out ends with an ``InputLeftOut`` event."""
    path = Path(path)
    source = str(path)
    if path.is_dir():
        if not is_conversation_folder(path):
            raise TraceImportError(
                source, 0, "", "a folder that is not an OpenHands V1 conversation"
            )
        fmt = "openhands-v1"
        imported = [import_openhands_v1(path, session_id=session_id, lenient=lenient)]
    else:
        streamed = _lines_format_of(path, source)
        if streamed is not None:
            fmt = streamed
            with path.open("rb") as lines:
                imported = _import_lines(fmt, lines, source, session_id, lenient)
        else:
            fmt, document = _detect_file(path, source)
            imported = _import(fmt, document, path, source, session_id, lenient)
            del document  # each importer holds what it still needs
    if fmt == "claude-code" and (path.with_suffix("") / "subagents").is_dir():
        import_subagents(imported[0], path.with_suffix(""), lenient=lenient)
    sessions = checked(imported, source=source, lenient=lenient)
    return ImportResult(sessions=sessions, report=import_report(sessions, source=source, fmt=fmt))


def detect_format(path: str | Path) -> str:
    """The name of the format of the transcript at ``path`` (see ``import_trace``), one of
    ``FORMATS``."""
    path = Path(path)
    if path.is_dir():
        if is_conversation_folder(path):
            return "openhands-v1"
        raise TraceImportError(
            str(path), 0, "", "a folder that is not an OpenHands V1 conversation"
        )
    return _detect_file(path, str(path))[0]


#: How much of a file ``source_digest`` reads at a time: a read allocates its whole size even
#: when the file is shorter, and 64 KiB keeps hashing at full speed.
_DIGEST_CHUNK: Final = 1 << 16


def source_digest(path: str | Path) -> str:
    """The SHA-256 (hex) of the transcript at ``path``: of the file's bytes, or, for an
    OpenHands V1 conversation folder, of each file's path inside it and bytes, in order.
    Read in chunks, so memory does not grow with the file."""
    path = Path(path)
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        if path.is_dir():
            digest.update(str(file.relative_to(path)).encode() + b"\0")
        with file.open("rb") as f:
            while chunk := f.read(_DIGEST_CHUNK):
                digest.update(chunk)
    return digest.hexdigest()


def transcripts_under(folder: str | Path) -> list[Path]:
    """Every transcript under ``folder``, sorted: its ``.jsonl``, ``.json`` and ``.traj`` files,
    its aider histories (``.md`` files with a session header), and each OpenHands V1
    conversation folder as one transcript (its files are not listed). A Claude Code session's
    ``subagents`` folder is not listed: it is imported with the session."""
    found: list[Path] = []
    for root, dirs, files in os.walk(folder):
        here = Path(root)
        dirs.sort()
        if is_conversation_folder(here):
            found.append(here)
            dirs.clear()
            continue
        if here.name == "subagents" and here.parent.with_suffix(".jsonl").is_file():
            continue  # Claude Code 2.1 sub-agents: imported with the session beside them
        for name in sorted(files):
            path = here / name
            if path.suffix in TRANSCRIPT_SUFFIXES or (path.suffix == ".md" and _is_aider(path)):
                found.append(path)
    return sorted(found)


def _is_aider(path: Path) -> bool:
    """Whether the file at ``path`` is an aider chat history, read a line at a time up to its
    first session header."""
    with path.open(encoding="utf-8", errors="replace") as text:
        return any(HEADER.match(line) for line in text)


# --- detection -----------------------------------------------------------------------------


def _detect_file(path: Path, source: str) -> tuple[str, Any]:
    """The format of the file at ``path`` and, for a JSON document, the document: for a format
    whose file is a document of messages, its lists decoded an item at a time from a memory
    map of the file (``lazy_document``), else decoded whole."""
    with path.open("rb") as f:
        head = f.read(_HEAD).lstrip()[:1]
        if head not in (b"{", b"["):
            if _is_aider(path):
                return "aider", None
            raise _unknown(source, 1)
        buffer = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        document = lazy_document(buffer)
    except json.JSONDecodeError as whole:
        lines = buffer[:].decode("utf-8", "replace").splitlines()
        return _lines_format(lines, source, whole), None
    fmt = _document_format(document, source)
    if fmt not in _DOCUMENT_IMPORTERS:
        document = decode_json(buffer)
    return fmt, document


def _lines_format_of(path: Path, source: str) -> str | None:
    """The format of the JSON lines file at ``path`` when its first record alone says so and
    more follows it (so the file is no single JSON document), read a line at a time;
    ``None`` when the whole file must be read to tell (also when its first line is longer than
    ``_FIRST_LINE_MAX``)."""
    with path.open("rb") as f:
        number, first = 0, b""
        while not first or first.isspace():
            first = f.readline(_FIRST_LINE_MAX + 1)
            number += 1
            if not first or len(first) > _FIRST_LINE_MAX:
                return None  # empty, or a long first line: most likely one JSON document
        more = any(not line.isspace() for line in f)
    if not more:
        return None
    try:
        return _record_format(json.loads(first), source, number)
    except (ValueError, TraceImportError):
        return None


def _import_lines(
    fmt: str, lines: Iterable[bytes], source: str, session_id: str | None, lenient: bool
) -> list[ImportedSession]:
    """Import the JSON lines ``lines`` (of the file ``source``) in format ``fmt``, reading them
    one by one (a Codex rollout reads its file twice, see ``import_codex``)."""
    if fmt == "openhands":
        return import_openhands_lines(lines, source=source, session_id=session_id, lenient=lenient)
    if fmt == "codex":
        return [import_codex(source, session_id=session_id, lenient=lenient)]
    if fmt == "claude-code":
        return [
            import_claude_code_lines(lines, source=source, session_id=session_id, lenient=lenient)
        ]
    malformed: list[LeftOut] | None = [] if lenient else None
    events = ((n, v, "") for n, v in json_lines(lines, source, malformed))
    session = import_openhands_v1_events(
        events, source=source, session_id=session_id, lenient=lenient
    )
    session.add_left_out(malformed or [])
    return [session]


def _import(
    fmt: str, document: Any, path: Path, source: str, session_id: str | None, lenient: bool
) -> list[ImportedSession]:
    """Import the file at ``path`` in format ``fmt``: from ``document`` when it is one JSON
    document (the file's bytes are no longer held), else reading the file again."""
    if fmt == "aider":
        return import_aider(path, session_id=session_id)
    if fmt in _LINE_FORMATS and not is_v1_event(document):
        with path.open("rb") as raw:
            return _import_lines(fmt, raw, source, session_id, lenient)
    if fmt == "openhands-v1":
        return [
            import_openhands_v1_events(
                [(1, document, "")], source=source, session_id=session_id, lenient=lenient
            )
        ]
    importer = _DOCUMENT_IMPORTERS[fmt]
    return [importer(document, source=source, session_id=session_id, lenient=lenient)]


#: The importer of each format whose file is one JSON document of messages.
_DOCUMENT_IMPORTERS: Final = {
    "swe-agent": import_swe_agent_data,
    "mini-swe-agent": import_mini_swe_agent_data,
    "gemini-cli": import_gemini_cli_data,
    "opencode": import_opencode_data,
    "openai-chat": import_openai_chat_data,
}


def _document_format(document: Any, source: str) -> str:
    if isinstance(document, dict):
        history = document.get("history")
        if "history" in document and ("trajectory" in document or "info" in document):
            return "swe-agent"
        if isinstance(history, list) and any(_is_message(m) for m in history):
            return "swe-agent"
        if str(document.get("trajectory_format", "")).startswith("mini-swe-agent"):
            return "mini-swe-agent"
        if is_gemini_cli(document):
            return "gemini-cli"
        if is_opencode_export(document):
            return "opencode"
        if isinstance(document.get("messages"), list):
            return "mini-swe-agent" if _looks_mini(document["messages"]) else "openai-chat"
    if isinstance(document, list) and any(_is_message(m) for m in document):
        return "mini-swe-agent" if _looks_mini(document) else "openai-chat"
    return _record_format(document, source, 1)


def _record_format(record: Any, source: str, line: int) -> str:
    """The format of a JSON-lines file whose first record is ``record``."""
    if not isinstance(record, dict):
        raise _unknown(source, line)
    if isinstance(record.get("history"), list):
        return "openhands"
    if is_v1_event(record):
        return "openhands-v1"
    kind = record.get("type")
    if kind in CODEX_TYPES and isinstance(record.get("payload"), dict):
        return "codex"
    if isinstance(kind, str):
        return "claude-code"
    raise _unknown(source, line)


def _lines_format(lines: list[str], source: str, whole: json.JSONDecodeError) -> str:
    """The format of JSON lines, by the first record. When the first line is no JSON, the
    first record after it that is one of a known format decides (JSON lines with a broken
    line); without one the file is a broken JSON document: where the parser stopped."""
    broken = False
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError:
            broken = True
            continue
        try:
            return _record_format(record, source, number)
        except TraceImportError:
            if not broken:
                raise
            break
    if broken:
        raise TraceImportError(source, whole.lineno, "", not_json(whole))
    raise _unknown(source, 1)


def _unknown(source: str, line: int) -> TraceImportError:
    return TraceImportError(source, line, "", f"unknown trace format (known: {_KNOWN})")


def _is_message(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("role"), str)


def _looks_mini(messages: list[Any]) -> bool:
    """Whether chat ``messages`` are a mini-swe-agent trajectory, read in one pass (a
    document's messages are decoded one at a time): an assistant message holds its action
    mark, or, without any ``tool_calls``, a bash block answered by a ``<returncode>``."""
    calls = blocks = answers = False
    for message in messages:
        if not _is_message(message):
            continue
        content = message.get("content")
        if message["role"] == "assistant":
            if isinstance(content, str) and _MINI_MARK in content:
                return True
            calls = calls or bool(message.get("tool_calls"))
            blocks = blocks or (isinstance(content, str) and bool(ACTION_BLOCK.search(content)))
        elif message["role"] == "user":
            answers = answers or "<returncode>" in str(content)
    return not calls and blocks and answers
