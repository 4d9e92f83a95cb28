"""Every shared trace imports with the figures of ``shared/traces/README.md``.

For each file the README lists: the import succeeds; every tool call has exactly one result and
every result a call; and the records, tool calls and characters of content measured on the
IMPORTED events agree with the README.

What the README's figures mean, measured on the raw files (each reproduces every figure):

- records: Claude Code: the ``user`` and ``assistant`` lines (not ``system`` or ``summary``);
  SWE-agent and mini-swe-agent: the ``history`` (or message list) entries; OpenHands: the
  events of each run's ``history``.
- chars: Claude Code: for each ``user``/``assistant`` line, the length of ``message.content``
  when it is a string, else of ``json.dumps(message.content)`` (Python's defaults: ASCII
  escapes, ``", "`` separators), so the figure includes JSON syntax, block ``type`` names, tool
  ids and base64 image data; SWE-agent and mini-swe-agent: the ``content`` strings of the
  messages; OpenHands: each event's top-level ``content`` and ``message`` strings (``message``
  is OpenHands' display line, e.g. "Running command: ls"; tool arguments and thoughts are
  not counted).

The importers keep the content, not those encodings, so the imported characters (``content_chars``:
text, reasoning, system prompt, tool inputs as JSON, tool outputs and errors, image data) are
compared with ``expected_chars``: the same content measured on the raw file under the format's
documented mapping. ``expected_chars`` differs from the README figure only by what each format's
``readme_chars`` counts on top, computed from the raw file, never by a tolerance:

- Claude Code: JSON syntax, ``type`` names, ids and escape sequences of the content blocks.
- SWE-agent (old variant): the fence around each action (assistant ``content`` is ``thought``
  + a fenced ``action``; the importer keeps the thought as text and the action as the input
  ``{"command": action}``); demonstrations (``is_demo``), skipped by design. Function-calling
  variant: assistant ``content`` is the thought; the tool-call arguments the importer keeps as
  inputs are not in the README's figure.
- mini-swe-agent: the fence of each bash block and the whitespace stripped around it.
- OpenHands: the ``message`` display lines and the ``recall`` observations (skipped by design);
  the thoughts and tool arguments the importer keeps are not in the README's figure.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from contextledger.events._catalogue import (
    MessageAdded,
    PartAdded,
    SessionStarted,
    ToolStateChanged,
)
from contextledger.events._parts import (
    FilePart,
    ReasoningPart,
    TextPart,
    ToolCompleted,
    ToolErrored,
    ToolPart,
)
from contextledger.importers._claude_code import ImportedSession
from contextledger.importers._detect import detect_format, import_trace
from contextledger.importers._mini_swe_agent import split_action
from contextledger.importers._openai_chat import loose_literal
from contextledger.importers._openhands import _NOT_INPUT

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"


class Figures(NamedTuple):
    """One run's row of the README: records, tool calls, characters of content, and the
    precision the characters are given at (1 for exact figures, 100 for "85.7k")."""

    records: int
    tool_calls: int
    chars: int
    precision: int = 1


def _k(text: str) -> tuple[int, int]:
    return round(float(text.removesuffix("k")) * 1000), 100


#: The README's table (``shared/traces/README.md``): per file, one row per run.
README: dict[str, list[Figures]] = {
    "claude-code-jsonl/vsla_f67ab274-e83b-41ac-ac85-77488d6b5c28.jsonl": [
        Figures(726, 260, 745_746)
    ],
    "claude-code-jsonl/vsla_9034225e-c367-4ab6-b1eb-1f478a7ae27a.jsonl": [
        Figures(610, 219, 964_881)
    ],
    "claude-code-jsonl/vsla_0a725fb5-6378-432a-9e84-9f3f49d4043d.jsonl": [
        Figures(608, 209, 526_465)
    ],
    "claude-code-jsonl/vsla_5f8cbb78-38d3-47e9-9504-baa93bb166c9.jsonl": [
        Figures(532, 208, 892_882)
    ],
    "claude-code-jsonl/vsla_d7d349f9-c243-46e2-9a32-4a0eddfc634b.jsonl": [
        Figures(240, 85, 263_077)
    ],
    "claude-code-jsonl/vsla_dc7e9081-a507-4c59-9c3b-f9b714e4a44c.jsonl": [Figures(63, 20, 717_895)],
    "claude-code-jsonl/vsla_6dc88126-2048-43a9-b5c2-b9747d5a0301.jsonl": [Figures(55, 20, 367_021)],
    "openhands/multi_swe_bench_output.jsonl": [
        Figures(49, 22, *_k("85.7k")),
        Figures(70, 32, *_k("47.4k")),
        Figures(103, 49, *_k("64.3k")),
    ],
    "openhands/resolver_mock_output.jsonl": [
        Figures(8, 3, *_k("1.9k")),
        Figures(44, 21, *_k("44.0k")),
    ],
    "swe-agent-traj/ctf_web_i_got_id_demo.traj": [Figures(43, 21, 42_993)],
    "swe-agent-traj/ctf_crypto_katy.traj": [Figures(37, 18, 27_302)],
    "swe-agent-traj/marshmallow-1867_function_calling.traj": [Figures(28, 13, 28_719)],
    "swe-agent-traj/pydicom-1458_gpt4.traj": [Figures(26, 12, 56_550)],
    "mini-swe-agent/github_issue.traj.json": [Figures(22, 10, 7_637)],
}


def _path(name: str) -> Path:
    if not TRACES.is_dir():
        pytest.skip(f"the shared traces are not at {TRACES}")
    return TRACES / name


def _dumps(value: Any) -> int:
    return len(json.dumps(value))


# --- the imported side -------------------------------------------------------------------


def _payload(url: str) -> int:
    """The characters of a data URL's payload (base64 image data), else of the URL."""
    return len(url.partition(",")[2]) if url.startswith("data:") else len(url)


