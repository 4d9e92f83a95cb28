"""The text a compaction is made of: the head as a transcript, the prompts around it, the
messages written after it, and the file manifest.

* ``serialize_head``: pi's plain-text transcript of the messages to summarise, one labelled
  block per model message (``[User]:``, ``[Assistant thinking]:``, ``[Assistant]:``,
  ``[Assistant tool calls]:``, ``[Tool result]:``, ``[Tool error]:``). It is rendered from the
  model view's conversion, so it holds exactly what the model was shown: ignored text and
  failed answers left out, cleared outputs as the view's placeholder, media as
  ``[Attached <mime>: <filename>]``. Tool results and tool-call arguments are cut to
  ``tool_output_chars``; user and assistant text never is.
* ``conversation_request``, ``chunk_prompt``, ``merge_prompt``: the summarizer's requests,
  single-shot or in chunks (Kilo Code's fallback when the head does not fit one request).
* ``continue_text``, ``replay_parts``: what is written after an automatic compaction.
* ``wrap_summary`` / ``unwrap_summary``: MiMo Code's ``<conversation-summary>`` block.
* ``file_manifest`` / ``render_manifest``: the files the head read or wrote (MiMo Code).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

import msgspec

from contextledger.events._catalogue import FileRange
from contextledger.events._parts import (
    CompactionTrigger,
    FilePart,
    TextPart,
    ToolCompleted,
    ToolPart,
)
from contextledger.history._projection import Message
from contextledger.history._view import ViewOptions, convert_message, media_placeholder
from contextledger.policy._templates import SummaryTemplate, summary_prompt
from contextledger.vocabulary._defaults import SUMMARY_TOOL_OUTPUT_CHARS
from contextledger.vocabulary._messages import (
    ModelContent,
    ModelFile,
    ModelMessage,
    ModelReasoning,
    ModelText,
    ModelToolCall,
    ModelToolResult,
)

#: What follows a cut tool result or argument (pi's marker).
CUT_MARKER: Final = "\n\n[... {omitted} more characters truncated]"

#: opencode's synthetic message after an automatic compaction with nothing to replay.
CONTINUE_TEXT: Final = (
    "Continue if you have next steps, or stop and ask for clarification if you are unsure "
    "how to proceed."
)
#: Put before ``CONTINUE_TEXT`` when the compaction answered a provider overflow and media
#: was among what it summarised (opencode's notice).
OVERFLOW_NOTICE: Final = (
    "The previous request exceeded the provider's size limit, most likely because of large "
    "media attachments, so the attached media has been taken out of the conversation. Tell "
    "the user the files were too large to process and suggest sending smaller or fewer files."
)
#: Put before ``CONTINUE_TEXT`` when the compaction answered a provider overflow without
#: media among what it summarised: the conversation itself had outgrown the window.
OVERFLOW_CONTEXT_NOTICE: Final = (
    "The previous request exceeded the model's context window, so the earlier part of the "
    "conversation was condensed into the summary above."
)

#: The sentence opening a wrapped summary, and the two that say what follows it.
SUMMARY_INTRO: Final = "The earlier part of this conversation was condensed into this summary."
SUMMARY_TAIL: Final = "Rounds that arrived while it was being written follow it unchanged."
SUMMARY_NO_TAIL: Final = "No rounds arrived while it was being written."
_WRAPPED: Final = re.compile(
    r'<conversation-summary trigger="[^"]*">\n.*?\n\n(?P<body>.*)\n</conversation-summary>',
    re.DOTALL,
)

#: Heads the manifest: the files may have changed since the summarised messages saw them.
MANIFEST_INTRO: Final = (
    "Files read or written before this point, most recent first. Read a file again before "
    "you edit it: what was seen of it may be out of date."
)

#: The conversion the transcript renders: media as placeholders, tool outputs whole (the
#: transcript cuts them with its own marker), reasoning as reasoning.
_TRANSCRIPT_VIEW: Final = ViewOptions(strip_media=True, tool_output=None)
_json = msgspec.json.Encoder()


# --- the head transcript --------------------------------------------------------------------


def serialize_head(
    messages: Iterable[Message], *, tool_output_chars: int = SUMMARY_TOOL_OUTPUT_CHARS
) -> str:
    """``messages`` as a labelled plain-text transcript, blocks separated by blank lines."""
    return "\n\n".join(
        block
        for message in messages
        for model_message in convert_message(message, _TRANSCRIPT_VIEW)
        for block in _blocks(model_message, tool_output_chars)
    )


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with pi's marker (unchanged when it fits)."""
    if len(text) <= limit:
        return text
    return text[:limit] + CUT_MARKER.format(omitted=len(text) - limit)


