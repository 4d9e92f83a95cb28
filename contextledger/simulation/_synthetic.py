"""Synthetic coding-agent sessions: deterministic, valid event sequences shaped like real ones.

``synthetic_session("s1", seed=7, turns=20)`` returns the events of a session in which a user
asks for something and the agent answers with many model steps, each reading files, running
commands, searching and editing. Every sequence passes ``validate_events``. The same
``session_id``, ``seed``, ``turns`` and ``start_ms`` give the same events, byte for byte.

The *shape* (text lengths, steps per turn, tool mix, tool input and output sizes, error rates)
follows real Claude Code sessions; the *content* is generated (file paths, shell commands and
output, code-like lines, prose), none of it taken from a trace. Use it for benchmarks, load
tests and examples that need realistic sizes; use ``session_events()`` (hypothesis) to explore
edge cases.

How the shape was measured, once, on ``shared/traces/claude-code-jsonl`` (7 sessions of Claude
Code 1.0.x: 58 user turns, 1,045 API calls, 1,021 tool results). Sizes are characters. Each
size table below lists the values at the quantiles ``QUANTILES`` (min, p10, p25, median, p75,
p90, p99, max); a size is drawn by interpolating ``log(1 + size)`` linearly between them, so
the generated distribution has the measured quantiles. User text is the prompts typed (string
contents and text blocks, not tool results nor ``<command>`` meta lines); assistant text is the
text blocks of one API response; a step is one API response (one assistant message here);
steps per turn count responses between two typed prompts. Tool output is the ``tool_result``
content; tool input is the JSON of ``tool_use.input`` and sizes the tool's free-form field.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from typing import Any, Final, NamedTuple

from contextledger.events._catalogue import (
    AssistantFinished,
    Event,
    MessageAdded,
    PartAdded,
    SessionStarted,
    ToolStateChanged,
)
from contextledger.events._ids import IdGenerator
from contextledger.events._parts import (
    ModelRef,
    ReasoningPart,
    StepFinishPart,
    StepStartPart,
    TextPart,
    ToolCompleted,
    ToolErrored,
    ToolPart,
    ToolPending,
    ToolRunning,
    Usage,
)
from contextledger.prices._tables import price_for

# --- the measured shape --------------------------------------------------------------------

QUANTILES: Final = (0.0, 0.10, 0.25, 0.50, 0.75, 0.90, 0.99, 1.0)

USER_TEXT_CHARS: Final = (10, 25, 71, 158, 346, 1464, 10843, 13325)
ASSISTANT_TEXT_CHARS: Final = (18, 43, 60, 85, 142, 285, 2833, 9940)
STEPS_PER_TURN: Final = (1, 3, 5, 10, 21, 41, 77, 108)
#: 706 of 1,045 responses carry text; a turn's last response (no tool call) always does.
TEXT_PROBABILITY: Final = 0.68
#: The traces hold no thinking blocks; this is a guess (sized like assistant text).
REASONING_PROBABILITY: Final = 0.2
#: Tool calls per step that calls tools: measured 990 x 1, 7 x 2, 1 x 3, 3 x 4+; parallel calls
#: are raised a little so that short sessions have some.
PARALLEL_CALLS: Final = (1, 2, 3)
PARALLEL_WEIGHTS: Final = (0.94, 0.04, 0.02)


class ToolShape(NamedTuple):
    """One tool's share of calls, sizes and failure rate."""

    calls: int
    """Calls in the traces (the tool's weight)."""
    output: tuple[int, ...]
    """Output characters at ``QUANTILES``."""
    input: tuple[int, ...] | None
    """Input JSON characters at ``QUANTILES``, for tools with a free-form field."""
    error_rate: float
    """Share of calls that fail: the traces' ``is_error`` share, except for Bash, whose
    non-zero exits (37% of its calls there) are completed calls with ``exit`` in the metadata,
    as in opencode; its 2% stands for timeouts and the like."""


