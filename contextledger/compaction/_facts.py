"""What a compaction summary must keep, read from a session's messages, and the exact strings
a summary is judged by.

``extract_facts`` walks the messages once, oldest first, and returns ``SessionFacts``: the
first and latest user requests, the files read (line ranges merged) and changed, the commands
run with their outcome, the error lines of the last failures, the last stated plan, and the
paths, identifiers and values (``VALUE``: the numbers and versions the user or the agent wrote)
the session uses most. ``walk_facts`` is the same walk in small steps
(a generator a caller can pause between steps). ``exact_strings`` is the extractor the
fact-retention benchmark measures a summary with. All are pure and deterministic.

Tools are recognised by name, case-insensitively and ignoring ``_`` and ``-``, so Claude
Code's ``Read``/``Edit``/``MultiEdit``/``Write``/``Bash``/``TodoWrite`` and opencode's
``read``/``edit``/``write``/``bash``/``todowrite`` (and SWE-agent's ``str_replace_editor``)
all count. Inputs name the file as ``file_path``, ``filePath``, ``path`` or
``notebook_path``.

Command outcome (``CommandRun``):

- a call without a result (pending, running) or an interrupted one is ``interrupted``;
- the exit code is the tool's own metadata (``exit``, ``exit_code``, ``exitCode``,
  ``returncode``) when it is an integer, else the last exit status reported on the first line
  or the last three lines of the result: ``Exit code N``, ``exit code: N``,
  ``exit status N``, ``exited with code N``, ``return code N``;
- an errored call is ``failed``; a completed one is ``ok`` unless its exit code is non-zero.

Error lines are lines of a command's result, or of any tool's error, that match
``ERROR_LINE`` once stripped of indentation and a leading ``-``/``*``/``+`` list marker:
exception lines (``ValueError: bad``, ``json.JSONDecodeError: ...``, ``AssertionError``),
pytest's ``E   `` detail lines and ``FAILED``/``ERROR`` lines, ``error:``/``Error:`` lines
(``src/a.c:3:5: error: ...``, ``error[E0308]: ...``, ``! LaTeX Error: ...``), linter
diagnostics (``src/a.py:2:5: F821 ...``), Rust and Go panics; not a line that only reports
the exit status. They are kept verbatim (only lines over ``ERROR_LINE_CHARS`` are cut, at a
space), from the last ``MAX_FAILURES`` results that had any; a command that later succeeds
without error lines clears its earlier failures (the error was fixed).
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, Literal, TypeVar, cast

import msgspec

from contextledger.events._parts import (
    ReasoningPart,
    TextPart,
    ToolCompleted,
    ToolErrored,
    ToolPart,
)
from contextledger.history._projection import Message

T = TypeVar("T")

# --- limits -----------------------------------------------------------------------------------

#: A request is kept whole up to about a page; a longer one keeps its first whole lines.
REQUEST_CHARS: Final = 1_500
#: The error lines of the last 3 failures: enough to see whether a fix changed the failure.
MAX_FAILURES: Final = 3
#: At most 12 error lines in all, and 8 from one failure: a compiler's first errors matter
#: most, the cascade after them adds little.
MAX_ERROR_LINES: Final = 12
MAX_LINES_PER_FAILURE: Final = 8
#: A verbatim line longer than this is cut at a space (minified output, not an error message).
ERROR_LINE_CHARS: Final = 400
#: The identifiers and paths kept fill at most 7,000 characters (under 2,000 tokens). On the
#: Claude Code traces this keeps over 90% of a head's strings that the session writes again
#: after the compaction (6,000 keep about 90%, 8,000 about 95%), and the whole summary stays
#: near the 9,000 to 13,000 characters of Claude Code's own continuation summaries.
IDENTIFIER_CHARS: Final = 7_000
#: A "name" longer than this is data a tool printed (a base64 blob, a minified line), not a
#: path or identifier worth keeping: one would take most of the budget above, and a long run
#: of one character makes the summary look degenerate (``rollback_reason``) and roll back.
NAME_CHARS: Final = 256
#: A value the user or the agent wrote (texts, tool inputs): a number of three digits or more
#: or a dotted version (``20000``, ``8080``, ``1.21.4``), not part of a word, a path or a
#: longer number or version (``1.2.3-rc1`` and ``18.3.0-rc.1`` give none). A value is a fact
#: the session may need again as much as a name is (a limit, a port, an issue number); those
#: only a tool printed (line numbers, sizes, timestamps) are too many to rank, so they are
#: left out. On the tuning traces, the values were about 40 % of the
#: facts an agent used again after a compaction and its summary did not hold.
VALUE: Final = re.compile(r"(?<![\w./,-])(?:\d+(?:\.\d+)+|\d{3,})(?![\w/-]|\.\w)")
#: A name written by the user or the agent (texts, tool inputs) counts twice as much as one
#: a tool printed: the session chose to use it.
WRITTEN_WEIGHT: Final = 2
PRINTED_WEIGHT: Final = 1
#: Statements of decisions and user constraints kept, newest first, each cut to 300 chars.
MAX_STATEMENTS: Final = 6
STATEMENT_CHARS: Final = 300
#: The latest assistant text, as the last step taken.
LAST_STEP_CHARS: Final = 600
#: ``walk_facts`` scans texts for names and error lines in pieces of whole lines, pausing
#: whenever about this many characters have been scanned since the last pause: 1 KB of tool
#: output takes about a quarter of a millisecond, so a pause comes well within the
#: summarizer's slice (``SLICE_SECONDS``), while a 50 KB output scanned at once holds its
#: caller for tens of milliseconds.
SCAN_CHARS: Final = 1_024
#: ``walk_facts`` pauses after weighing this many names for the ranking: a long head uses a
#: few thousand, weighed at about half a microsecond each.
RANK_NAMES: Final = 512

# --- facts ------------------------------------------------------------------------------------

CommandOutcome = Literal["ok", "failed", "interrupted"]
ChangeAction = Literal["created", "written", "edited", "deleted"]


class LineRange(msgspec.Struct, frozen=True):
    """Lines ``start`` to ``end`` (1-based, inclusive); ``end`` None reads to the end."""

    start: int
    end: int | None = None


class FileRead(msgspec.Struct, frozen=True):
    """A file read, with the line ranges read, merged and sorted; ``()`` is the whole file."""

    path: str
    ranges: tuple[LineRange, ...] = ()


class FileChange(msgspec.Struct, frozen=True):
    """A file changed. ``created`` sticks once seen; otherwise the latest action counts."""

    path: str
    action: ChangeAction


class CommandRun(msgspec.Struct, frozen=True):
    """The latest run of one command, with its exit code when one was reported."""

    command: str
    outcome: CommandOutcome
    exit_code: int | None = None


class PlanStep(msgspec.Struct, frozen=True):
    """A step of the last stated plan; ``status`` is the todo's (``pending``,
    ``in_progress``, ``completed``), None for a step of a plan written as text."""

    text: str
    status: str | None = None


class SessionFacts(msgspec.Struct, frozen=True, kw_only=True):
    """The facts of a run of messages. Files and commands are in the order of their latest
    use, oldest first; ``errors`` has the newest failure's lines first (each failure's lines
    in their order); ``identifiers`` the paths, names and values (``VALUE``) the messages use
    most (files read or changed left out)."""

    first_request: str | None = None
    latest_request: str | None = None
    constraints: tuple[str, ...] = ()
    files_read: tuple[FileRead, ...] = ()
    files_changed: tuple[FileChange, ...] = ()
    commands: tuple[CommandRun, ...] = ()
    errors: tuple[str, ...] = ()
    plan: tuple[PlanStep, ...] = ()
    decisions: tuple[str, ...] = ()
    last_step: str | None = None
    identifiers: tuple[str, ...] = ()


# --- patterns ---------------------------------------------------------------------------------

ERROR_LINE: Final = re.compile(
    r"""
    ^E\s{2,}\S                             # pytest detail: "E   assert 1 == 2"
    | ^(?:FAILED|ERROR)\b | \sFAILED\b     # pytest summary, "test_x ... FAILED"
    | (?:^|:\d+:\ )(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)(?::|$)
                                           # "KeyError: 'x'", "a.py:4: AssertionError"
    | \b(?:error|Error|ERROR)(?:\[\w+\])?:  # "a.c:3:5: error:", "Error:", "error[E1]:"
    | ^\S+:\d+:\d+:\ [A-Z]{1,4}\d{2,4}\b    # linters: "a.py:2:5: F821 ..."
    | \bpanicked\ at\b | ^panic:            # Rust, Go
    """,
    re.VERBOSE,
)
#: A line that only reports the exit status (Claude Code's ``Error: Exit code 1``): the
#: command's outcome says that already.
_STATUS_ONLY: Final = re.compile(r"(?i)^(?:error: )?exit (?:code|status) -?\d+$")
_EXIT_STATUS: Final = re.compile(
    r"(?i)\b(?:exit(?:ed)?(?: with)? (?:code|status)|return ?code)\b[:=]?\s*(-?\d+)"
)
_EXIT_KEYS: Final = ("exit", "exit_code", "exitCode", "returncode")
_LIST_MARKER: Final = re.compile(r"^[-*+]\s+")
#: Client notices recorded as user text: slash-command echoes, interruptions, Claude Code's
#: own continuation summaries. None of them is a request.
_NOTICE: Final = re.compile(
    r"^\s*(?:<command-|<local-command-|\[Request interrupted"
    r"|This session is being continued from a previous conversation)"
)
_CONSTRAINT: Final = re.compile(
    r"(?i)\b(?:don't|do not|never|always|must|make sure|avoid|prefer|should not|shouldn't)\b"
)
_DECISION: Final = re.compile(
    r"(?i)\b(?:because|instead|decided|chose|root cause|turns out|found that|the fix"
    r"|the (?:issue|problem|bug) (?:is|was))\b"
)
_LIST_ITEM: Final = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+(\S.*)$")
_PLAN_CUE: Final = re.compile(
    r"(?i)\b(?:next|plan|steps?|todo|remaining|will|going to|need to|should|let me|let's|I'll)"
)

#: File extensions that make a bare name (``setup.py``) a file rather than a dotted name.
_EXTENSIONS: Final = (
    "py pyi pyx c h cc cpp cxx hpp hh cu cuh rs go java kt kts scala swift m mm cs fs rb php "
    "pl lua r jl zig nim dart ex exs erl hs ml clj js mjs cjs jsx ts tsx vue svelte css scss "
    "html htm xml json jsonl yaml yml toml ini cfg conf env lock sql sh bash zsh fish ps1 bat "
    "md rst txt tex bib csv tsv log ipynb proto graphql cmake mk gradle dockerfile pdf png "
    "jpg jpeg gif svg"
)
FILE_EXTENSIONS: Final = frozenset(_EXTENSIONS.split())
_URL: Final = re.compile(r"\bhttps?://[^\s<>\"'`()\[\]{}]+")
_PATH: Final = re.compile(
    r"(?<![\w/.~:@+<-])"
    r"(?:(?:~|\.\.?)?(?:/[\w.@+-]+)+|[\w@+-][\w.@+-]*(?:/[\w.@+-]+)+)/?"
)
_WORD: Final = re.compile(r"(?<![\w./@+-])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*(?![\w/@+-]|\.\w)")
_SPAN_COMMAND: Final = re.compile(r"(?<!`)(`+)(?!`) ?\$ (.+?) ?\1(?!`)")
_LINE_COMMAND: Final = re.compile(r"^[ \t]*(?:[-*+>][ \t]+)?\$ (.+)$", re.MULTILINE)
_TRAILING: Final = ".,;:!?'\")]}/"

# --- exact strings ----------------------------------------------------------------------------


def exact_strings(text: str) -> set[str]:
    """The strings of ``text`` a summary must reproduce exactly to keep a fact.

    - paths: URLs; rooted paths (``/a``, ``./a``, ``../a``, ``~/a``); relative paths with two
      slashes or more or with a file extension (``src/app.py``; ``and/or`` is not one); bare
      file names with a known extension (``setup.py``). Trailing punctuation is dropped.
    - identifiers: whole words, not inside a path, that are ``snake_case`` (an underscore and
      at least four characters), ``camelCase``/``CamelCase`` (an upper-case letter after the
      first character and a lower-case one somewhere) or ``dotted.names`` (at least four
      characters, each part a name);
    - commands: the text of an inline code span opening with ``$ `` (`` `$ pytest -q` ``),
      and the rest of a line that opens with ``$ `` (after indentation and a list marker);
    - error lines: lines matching ``ERROR_LINE``, stripped of indentation and of a leading
      list marker.
    """
    return {*path_strings(text), *identifier_strings(text), *commands(text), *error_lines(text)}


def path_strings(text: str) -> list[str]:
    """The URLs, paths and file names of ``text``, in order (see ``exact_strings``)."""
    found: list[tuple[int, str]] = []
    urls = [(m.start(), m.end(), m.group().rstrip(_TRAILING)) for m in _URL.finditer(text)]
    found.extend((start, url) for start, _, url in urls)

    def in_url(position: int) -> bool:
        return any(start <= position < end for start, end, _ in urls)

    for match in _PATH.finditer(text):
        path = match.group().rstrip(_TRAILING)
        if not in_url(match.start()) and _is_path(path):
            found.append((match.start(), path))
    for match in _WORD.finditer(text):
        if _extension(match.group()) in FILE_EXTENSIONS:
            found.append((match.start(), match.group()))
    return [path for _, path in sorted(found)]


def identifier_strings(text: str) -> list[str]:
    """The ``snake_case``, ``CamelCase`` and ``dotted.names`` of ``text``, in order."""
    return [m.group() for m in _WORD.finditer(text) if _is_identifier(m.group())]


def commands(text: str) -> list[str]:
    """The commands of ``text``: code spans and lines opening with ``$ ``, in order."""
    spans = [(m.start(), m.group(2).strip()) for m in _SPAN_COMMAND.finditer(text)]
    lines = [(m.start(1), m.group(1).strip()) for m in _LINE_COMMAND.finditer(text)]
    return [command for _, command in sorted(spans + lines) if command]


def error_lines(text: str) -> list[str]:
    """The lines of ``text`` that look like errors, stripped of indentation and of a leading
    list marker, in order."""
    stripped = (_LIST_MARKER.sub("", line.strip()) for line in text.splitlines())
    return [line for line in stripped if ERROR_LINE.search(line) and not _STATUS_ONLY.match(line)]


def _is_path(path: str) -> bool:
    if path.startswith(("/", "./", "../", "~/")):
        return any(c.isalnum() for c in path)
    return path.count("/") >= 2 or bool(_extension(path.rsplit("/", 1)[-1]))


def _extension(name: str) -> str:
    stem, dot, extension = name.rpartition(".")
    return extension.lower() if dot and stem and extension.isalnum() else ""


def _is_identifier(word: str) -> bool:
    if "." in word:
        return len(word) >= 4 and _extension(word) not in FILE_EXTENSIONS
    if "_" in word:
        return len(word) >= 4 and any(c.isalpha() for c in word)
    return any(c.isupper() for c in word[1:]) and any(c.islower() for c in word)


# --- extraction -------------------------------------------------------------------------------


class _Walk:
    """Facts gathered while walking the messages, oldest first."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.constraints: list[str] = []
        self.reads: dict[str, list[LineRange] | None] = {}
        self.changes: dict[str, ChangeAction] = {}
        self.commands: dict[str, CommandRun] = {}
        self.failures: list[tuple[str, list[str]]] = []
        self.plan: tuple[PlanStep, ...] = ()
        self.decisions: list[str] = []
        self.last_text: str | None = None
        self.scans = _Scans()
        self.uses = _Uses(self.scans)

    def message(self, message: Message) -> None:
        if message.excluded or message.summary:
            return
        if message.role == "user":
            self.user(message)
        else:
            self.assistant(message)

    def user(self, message: Message) -> None:
        if message.synthetic:
            return
        for part in message.parts:
            if isinstance(part, TextPart) and _sent(part) and not _NOTICE.match(part.text):
                self.requests.append(part.text.strip())
                self.constraints.extend(_statements(part.text, _CONSTRAINT))
                self.uses.add(part.text, WRITTEN_WEIGHT, values=True)

    def assistant(self, message: Message) -> None:
        for part in message.parts:
            if isinstance(part, TextPart) and _sent(part) and part.text.strip():
                self.text(part.text)
            elif isinstance(part, ToolPart):
                self.tool(part)
            elif isinstance(part, ReasoningPart):
                self.decisions.extend(_statements(part.text, _DECISION))

    def text(self, text: str) -> None:
        self.last_text = text
        self.uses.add(text, WRITTEN_WEIGHT, values=True)
        self.decisions.extend(_statements(text, _DECISION))
        steps = text_plan(text)
        if steps:
            self.plan = steps

    def tool(self, part: ToolPart) -> None:
        kind = TOOL_KINDS.get(_tool_key(part.tool))
        tool_input = part.state.input
        state = part.state
        if kind != "todo":
            self.uses.add("\n".join(strings_in(tool_input)), WRITTEN_WEIGHT, values=True)
        if isinstance(state, ToolCompleted | ToolErrored):
            self.uses.add(_result(state), PRINTED_WEIGHT)
        if kind == "command":
            self.command(part)
        elif kind == "todo":
            self.plan = todo_plan(tool_input) or self.plan
        elif kind is not None and isinstance(state, ToolCompleted):
            self.file(kind, tool_input)
        if isinstance(state, ToolErrored) and kind != "command":
            self.errors(part.tool, state.error)

    def file(self, kind: ToolKind, tool_input: Mapping[str, Any]) -> None:
        for path, action in file_actions(kind, tool_input):
            if action == "read":
                self.read(path, read_range(tool_input))
            elif self.changes.get(path) != "created":
                self.changes.pop(path, None)
                self.changes[path] = action

    def read(self, path: str, lines: LineRange | None) -> None:
        ranges = self.reads.pop(path, [])
        self.reads[path] = None if lines is None or ranges is None else [*ranges, lines]

    def command(self, part: ToolPart) -> None:
        command = _first_string(part.state.input, ("command", "cmd"))
        if command is None:
            return
        run = command_run(command, part)
        self.commands.pop(command, None)
        self.commands[command] = run
        if isinstance(part.state, ToolCompleted | ToolErrored):
            self.errors(command, _result(part.state), fixed=run.outcome == "ok")

    def errors(self, source: str, text: str, *, fixed: bool = False) -> None:
        """Note the error lines of a result of ``source`` (a command, a tool). A clean
        result that is ``fixed`` clears the earlier failures of the same source."""
        found = self.scans.error_lines(text)
        lines = list(dict.fromkeys(cut_words(line, ERROR_LINE_CHARS) for line in found))
        if lines:
            self.failures.append((source, lines[:MAX_LINES_PER_FAILURE]))
        elif fixed:
            self.failures = [f for f in self.failures if f[0] != source]

    def ranked_names(self, pause_every: int) -> Generator[None, None, tuple[str, ...]]:
        """The paths and identifiers worth keeping (``_Uses.ranked``), files read or changed
        left out: they have their own facts."""
        return self.uses.ranked({*self.reads, *self.changes}, IDENTIFIER_CHARS, pause_every)

    def facts(self, identifiers: tuple[str, ...]) -> SessionFacts:
        return SessionFacts(
            first_request=_clip(self.requests[0], REQUEST_CHARS) if self.requests else None,
            latest_request=_clip(self.requests[-1], REQUEST_CHARS) if self.requests else None,
            constraints=_newest_unique(self.constraints, MAX_STATEMENTS),
            files_read=tuple(
                FileRead(path, () if ranges is None else merge_ranges(ranges))
                for path, ranges in self.reads.items()
            ),
            files_changed=tuple(FileChange(p, a) for p, a in self.changes.items()),
            commands=tuple(self.commands.values()),
            errors=_error_lines(self.failures),
            plan=self.plan,
            decisions=_newest_unique(self.decisions, MAX_STATEMENTS),
            last_step=_clip(self.last_text, LAST_STEP_CHARS) if self.last_text else None,
            identifiers=identifiers,
        )


