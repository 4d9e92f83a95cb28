"""aider chat histories (``.aider.chat.history.md``) into events: one session per
``# aider chat started at <time>`` header.

The file is Markdown that aider appends to as it runs. Line kinds:

- ``#### <text>``: what the user typed; a run of such lines is one user message (the prefix
  and the two trailing spaces of a Markdown line break removed). A message that starts with
  an aider command (``/add``, ``/drop``, ``/run``, …) is kept with its text ``ignored`` (shown,
  never sent to the model), except the commands that ask the model (``/ask``, ``/code``,
  ``/architect``, ``/context``);
- plain lines: the model's reply, one assistant message per reply (blank lines inside kept);
- ``> <text>``: aider's console output. ``> Tokens: 2.1k sent, 89 received.`` closes the model
  call before it with its usage (rounded as aider prints it; ``cache write`` and ``cache hit``
  figures are split out of ``sent``); a model line (``> Main model:``, ``> Models:``,
  ``> Model:``) sets the model of the replies that follow. Every other run of console lines is
  left out (shown to the user, not sent to the model), listed with its first and last line.

Lines before the first header (a file that starts mid-session) make one more session when they
hold a message. A session without a message (a header followed by console output at most) is
no session: it is reported (``empty_session``, with its lines) with the next session that has
one, or the last. The header's time (local time, no zone: read as UTC) starts each session's
clock; messages follow one second apart. aider records no tool calls (its edits are text in the
replies), no system prompt, no repository map and none of the files it added to the chat.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from contextledger.events._catalogue import LeftOut
from contextledger.events._parts import ModelRef, Usage
from contextledger.importers._builder import ChatBuilder
from contextledger.importers._imported import ImportedSession

FORMAT: Final = "aider"
#: Starts each session (the only times in the file).
HEADER: Final = re.compile(r"^# aider chat started at (?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
#: aider's usage report after a model call.
TOKENS: Final = re.compile(
    r"^> Tokens: (?P<sent>[\d.,]+[kKmM]?) sent, "
    r"(?:(?P<write>[\d.,]+[kKmM]?) cache write, )?"
    r"(?:(?P<hit>[\d.,]+[kKmM]?) (?:cache hit|cached), )?"
    r"(?P<received>[\d.,]+[kKmM]?) received"
)
#: The model line aider prints at start and after ``/model``.
MODEL: Final = re.compile(r"^> (?:Main model|Models|Model): (?P<model>[\w.@:/+\-]+)")
#: aider's own version line.
VERSION: Final = re.compile(r"^> Aider (?P<version>v\S+)")
#: An editor mode line (``-*- mode: fundamental -*-``) some histories start with.
MODE_LINE: Final = re.compile(r"^-\*-.*-\*-\s*$")
#: The commands whose text goes to the model; every other ``/command`` is aider's own.
MODEL_COMMANDS: Final = frozenset({"/ask", "/code", "/architect", "/context"})
#: The Markdown line break aider appends to ``####`` and ``>`` lines.
LINE_BREAK: Final = "  "
_UNITS: Final = {"k": 1_000, "m": 1_000_000}

#: Why each kind of line is left out.
CONSOLE: Final = "aider's console output, shown to the user, not sent to the model"
MODE: Final = "an editor mode line"
NO_SESSION: Final = "text before the first session header that holds no message"
EMPTY_SESSION: Final = "a session header followed by no message (console output at most)"


def import_aider(path: str | Path, *, session_id: str | None = None) -> list[ImportedSession]:
    """Import every session of the aider history at ``path``, read a line at a time;
    ``session_id`` names the first session (the others get ids derived from their content)."""
    path = Path(path)
    with path.open(encoding="utf-8", errors="replace", newline="") as text:
        lines = (line.rstrip("\r\n") for line in text)
        return import_aider_lines(lines, source=str(path), session_id=session_id)


def import_aider_lines(
    lines: Iterable[str], *, source: str = "<lines>", session_id: str | None = None
) -> list[ImportedSession]:
    """Import a history given as its lines; pure, and reading them once: one session's lines
    are held at a time. See the module docstring for the rules."""
    sessions: list[ImportedSession] = []
    preamble: _Session | None = None
    empty: list[LeftOut] = []
    for chunk in _chunks(lines):
        if not chunk.has_messages():
            if chunk.headless:
                preamble = chunk
            else:
                last = chunk.start + len(chunk.lines) - 1
                reason = f"{EMPTY_SESSION} (to line {last})"
                empty.append(LeftOut(line=chunk.start, kind="empty_session", reason=reason))
            continue
        if preamble is not None:
            chunk.carry(preamble)
            preamble = None
        chunk.carried.extend((item.line, item.kind, item.reason) for item in empty)
        empty = []
        sessions.append(chunk.build(None if sessions else session_id))
    if sessions and empty:
        last_session = sessions[-1]
        last_session.left_out.extend(empty)
        last_session.skipped["empty_session"] = last_session.skipped.get("empty_session", 0) + len(
            empty
        )
    return sessions


def _chunks(lines: Iterable[str]) -> Iterator[_Session]:
    """The sessions of ``lines``, one at a time: the lines before the first header (headless),
    then one per header."""
    start, headless = 1, True
    chunk: list[str] = []
    for number, line in enumerate(lines, 1):
        if HEADER.match(line):
            yield _Session(start, chunk, headless=headless)
            start, chunk, headless = number, [line], False
        else:
            chunk.append(line)
    yield _Session(start, chunk, headless=headless)


def _tokens(value: str | None) -> int:
    """An aider count (``12,566``, ``1.8k``) as an int."""
    if not value:
        return 0
    value = value.replace(",", "")
    unit = _UNITS.get(value[-1].lower(), 1)
    number = value[:-1] if unit != 1 else value
    try:
        return round(float(number) * unit)
    except ValueError:
        return 0


def usage_of(line: str) -> Usage | None:
    """The usage a ``> Tokens:`` line reports: ``sent`` includes the cache writes and hits,
    which are split out."""
    match = TOKENS.match(line)
    if match is None:
        return None
    sent = _tokens(match["sent"])
    written, hit = _tokens(match["write"]), _tokens(match["hit"])
    return Usage(
        input=max(sent - written - hit, 0),
        output=_tokens(match["received"]),
        cache_read=hit,
        cache_write=written,
    )


def _model(name: str) -> ModelRef:
    provider, _, model = name.partition("/")
    if model:
        return ModelRef(provider_id=provider, model_id=model)
    return ModelRef(provider_id="", model_id=name)


def _kind(line: str) -> str:
    if line.startswith("#### ") or line.rstrip() == "####":
        return "user"
    if line.startswith("> ") or line.rstrip() == ">":
        return "console"
    return "blank" if not line.strip() else "text"


def _unbroken(line: str, prefix: str) -> str:
    text = line[len(prefix) :] if line.startswith(prefix) else line.lstrip("#> ")
    return text.removesuffix(LINE_BREAK)


class _Session:
    """One session's lines (``start`` is the file line of the first)."""

    def __init__(self, start: int, lines: list[str], *, headless: bool) -> None:
        self.start = start
        self.lines = lines
        self.headless = headless
        self.carried: list[tuple[int, str, str]] = []
        match = HEADER.match(lines[0]) if lines and not headless else None
        self.started_at = match["time"] if match else None

    def has_messages(self) -> bool:
        body = self.lines if self.headless else self.lines[1:]
        return any(
            (_kind(line) in ("user", "text") and not MODE_LINE.match(line))
            or usage_of(line) is not None
            for line in body
        )

    def carry(self, other: _Session) -> None:
        """Report ``other``'s lines (before the first header, no message) with this session."""
        number = other.start
        block: list[int] = []
        for offset, line in enumerate(other.lines):
            number = other.start + offset
            if MODE_LINE.match(line):
                self.carried.append((number, "mode_line", MODE))
            elif line.strip():
                block.append(number)
        if block:
            self.carried.append((block[0], "preamble", f"{NO_SESSION} (to line {block[-1]})"))

    def build(self, session_id: str | None) -> ImportedSession:
        start_ms = None
        if self.started_at is not None:
            moment = datetime.fromisoformat(self.started_at).replace(tzinfo=UTC)
            start_ms = int(moment.timestamp() * 1000)
        key = f"aider:{self.start}:" + "\n".join(self.lines)
        builder = ChatBuilder(fmt=FORMAT, session_id=session_id, start_ms=start_ms, key=key)
        if self.started_at is not None:
            builder.config["started_at"] = self.started_at
        else:
            builder.config["headless"] = True
        builder.config["first_line"] = self.start
        for number, kind, reason in self.carried:
            builder.leave_out(number, kind, reason)
        _Reader(builder, self.start).read(self.lines, headless=self.headless)
        return builder.build()


