"""Tool-output truncation: the lossy view of a tool result, and paging back the lossless log.

Three pure functions, no I/O:

- ``truncate_for_view`` caps what the model sees of one tool result, as opencode's
  ``Truncate.output`` does (2,000 lines or 50 KiB, head or tail, a ``...N lines truncated...``
  marker and a hint). opencode spills the full text to a file; here it already sits in the event
  log, so the hint says how to page it back with ``read_tool_output``.
- ``truncate_tool_output`` is opencode's ``truncateToolOutput``: the per-result character cap
  used when a history is serialised for a compaction summary.
- ``read_tool_output`` pages the *full* output of a tool call by line, whatever the view did to
  it (pruned, soft-trimmed, truncated): "lossy view, lossless storage". ``PAGING_TOOL`` is the
  tool definition a request offers the model for it, ``page_for_call`` answers the model's
  call, and ``OutputPage.answer`` is the text the call's result carries.

Lines: a line is the text up to and including a ``"\\n"``, plus any unterminated rest, so
``"a\\nb\\n"`` is two lines (``wc -l`` counts the same). opencode counts the pieces of
``split("\\n")`` instead, which makes every newline-terminated output one (empty) line longer and
truncates 2,000 newline-terminated lines for that phantom line; we do not. Line numbers are
0-based offsets, the same numbers ``read_tool_output`` takes, and pages concatenate back to the
exact output.

Bytes are UTF-8 bytes. A surrogate code point, which Python strs can hold but UTF-8 cannot
carry, counts as the three bytes of its ``surrogatepass`` encoding (JavaScript's
``Buffer.byteLength`` also counts 3: it encodes it as U+FFFD).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final, Literal, Protocol, overload

import msgspec

from contextledger.events._errors import LedgerError
from contextledger.events._parts import (
    Part,
    ToolCompleted,
    ToolErrored,
    ToolPart,
    ToolSchema,
    struct_tag,
)
from contextledger.vocabulary._defaults import TOOL_OUTPUT_MAX_BYTES, TOOL_OUTPUT_MAX_LINES

#: A line longer than this counts as several lines of this length, for the line cap and for
#: paging, so that a single huge line (minified JSON, a base64 blob) can still be paged.
#: opencode's Read tool cuts lines at 2,000 characters for the same reason.
WRAP_CHARS: Final = 2000

#: Lines per page of ``read_tool_output``: one page is what one view shows
#: (``TOOL_OUTPUT_MAX_LINES``).
PAGE_LINES: Final = TOOL_OUTPUT_MAX_LINES

#: Appended by ``truncate_tool_output``; opencode's text, which its tests assert verbatim.
COMPACTION_MARKER: Final = "\n[Tool output truncated for compaction: omitted {omitted} chars]"

#: Between the preview and the hint: opencode's ``...N lines truncated...`` (or ``bytes``).
VIEW_MARKER: Final = "...{omitted} {unit} truncated..."

#: opencode's hint, with the spill file replaced by the log: the full output is never lost.
HINT_LEAD: Final = (
    "The tool call succeeded but the output was truncated. "
    "The full output ({total_lines} lines) is kept; "
)

#: For an agent that may hand work to a sub-agent (opencode: "Use the Task tool to have explore
#: agent process this file ... Do NOT read the full file yourself - delegate to save context").
HINT_DELEGATE: Final = (
    "use the Task tool to have an explore agent read it with "
    'read_tool_output(part_id="{part_id}", offset={offset}, limit={limit}) and report what '
    "matters. Do NOT page through the full output yourself - delegate to save context."
)

#: For an agent that reads for itself (opencode: "Use Grep ... or Read with offset/limit").
HINT_READ: Final = (
    'read more with read_tool_output(part_id="{part_id}", offset={offset}, limit={limit}) '
    "(offset is a 0-based line number), or rerun the command narrowed (e.g. with grep) to "
    "view specific sections."
)

#: What every truncation hint starts with (``HINT_LEAD`` up to its first figure).
_HINT_START: Final = HINT_LEAD.partition("{")[0]

#: The name of the paging tool, as the hints above call it.
PAGING_TOOL_NAME: Final = "read_tool_output"

#: The paging tool's definition, as a request offers it to the model.
PAGING_TOOL: Final = ToolSchema(
    name=PAGING_TOOL_NAME,
    description=(
        "Read lines of a tool call's full output when the output you were shown was "
        "truncated. Use the part_id, offset and limit its truncation note gives."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "part_id": {
                "type": "string",
                "description": "The part id the truncation note names.",
            },
            "offset": {
                "type": "integer",
                "minimum": 0,
                "description": "The first line to read, 0-based.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": TOOL_OUTPUT_MAX_LINES,
                "description": "How many lines to read.",
            },
        },
        "required": ["part_id"],
        "additionalProperties": False,
    },
)

Direction = Literal["head", "tail"]
TruncatedBy = Literal["lines", "bytes"]

_ENCODING: Final = "utf-8"
_SURROGATES: Final = "surrogatepass"


class Truncated(msgspec.Struct, frozen=True, kw_only=True):
    """What ``truncate_for_view`` shows of one tool output, and what it left out.

    ``shown_from_line``/``shown_to_line`` are the 0-based, half-open range of the lines shown
    whole (a single line too long for the byte limit is shown cut and is not in the range);
    ``next_offset`` is where ``read_tool_output`` picks up, ``None`` when nothing was cut.
    ``omitted_bytes`` counts every byte of the output not shown, separators included.
    """

    text: str
    truncated: bool
    truncated_by: TruncatedBy | None = None
    omitted_lines: int = 0
    omitted_bytes: int = 0
    total_lines: int
    total_bytes: int
    shown_from_line: int
    shown_to_line: int
    next_offset: int | None = None


class OutputPage(msgspec.Struct, frozen=True, kw_only=True):
    """Lines ``offset`` to ``offset + limit`` of a tool call's full output.

    ``text`` keeps each line's ``"\\n"``, so the pages of an output concatenate back to it
    exactly; ``next_offset`` is the next page's offset, ``None`` after the last line.
    """

    text: str
    offset: int
    limit: int
    total_lines: int
    next_offset: int | None
    part_id: str

    def answer(self) -> str:
        """The page as the paging tool's result: its lines, then which lines they are of
        how many and how to read on (or that the output ends here)."""
        end = self.total_lines if self.next_offset is None else self.next_offset
        where = f"lines {self.offset}-{end - 1} of {self.total_lines}"
        if end <= self.offset:
            where = f"no lines from {self.offset}: the output has {self.total_lines}"
        if self.next_offset is None:
            tail = "the end of the output"
        else:
            tail = "read more with " + _call(self.part_id, self.next_offset, self.limit)
        lines = self.text.removesuffix("\n")
        return f"{lines}\n\n[{where}; {tail}]"


class PagingCall(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The input of a call of ``PAGING_TOOL``."""

    part_id: str
    offset: int = 0
    limit: int = PAGE_LINES