class _Scans:
    """The names and error lines of texts, scanned ahead in pieces (``ahead``) or when asked.
    A scan made ahead is handed out once."""

    def __init__(self) -> None:
        self._names: dict[str, set[str]] = {}
        self._errors: dict[str, list[str]] = {}
        self._unpaused = 0

    def ahead(self, text: str, piece_chars: int) -> Iterator[None]:
        """Scan ``text`` in pieces of whole lines of about ``piece_chars``, yielding whenever
        about ``piece_chars`` characters (of this text and those scanned before it) have been
        scanned since the last yield. A name or an error line never spans a line break, so
        the pieces give what the whole text gives."""
        names: set[str] = set()
        errors: list[str] = []
        for piece in _pieces(text, piece_chars):
            names.update(path_strings(piece), identifier_strings(piece))
            errors.extend(error_lines(piece))
            self._unpaused += len(piece)
            if self._unpaused >= piece_chars:
                self._unpaused = 0
                yield
        self._names[text] = names
        self._errors[text] = errors

    def names(self, text: str) -> set[str]:
        """The paths and identifiers of ``text``."""
        names = self._names.pop(text, None)
        return {*path_strings(text), *identifier_strings(text)} if names is None else names

    def error_lines(self, text: str) -> list[str]:
        """The error lines of ``text`` (``error_lines``)."""
        errors = self._errors.pop(text, None)
        return error_lines(text) if errors is None else errors