def _blocks(message: ModelMessage, limit: int) -> Iterator[str]:
    content = message.content
    if message.role == "tool":
        for result in content:
            if isinstance(result, ModelToolResult):
                label = "[Tool error]" if result.is_error else "[Tool result]"
                yield f"{label}: {clip(result.output, limit)}"
        return
    if message.role == "user":
        yield "[User]: " + "\n".join(_user_item(item) for item in content)
        return
    thinking = [c.text for c in content if isinstance(c, ModelReasoning) and c.text.strip()]
    text = [c.text for c in content if isinstance(c, ModelText) and c.text.strip()]
    calls = [_call(c, limit) for c in content if isinstance(c, ModelToolCall)]
    if thinking:
        yield "[Assistant thinking]: " + "\n".join(thinking)
    if text:
        yield "[Assistant]: " + "\n".join(text)
    if calls:
        yield "[Assistant tool calls]: " + "; ".join(calls)


def _user_item(item: ModelContent) -> str:
    if isinstance(item, ModelText):
        return item.text
    if isinstance(item, ModelFile):
        return f"[Attached {item.mime}: {item.filename or 'file'}]"
    return ""


def _call(call: ModelToolCall, limit: int) -> str:
    arguments = ", ".join(
        f"{key}={clip(_json.encode(value).decode(), limit)}" for key, value in call.input.items()
    )
    return f"{call.tool}({arguments})"


# --- summarizer requests --------------------------------------------------------------------


def conversation_request(transcript: str, prompt: str) -> str:
    """A summarizer's request: the transcript inside ``<conversation>`` tags, then the
    instruction."""
    return f"<conversation>\n{transcript}\n</conversation>\n\n{prompt}"


def chunk_prompt(index: int, count: int) -> str:
    """The instruction for chunk ``index`` (from 1) of ``count``."""
    return (
        f"This is part {index} of {count} of a longer conversation. List, as terse bullet "
        "points, the facts of this part that the rest of the work depends on: what the user "
        "asked for and ruled out, decisions and their reasons, what was done and what is "
        "unfinished, and exact file paths, commands, identifiers and error messages. State "
        "the facts only; do not mention the parts or this instruction."
    )


def merge_prompt(
    partials: Sequence[str], template: SummaryTemplate, previous_summary: str | None = None
) -> str:
    """The request merging chunk summaries (oldest first) into one summary in ``template``."""
    blocks = "\n\n".join(
        f'<partial-summary index="{i}">\n{text.strip()}\n</partial-summary>'
        for i, text in enumerate(partials, 1)
    )
    return (
        f"The conversation was condensed in {len(partials)} parts, oldest first:\n\n"
        f"{blocks}\n\n{summary_prompt(template, previous_summary)}"
    )


# --- after the summary ----------------------------------------------------------------------


def continue_text(overflow: bool, *, media: bool) -> str:
    """The synthetic user text that lets the model carry on after an automatic compaction;
    after an overflow it first names the cause: the media that was taken out when ``media``
    (media was among what the compaction summarised), else the conversation's length."""
    if not overflow:
        return CONTINUE_TEXT
    notice = OVERFLOW_NOTICE if media else OVERFLOW_CONTEXT_NOTICE
    return f"{notice}\n\n{CONTINUE_TEXT}"


def replay_parts(message: Message) -> tuple[str, ...]:
    """The texts a replayed user message is written with: its text parts (ignored ones left
    out) and each attachment as ``[Attached <mime>: <filename>]``; other parts (the
    compaction part among them) are skipped."""
    texts: list[str] = []
    for part in message.parts:
        if isinstance(part, TextPart) and not part.ignored and part.text:
            texts.append(part.text)
        elif isinstance(part, FilePart):
            texts.append(media_placeholder(part))
    return tuple(texts)


def wrap_summary(summary: str, trigger: CompactionTrigger, has_tail: bool) -> str:
    """MiMo Code's ``<conversation-summary>`` block: what the summary is, whether rounds
    that arrived while it was written follow it, and the summary itself."""
    follows = SUMMARY_TAIL if has_tail else SUMMARY_NO_TAIL
    return (
        f'<conversation-summary trigger="{trigger}">\n{SUMMARY_INTRO}\n{follows}\n\n'
        f"{summary.strip()}\n</conversation-summary>"
    )


def unwrap_summary(text: str) -> str:
    """The summary inside a ``wrap_summary`` block (``text`` stripped when it is not one)."""
    match = _WRAPPED.fullmatch(text.strip())
    return (match["body"] if match else text).strip()


# --- the file manifest ----------------------------------------------------------------------

#: Tool names (lower case, letters only, namespace dropped) that read a file ...
READ_TOOLS: Final = frozenset({"read", "readfile", "view", "viewfile", "open", "openfile", "cat"})
#: ... and that write one.
WRITE_TOOLS: Final = frozenset(
    {
        "write",
        "writefile",
        "create",
        "createfile",
        "edit",
        "editfile",
        "multiedit",
        "replace",
        "strreplace",
        "strreplaceeditor",
        "strreplacebasededittool",
        "applypatch",
        "patch",
        "notebookedit",
    }
)
#: Input keys (normalised the same way) that name the file.
PATH_KEYS: Final = (
    "filepath",
    "path",
    "absolutepath",
    "targetfile",
    "notebookpath",
    "filename",
    "file",
)
#: ``command`` values of editor tools that only look (Anthropic's text editor tool).
_VIEW_COMMANDS: Final = frozenset({"view"})
_PATCH_KEYS: Final = ("patch", "patchtext", "input", "diff")
_PATCH_PATH: Final = re.compile(
    r"^(?:\*\*\* (?:Add|Update|Delete) File: |\*\*\* Move to: |\+\+\+ (?:b/)?)(?P<path>\S.*?)\s*$",
    re.MULTILINE,
)
#: The end of a range read from a start line to the end of the file.
TO_END: Final = 0

