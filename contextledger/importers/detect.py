"""``import_trace``: import a transcript of any supported format, chosen by its content.

The file is read once. A file that is one JSON document is:

- a SWE-agent trajectory: an object with ``history`` and ``trajectory`` (or ``info``);
- a mini-swe-agent trajectory: an object whose ``trajectory_format`` names mini-swe-agent, or
  a list of ``{role, content}`` messages whose assistant messages hold a
  `` ```mswea_bash_command `` block (or, without any ``tool_calls``, a `` ```bash `` block
  answered by a ``<returncode>``);
- an OpenAI chat log: a list of messages with a ``role``, or an object with ``messages``.

Otherwise the file is read as JSON lines, by its first record: a record with ``history`` is an
OpenHands run; one with a ``type`` (``user``, ``assistant``, ``summary``, …) a Claude Code
transcript. Anything else raises ``TraceImportError``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from contextledger.importers.claude_code import ImportedSession, import_claude_code_lines
from contextledger.importers.errors import TraceImportError
from contextledger.importers.mini_swe_agent import ACTION_BLOCK, import_mini_swe_agent_data
from contextledger.importers.openai_chat import import_openai_chat_data
from contextledger.importers.openhands import import_openhands_lines
from contextledger.importers.swe_agent import import_swe_agent_data

_MINI_MARK: Final = "```mswea_bash_command"
_LINE_FORMATS: Final = frozenset({"openhands", "claude-code"})
_KNOWN: Final = (
    "Claude Code JSONL, SWE-agent .traj, OpenHands output.jsonl, mini-swe-agent, OpenAI chat"
)


def import_trace(path: str | Path) -> list[ImportedSession]:
    """Import the transcript at ``path`` in whichever supported format it is."""
    path = Path(path)
    data = path.read_bytes()
    source = str(path)
    try:
        document = json.loads(data.decode("utf-8", "replace"))
    except json.JSONDecodeError:
        return _import_lines(data.splitlines(), source)
    if _document_format(document, source) in _LINE_FORMATS:
        return _import_lines(data.splitlines(), source)
    return [_import_document(document, source)]


def detect_format(path: str | Path) -> str:
    """The name of the format of the transcript at ``path`` (see ``import_trace``)."""
    path = Path(path)
    data = path.read_bytes()
    try:
        document = json.loads(data.decode("utf-8", "replace"))
    except json.JSONDecodeError:
        return _lines_format(data.splitlines(), str(path))
    return _document_format(document, str(path))


def _import_document(document: Any, source: str) -> ImportedSession:
    kind = _document_format(document, source)
    if kind == "swe-agent":
        return import_swe_agent_data(document, source=source)
    if kind == "mini-swe-agent":
        return import_mini_swe_agent_data(document, source=source)
    return import_openai_chat_data(document, source=source)


def _import_lines(lines: list[bytes], source: str) -> list[ImportedSession]:
    if _lines_format(lines, source) == "openhands":
        return import_openhands_lines(lines, source=source)
    return [import_claude_code_lines(lines, source=source)]


def _document_format(document: Any, source: str) -> str:
    if isinstance(document, dict):
        if "history" in document and ("trajectory" in document or "info" in document):
            return "swe-agent"
        if str(document.get("trajectory_format", "")).startswith("mini-swe-agent"):
            return "mini-swe-agent"
        if isinstance(document.get("messages"), list):
            return "mini-swe-agent" if _looks_mini(document["messages"]) else "openai-chat"
    if isinstance(document, list) and document and all(_is_message(m) for m in document):
        return "mini-swe-agent" if _looks_mini(document) else "openai-chat"
    if isinstance(document, dict) and isinstance(document.get("history"), list):
        return "openhands"
    if isinstance(document, dict) and isinstance(document.get("type"), str):
        return "claude-code"
    raise TraceImportError(source, 1, "", f"unknown trace format (known: {_KNOWN})")


def _lines_format(lines: list[bytes], source: str) -> str:
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw.decode("utf-8", "replace"))
        except json.JSONDecodeError:
            break
        if isinstance(record, dict) and isinstance(record.get("history"), list):
            return "openhands"
        if isinstance(record, dict) and isinstance(record.get("type"), str):
            return "claude-code"
        raise TraceImportError(source, number, "", f"unknown trace format (known: {_KNOWN})")
    raise TraceImportError(source, 1, "", f"unknown trace format (known: {_KNOWN})")


def _is_message(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("role"), str)


def _looks_mini(messages: list[Any]) -> bool:
    assistants = [m for m in messages if _is_message(m) and m["role"] == "assistant"]
    texts = [m.get("content") for m in assistants]
    if any(isinstance(t, str) and _MINI_MARK in t for t in texts):
        return True
    if any(m.get("tool_calls") for m in assistants):
        return False
    blocks = any(isinstance(t, str) and ACTION_BLOCK.search(t) for t in texts)
    answers = any(
        _is_message(m) and m["role"] == "user" and "<returncode>" in str(m.get("content"))
        for m in messages
    )
    return blocks and answers