def _pieces(text: str, piece_chars: int) -> Iterator[str]:
    """``text`` cut after line ends into pieces of at least ``piece_chars`` characters (the
    last one shorter), or of one longer line."""
    piece: list[str] = []
    size = 0
    for line in text.splitlines(keepends=True):
        piece.append(line)
        size += len(line)
        if size >= piece_chars:
            yield "".join(piece)
            piece, size = [], 0
    if piece:
        yield "".join(piece)


class _Uses:
    """How much each path, identifier and value is used: the weights of the texts it occurs
    in (once per text), and the last text it occurs in."""

    def __init__(self, scans: _Scans) -> None:
        self.scans = scans
        self.weights: dict[str, int] = {}
        self.last: dict[str, int] = {}
        self.texts = 0

    def add(self, text: str, weight: int, *, values: bool = False) -> None:
        """Count the names of ``text`` at ``weight``; with ``values``, its values too."""
        self.texts += 1
        names = self.scans.names(text)
        if values:
            names = names | {m.group() for m in VALUE.finditer(text)}
        for name in names:
            if len(name) > NAME_CHARS:
                continue
            self.weights[name] = self.weights.get(name, 0) + weight
            self.last[name] = self.texts

    def ranked(
        self, known: set[str], budget: int, pause_every: int
    ) -> Generator[None, None, tuple[str, ...]]:
        """The names not in ``known`` within ``budget`` characters, chosen like a knapsack:
        the most use per character first (the latest first among equals), so a long path
        must be used more than a short name to be kept. A generator that yields after
        weighing every ``pause_every`` names and returns them."""
        order: list[tuple[float, int, str]] = []
        for name, weight in self.weights.items():
            order.append((-weight / _cost(name), -self.last[name], name))
            if len(order) % pause_every == 0:
                yield
        order.sort()
        return within_budget((name for _, _, name in order if name not in known), budget)