TOOLS: Final[dict[str, ToolShape]] = {
    "Bash": ToolShape(288, (0, 0, 5, 161, 883, 4300, 18835, 30032), None, 0.02),
    "Read": ToolShape(215, (20, 643, 1713, 3553, 6708, 14954, 29511, 36319), None, 0.02),
    "Edit": ToolShape(
        173,
        (63, 380, 485, 715, 1294, 2621, 5310, 7469),
        (122, 206, 290, 592, 1375, 2838, 5709, 6488),
        0.07,
    ),
    "Grep": ToolShape(129, (14, 16, 16, 112, 693, 1732, 8945, 20030), None, 0.0),
    "TodoWrite": ToolShape(125, (160,) * 8, (143, 344, 449, 579, 727, 902, 1208, 1734), 0.0),
    "MultiEdit": ToolShape(
        36,
        (63, 67, 102, 182, 316, 541, 845, 1475),
        (145, 146, 166, 394, 661, 2134, 2691, 3637),
        0.22,
    ),
    "Write": ToolShape(
        28,
        (61, 63, 64, 76, 84, 86, 91, 3164),
        (223, 820, 2512, 5026, 9092, 11398, 22286, 25547),
        0.18,
    ),
    "LS": ToolShape(16, (123, 312, 562, 747, 3991, 4546, 4546, 4546), None, 0.0),
    "Task": ToolShape(
        6,
        (3791, 3791, 4418, 4575, 6470, 9920, 9920, 9940),
        (738, 738, 826, 973, 1433, 1554, 1554, 1756),
        0.0,
    ),
    "Glob": ToolShape(5, (14, 14, 28, 28, 816, 816, 816, 828), None, 0.0),
}

#: Simulated time: seconds a model step takes, a tool runs, and the user thinks between turns.
STEP_SECONDS: Final = (2.0, 8.0)
TOOL_SECONDS: Final = (0.05, 6.0)
USER_SECONDS: Final = (10.0, 180.0)
#: The first call's prompt (system prompt and tool table), in tokens: the traces' first
#: ``cache_creation_input_tokens`` is 14,410.
SYSTEM_TOKENS: Final = 14_000
_SONNET_4: Final = price_for("claude-sonnet-4", "anthropic")
#: US$ per million tokens: input, output, cache read, cache write (Claude Sonnet 4's entry in
#: the price tables).
PRICES: Final = (
    _SONNET_4.input,
    _SONNET_4.output,
    _SONNET_4.cache_read,
    _SONNET_4.cache_write or _SONNET_4.input,
)

MODELS: Final = (
    ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-20250514"),
    ModelRef(provider_id="anthropic", model_id="claude-opus-4-20250514"),
)


def draw_size(rng: random.Random, table: Sequence[int]) -> int:
    """A size drawn from the distribution whose ``QUANTILES`` are ``table``."""
    u = rng.random()
    for i in range(1, len(QUANTILES)):
        if u <= QUANTILES[i]:
            lo, hi = QUANTILES[i - 1], QUANTILES[i]
            a, b = math.log1p(table[i - 1]), math.log1p(table[i])
            return round(math.expm1(a + (b - a) * (u - lo) / (hi - lo)))
    return table[-1]


# --- generated content ---------------------------------------------------------------------

_WORD_TEXT = (
    "the test parser cache buffer config index tensor shape error value file function module "
    "build output input request result check update add remove fix handle return call path "
    "line case type field list map key count size offset length range block stream event "
    "state step node tree graph loop branch merge commit patch diff log trace report make run "
    "should now then also still again first next last only each every both this that it we"
)
_WORDS = _WORD_TEXT.split()
_NAME_TEXT = (
    "parser tensor engine config utils io cache storage kernel shape matrix vector model "
    "session router loader writer reader schema codec client server worker queue"
)
_NAMES = _NAME_TEXT.split()
_DIRS = ("src", "src/core", "src/ops", "tests", "lib", "include", "scripts", "docs", "bench")
_EXTS = (".py", ".c", ".h", ".rs", ".ts", ".md", ".toml", ".sh")
_ROOT = "/home/dev/project"
_CODE = (
    "def {a}_{b}(self, {c}, {d}=None):",
    "    return self.{a}.{b}({c}, {d})",
    "    if {c} is None:",
    '        raise ValueError("invalid {a} {b}")',
    "    for {c} in range({n}):",
    "        {a}_{c} = {b}[{c}] + {n}",
    "static int {a}_{b}(const {c}_t *{d}, size_t {c});",
    "    if ({c} == NULL) return -{n};",
    '#include "{a}/{b}.h"',
    "    // {w} {x} {y} {z}",
    "class {A}{B}:",
    '    """{W} the {a} {b} for {c}."""',
    "    {c} = {a}_{b}({d}, {n})",
    "fn {a}_{b}({c}: &{A}, {d}: usize) -> Result<{B}, Error> {{",
    "    assert {a}.{b} == {n}",
    "}}",
    "",
)
_SHELL = (
    "{a}/{b}.c:{n}:{m}: warning: unused variable '{c}' [-Wunused-variable]",
    "tests/test_{a}.py::test_{b}_{c} PASSED",
    "tests/test_{a}.py::test_{b}_{c} FAILED",
    '  File "{p}", line {n}, in {a}_{b}',
    "{A}Error: {w} {x} {y} {z}",
    "-rw-r--r-- 1 dev dev {n}{m} Mar {m} 12:{m} {b}{e}",
    "[{n}/{m}] Building C object {a}/CMakeFiles/{b}.dir/{c}.c.o",
    "ok   {a}_{b} ({n}.{m}s)",
    "{n} passed, {m} warnings in {n}.{m}s",
    "M  {p}",
    "",
)
_COMMANDS = (
    "pytest -x -q tests/test_{a}.py",
    "make -j4 {a}",
    "git diff --stat",
    "git status",
    "ls -la {d}",
    'grep -rn "{a}_{b}" {d}',
    "python -m {a}.{b} --check",
    "cargo test {a}",
    "cmake --build build --target {a}",
    "cat {p} | head -{n}",
)