def content_chars(sessions: Iterable[ImportedSession]) -> int:
    """The characters of content in imported events: system prompt, text, reasoning, media
    payloads, tool inputs (as JSON), tool outputs, errors and attachments."""
    total = 0
    for session in sessions:
        states: dict[tuple[str, str], Any] = {}
        for event in session.events:
            if isinstance(event, SessionStarted):
                total += len(event.config.get("system_prompt", ""))
            elif isinstance(event, PartAdded):
                part = event.part
                if isinstance(part, TextPart | ReasoningPart):
                    total += len(part.text)
                elif isinstance(part, FilePart):
                    total += _payload(part.url)
                elif isinstance(part, ToolPart):
                    states[part.message_id, part.id] = part.state
            elif isinstance(event, ToolStateChanged):
                states[event.message_id, event.part_id] = event.state
        for state in states.values():
            total += _dumps(state.input)
            if isinstance(state, ToolCompleted):
                total += len(state.output) + sum(_payload(a.url) for a in state.attachments)
            elif isinstance(state, ToolErrored):
                total += len(state.error)
    return total


class Tally(NamedTuple):
    """What the imported events hold, counted."""

    user_messages: int
    assistant_messages: int
    assistant_parts: int
    text_only_assistant_messages: int
    calls: int
    results: int
    skipped: Counter[str]