def within_budget(names: Iterable[str], budget: int) -> tuple[str, ...]:
    """``names`` in order, each kept if it still fits ``budget`` characters (a name costs its
    length and 4: the backticks around it and the comma after)."""
    kept: list[str] = []
    for name in names:
        cost = _cost(name)
        if cost <= budget:
            kept.append(name)
            budget -= cost
    return tuple(kept)


def extract_facts(messages: Sequence[Message]) -> SessionFacts:
    """The facts of ``messages`` (history messages, oldest first). Excluded messages,
    summaries and synthetic user messages are skipped; pure and deterministic."""
    walk = _Walk()
    for message in messages:
        walk.message(message)
    return walk.facts(run_steps(walk.ranked_names(RANK_NAMES)))


def walk_facts(
    messages: Sequence[Message], *, piece_chars: int = SCAN_CHARS
) -> Generator[None, None, SessionFacts]:
    """``extract_facts`` in steps: a generator that yields after each message, whenever it
    has scanned about ``piece_chars`` characters of the texts it reads for names and error
    lines, and after every ``RANK_NAMES`` names it weighs for the ranking; it returns the
    same ``SessionFacts``. A caller
    that must not be held long (an event loop) pauses between steps."""
    walk = _Walk()
    for message in messages:
        if not (message.excluded or message.summary):
            for text in _scanned_texts(message):
                yield from walk.scans.ahead(text, piece_chars)
        walk.message(message)
        yield
    return walk.facts((yield from walk.ranked_names(RANK_NAMES)))