Range = tuple[int, int]


def file_manifest(
    messages: Iterable[Message], limit: int, previous: Sequence[FileRange] = ()
) -> tuple[FileRange, ...]:
    """The last ``limit`` distinct files the completed tool calls of ``messages`` read or
    wrote, most recent first, then files of ``previous`` (an earlier manifest) not listed yet.

    A file written at all is ``write`` with no ranges; a read one has the line ranges read,
    merged (none: read whole). Ranges come from ``offset``/``limit`` (1-based),
    ``start_line``/``end_line`` or ``view_range``; an end of ``TO_END`` means "to the end".
    Tool names are matched loosely (case, ``_``, a ``server__`` or ``ns.`` prefix ignored).
    """
    touched: dict[str, tuple[bool, list[Range] | None]] = {}
    for message in reversed(list(messages)):
        for part in reversed(message.parts):
            if isinstance(part, ToolPart) and isinstance(part.state, ToolCompleted):
                for path, write, lines in _touches(part.tool, part.state.input):
                    wrote, seen = touched.get(path, (False, []))
                    merged = None if seen is None or lines is None else [*seen, lines]
                    touched[path] = (wrote or write, merged)
    files = [
        FileRange(path=path, action="write" if wrote else "read", ranges=_ranges(wrote, seen))
        for path, (wrote, seen) in touched.items()
    ]
    files += [f for f in previous if f.path not in touched]
    return tuple(files[:limit])


def render_manifest(files: Sequence[FileRange]) -> str:
    """The manifest as text for the model ("" when there are no files)."""
    if not files:
        return ""
    return "\n".join([MANIFEST_INTRO, *(f"- {f.path}: {_describe(f)}" for f in files)])


def _describe(file: FileRange) -> str:
    if file.action == "write":
        return "written"
    if not file.ranges:
        return "read in full"
    spans = ", ".join(f"{a}-{b if b != TO_END else 'end'}" for a, b in file.ranges)
    return f"read, lines {spans}"


def _ranges(wrote: bool, seen: list[Range] | None) -> tuple[Range, ...]:
    if wrote or not seen:
        return ()
    merged: list[Range] = []
    for start, end in sorted(seen, key=lambda r: (r[0], _end(r))):
        if merged and start <= _end(merged[-1]) + 1:
            last = merged[-1]
            merged[-1] = (last[0], max(last, (start, end), key=_end)[1])
        else:
            merged.append((start, end))
    return tuple(merged)


def _end(r: Range) -> float:
    return float("inf") if r[1] == TO_END else r[1]


def _normal(name: str) -> str:
    """A tool or key name in lower case, letters only, namespace dropped."""
    last = re.split(r"__|\.", name)[-1]
    return re.sub(r"[^a-z]", "", last.lower())


def _touches(tool: str, tool_input: Mapping[str, Any]) -> list[tuple[str, bool, Range | None]]:
    """(path, written, lines read or None for the whole file) for each file of one call."""
    name = _normal(tool)
    if name not in READ_TOOLS and name not in WRITE_TOOLS:
        return []
    fields = {_normal(key): value for key, value in tool_input.items()}
    write = name in WRITE_TOOLS and str(fields.get("command", "")).lower() not in _VIEW_COMMANDS
    paths = [p for key in PATH_KEYS if isinstance(p := fields.get(key), str) and p][:1]
    if not paths:
        patch = next((v for k in _PATCH_KEYS if isinstance(v := fields.get(k), str)), "")
        found = (m["path"] for m in _PATCH_PATH.finditer(patch))
        paths = list(dict.fromkeys(p for p in found if p != "/dev/null"))
    lines = None if write else _read_range(fields)
    return [(path, write, lines) for path in paths]


def _read_range(fields: Mapping[str, Any]) -> Range | None:
    """The lines one read covered, or None when it read the whole file."""
    start, end = fields.get("startline"), fields.get("endline")
    view_range = fields.get("viewrange")
    if isinstance(view_range, list | tuple) and len(view_range) == 2:
        start, end = view_range
    if isinstance(start, int):
        return (max(1, start), end if isinstance(end, int) and end >= start else TO_END)
    offset, count = fields.get("offset"), fields.get("limit")
    if not isinstance(offset, int) and not isinstance(count, int):
        return None
    first = max(1, offset) if isinstance(offset, int) else 1
    return (first, first + count - 1 if isinstance(count, int) and count > 0 else TO_END)
