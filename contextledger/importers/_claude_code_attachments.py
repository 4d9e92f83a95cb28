"""What a Claude Code ``attachment`` record put in the model's prompt, as text.

Since Claude Code 2.1, context the CLI adds on its own (a file changed outside the session, the
skills and deferred tools on offer, hook output, diagnostics, a prompt typed while the model
worked) is written to the transcript as an ``attachment`` record, and sent to the model as user
content inside a ``<system-reminder>``. ``attachment_text`` returns the content an attachment
carries, one line naming its kind first; Claude Code's own fixed wording around it is not in
the transcript and is not made up here. Kinds that Claude Code never sends, and kinds whose
whole message is that fixed wording (``auto_mode``, a reminder with no items), give ``None``
and a reason.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, Final

__all__ = ["NOT_SENT", "Rendered", "attachment_text", "typed_by_user"]

#: The kinds Claude Code keeps in the transcript but never sends to the model.
NOT_SENT: Final = frozenset(
    {
        "already_read_file",
        "command_permissions",
        "dynamic_skill",
        "edited_image_file",
        "hook_cancelled",
        "hook_error_during_execution",
        "hook_non_blocking_error",
        "hook_permission_decision",
        "hook_system_message",
        "structured_output",
    }
)

#: The hook events whose successful output Claude Code sends (the others' only shows).
HOOK_EVENTS_SENT: Final = frozenset({"SessionStart", "UserPromptSubmit"})

NOT_SENT_REASON: Final = "an attachment Claude Code never sends to the model"
FIXED_REASON: Final = (
    "an attachment whose message is Claude Code's fixed wording, which the transcript does not hold"
)
UNKNOWN_REASON: Final = "an attachment kind the importer does not read"

#: The rendered text of an attachment, or ``None`` and why it is left out.
Rendered = tuple[str, None] | tuple[None, str]


def attachment_text(attachment: dict[str, Any]) -> Rendered:
    """The text an attachment put in the prompt: a line naming its kind, then the strings it
    carries (a changed file's lines, a listing, hook output, a queued prompt, ...), joined by
    newlines; or ``None`` and the reason it is left out."""
    kind = str(attachment.get("type"))
    if kind in NOT_SENT:
        return None, NOT_SENT_REASON
    render = _RENDER.get(kind)
    if render is None:
        return None, UNKNOWN_REASON
    texts = [t for t in render(attachment) if t.strip()]
    if not texts:
        return None, FIXED_REASON
    if typed_by_user(attachment):
        return "\n".join(texts), None
    return "\n".join([f"[{kind}]", *texts]), None


def typed_by_user(attachment: dict[str, Any]) -> bool:
    """Whether the attachment is a prompt the user typed while the model worked (a queued
    command from a person, not a task notification or another agent's message)."""
    origin = attachment.get("origin")
    origin_kind = origin.get("kind") if isinstance(origin, dict) else None
    return (
        attachment.get("type") == "queued_command"
        and attachment.get("commandMode", "prompt") == "prompt"
        and origin_kind in (None, "human")
    )


def _fields(*paths: str) -> Callable[[dict[str, Any]], Iterator[str]]:
    """A renderer taking the strings at ``paths`` (dotted; ``*`` goes into every item of a
    list); anything that is not a string, or a list of strings, is passed over."""

    def render(attachment: dict[str, Any]) -> Iterator[str]:
        for path in paths:
            yield from _strings(attachment, path.split("."))

    return render


def _strings(value: Any, path: list[str]) -> Iterator[str]:
    if not path:
        if isinstance(value, str):
            yield value
        elif isinstance(value, list):
            yield from (item for item in value if isinstance(item, str))
        return
    head, rest = path[0], path[1:]
    if head == "*" and isinstance(value, list):
        for item in value:
            yield from _strings(item, rest)
    elif isinstance(value, dict) and head in value:
        yield from _strings(value[head], rest)


def _hook_success(attachment: dict[str, Any]) -> Iterator[str]:
    event = attachment.get("hookEvent")
    if isinstance(event, str) and event in HOOK_EVENTS_SENT:
        yield from _strings(attachment, ["content"])


def _queued(attachment: dict[str, Any]) -> Iterator[str]:
    prompt = attachment.get("prompt")
    if isinstance(prompt, list):  # content blocks: their texts (images are not kept)
        yield from _strings(prompt, ["*", "text"])
    else:
        yield from _strings(attachment, ["prompt"])


def _diagnostics(attachment: dict[str, Any]) -> Iterator[str]:
    """One line per diagnostic under its file: ``line:column [severity] message (source)``."""
    files = attachment.get("files")
    for file in files if isinstance(files, list) else []:
        if not isinstance(file, dict):
            continue
        yield str(file.get("uri", ""))
        found = file.get("diagnostics")
        for item in found if isinstance(found, list) else []:
            if isinstance(item, dict):
                line, column = _position(item.get("range"))
                source = f" ({item['source']})" if item.get("source") else ""
                severity, message = item.get("severity", ""), item.get("message", "")
                yield f"  {line}:{column} [{severity}] {message}{source}"


def _position(span: Any) -> tuple[int, int]:
    """The 1-based line and column where an LSP range starts (0 where it says nothing)."""
    start = span.get("start") if isinstance(span, dict) else None
    if not isinstance(start, dict):
        return 0, 0
    line, column = start.get("line"), start.get("character")
    return (
        line + 1 if isinstance(line, int) else 0,
        column + 1 if isinstance(column, int) else 0,
    )


def _items(attachment: dict[str, Any]) -> Iterator[str]:
    """The items of a todo or task reminder (the reminder's own wording is fixed)."""
    content = attachment.get("content")
    for item in content if isinstance(content, list) else []:
        if isinstance(item, dict):
            yield json.dumps(item, ensure_ascii=False)


def _numbers(*keys: str) -> Callable[[dict[str, Any]], Iterator[str]]:
    def render(attachment: dict[str, Any]) -> Iterator[str]:
        values = [f"{key}: {attachment[key]}" for key in keys if key in attachment]
        if values:
            yield ", ".join(values)

    return render


_RENDER: Final[dict[str, Callable[[dict[str, Any]], Iterator[str]]]] = {
    "agent_listing_delta": _fields("addedLines", "removedTypes"),
    "agent_mention": _fields("agentType"),
    "async_hook_response": _fields(
        "response.systemMessage", "response.hookSpecificOutput.additionalContext"
    ),
    "auto_mode": _fields(),
    "auto_mode_exit": _fields(),
    "budget_usd": _numbers("used", "total", "remaining"),
    "compact_file_reference": _fields("filename"),
    "compaction_reminder": _fields(),
    "critical_system_reminder": _fields("content"),
    "date_change": _fields("newDate"),
    "deferred_tools_delta": _fields("addedLines", "removedNames"),
    "diagnostics": _diagnostics,
    "directory": _fields("path", "content"),
    "edited_text_file": _fields("filename", "snippet"),
    "file": _fields("filename", "content.file.content"),
    "hook_additional_context": _fields("hookName", "content"),
    "hook_blocking_error": _fields(
        "hookName", "blockingError.command", "blockingError.blockingError"
    ),
    "hook_stopped_continuation": _fields("hookName", "message"),
    "hook_success": _hook_success,
    "invoked_skills": _fields("skills.*.name", "skills.*.path", "skills.*.content"),
    "mcp_instructions_delta": _fields("addedBlocks", "removedNames"),
    "mcp_resource": _fields("server", "uri", "content.contents.*.text"),
    "nested_memory": _fields("content.path", "content.content"),
    "opened_file_in_ide": _fields("filename"),
    "output_style": _fields("style"),
    "output_token_usage": _numbers("turn", "budget", "session"),
    "pdf_reference": _fields("filename"),
    "plan_file_reference": _fields("planFilePath", "planContent"),
    "plan_mode": _fields("planFilePath"),
    "plan_mode_exit": _fields("planFilePath"),
    "plan_mode_reentry": _fields("planFilePath"),
    "queued_command": _queued,
    "relevant_memories": _fields("memories.*.header", "memories.*.content"),
    "selected_lines_in_ide": _fields("filename", "content"),
    "skill_listing": _fields("content"),
    "task_reminder": _items,
    "task_status": _fields("taskId", "description", "status", "deltaSummary", "outputFilePath"),
    "todo_reminder": _items,
    "token_usage": _numbers("used", "total", "remaining"),
    "ultrathink_effort": _fields("level"),
}