def run_steps(steps: Generator[None, None, T]) -> T:
    """What a generator of steps (such as ``walk_facts``) returns, run without pausing."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return cast(T, done.value)


def _scanned_texts(message: Message) -> Iterator[str]:
    """The texts of ``message`` the walk may scan for names and error lines: texts, tool
    inputs (their strings joined, as ``_Walk.tool`` joins them) and tool results."""
    for part in message.parts:
        if isinstance(part, TextPart):
            yield part.text
        elif isinstance(part, ToolPart):
            yield "\n".join(strings_in(part.state.input))
            if isinstance(part.state, ToolCompleted | ToolErrored):
                yield _result(part.state)


# --- tools ------------------------------------------------------------------------------------

ToolKind = Literal["read", "edit", "write", "patch", "editor", "command", "todo"]

#: Tool names (lower-case, without ``_`` and ``-``) by what they do.
TOOL_KINDS: Final[Mapping[str, ToolKind]] = {
    "read": "read",
    "readfile": "read",
    "viewfile": "read",
    "edit": "edit",
    "multiedit": "edit",
    "editfile": "edit",
    "notebookedit": "edit",
    "write": "write",
    "writefile": "write",
    "createfile": "write",
    "applypatch": "patch",
    "patch": "patch",
    "strreplaceeditor": "editor",
    "strreplacebasededittool": "editor",
    "bash": "command",
    "shell": "command",
    "localshell": "command",
    "exec": "command",
    "execcommand": "command",
    "executecommand": "command",
    "runcommand": "command",
    "runterminalcmd": "command",
    "terminal": "command",
    "todowrite": "todo",
}
_PATH_KEYS: Final = ("file_path", "filePath", "path", "notebook_path", "file")
_PATCH_KEYS: Final = ("patchText", "patch", "input")
_PATCH_FILE: Final = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+)$", re.MULTILINE)
_PATCH_ACTIONS: Final[Mapping[str, ChangeAction]] = {
    "Add": "created",
    "Update": "edited",
    "Delete": "deleted",
}
#: ``str_replace_editor`` sub-commands.
_EDITOR_ACTIONS: Final[Mapping[str, ChangeAction | Literal["read"]]] = {
    "view": "read",
    "create": "created",
    "str_replace": "edited",
    "insert": "edited",
    "undo_edit": "edited",
}
_SIMPLE_ACTIONS: Final[Mapping[ToolKind, ChangeAction | Literal["read"]]] = {
    "read": "read",
    "edit": "edited",
    "write": "written",
}


def file_actions(
    kind: ToolKind, tool_input: Mapping[str, Any]
) -> list[tuple[str, ChangeAction | Literal["read"]]]:
    """The files a completed call of a ``kind`` tool read or changed, with what it did."""
    if kind == "patch":
        patch = _first_string(tool_input, _PATCH_KEYS) or ""
        return [(m[2].strip(), _PATCH_ACTIONS[m[1]]) for m in _PATCH_FILE.finditer(patch)]
    path = _first_string(tool_input, _PATH_KEYS)
    if path is None:
        return []
    if kind == "editor":
        action = _EDITOR_ACTIONS.get(str(tool_input.get("command", "")))
    else:
        action = _SIMPLE_ACTIONS.get(kind)
    return [] if action is None else [(path, action)]


def read_range(tool_input: Mapping[str, Any]) -> LineRange | None:
    """The lines a read asked for, None for the whole file. ``offset`` is the first line
    (1-based, as Claude Code's and opencode's ``Read`` count it), ``limit`` the number of
    lines; ``view_range`` ``[start, end]`` (``-1``: to the end) is SWE-agent's."""
    view = tool_input.get("view_range")
    if isinstance(view, list) and len(view) == 2 and all(isinstance(v, int) for v in view):
        return LineRange(max(view[0], 1), view[1] if view[1] > 0 else None)
    offset, limit = tool_input.get("offset"), tool_input.get("limit")
    if not isinstance(offset, int) and not isinstance(limit, int):
        return None
    start = max(offset, 1) if isinstance(offset, int) else 1
    end = start + limit - 1 if isinstance(limit, int) and limit > 0 else None
    return None if start == 1 and end is None else LineRange(start, end)


