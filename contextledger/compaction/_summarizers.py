"""Summarizers: what turns a compacted head into the summary that replaces it.

``Summarizer`` is the protocol the compactor calls. Two implementations:

* ``ExtractiveSummarizer`` fills the template from the facts of the head (``walk_facts``),
  with no model and no I/O, deterministically, on the event loop in short slices. It is
  incremental: every bullet of the previous summary is carried into its section unless a new
  fact supersedes it (the same file listed again, the same command run again, the same todo
  with a new status, a newer request), so a second compaction keeps the facts of the first.
* ``ModelSummarizer`` asks a model through the provider HTTP client. Its request repeats the
  session's pinned system blocks and tool table and its view as the session last sent it,
  with the session's tool choice (unset), so its prefix is the session's last request's and
  reads the session's prompt cache; the instruction at the end asks for text only and names
  the messages to summarise.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from typing import Any, Final, Literal, Protocol, cast, get_args

import msgspec
import structlog
import trio

from contextledger.compaction._facts import (
    IDENTIFIER_CHARS,
    ChangeAction,
    CommandRun,
    FileChange,
    FileRead,
    LineRange,
    PlanStep,
    SessionFacts,
    cut_words,
    merge_ranges,
    run_steps,
    walk_facts,
    within_budget,
)
from contextledger.events._parts import ModelRef, ToolChoice, ToolSchema
from contextledger.history._projection import Message
from contextledger.policy._compaction import text_tokens
from contextledger.policy._templates import NONE, SummaryTemplate, missing_sections, render_summary
from contextledger.providers._http import ProviderClient
from contextledger.vocabulary._defaults import SUMMARY_MAX_TOKENS
from contextledger.vocabulary._messages import (
    ModelMessage,
    ModelText,
    ModelToolCall,
    ModelToolResult,
)
from contextledger.vocabulary._requests import CacheMark, Request

_log = structlog.get_logger(__name__)

#: The longest the extractive summarizer works before it lets the event loop run others
#: (overshot by at most one step, a quarter to a half of it): a host loop waits for every
#: task step the scheduler runs between two of its turns, the other sessions' among them, so
#: one task's share of the 20 ms a host loop may be held (a 60 Hz frame is 16 ms; asyncio's
#: debug mode reports a callback at 100 ms) is kept to a few milliseconds, while the pause
#: each slice costs (tens of microseconds) stays a few percent. A worker thread is no way out:
#: the work holds the GIL, and the loop's thread then waits up to the 5 ms switch interval
#: each time it gets the GIL back after I/O.
SLICE_SECONDS: Final = 0.001


class SummaryInput(msgspec.Struct, frozen=True, kw_only=True):
    """One summary to write.

    ``head`` is the history to summarise and ``transcript`` its serialisation (made by the
    planner); ``prompt`` the instruction (``summary_prompt``). ``system``, ``tools`` and
    ``marks`` are the session's pinned prefix and its cache breakpoints (indices into
    ``system``, ``tools`` and ``messages``); ``messages`` the session's view as its last
    request sent it, through that request's last message or the head's, whichever is later
    (media stripped, outputs cut), empty for a caller without a view. Its
    first ``sent`` messages are those the session's last request sent, as it sent them (its
    prompt cache holds them; 0 when none is known to); its last ``kept`` messages are not to
    be summarised: the verbatim tail, sent because that request held them. ``rest`` is the
    head's part after ``messages`` as a transcript (outputs cut), when the request could not
    hold it as messages. ``tool_choice`` is the tool choice that request was sent with, when
    ``sent`` (a changed one empties Anthropic's cache of its messages).
    """

    session_id: str
    head: tuple[Message, ...]
    transcript: str
    previous_summary: str | None
    template: SummaryTemplate
    prompt: str
    model: ModelRef | None = None
    system: tuple[str, ...] = ()
    tools: tuple[ToolSchema, ...] = ()
    messages: tuple[ModelMessage, ...] = ()
    marks: tuple[CacheMark, ...] = ()
    sent: int = 0
    kept: int = 0
    rest: str = ""
    max_output_tokens: int | None = None
    tool_choice: ToolChoice | None = None


class Summarizer(Protocol):
    """Writes summaries. ``max_input_tokens`` is how much one call can read: None for no
    limit (the head is never cut into chunks), 0 for the usable window of the model being
    compacted for, or a token count; the compactor cuts a head that does not fit into
    chunks."""

    max_input_tokens: int | None

    async def summarize(self, task: SummaryInput) -> str:
        """The summary of ``task.head`` in ``task.template``'s structure; ``""`` when none
        was produced (the compactor then rolls back)."""
        ...


# --- the extractive summary -------------------------------------------------------------------

#: New facts a section takes (newest first); bullets carried from the previous summary come
#: after them, up to as many again. A first summary never has more than ``SECTION_NEW`` bullets
#: in a section, so a second compaction carries all of them; from then on the oldest fall off.
SECTION_NEW: Final = 40
SECTION_CARRIED: Final = 40
#: Files listed, changed ones first; commands shown, latest run of each; plan steps.
MAX_FILES: Final = 30
MAX_COMMANDS: Final = 15
MAX_STEPS: Final = 20
#: A command longer than this shows its first characters (whole words).
COMMAND_CHARS: Final = 300
#: The characters of identifiers kept when a new list merges with the previous summary's.
MERGED_IDENTIFIER_CHARS: Final = 2 * IDENTIFIER_CHARS

Slot = Literal[
    "goal",
    "constraints",
    "done",
    "in_progress",
    "blocked",
    "decisions",
    "next",
    "critical",
    "files",
    "identifiers",
]

#: The kinds of facts each section of both templates holds (a section lists them in ``Slot``
#: order). A template's section for a kind is the first leaf section (one without
#: sub-sections) holding it; a kind no section holds goes to the last section.
SECTION_SLOTS: Final[Mapping[str, tuple[Slot, ...]]] = {
    "Goal": ("goal",),
    "Constraints & Preferences": ("constraints",),
    "Progress": ("done",),
    "Done": ("done",),
    "In Progress": ("in_progress",),
    "Blocked": ("blocked",),
    "Key Decisions": ("decisions",),
    "Next Steps": ("next",),
    "Critical Context": ("critical", "identifiers"),
    "Relevant Files": ("files",),
    "Task Overview": ("goal", "constraints"),
    "Current State": ("done", "in_progress"),
    "Important Discoveries": ("blocked", "decisions", "critical"),
    "Context to Preserve": ("files", "identifiers"),
}

LATEST_REQUEST: Final = "Latest request: "
TASK: Final = "Task: "
LAST_STEP: Final = "Last step: "
IDENTIFIERS: Final = "Identifiers: "

_HEADING: Final = re.compile(r"^#{1,6}\s+(.*?)\s*$")
_BULLET_MARKER: Final = re.compile(r"^\s*(?:[-*] |(?=\S))")
_WRAPPER: Final = re.compile(r"^</?[\w-]+>$")
_FILE_BULLET: Final = re.compile(r"^`([^`\n]+)`: (.+)$")
_CHANGE_BULLET: Final = re.compile(r"^(created|written|edited|deleted) `([^`\n]+)`$")
_TODO_BULLET: Final = re.compile(r"^\[([a-z_]+)\] (.+)$")
_COMMAND_BULLET: Final = re.compile(r"^(`+) ?\$ (.+?) ?\1(?!`)")
_RANGE: Final = re.compile(r"(\d+)-(\d+|end)")
_IDENTIFIER_ITEM: Final = re.compile(r"`([^`]+)`")

Key = tuple[str, str]


class _Bullet(msgspec.Struct, frozen=True):
    """One bullet of a section: its text (continuation lines indented by two spaces) and the
    key a newer bullet supersedes it by (None: only an identical bullet does)."""

    text: str
    key: Key | None = None


class ExtractiveSummarizer:
    """Fills the summary template from the facts of the head; no model, no I/O.

    The work is pure Python over the whole head (tens of milliseconds for a long one). It
    runs on the event loop in slices of about ``slice_seconds`` (``walk_facts``'s steps, then
    ``summary_steps``'s), pausing at a checkpoint after each, on a copy of the head taken
    before it starts: every other session, and a host loop the runtime is a guest of, keeps
    running meanwhile. One summary is written at a time (the others wait their turn): all of
    them run on the one thread, so at once they would only interleave, and the scheduler
    would run a slice of each between two turns of the host loop. A cancellation stops it at
    the next pause."""

    max_input_tokens: int | None = None

    def __init__(
        self, *, slice_seconds: float = SLICE_SECONDS, max_tokens: int | None = SUMMARY_MAX_TOKENS
    ) -> None:
        self.slice_seconds = slice_seconds
        self.max_tokens = max_tokens
        self._turn: trio.Lock | None = None

    async def summarize(self, task: SummaryInput) -> str:
        """The extractive summary of ``task`` (see ``extractive_summary``), at most
        ``max_tokens`` long and at most the task's ``max_output_tokens``."""
        if self._turn is None:
            self._turn = trio.Lock()
        async with self._turn:
            return await self._summarize(task)

    async def _summarize(self, task: SummaryInput) -> str:
        budget = min((n for n in (self.max_tokens, task.max_output_tokens) if n), default=None)
        # The projection goes on changing its messages in place between the slices.
        head = tuple(msgspec.structs.replace(m, parts=list(m.parts)) for m in task.head)
        steps = _extractive_steps(head, task, budget)
        pause_at = time.perf_counter() + self.slice_seconds
        while True:
            try:
                next(steps)
            except StopIteration as done:
                return cast(str, done.value)
            if time.perf_counter() >= pause_at:
                await trio.lowlevel.checkpoint()
                pause_at = time.perf_counter() + self.slice_seconds


def _extractive_steps(
    head: Sequence[Message], task: SummaryInput, max_tokens: int | None
) -> Generator[None, None, str]:
    """The extractive summary of ``head`` for ``task`` in steps: the walk's, then the
    summary's (``summary_steps``)."""
    facts = yield from walk_facts(head)
    yield
    return (
        yield from summary_steps(facts, task.template, task.previous_summary, max_tokens=max_tokens)
    )


def extractive_summary(
    facts: SessionFacts,
    template: SummaryTemplate,
    previous: str | None = None,
    *,
    max_tokens: int | None = None,
) -> str:
    """The summary of ``facts`` in ``template``'s structure, every section present (``(none)``
    when empty), updating ``previous``: its bullets follow the new ones in their section (or
    the section of the same kind, when ``previous`` used the other template), except those a
    new bullet supersedes or repeats. A superseded file or identifier list is merged into the
    new one. With ``max_tokens``, the summary holds at most that many tokens (or only its
    headings, when they alone are longer): the carried bullets go first, the oldest first,
    then the new ones, the oldest first."""
    return run_steps(summary_steps(facts, template, previous, max_tokens=max_tokens))


def summary_steps(
    facts: SessionFacts,
    template: SummaryTemplate,
    previous: str | None = None,
    *,
    max_tokens: int | None = None,
) -> Generator[None, None, str]:
    """``extractive_summary`` in steps: a generator that yields after writing the new
    bullets and after merging each carried bullet a new one supersedes, and returns the
    same summary (a long identifier list takes about a millisecond to write or merge)."""
    sections = _leaf_sections(template)
    new: dict[str, list[_Bullet]] = {title: [] for title in sections}
    for slot, bullets in _slot_bullets(facts, first=not previous).items():
        new[_section_for(slot, template)].extend(bullets)
    yield
    new = {title: bullets[:SECTION_NEW] for title, bullets in new.items()}
    carried = _parse_summary(previous or "")
    by_key = {
        b.key: (title, i)
        for title, bullets in new.items()
        for i, b in enumerate(bullets)
        if b.key is not None
    }
    texts = {b.text for bullets in new.values() for b in bullets}
    kept: dict[str, list[str]] = {title: [] for title in sections}
    for heading, bullet in carried:
        if bullet.key is not None and bullet.key in by_key:
            at, i = by_key[bullet.key]
            new[at][i] = _merge(new[at][i], bullet)
            yield
        elif bullet.text not in texts:
            texts.add(bullet.text)
            target = heading if heading in sections else _section_for(_slot_of(heading), template)
            kept[target].append(bullet.text)
    ranked = {
        title: [((0, i), b.text) for i, b in enumerate(new[title])]
        + [(_carried_rank(i, text), text) for i, text in enumerate(kept[title][:SECTION_CARRIED])]
        for title in sections
    }
    return _within(template, ranked, max_tokens)


def _carried_rank(position: int, text: str) -> tuple[int, int]:
    """The rank of a carried bullet: after every new one, the newest first; but the task,
    which only a first summary writes, before all of them: a summary that lost it would
    leave the agent without what it was asked to do."""
    return (-1, 0) if text.startswith(TASK) else (1, position)


def _within(
    template: SummaryTemplate,
    ranked: Mapping[str, Sequence[tuple[tuple[int, int], str]]],
    max_tokens: int | None,
) -> str:
    """The summary of the bullets of each section (each with its rank, ``_carried_rank``:
    the task, then new before carried, then by position, newest first), without the
    lowest-ranked bullets, as few as needed for it to hold at most ``max_tokens`` tokens
    (every bullet when None). The identifier list is one long bullet whose names come most
    used first: when it is among the first bullets that do not fit, it is kept with as many
    of its names as fit rather than left out whole."""
    ranks = sorted(rank for bullets in ranked.values() for rank, _ in bullets)
    none: tuple[int, int] = (-1, -1)  # a rank below every bullet's

    def render(cut: tuple[int, int], names: int | None = None) -> str:
        filled = {
            title: [_with_names(text, names) for rank, text in bullets if rank <= cut]
            for title, bullets in ranked.items()
        }
        return render_summary(template, filled)

    def fits(text: str) -> bool:
        return max_tokens is None or text_tokens(len(text)) <= max_tokens

    kept = _most(len(ranks), lambda n: fits(render(ranks[n - 1] if n else none)))
    if kept < len(ranks):
        cut = ranks[kept]
        lists = [t for b in ranked.values() for r, t in b if r == cut and t.startswith(IDENTIFIERS)]
        if lists:
            total = len(_IDENTIFIER_ITEM.findall(lists[0]))
            names = _most(total, lambda n: fits(render(cut, n)))
            if names:
                return render(cut, names)
    return render(ranks[kept - 1] if kept else none)


def _most(high: int, fits: Callable[[int], bool]) -> int:
    """The largest ``n`` in ``[0, high]`` with ``fits(n)`` (``fits`` holds for 0 and, once it
    fails, for no larger ``n``)."""
    low = 0
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    return low


def _with_names(text: str, names: int | None) -> str:
    """``text``, or, when it is the identifier list and ``names`` is given, the list of its
    first ``names`` names."""
    if names is None or not text.startswith(IDENTIFIERS):
        return text
    return _identifiers_text(_IDENTIFIER_ITEM.findall(text)[:names])


# --- facts to bullets -------------------------------------------------------------------------


def _slot_bullets(facts: SessionFacts, *, first: bool) -> dict[Slot, list[_Bullet]]:
    """The bullets of each kind, newest first. The task (first request) is written only by a
    first summary; later ones carry it."""
    todos = [s for s in facts.plan if s.status is not None]
    steps = [_todo_bullet(s) for s in facts.plan if s.status not in ("completed", "in_progress")]
    runs = list(reversed(facts.commands))[:MAX_COMMANDS]
    identifiers = [_Bullet(_identifiers_text(facts.identifiers), ("identifiers", ""))]
    return {
        "goal": _goal(facts, first=first),
        "constraints": [_Bullet(c) for c in facts.constraints],
        "done": [
            *(_change_bullet(c) for c in reversed(facts.files_changed)),
            *(_command_bullet(r) for r in runs if r.outcome == "ok"),
            *(_todo_bullet(s) for s in todos if s.status == "completed"),
        ],
        "in_progress": [
            *(_todo_bullet(s) for s in todos if s.status == "in_progress"),
            *_prefixed(LAST_STEP, facts.last_step, "last-step"),
        ],
        "blocked": [_command_bullet(r) for r in runs if r.outcome != "ok"],
        "decisions": [_Bullet(d) for d in facts.decisions],
        "next": steps[:MAX_STEPS],
        "critical": [_Bullet(line) for line in facts.errors],
        "files": _file_bullets(facts.files_changed, facts.files_read),
        "identifiers": identifiers if facts.identifiers else [],
    }


def _goal(facts: SessionFacts, *, first: bool) -> list[_Bullet]:
    latest = _prefixed(LATEST_REQUEST, facts.latest_request, "latest")
    if not first:
        return latest
    task = _prefixed(TASK, facts.first_request, None)
    return task if facts.latest_request == facts.first_request else [*task, *latest]


def _prefixed(prefix: str, text: str | None, key: str | None) -> list[_Bullet]:
    if not text:
        return []
    body = prefix + text.replace("\n", "\n  ")
    return [_Bullet(body, (key, "") if key else None)]


def _change_bullet(change: FileChange) -> _Bullet:
    return _Bullet(f"{change.action} `{change.path}`", ("changed", change.path))


def _todo_bullet(step: PlanStep) -> _Bullet:
    if step.status is None:
        return _Bullet(step.text)
    return _Bullet(f"[{step.status}] {step.text}", ("todo", step.text))


def _command_bullet(run: CommandRun) -> _Bullet:
    lines = run.command.splitlines()
    shown = cut_words(lines[0].strip(), COMMAND_CHARS)
    more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
    status = f"exit {run.exit_code}" if run.exit_code is not None else run.outcome
    return _Bullet(f"{_code_span('$ ' + shown)}{more} → {status}", ("command", shown))


def _code_span(text: str) -> str:
    """``text`` as a Markdown inline code span, fenced with more backticks than it holds."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    return f"{fence}{text}{fence}" if longest == 0 else f"{fence} {text} {fence}"


def _identifiers_text(names: Iterable[str]) -> str:
    return IDENTIFIERS + ", ".join(_code_span(n) for n in names)


class _FileEntry(msgspec.Struct):
    """What the summary says about one file: the lines read (None: not read, ``()``: whole)
    and the change made."""

    path: str
    read: tuple[LineRange, ...] | None = None
    change: ChangeAction | None = None

    def bullet(self) -> _Bullet:
        said: list[str] = []
        if self.read is not None:
            ranges = ", ".join(f"{r.start}-{r.end or 'end'}" for r in self.read)
            said.append(f"read lines {ranges}" if ranges else "read")
        if self.change is not None:
            said.append(self.change)
        return _Bullet(f"`{self.path}`: {'; '.join(said)}", ("file", self.path))


def _file_bullets(changed: Sequence[FileChange], read: Sequence[FileRead]) -> list[_Bullet]:
    """Changed files, newest first, then files only read, newest first; with the lines read."""
    reads = {r.path: r.ranges for r in read}
    entries = {c.path: _FileEntry(c.path, reads.get(c.path), c.action) for c in reversed(changed)}
    for r in reversed(read):
        entries.setdefault(r.path, _FileEntry(r.path, r.ranges))
    return [e.bullet() for e in list(entries.values())[:MAX_FILES]]


# --- the previous summary ---------------------------------------------------------------------


def _parse_summary(text: str) -> list[tuple[str | None, _Bullet]]:
    """The bullets of a summary with the title of their section (None before any heading).
    A ``- `` line opens a bullet, an indented line continues it, any other text line is a
    bullet of its own; ``(none)``, blank lines and wrapper tags are skipped."""
    found: list[tuple[str | None, list[str]]] = []
    title: str | None = None
    current: list[str] | None = None
    for line in text.split("\n"):
        heading = _HEADING.match(line)
        if heading:
            title, current = heading[1], None
        elif not line.strip() or line.strip() == NONE or _WRAPPER.match(line.strip()):
            current = None
        elif current is not None and line[0].isspace():
            current.append(line)
        else:
            current = [_BULLET_MARKER.sub("", line, count=1)]
            found.append((title, current))
    return [(t, _keyed("\n".join(lines))) for t, lines in found if "".join(lines).strip()]


def _keyed(text: str) -> _Bullet:
    """A carried bullet with the key of the fact it states, if it is one of ours."""
    first = text.split("\n", 1)[0]
    for prefix, key in (
        (LATEST_REQUEST, "latest"),
        (LAST_STEP, "last-step"),
        (IDENTIFIERS, "identifiers"),
    ):
        if first.startswith(prefix):
            return _Bullet(text, (key, ""))
    for pattern, kind, group in (
        (_COMMAND_BULLET, "command", 2),
        (_FILE_BULLET, "file", 1),
        (_CHANGE_BULLET, "changed", 2),
        (_TODO_BULLET, "todo", 2),
    ):
        match = pattern.match(first)
        if match:
            return _Bullet(text, (kind, match[group].strip()))
    return _Bullet(text)


def _merge(new: _Bullet, old: _Bullet) -> _Bullet:
    """A new bullet superseding ``old``: file facts and identifier lists are merged, newest
    first; other facts are replaced."""
    if new.key is None or new.key[0] not in ("file", "identifiers"):
        return new
    if new.key[0] == "identifiers":
        names = [*_IDENTIFIER_ITEM.findall(new.text), *_IDENTIFIER_ITEM.findall(old.text)]
        merged = list(dict.fromkeys(names))
        return _Bullet(_identifiers_text(within_budget(merged, MERGED_IDENTIFIER_CHARS)), new.key)
    fresh, stale = _file_entry(new.text), _file_entry(old.text)
    if fresh is None or stale is None:
        return new
    if fresh.read is None or stale.read is None:
        fresh.read = fresh.read if stale.read is None else stale.read
    elif fresh.read and stale.read:
        fresh.read = merge_ranges((*fresh.read, *stale.read))
    else:
        fresh.read = ()
    if fresh.change is None or stale.change == "created":
        fresh.change = stale.change or fresh.change
    return fresh.bullet()


def _file_entry(text: str) -> _FileEntry | None:
    """The file bullet ``text`` read back (None when it is not one)."""
    match = _FILE_BULLET.match(text)
    if match is None:
        return None
    entry = _FileEntry(match[1])
    for said in match[2].split("; "):
        if said == "read":
            entry.read = ()
        elif said.startswith("read lines "):
            entry.read = tuple(
                LineRange(int(a), None if b == "end" else int(b)) for a, b in _RANGE.findall(said)
            )
        elif said in get_args(ChangeAction):
            entry.change = cast(ChangeAction, said)
    return entry


def _leaf_sections(template: SummaryTemplate) -> list[str]:
    """The titles of the sections that hold bullets (not those with sub-sections)."""
    sections = template.sections
    return [
        s.title
        for i, s in enumerate(sections)
        if not (i + 1 < len(sections) and sections[i + 1].level > s.level)
    ]


def _section_for(slot: Slot, template: SummaryTemplate) -> str:
    leaves = _leaf_sections(template)
    for title in leaves:
        if slot in SECTION_SLOTS.get(title, ()):
            return title
    return leaves[-1]


def _slot_of(title: str | None) -> Slot:
    """The kind of facts a section of a previous summary held; text outside any known
    section counts as critical context."""
    slots = SECTION_SLOTS.get(title or "")
    return slots[0] if slots else "critical"


# --- the model summary ------------------------------------------------------------------------

#: pi: a summary may use 80% of the 16,384 tokens reserved for output.
SUMMARY_OUTPUT_TOKENS: Final = 13_107
#: The view message the instruction is sent as names this as its source.
PROMPT_SOURCE: Final = "summary-prompt"
#: Opens every summary instruction. The request keeps the tool choice of the session's last
#: request (a change would make Anthropic drop the session's cached messages), so the model
#: may call the session's tools; it is asked in words not to, and an answer of only a tool
#: call is empty.
SUMMARY_OPENING: Final = (
    "Respond with text only and call no tool: this request asks for a summary of the "
    "conversation, not for a step of its task."
)
#: Sent before a head that starts with the model's message.
HEAD_OPENING: Final = "The conversation to summarise follows."
#: Added to the instruction when the request's messages end with the verbatim tail.
KEPT_NOTE: Final = (
    "The last {count} messages above, from the {role} message that opens with {opening}, stay "
    "in the conversation word for word after the summary: summarise only what comes before "
    "them."
)
#: Opens the transcript of the head's part a request could not hold as messages.
REST_OPENING: Final = "The conversation above continues:"
#: How much of the first kept message ``KEPT_NOTE`` quotes.
OPENING_CHARS: Final = 80


class ModelSummarizer:
    """Asks a model for the summary through ``client``.

    The request is the session's: its pinned system blocks and tool table, its cache marks,
    its view as last sent, then the instruction as the last user message, with the
    ``tool_choice`` of the session's last request (the tools stay in the table and the choice
    unchanged, so the prefix is byte-identical with the session's requests and reads all of
    their prompt cache; the instruction opens with ``SUMMARY_OPENING``). ``model`` is used
    when the task names none; ``max_input_tokens`` is what one call can read (0, the
    default: the window of the model being compacted for; see ``Summarizer``).
    """

    def __init__(
        self,
        client: ProviderClient,
        *,
        model: ModelRef | None = None,
        max_output_tokens: int = SUMMARY_OUTPUT_TOKENS,
        max_input_tokens: int | None = 0,
    ) -> None:
        self.client = client
        self.model = model
        self.max_output_tokens = max_output_tokens
        self.max_input_tokens = max_input_tokens

    def request(self, task: SummaryInput) -> Request:
        """The summary request of ``task`` (``summary_request`` with this summarizer's model
        and output cap)."""
        return summary_request(task, model=self.model, max_output_tokens=self.max_output_tokens)

    async def summarize(self, task: SummaryInput) -> str:
        """The model's summary of ``task``, or ``""`` when its answer has no text (an answer of
        only a tool call among them)."""
        response = await self.client.send(self.request(task))
        text = response_text(self.client.wire.name, response.body)
        _log.info(
            "summary received" if text else "summary empty",
            session_id=task.session_id,
            provider=self.client.wire.name,
            chars=len(text),
            missing_sections=missing_sections(task.template, text) if text else [],
            cache_read=response.usage.cache_read,
            attempts=response.attempts,
        )
        return text


def summary_request(
    task: SummaryInput, *, model: ModelRef | None = None, max_output_tokens: int
) -> Request:
    """The request a model summarizer sends for ``task``: the session's pinned system blocks,
    tool table and cache marks, the task's messages, then the instruction as the last user
    message (opening with ``SUMMARY_OPENING``; saying which messages are kept, ``KEPT_NOTE``,
    when ``task.kept``; after ``task.rest`` under ``REST_OPENING`` when there is one), with
    the tool choice of the request it continues (``task.tool_choice``), unless that one
    required a tool call, which would leave the summary no answer in text. Without
    ``task.messages`` the transcript (when there is one: a chunk's prompt carries its own) and
    the instruction go as one user message, and message marks are dropped. It asks for
    ``max_output_tokens``, or less when the task says so (``task.max_output_tokens``: a
    chunk's cap, or the room the window leaves). ``task.model`` wins over ``model``; raises
    ``ValueError`` when neither names one."""
    chosen = task.model or model
    if chosen is None:
        raise ValueError("a summary request needs a model: give one to it or in the task")
    instruction = f"{SUMMARY_OPENING}\n\n{task.prompt}"
    if task.messages and task.kept:
        instruction += "\n\n" + _kept_note(task.messages[-task.kept :])
    prompt = ModelText(text=instruction, synthetic=True)
    if task.messages:
        head, marks = task.messages, task.marks
        if head[0].role != "user":
            # Providers want a user message first (Bedrock and Anthropic refuse otherwise);
            # a view may open with the model's message. The message marks move one on.
            head = (_user(ModelText(text=HEAD_OPENING, synthetic=True)), *head)
            marks = tuple(
                msgspec.structs.replace(m, index=m.index + 1) if m.target == "message" else m
                for m in marks
            )
        rest = f"{REST_OPENING}\n<conversation>\n{task.rest}\n</conversation>"
        messages = (
            *head,
            _user(ModelText(text=rest, synthetic=True), prompt) if task.rest else _user(prompt),
        )
    else:
        transcript = ModelText(text=task.transcript, synthetic=True)
        messages = (_user(transcript, prompt) if task.transcript else _user(prompt),)
        marks = tuple(m for m in task.marks if m.target != "message")
    return Request(
        model=chosen,
        session_id=task.session_id,
        system=task.system,
        tools=task.tools,
        messages=messages,
        marks=marks,
        max_output_tokens=min(task.max_output_tokens or max_output_tokens, max_output_tokens),
        tool_choice=None if task.tool_choice == "required" else task.tool_choice,
    )


def _kept_note(kept: Sequence[ModelMessage]) -> str:
    """``KEPT_NOTE`` for the ``kept`` messages that end a summary request: how many, and
    how the first opens (its text, cut to ``OPENING_CHARS`` characters, or its tool)."""
    first = kept[0]
    role = {"user": "user's", "assistant": "assistant's", "tool": "tool result"}[first.role]
    opening = "(no text)"
    for part in first.content:
        if isinstance(part, ModelText) and part.text.strip():
            text = " ".join(part.text.split())
            cut = text if len(text) <= OPENING_CHARS else text[:OPENING_CHARS] + "…"
            opening = json.dumps(cut, ensure_ascii=False)
            break
        if isinstance(part, ModelToolCall):
            opening = f"a call of the `{part.tool}` tool"
            break
        if isinstance(part, ModelToolResult):
            opening = f"the result of the `{part.tool}` tool"
            break
    return KEPT_NOTE.format(count=len(kept), role=role, opening=opening)


def _user(*content: ModelText) -> ModelMessage:
    return ModelMessage(role="user", content=content, source_id=PROMPT_SOURCE, synthetic=True)


# --- answers ----------------------------------------------------------------------------------

#: An answer's text, its reasoning, and whether it calls a tool.
_Texts = tuple[list[str], list[str], bool]


def response_text(wire: str, body: Mapping[str, Any]) -> str:
    """The text of a (non-streamed) answer of wire format ``wire``; the reasoning text when
    the answer has only reasoning; ``""`` when it has neither, or no text and a tool call
    (a step of the task, not a summary). Raises ``ValueError`` for a wire format it cannot
    read."""
    reader = _READERS.get(wire)
    if reader is None:
        raise ValueError(f"no summary reader for wire format {wire!r}")
    text, reasoning, calls = reader(body)
    answer = "\n".join(text).strip()
    return answer or ("" if calls else "\n".join(reasoning).strip())


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else []


def _anthropic(body: Mapping[str, Any]) -> _Texts:
    blocks = _dicts(body.get("content"))
    text = [t for b in blocks if b.get("type") == "text" for t in _str(b.get("text"))]
    thinking = [t for b in blocks if b.get("type") == "thinking" for t in _str(b.get("thinking"))]
    return text, thinking, any(b.get("type") == "tool_use" for b in blocks)


def _chat(body: Mapping[str, Any]) -> _Texts:
    choices = _dicts(body.get("choices"))
    message = _dict(choices[0].get("message")) if choices else {}
    content = message.get("content")
    text = _str(content) or [t for p in _dicts(content) for t in _str(p.get("text"))]
    reasoning = _str(message.get("reasoning_content")) or _str(message.get("reasoning"))
    return text, reasoning, bool(_dicts(message.get("tool_calls")))


def _responses(body: Mapping[str, Any]) -> _Texts:
    items = _dicts(body.get("output"))
    text = [
        t
        for item in items
        if item.get("type") == "message"
        for part in _dicts(item.get("content"))
        if part.get("type") == "output_text"
        for t in _str(part.get("text"))
    ]
    reasoning = [
        t
        for item in items
        if item.get("type") == "reasoning"
        for part in (*_dicts(item.get("summary")), *_dicts(item.get("content")))
        for t in _str(part.get("text"))
    ]
    return text, reasoning, any(item.get("type") == "function_call" for item in items)


def _bedrock(body: Mapping[str, Any]) -> _Texts:
    blocks = _dicts(_dict(_dict(body.get("output")).get("message")).get("content"))
    text = [t for b in blocks for t in _str(b.get("text"))]
    reasoning = [
        t
        for b in blocks
        for t in _str(_dict(_dict(b.get("reasoningContent")).get("reasoningText")).get("text"))
    ]
    return text, reasoning, any("toolUse" in b for b in blocks)


def _gemini(body: Mapping[str, Any]) -> _Texts:
    candidates = _dicts(body.get("candidates"))
    parts = _dicts(_dict(candidates[0].get("content")).get("parts")) if candidates else []
    text = [t for p in parts if not p.get("thought") for t in _str(p.get("text"))]
    thoughts = [t for p in parts if p.get("thought") for t in _str(p.get("text"))]
    return text, thoughts, any("functionCall" in p for p in parts)


#: How to read an answer's text, by wire-format name.
_READERS: Final[Mapping[str, Callable[[Mapping[str, Any]], _Texts]]] = {
    "anthropic": _anthropic,
    "openai-chat": _chat,
    "openrouter": _chat,
    "openai-compatible": _chat,
    "openai-responses": _responses,
    "bedrock": _bedrock,
    "gemini": _gemini,
}