def tally(sessions: Iterable[ImportedSession]) -> Tally:
    """Messages, content parts, calls and results of ``sessions``."""
    roles: dict[str, str] = {}
    with_tools: set[str] = set()
    parts = calls = results = 0
    skipped: Counter[str] = Counter()
    for session in sessions:
        skipped.update(session.skipped)
        for event in session.events:
            if isinstance(event, MessageAdded):
                roles[event.message_id] = event.role
            elif isinstance(event, PartAdded) and roles[event.part.message_id] == "assistant":
                if isinstance(event.part, ToolPart):
                    calls += 1
                    with_tools.add(event.part.message_id)
                parts += isinstance(event.part, TextPart | ReasoningPart | ToolPart)
            elif isinstance(event, ToolStateChanged):
                results += isinstance(event.state, ToolCompleted | ToolErrored)
    assistants = [m for m, role in roles.items() if role == "assistant"]
    return Tally(
        user_messages=sum(role == "user" for role in roles.values()),
        assistant_messages=len(assistants),
        assistant_parts=parts,
        text_only_assistant_messages=sum(m not in with_tools for m in assistants),
        calls=calls,
        results=results,
        skipped=skipped,
    )


def imported_records(fmt: str, counts: Tally) -> int:
    """The README's records, rebuilt from what was imported."""
    answered = counts.user_messages + counts.results
    if fmt == "claude-code":
        # Claude Code writes one content block per assistant line.
        return counts.assistant_parts + answered
    if fmt == "openhands":
        skipped = counts.skipped["system"] + counts.skipped["recall"]
        return skipped + counts.calls + counts.text_only_assistant_messages + answered
    skipped = counts.skipped["system"] + counts.skipped["demonstration"]
    return skipped + counts.assistant_messages + answered


def unanswered(sessions: Iterable[ImportedSession]) -> tuple[list[str], list[str]]:
    """The call ids with no result, and the results (message, part) that answer no call or
    answer one a second time."""
    open_calls: dict[tuple[str, str], str] = {}
    strays: list[str] = []
    for session in sessions:
        calls: dict[tuple[str, str], str] = {}
        answered: set[tuple[str, str]] = set()
        for event in session.events:
            if isinstance(event, PartAdded) and isinstance(event.part, ToolPart):
                calls[event.part.message_id, event.part.id] = event.part.call_id
            elif isinstance(event, ToolStateChanged) and isinstance(
                event.state, ToolCompleted | ToolErrored
            ):
                key = (event.message_id, event.part_id)
                if key not in calls or key in answered:
                    strays.append(f"{session.session_id}:{key}")
                answered.add(key)
        open_calls.update({k: v for k, v in calls.items() if k not in answered})
    return list(open_calls.values()), strays


# --- the raw side ------------------------------------------------------------------------


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    for line in path.read_text().splitlines():
        if line.strip():
            yield json.loads(line)


def _claude_blocks(content: Any) -> Iterator[dict[str, Any]]:
    """The blocks of a ``message.content``, tool results' own items included."""
    for block in content if isinstance(content, list) else ():
        yield block
        if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
            yield from (item for item in block["content"] if item.get("type") == "image")


def _claude_block_chars(block: dict[str, Any]) -> int:
    kind = block.get("type")
    if kind == "text":
        return len(block["text"])
    if kind == "thinking":
        return len(block["thinking"])
    if kind == "tool_use":
        return _dumps(block["input"])
    if kind == "image":
        return len(block["source"].get("data", ""))
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, str):
            return len(content)
        items = content if isinstance(content, list) else []
        return sum(len(item["text"]) for item in items if item.get("type") == "text")
    raise AssertionError(f"unexpected block {kind!r}")


def claude_code_chars(path: Path) -> tuple[list[int], list[int]]:
    """The README's characters, and the content the importer keeps."""
    readme = expected = 0
    for record in _jsonl(path):
        if record.get("type") not in ("user", "assistant"):
            continue
        content = record["message"]["content"]
        if isinstance(content, str):
            readme += len(content)
            expected += len(content)
        else:
            readme += _dumps(content)
            expected += sum(_claude_block_chars(b) for b in _claude_blocks(content))
    return [readme], [expected]


def _swe_assistant_chars(message: dict[str, Any]) -> int:
    text = len(message.get("thought") or message["content"])
    tool_calls = message.get("tool_calls")
    if tool_calls:
        arguments = [loose_literal(c["function"]["arguments"]) for c in tool_calls]
        return text + sum(_dumps(a) for a in arguments)
    return text + _dumps({"command": message["action"]})