def merge_ranges(ranges: Iterable[LineRange]) -> tuple[LineRange, ...]:
    """``ranges`` sorted, with overlapping and adjacent ones joined."""
    merged: list[LineRange] = []
    for r in sorted(ranges, key=lambda r: r.start):
        last = merged[-1] if merged else None
        if last is not None and (last.end is None or r.start <= last.end + 1):
            end = None if last.end is None or r.end is None else max(last.end, r.end)
            merged[-1] = LineRange(last.start, end)
        else:
            merged.append(r)
    return tuple(merged)


def command_run(command: str, part: ToolPart) -> CommandRun:
    """The outcome of one call of a command tool (rules in the module docstring)."""
    state = part.state
    if isinstance(state, ToolCompleted):
        code = exit_code(state.metadata, state.output)
        return CommandRun(command, "ok" if code in (None, 0) else "failed", code)
    if isinstance(state, ToolErrored):
        outcome: CommandOutcome = "interrupted" if state.interrupted else "failed"
        return CommandRun(command, outcome, exit_code(state.metadata, state.error))
    return CommandRun(command, "interrupted")


def exit_code(metadata: Mapping[str, Any], text: str) -> int | None:
    """The exit code in a command result's metadata, else the last one reported on the
    first line or the last three lines of ``text``; None when neither says."""
    for key in _EXIT_KEYS:
        value = metadata.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    lines = text.strip().splitlines()
    codes = [m[1] for line in (*lines[:1], *lines[1:][-3:]) for m in _EXIT_STATUS.finditer(line)]
    return int(codes[-1]) if codes else None