class _Reader:
    """Walks a session's lines and writes its messages."""

    def __init__(self, builder: ChatBuilder, start: int) -> None:
        self.builder = builder
        self.start = start
        self.model: ModelRef | None = None
        self.user: list[str] = []
        self.user_line = 0
        self.reply: list[str] = []
        self.reply_line = 0
        self.console: list[int] = []

    def read(self, lines: list[str], *, headless: bool) -> None:
        for offset, line in enumerate(lines):
            number = self.start + offset
            if offset == 0 and not headless:
                self.builder.read["session"] += 1
                continue
            kind = _kind(line)
            if offset == 0 and MODE_LINE.match(line):
                self.builder.read["mode line"] += 1
                self.builder.leave_out(number, "mode_line", MODE)
                continue
            if kind == "user":
                self._end_console()
                self._end_reply(None)
                if not self.user:
                    self.user_line = number
                self.user.append(_unbroken(line, "#### "))
                continue
            self._end_user()
            if kind == "console":
                self._console(line, number)
            elif kind == "text":
                self._end_console()
                if not self.reply:
                    self.reply_line = number
                self.reply.append(line)
            elif self.reply:
                self.reply.append(line)
        self._end_user()
        self._end_console()
        self._end_reply(None)

    def _console(self, line: str, number: int) -> None:
        usage = usage_of(line)
        if usage is not None:
            self.builder.read["tokens line"] += 1
            self._end_console()
            self._end_reply(usage, number)
            return
        model = MODEL.match(line)
        if model is not None and not model["model"].startswith("["):
            self.model = _model(model["model"])
            self.builder.model = self.builder.model or self.model
        version = VERSION.match(line)
        if version is not None:
            self.builder.config.setdefault("aider_version", version["version"])
        self.console.append(number)

    def _end_console(self) -> None:
        if not self.console:
            return
        first, last = self.console[0], self.console[-1]
        self.builder.read["console block"] += 1
        field = f"to line {last}" if last != first else ""
        self.builder.leave_out(first, "console", CONSOLE, field)
        self.console = []

    def _end_user(self) -> None:
        if not self.user:
            return
        text = "\n".join(self.user)
        self.builder.read["user message"] += 1
        command = text.split(maxsplit=1)[0] if text.strip() else ""
        ignored = command.startswith("/") and command not in MODEL_COMMANDS
        self.builder.user([text], now=self.builder.tick(), ignored=ignored)
        self.user = []

    def _end_reply(self, usage: Usage | None, tokens_line: int = 0) -> None:
        """Close the reply: with ``usage`` (its ``> Tokens:`` line) even when it has no text
        (the call answered with nothing printed); without, only when it has text."""
        text = "\n".join(self.reply).strip("\n")
        if not text and usage is None:
            self.reply = []
            return
        if text:
            self.builder.read["assistant reply"] += 1
        self.builder.assistant(
            now=self.builder.tick(),
            line=self.reply_line if text else tokens_line,
            texts=[text] if text else [],
            usage=usage,
            model=self.model,
        )
        self.reply = []