def _fill(template: str, rng: random.Random, paths: Sequence[str]) -> str:
    a, b, c, d = rng.choices(_NAMES, k=4)
    w, x, y, z = rng.choices(_WORDS, k=4)
    return template.format(
        a=a, b=b, c=c, d=d, A=a.title(), B=b.title(), w=w, x=x, y=y, z=z, W=w.title(),
        n=rng.randint(1, 999), m=rng.randint(10, 59), p=rng.choice(paths),
        e=rng.choice(_EXTS),
    )  # fmt: skip


def _prose(rng: random.Random, size: int, paths: Sequence[str]) -> str:
    """Sentences of plain words, now and then naming a file, cut to ``size`` characters."""
    out: list[str] = []
    total = 0
    while total < size:
        words = rng.choices(_WORDS, k=rng.randint(6, 16))
        if paths and rng.random() < 0.3:
            words.append(f"`{rng.choice(paths)}`")
        sentence = " ".join(words).capitalize() + "."
        out.append(sentence)
        total += len(sentence) + 1
    return " ".join(out)[:size]


def _lines(rng: random.Random, pool: Sequence[str], size: int, numbered: bool = False) -> str:
    """Lines drawn from ``pool`` (``cat -n`` style when ``numbered``), cut to ``size``."""
    if size <= 0:
        return ""
    out: list[str] = []
    total = 0
    start = rng.randint(1, 400)
    while total < size:
        batch = rng.choices(pool, k=size // 40 + 1)
        if numbered:
            first = start + len(out)
            batch = [f"{first + i:6d}\t{line}" for i, line in enumerate(batch)]
        out.extend(batch)
        total += sum(len(line) + 1 for line in batch)
    return "\n".join(out)[:size]


class _Workspace:
    """A session's made-up project: its files and typical code and shell lines."""

    def __init__(self, rng: random.Random) -> None:
        self.paths = [
            f"{_ROOT}/{rng.choice(_DIRS)}/{rng.choice(_NAMES)}{rng.choice(_EXTS)}"
            for _ in range(40)
        ]
        self.code = [_fill(rng.choice(_CODE), rng, self.paths) for _ in range(300)]
        self.shell = [_fill(rng.choice(_SHELL), rng, self.paths) for _ in range(150)]


def _tool_input(rng: random.Random, ws: _Workspace, tool: str, shape: ToolShape) -> dict[str, Any]:
    path = rng.choice(ws.paths)
    free = max(draw_size(rng, shape.input) - 60, 10) if shape.input else 0
    match tool:
        case "Bash":
            command = _fill(rng.choice(_COMMANDS), rng, ws.paths)
            return {"command": command, "description": _prose(rng, rng.randint(15, 60), ())}
        case "Read":
            return {"file_path": path}
        case "Edit":
            old = _lines(rng, ws.code, free // 2)
            return {
                "file_path": path,
                "old_string": old,
                "new_string": _lines(rng, ws.code, free - len(old)),
            }
        case "MultiEdit":
            edits = [
                {
                    "old_string": _lines(rng, ws.code, free // 4),
                    "new_string": _lines(rng, ws.code, free // 4),
                }
                for _ in range(2)
            ]
            return {"file_path": path, "edits": edits}
        case "Write":
            return {"file_path": path, "content": _lines(rng, ws.code, free)}
        case "TodoWrite":
            todos = []
            for i in range(max(1, free // 90)):
                status = rng.choice(("pending", "in_progress", "completed"))
                todos.append({"id": str(i + 1), "content": _prose(rng, 50, ()), "status": status})
            return {"todos": todos}
        case "Task":
            return {"description": _prose(rng, 30, ()), "prompt": _prose(rng, free, ws.paths)}
        case "Grep":
            return {"pattern": f"{rng.choice(_NAMES)}_{rng.choice(_NAMES)}", "path": _ROOT}
        case "Glob":
            return {"pattern": f"**/*{rng.choice(_EXTS)}"}
        case _:  # LS
            return {"path": path.rsplit("/", 1)[0]}


def _tool_output(
    rng: random.Random, ws: _Workspace, tool: str, inp: dict[str, Any], size: int
) -> str:
    match tool:
        case "Read":
            return _lines(rng, ws.code, size, numbered=True)
        case "Bash":
            return _lines(rng, ws.shell, size)
        case "Edit":
            head = f"Edited {inp['file_path']}; the lines around the change now read:\n"
            return (head + _lines(rng, ws.code, size, numbered=True))[:size]
        case "Grep" | "Glob" | "LS":
            return _lines(rng, ws.paths, size)
        case "Task":
            return _prose(rng, size, ws.paths)
        case _:  # TodoWrite, Write, MultiEdit: short confirmations
            head = f"{tool} done: {inp.get('file_path', 'todo list updated')}. "
            return (head + _prose(rng, size, ws.paths))[:size]


# --- the session ---------------------------------------------------------------------------


def iter_synthetic_session(
    session_id: str, *, seed: int, turns: int, start_ms: int = 1_767_225_600_000
) -> Iterator[Event]:
    """Yield the events of ``synthetic_session`` one at a time (nothing is held back)."""
    rng = random.Random(seed)
    ws = _Workspace(rng)
    msg_ids, part_ids = IdGenerator("msg"), IdGenerator("prt")
    model = rng.choice(MODELS)
    names = list(TOOLS)
    weights = [shape.calls for shape in TOOLS.values()]
    now = start_ms
    context_chars = 0  # what the conversation so far adds to the prompt
    cached = 0  # prompt tokens the provider has cached
    calls = 0

    def advance(bounds: tuple[float, float]) -> int:
        nonlocal now
        now += round(rng.uniform(*bounds) * 1000)
        return now

    yield SessionStarted(
        session_id=session_id,
        time_ms=now,
        title=_prose(rng, rng.randint(20, 50), ()),
        model=model,
        config={"cwd": _ROOT},
    )
    for _ in range(turns):
        t = advance(USER_SECONDS)
        user_id = msg_ids.next(t)
        text = _prose(rng, draw_size(rng, USER_TEXT_CHARS), ws.paths)
        context_chars += len(text)
        yield MessageAdded(session_id=session_id, time_ms=t, message_id=user_id, role="user")
        yield PartAdded(
            session_id=session_id,
            time_ms=t,
            part=TextPart(id=part_ids.next(t), message_id=user_id, text=text),
        )
        steps = max(1, draw_size(rng, STEPS_PER_TURN))
        for step in range(steps):
            t = advance(STEP_SECONDS)
            mid = msg_ids.next(t)
            last = step == steps - 1
            out_chars = 0
            yield MessageAdded(
                session_id=session_id,
                time_ms=t,
                message_id=mid,
                role="assistant",
                parent_id=user_id,
                model=model,
            )
            yield PartAdded(
                session_id=session_id,
                time_ms=t,
                part=StepStartPart(id=part_ids.next(t), message_id=mid),
            )
            if rng.random() < REASONING_PROBABILITY:
                thought = _prose(rng, draw_size(rng, ASSISTANT_TEXT_CHARS), ws.paths)
                out_chars += len(thought)
                yield PartAdded(
                    session_id=session_id,
                    time_ms=t,
                    part=ReasoningPart(id=part_ids.next(t), message_id=mid, text=thought),
                )
            if last or rng.random() < TEXT_PROBABILITY:
                said = _prose(rng, draw_size(rng, ASSISTANT_TEXT_CHARS), ws.paths)
                out_chars += len(said)
                yield PartAdded(
                    session_id=session_id,
                    time_ms=t,
                    part=TextPart(id=part_ids.next(t), message_id=mid, text=said),
                )
            count = 0 if last else rng.choices(PARALLEL_CALLS, PARALLEL_WEIGHTS)[0]
            pending: list[tuple[ToolPart, dict[str, Any]]] = []
            for _ in range(count):
                tool = rng.choices(names, weights)[0]
                inp = _tool_input(rng, ws, tool, TOOLS[tool])
                calls += 1
                part = ToolPart(
                    id=part_ids.next(t),
                    message_id=mid,
                    call_id=f"toolu_{rng.getrandbits(64):016x}{calls:06d}",
                    tool=tool,
                    state=ToolPending(input=inp),
                )
                out_chars += len(str(inp))
                pending.append((part, inp))
                yield PartAdded(session_id=session_id, time_ms=t, part=part)
            started = now
            for part, inp in pending:
                title = str(inp.get("file_path") or inp.get("command") or inp.get("pattern") or "")
                yield ToolStateChanged(
                    session_id=session_id,
                    time_ms=started,
                    message_id=mid,
                    part_id=part.id,
                    state=ToolRunning(input=inp, title=title, started_ms=started),
                )
            for part, inp in pending:
                shape = TOOLS[part.tool]
                ended = advance(TOOL_SECONDS)
                state: ToolCompleted | ToolErrored
                if rng.random() < shape.error_rate:
                    error = f"{part.tool} failed: " + _prose(rng, rng.randint(20, 250), ws.paths)
                    state = ToolErrored(input=inp, error=error, started_ms=started, ended_ms=ended)
                    context_chars += len(error)
                else:
                    output = _tool_output(rng, ws, part.tool, inp, draw_size(rng, shape.output))
                    meta = {"exit": int(rng.random() < 0.37)} if part.tool == "Bash" else {}
                    state = ToolCompleted(
                        input=inp,
                        output=output,
                        title=str(inp.get("file_path", part.tool)),
                        metadata=meta,
                        started_ms=started,
                        ended_ms=ended,
                    )
                    context_chars += len(output)
                yield ToolStateChanged(
                    session_id=session_id,
                    time_ms=ended,
                    message_id=mid,
                    part_id=part.id,
                    state=state,
                )
            # Usage: the whole conversation is the prompt; what the last call cached is read
            # from the cache, the rest is written to it.
            prompt = SYSTEM_TOKENS + context_chars // 4
            fresh = rng.randint(1, 12)
            usage = Usage(
                input=fresh,
                output=out_chars // 4 + rng.randint(5, 60),
                cache_read=min(cached, prompt),
                cache_write=max(prompt - cached - fresh, 0),
            )
            cost = (
                usage.input * PRICES[0]
                + usage.output * PRICES[1]
                + usage.cache_read * PRICES[2]
                + usage.cache_write * PRICES[3]
            ) / 1e6
            cached = prompt
            context_chars += out_chars
            finish = "stop" if last else "tool-calls"
            t = now
            yield PartAdded(
                session_id=session_id,
                time_ms=t,
                part=StepFinishPart(
                    id=part_ids.next(t), message_id=mid, reason=finish, usage=usage, cost=cost
                ),
            )
            yield AssistantFinished(
                session_id=session_id,
                time_ms=t,
                message_id=mid,
                finish=finish,
                usage=usage,
                cost=cost,
            )


def synthetic_session(
    session_id: str, *, seed: int, turns: int, start_ms: int = 1_767_225_600_000
) -> list[Event]:
    """The events of a made-up coding-agent session of ``turns`` user turns.

    Deterministic in its arguments. Starts with ``SessionStarted``; each turn is a user
    message with its text, then one assistant message per model step (step start, sometimes
    reasoning, text, tool calls added pending then running then completed or failed, step
    finish with usage, finished). A turn's last step calls no tool and ends with ``"stop"``.
    A turn averages about 20 steps and 150 events, with a long tail (see ``STEPS_PER_TURN``).
    """
    return list(iter_synthetic_session(session_id, seed=seed, turns=turns, start_ms=start_ms))