class ToolOutputUnavailable(LedgerError):
    """``read_tool_output`` has no output to page: the part is unknown, is not a tool call, or
    the call has not produced an output (pending, running, or failed with no partial output)."""

    def __init__(self, part_id: str, reason: str) -> None:
        super().__init__(f"no output to read for part {part_id!r}: {reason}")
        self.part_id = part_id
        self.reason = reason


class PartLookup(Protocol):
    """Anything that finds a part by id and raises ``KeyError`` otherwise (``History``)."""

    def part(self, part_id: str) -> Part: ...


# --- the view cap ---------------------------------------------------------------------------


def truncate_for_view(
    output: str,
    *,
    max_lines: int = TOOL_OUTPUT_MAX_LINES,
    max_bytes: int = TOOL_OUTPUT_MAX_BYTES,
    direction: Direction = "head",
    part_id: str,
    tool_can_delegate: bool = False,
) -> Truncated:
    """Cap one tool output at ``max_lines`` lines and ``max_bytes`` UTF-8 bytes for the view.

    Within both limits the output is returned unchanged (the same str object). Otherwise whole
    lines are taken from the head (or the tail) until either limit would be passed, and the
    marker ``...N lines truncated...`` (``bytes`` when the byte limit stopped it) and a hint
    naming ``read_tool_output(part_id=..., offset=..., limit=...)`` are added: after the
    preview for ``head``, before it for ``tail``. Only when not even one whole line fits is a
    line cut inside, on a character boundary: never half a UTF-8 sequence, never one half of a
    surrogate pair. ``tool_can_delegate`` picks the hint that hands the reading to a sub-agent.
    """
    _check_positive("max_lines", max_lines)
    _check_positive("max_bytes", max_bytes)
    total_bytes = _byte_length(output)
    total_lines = count_lines(output)
    if total_lines <= max_lines and total_bytes <= max_bytes:
        return Truncated(
            text=output,
            truncated=False,
            total_lines=total_lines,
            total_bytes=total_bytes,
            shown_from_line=0,
            shown_to_line=total_lines,
        )

    lines = split_lines(output)
    kept, hit_bytes = _take_whole_lines(lines, max_lines, max_bytes, direction)
    whole = len(kept)
    preview = "".join(kept)
    if not kept:  # not even one line fits the bytes: show as much of it as does
        preview = _cut_line(lines[0] if direction == "head" else lines[-1], max_bytes, direction)
    shown_bytes = _byte_length(preview)

    if direction == "head":
        shown_from, shown_to = 0, whole
        next_offset = shown_to
        page = min(max_lines, total_lines - next_offset)
    else:
        shown_from, shown_to = total_lines - whole, total_lines
        next_offset = max(0, shown_from - max_lines)
        page = shown_from - next_offset
    omitted_lines = total_lines - whole
    omitted_bytes = total_bytes - shown_bytes
    unit: TruncatedBy = "bytes" if hit_bytes else "lines"
    marker = VIEW_MARKER.format(
        omitted=omitted_bytes if hit_bytes else omitted_lines,
        unit=unit,
    )
    hint = HINT_LEAD.format(total_lines=total_lines) + (
        HINT_DELEGATE if tool_can_delegate else HINT_READ
    ).format(part_id=part_id, offset=next_offset, limit=page)
    if direction == "head":
        text = preview.removesuffix("\n") + f"\n\n{marker}\n\n{hint}"
    else:
        text = f"{marker}\n\n{hint}\n\n{preview}"
    return Truncated(
        text=text,
        truncated=True,
        truncated_by=unit,
        omitted_lines=omitted_lines,
        omitted_bytes=omitted_bytes,
        total_lines=total_lines,
        total_bytes=total_bytes,
        shown_from_line=shown_from,
        shown_to_line=shown_to,
        next_offset=next_offset,
    )