def todo_plan(tool_input: Mapping[str, Any]) -> tuple[PlanStep, ...]:
    """The steps of a ``TodoWrite`` call: its todos with their status."""
    todos = tool_input.get("todos")
    if not isinstance(todos, list):
        return ()
    return tuple(
        PlanStep(str(todo["content"]).strip(), str(todo.get("status") or "pending"))
        for todo in todos
        if isinstance(todo, dict) and str(todo.get("content") or "").strip()
    )


def text_plan(text: str) -> tuple[PlanStep, ...]:
    """The last list of two items or more in ``text`` that a line announcing a plan (next,
    plan, steps, will, need to, ...) introduces; ``()`` when there is none."""
    plan: tuple[PlanStep, ...] = ()
    cue = False
    items: list[str] = []
    for line in text.splitlines():
        item = _LIST_ITEM.match(line)
        if item:
            items.append(item[1].strip())
        elif line.strip():
            plan = _announced(cue, items) or plan
            items = []
            cue = bool(_PLAN_CUE.search(line))
    return _announced(cue, items) or plan


def _announced(cue: bool, items: Sequence[str]) -> tuple[PlanStep, ...]:
    return tuple(PlanStep(step) for step in items) if cue and len(items) >= 2 else ()


# --- helpers ----------------------------------------------------------------------------------