def swe_agent_chars(path: Path) -> tuple[list[int], list[int]]:
    """The README's characters, and the content the importer keeps."""
    history = json.loads(path.read_text())["history"]
    readme = sum(len(m["content"]) for m in history)
    expected = 0
    for message in history:
        if message.get("is_demo") or message.get("message_type") == "demonstration":
            continue
        if message["role"] == "assistant":
            expected += _swe_assistant_chars(message)
        else:
            expected += len(message["content"])
    return [readme], [expected]


def mini_swe_agent_chars(path: Path) -> tuple[list[int], list[int]]:
    """The README's characters, and the content the importer keeps."""
    messages = json.loads(path.read_text())
    readme = sum(len(m["content"]) for m in messages)
    expected = 0
    for message in messages:
        if message["role"] == "assistant":
            command, rest = split_action(message["content"])
            expected += len(rest) + (0 if command is None else _dumps({"command": command}))
        else:
            expected += len(message["content"])
    return [readme], [expected]


def _openhands_event_chars(event: dict[str, Any]) -> int:
    action = event.get("action")
    args = event.get("args", event)
    if action == "recall" or event.get("observation") == "recall":
        return 0
    if action in ("system", "message"):
        return len(args.get("content") or "")
    if action == "finish":
        text = args.get("final_thought") or args.get("thought") or event.get("message")
        return len(text or "")
    if action is not None:
        tool_input = (
            {k: v for k, v in args.items() if k != "thought"}
            if "args" in event
            else {k: v for k, v in event.items() if k not in _NOT_INPUT}
        )
        return len(args.get("thought") or "") + _dumps(tool_input)
    return len(event.get("content") or "")


def openhands_chars(path: Path) -> tuple[list[int], list[int]]:
    """Per run: the README's characters, and the content the importer keeps."""
    readme: list[int] = []
    expected: list[int] = []
    for run in _jsonl(path):
        history = run["history"]
        readme.append(
            sum(
                len(event[key])
                for event in history
                for key in ("content", "message")
                if isinstance(event.get(key), str)
            )
        )
        expected.append(sum(_openhands_event_chars(e) for e in history))
    return readme, expected


RAW_CHARS = {
    "claude-code": claude_code_chars,
    "swe-agent": swe_agent_chars,
    "mini-swe-agent": mini_swe_agent_chars,
    "openhands": openhands_chars,
}


def raw_unanswered(path: Path, fmt: str) -> int:
    """Calls the raw file itself leaves unanswered: a SWE-agent history that ends with the
    model's action (its final ``submit``) has no observation for it."""
    if fmt != "swe-agent":
        return 0
    return int(json.loads(path.read_text())["history"][-1]["role"] == "assistant")


# --- the tests ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(README))
def test_the_readme_figures_are_what_the_raw_file_holds(name: str) -> None:
    path = _path(name)
    readme, _ = RAW_CHARS[detect_format(path)](path)
    assert [
        round(r, -2) if f.precision == 100 else r for r, f in zip(readme, README[name], strict=True)
    ] == [f.chars for f in README[name]]


@pytest.mark.parametrize("name", sorted(README))
def test_every_trace_imports_with_the_readme_counts(name: str) -> None:
    path = _path(name)
    fmt = detect_format(path)
    runs = import_trace(path)
    assert len(runs) == len(README[name])
    _, expected = RAW_CHARS[fmt](path)
    for run, figures, content in zip(runs, README[name], expected, strict=True):
        sessions = list(run.sessions())
        counts = tally(sessions)
        assert counts.calls == figures.tool_calls
        assert imported_records(fmt, counts) == figures.records
        assert content_chars(sessions) == content
        open_calls, strays = unanswered(sessions)
        assert strays == []
        assert len(open_calls) == raw_unanswered(path, fmt)