def _take_whole_lines(
    lines: list[str], max_lines: int, max_bytes: int, direction: Direction
) -> tuple[list[str], bool]:
    """The most lines from the head (or tail) within both limits, in output order, and
    whether the byte limit (rather than the line limit) stopped the taking."""
    ordered: Iterable[str] = lines if direction == "head" else reversed(lines)
    kept: list[str] = []
    size = 0
    for line in ordered:
        if len(kept) == max_lines:
            break
        size += _byte_length(line)
        if size > max_bytes:
            return _in_order(kept, direction), True
        kept.append(line)
    return _in_order(kept, direction), False


def _in_order(kept: list[str], direction: Direction) -> list[str]:
    return kept if direction == "head" else kept[::-1]


def _cut_line(line: str, max_bytes: int, direction: Direction) -> str:
    """The longest head (or tail) of ``line`` within ``max_bytes`` UTF-8 bytes that splits no
    character and no surrogate pair."""
    data = line.encode(_ENCODING, _SURROGATES)
    if direction == "head":
        cut = max_bytes
        while cut > 0 and _is_continuation(data[cut]):
            cut -= 1
        shown = data[:cut].decode(_ENCODING, _SURROGATES)
        return shown[:-1] if shown and _is_high_surrogate(shown[-1]) else shown
    start = len(data) - max_bytes
    while start < len(data) and _is_continuation(data[start]):
        start += 1
    shown = data[start:].decode(_ENCODING, _SURROGATES)
    return shown[1:] if shown and _is_low_surrogate(shown[0]) else shown


# --- the compaction cap ---------------------------------------------------------------------