def _tool_key(name: str) -> str:
    return name.lower().replace("_", "").replace("-", "")


def _sent(part: TextPart) -> bool:
    return not part.ignored and not part.synthetic


def _first_string(mapping: Mapping[str, Any], keys: Iterable[str]) -> str | None:
    for key in keys:
        value = mapping.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def strings_in(value: Any) -> Iterator[str]:
    """Every string inside a JSON value (not its keys), depth first."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)


def _cost(name: str) -> int:
    return len(name) + 4


def _result(state: ToolCompleted | ToolErrored) -> str:
    return state.output if isinstance(state, ToolCompleted) else state.error


def _statements(text: str, pattern: re.Pattern[str]) -> list[str]:
    lines = (line.strip() for line in text.splitlines())
    return [cut_words(line, STATEMENT_CHARS) for line in lines if pattern.search(line)]


def _newest_unique(items: Sequence[str], limit: int) -> tuple[str, ...]:
    return tuple(dict.fromkeys(reversed(items)))[:limit]


def _error_lines(failures: Sequence[tuple[str, Sequence[str]]]) -> tuple[str, ...]:
    recent = (line for _, lines in reversed(failures[-MAX_FAILURES:]) for line in lines)
    return tuple(dict.fromkeys(recent))[:MAX_ERROR_LINES]


def cut_words(line: str, limit: int) -> str:
    """``line`` if it fits ``limit`` characters, else its whole words within ``limit`` (its
    first ``limit`` characters when it has no space there) and `` …``."""
    if len(line) <= limit:
        return line
    return f"{line[:limit].rpartition(' ')[0] or line[:limit]} …"


def _clip(text: str, limit: int) -> str:
    """The non-blank lines of ``text`` while they fit ``limit`` characters (whole lines, so
    no identifier is cut), at least the first one (cut at a space when it alone is longer)."""
    lines = [line.rstrip() for line in text.strip().splitlines() if line.strip()]
    kept = [cut_words(lines[0], limit)] if lines else []
    size = len(kept[0]) if kept else 0
    for line in lines[1:]:
        size += len(line) + 1
        if size > limit:
            kept.append("…")
            break
        kept.append(line)
    return "\n".join(kept)