def truncate_tool_output(output: str, limit: int | None) -> str:
    """opencode's ``truncateToolOutput``: ``output`` cut to ``limit`` characters for a summary.

    Returns ``output`` itself when there is no limit (``None`` or 0, as opencode's
    ``!maxChars``) or it is no longer than ``limit``; otherwise its first ``limit`` characters
    and ``\\n[Tool output truncated for compaction: omitted N chars]``. Characters are code
    points (opencode counts UTF-16 units), so an astral character such as an emoji counts once
    and is never split. "Surrogate-safe" therefore only concerns a surrogate held as a code
    point of its own (decoded with ``surrogatepass``, or an unpaired one): if the last kept
    character is a high surrogate the cut steps back one, so no dangling high surrogate ends
    the text (opencode's rule; downstream JSON encoders reject it).
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be None or >= 0, got {limit}")
    if not limit or len(output) <= limit:
        return output
    cut = limit - 1 if _is_high_surrogate(output[limit - 1]) else limit
    return output[:cut] + COMPACTION_MARKER.format(omitted=len(output) - cut)


# --- paging back the log --------------------------------------------------------------------


@overload
def read_tool_output(part: ToolPart, /, offset: int = 0, limit: int = PAGE_LINES) -> OutputPage: ...


@overload
def read_tool_output(
    history: PartLookup, part_id: str, /, offset: int = 0, limit: int = PAGE_LINES
) -> OutputPage: ...


def read_tool_output(source: ToolPart | PartLookup, /, *args: Any, **kwargs: Any) -> OutputPage:
    """Lines ``offset`` to ``offset + limit`` of a tool call's full output, from the log.

    Takes the ``ToolPart`` itself, or a ``History`` (any ``PartLookup``) and a part id. The
    output is the one recorded, whatever the view did to it (pruned, soft-trimmed, truncated);
    an errored call pages its partial output. Raises ``ToolOutputUnavailable`` when there is
    nothing to page, and ``ValueError`` for a negative offset, a limit below 1, or an offset
    past the last line (an offset equal to the line count gives the empty last page).
    """
    if isinstance(source, ToolPart):
        return _read_part(source, *args, **kwargs)
    return _read_lookup(source, *args, **kwargs)


def _read_lookup(
    history: PartLookup, part_id: str, offset: int = 0, limit: int = PAGE_LINES
) -> OutputPage:
    try:
        part = history.part(part_id)
    except KeyError:
        raise ToolOutputUnavailable(part_id, "no such part") from None
    if not isinstance(part, ToolPart):
        raise ToolOutputUnavailable(part_id, f"a {struct_tag(part)} part, not a tool call")
    return _read_part(part, offset, limit)


def _read_part(part: ToolPart, offset: int = 0, limit: int = PAGE_LINES) -> OutputPage:
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    output = _recorded_output(part)
    lines = split_lines(output)
    if offset > len(lines):
        raise ValueError(f"offset {offset} is past the end of the output ({len(lines)} lines)")
    end = offset + limit
    return OutputPage(
        text="".join(lines[offset:end]),
        offset=offset,
        limit=limit,
        total_lines=len(lines),
        next_offset=end if end < len(lines) else None,
        part_id=part.id,
    )


def _recorded_output(part: ToolPart) -> str:
    state = part.state
    if isinstance(state, ToolCompleted):
        return state.output
    if isinstance(state, ToolErrored):
        if state.partial_output is None:
            raise ToolOutputUnavailable(part.id, "the call failed without output")
        return state.partial_output
    raise ToolOutputUnavailable(part.id, f"the call is {struct_tag(state)}, it has no output yet")


def page_for_call(history: PartLookup, tool_input: dict[str, Any]) -> OutputPage:
    """The page a call of ``PAGING_TOOL`` with ``tool_input`` asks for, its limit capped at
    ``PAGE_LINES`` (one page is what one view shows). Raises ``ValueError`` for an input that
    does not match the tool's schema, or an offset past the end, and
    ``ToolOutputUnavailable`` when the part has no output to page."""
    try:
        call = msgspec.convert(tool_input, PagingCall)
    except msgspec.ValidationError as exc:
        raise ValueError(f"{PAGING_TOOL_NAME}: {exc}") from None
    return read_tool_output(history, call.part_id, call.offset, min(call.limit, PAGE_LINES))


def shows_truncation(output: str) -> bool:
    """Whether a tool output as the view shows it was cut by ``truncate_for_view`` (its hint
    is in it)."""
    return _HINT_START in output


def _call(part_id: str, offset: int, limit: int) -> str:
    return f'{PAGING_TOOL_NAME}(part_id="{part_id}", offset={offset}, limit={limit})'


# --- lines, bytes and surrogates ------------------------------------------------------------


def split_lines(text: str) -> list[str]:
    """``text`` split after each ``"\\n"`` (kept), a line longer than ``WRAP_CHARS`` into
    pieces of ``WRAP_CHARS``; ``"".join`` of the result is ``text``."""
    pieces = text.split("\n")
    last = pieces.pop()
    lines = [piece + "\n" for piece in pieces]
    if last:
        lines.append(last)
    if len(text) <= WRAP_CHARS or all(len(line) <= WRAP_CHARS for line in lines):
        return lines
    return [line[i : i + WRAP_CHARS] for line in lines for i in range(0, len(line), WRAP_CHARS)]


def count_lines(text: str) -> int:
    """How many lines ``split_lines`` makes of ``text``."""
    if len(text) <= WRAP_CHARS:
        return text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    return len(split_lines(text))


def _byte_length(text: str) -> int:
    return len(text.encode(_ENCODING, _SURROGATES))


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def _is_high_surrogate(char: str) -> bool:
    return "\ud800" <= char <= "\udbff"


def _is_low_surrogate(char: str) -> bool:
    return "\udc00" <= char <= "\udfff"


def _check_positive(name: str, value: int) -> None:
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
