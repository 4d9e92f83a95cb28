"""``actors``: concurrent sessions recorded and built through the ``Runtime``, against the
same work done by calling the pure core directly.

Sessions live on one SQLite file (``SQLiteStore``, default durability). Each session is a
trio task that runs its turns; a turn is: the user's message, a request built, a model step
with its text and one or two tool calls and their outputs (finished as ``tool-calls``), a
request built, and the final answer (finished as ``stop``). Sizes follow
``contextledger.simulation._synthetic`` (user and assistant text, Read/Bash/Grep/Edit outputs,
capped at ``OUTPUT_CAP`` characters so 50 turns stay inside a 200,000-token window); usage is
reported on every step, so the runtime checks its compaction limit before each request (it is
never reached: no compaction runs).

* **runtime**: ``Runtime.open(store, model=...)``, one ``SessionHandle`` per session:
  ``add_user``, ``build_request``, ``record_assistant`` (text, tool calls and results,
  finish), ``build_request``, ``record_assistant`` (the answer; the after-turn prune is
  asked, off by default).
* **core**: the same events through ``SessionLog`` (``user_message_events``, the assistant's
  events built directly, one append per runtime command) and ``prepare_request`` with a
  ``RequestBuilder`` per session, plus the decision the runtime makes before each request
  (``policy._decisions.compaction_due``).

Before every model step (the user's message, each assistant message) a session waits for a
simulated model answering after 1 to 6 simulated seconds (``Timeline``): the waits take no
wall time and one step runs at a time, in the order the answers come, so the 200 sessions
interleave as agents waiting for their model do and each build's latency is its own cost,
not a queue behind 199 other sessions driven flat out (under that load a latency counts
scheduler rounds: every mailbox hop waits for all other runnable tasks). Turns per second
are turns over the wall seconds of the phase: the throughput when steps run back to back.
Every ``build_request`` (runtime) or check-and-``prepare_request`` (core) is timed with
``time.perf_counter``. Sessions are opened before the timing starts; the core runs first,
then the runtime, on the same store, each after a full garbage collection.

Keys: ``overhead_p50`` (the runtime's p50 build latency divided by the core's; target
<= 1.5) and ``overhead_p99``; per side under ``runtime`` and ``core``: ``turns_per_s`` (turns
divided by the wall seconds of the phase), ``build_ms_p50``, ``build_ms_p99``, ``builds``,
``seconds``; ``throughput_ratio`` (runtime turns/s over the core's) and ``same_bytes`` (both
sides' last requests have the same sizes: they carry the same content). It runs 200
sessions x 50 turns (about 50 s on 2 cores; ``--full`` is the same size), ``issue_size``
says so; ``--events N`` scales down to about N events.
"""

from __future__ import annotations

import gc
import heapq
import itertools
import os
import random
import time
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

import trio

from contextledger.actors import Runtime, SessionHandle
from contextledger.bench._common import Options, ratio, table, temp_dir
from contextledger.config import Config
from contextledger.events._catalogue import (
    MAIN_AGENT,
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
    StepFinishPart,
    StepStartPart,
    TextPart,
    ToolCompleted,
    ToolPart,
    ToolPending,
    ToolSchema,
    Usage,
)
from contextledger.ledger import SessionLog
from contextledger.policy._decisions import compaction_due
from contextledger.policy._overflow import usable
from contextledger.providers._registry import wire_format
from contextledger.request._builder import RequestBuilder, RequestInputs, system_for
from contextledger.request._prepare import prepare_request
from contextledger.request._system import SystemSegments, family_prompt
from contextledger.request._turn import user_message_events
from contextledger.simulation._synthetic import (
    ASSISTANT_TEXT_CHARS,
    TOOLS,
    USER_TEXT_CHARS,
    draw_size,
)
from contextledger.store._sqlite import SQLiteStore
from contextledger.vocabulary._models import Model, ModelLimits

MODEL: Final = Model(
    provider_id="anthropic",
    model_id="claude-sonnet-4-5",
    limits=ModelLimits(context=200_000, output=32_000),
)
REF: Final = ModelRef(provider_id=MODEL.provider_id, model_id=MODEL.model_id)
WIRE: Final = "anthropic"
#: The issue's configuration, run by default and by ``--full``.
SESSIONS: Final = 200
TURNS: Final = 50
#: About how many events a turn appends (for ``--events``).
EVENTS_PER_TURN: Final = 17
TARGET_OVERHEAD: Final = 1.5
#: The tools a turn calls (weighted as in the traces) and the cap on an output's characters.
TURN_TOOLS: Final = ("Read", "Bash", "Grep", "Edit")
OUTPUT_CAP: Final = 12_000
#: Share of model steps calling two tools instead of one.
TWO_CALLS: Final = 0.35
#: Simulated seconds before each model step (on the mock clock: no wall time).
MODEL_SECONDS: Final = (1.0, 6.0)
#: The first request's prompt (system and tools), in tokens, for the reported usage.
SYSTEM_TOKENS: Final = 14_000
START_MS: Final = 1_900_000_000_000
SCHEMAS: Final = tuple(
    ToolSchema(
        name=name,
        description=f"The {name} tool.",
        input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
    )
    for name in TURN_TOOLS
)
INPUTS: Final = RequestInputs(
    model=REF,
    segments=SystemSegments(prompt=family_prompt("anthropic"), environment="<env>\n</env>"),
    tools=SCHEMAS,
    max_output_tokens=8192,
)
_WORDS: Final = (
    "def",
    "return",
    "self",
    "value",
    "config",
    "session",
    "request",
    "import",
    "async",
    "await",
    "None",
    "result",
    "error",
    "path",
    "items",
    "index",
    "for",
    "in",
    "if",
    "else",
    "raise",
    "with",
    "open",
    "read",
    "write",
    "line",
    "file",
    "test",
    "assert",
)


class ToolCall(NamedTuple):
    """A tool call of a model step and the output it gets."""

    tool: str
    input: dict[str, Any]
    output: str


class Turn(NamedTuple):
    """What one turn records: the user's text, a model step calling tools, the answer."""

    user: str
    step_text: str
    calls: tuple[ToolCall, ...]
    step_usage: Usage
    answer: str
    answer_usage: Usage


def _text(rng: random.Random, size: int) -> str:
    lines: list[str] = []
    length = 0
    while length < size:
        line = " ".join(rng.choices(_WORDS, k=rng.randint(3, 12)))
        lines.append(line)
        length += len(line) + 1
    return "\n".join(lines)[:size]


def script(seed: int, turns: int) -> list[Turn]:
    """A session's ``turns`` turns, the same for every ``seed``."""
    rng = random.Random(seed)
    weights = [TOOLS[t].calls for t in TURN_TOOLS]
    prompt = SYSTEM_TOKENS
    out: list[Turn] = []
    for n in range(turns):
        calls: list[ToolCall] = []
        for k in range(2 if rng.random() < TWO_CALLS else 1):
            tool = rng.choices(TURN_TOOLS, weights)[0]
            size = min(draw_size(rng, TOOLS[tool].output), OUTPUT_CAP)
            calls.append(ToolCall(tool, {"path": f"src/mod_{n}_{k}.py"}, _text(rng, size)))
        user = _text(rng, min(draw_size(rng, USER_TEXT_CHARS), 2_000))
        step = _text(rng, min(draw_size(rng, ASSISTANT_TEXT_CHARS), 1_000))
        answer = _text(rng, min(draw_size(rng, ASSISTANT_TEXT_CHARS), 2_000))
        prompt += len(user) // 4
        step_usage = Usage(input=len(user) // 4, cache_read=prompt, output=len(step) // 4 + 30)
        prompt += len(step) // 4 + 30 + sum(len(c.output) for c in calls) // 4
        answer_usage = Usage(input=200, cache_read=prompt, output=len(answer) // 4)
        prompt += len(answer) // 4
        out.append(Turn(user, step, tuple(calls), step_usage, answer, answer_usage))
    return out


class _Clock:
    """Event times: a millisecond counter."""

    def __init__(self) -> None:
        self.now = START_MS

    def __call__(self) -> int:
        self.now += 1
        return self.now


class _Sample:
    """What a phase collects: build latencies and each session's last request size."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.last_bytes: dict[int, int] = {}


class Timeline:
    """Simulated model latencies that cost no wall time.

    Every session is a task; ``pause`` ends a session's step and waits for its model, which
    answers after ``MODEL_SECONDS`` simulated seconds. One step runs at a time: when the
    running one pauses (or its session ends), the session whose answer comes first in
    simulated time goes on. The sessions interleave as agents waiting for a model do, and
    a step that waits (a commit on a worker thread) holds back the others instead of letting
    all of them pile up behind it."""

    def __init__(self, sessions: int, seed: int) -> None:
        self._rng = random.Random(seed)
        self._waiting: list[tuple[float, int, trio.Event]] = []
        self._running = sessions
        self._now = 0.0
        self._order = itertools.count()

    async def pause(self) -> None:
        """End the current step; return when this session's model has answered."""
        answered = trio.Event()
        low, high = MODEL_SECONDS
        heapq.heappush(
            self._waiting, (self._now + self._rng.uniform(low, high), next(self._order), answered)
        )
        self._step_done()
        await answered.wait()

    def done(self) -> None:
        """A session ran its last turn."""
        self._step_done()

    def _step_done(self) -> None:
        self._running -= 1
        if self._running == 0 and self._waiting:
            self._now, _, answered = heapq.heappop(self._waiting)
            self._running += 1
            answered.set()


# --- the runtime ---------------------------------------------------------------------------


async def _drive_runtime(
    index: int, session: SessionHandle, turns: Sequence[Turn], timeline: Timeline, sample: _Sample
) -> None:
    async def build() -> None:
        start = time.perf_counter()
        built = await session.build_request(INPUTS)
        sample.latencies.append(time.perf_counter() - start)
        sample.last_bytes[index] = len(built.encoded.body)

    for turn in turns:
        await timeline.pause()
        user = await session.add_user(turn.user)
        await build()
        await timeline.pause()
        await session.record_assistant(
            user,
            text=turn.step_text,
            tool_calls=[(c.tool, c.input, c.output) for c in turn.calls],
            usage=turn.step_usage,
        )
        await build()
        await timeline.pause()
        await session.record_assistant(user, text=turn.answer, usage=turn.answer_usage)
    timeline.done()


# --- the core ------------------------------------------------------------------------------


class _CoreSession:
    """One session written through ``SessionLog`` and built with ``prepare_request``."""

    def __init__(self, log: SessionLog, clock: _Clock, config: Config) -> None:
        self.log = log
        self.session_id = log.session_id
        self.clock = clock
        self.config = config
        self.builder = RequestBuilder(
            wire_format(WIRE),
            config,
            agent_id=MAIN_AGENT,  # as the runtime's builder: the main agent's slice
            usable_tokens=usable(MODEL, config),
            model=MODEL,
        )
        self._messages = IdGenerator("msg")
        self._parts = IdGenerator("prt")

    @classmethod
    async def open(
        cls, store: SQLiteStore, session_id: str, clock: _Clock, config: Config
    ) -> _CoreSession:
        log = await SessionLog.open(store, session_id)
        await log.append([SessionStarted(session_id=session_id, time_ms=clock(), model=REF)])
        return cls(log, clock, config)

    def message_id(self) -> str:
        return self._messages.next(self.clock.now)

    def part_id(self) -> str:
        return self._parts.next(self.clock.now)

    async def add_user(self, text: str) -> str:
        message_id = self.message_id()
        events: list[Event] = user_message_events(
            self.log.history,
            message_id=message_id,
            new_part_id=self.part_id,
            text=text,
            agent="build",
            model=REF,
            time_ms=self.clock(),
        )
        await self.log.append(events)
        return message_id

    async def build(self) -> int:
        """The runtime's decision (``compaction_due``), then ``prepare_request``; the body
        size."""
        history = self.log.history
        system = system_for(history, INPUTS.segments)
        if compaction_due(
            history, MODEL, self.config, agent_id=MAIN_AGENT, system=system, tools=INPUTS.tools
        ):
            raise RuntimeError("the benchmark's sessions never reach the compaction limit")
        built = await prepare_request(self.log, self.builder, INPUTS, time_ms=self.clock())
        return len(built.encoded.body)

    async def _append(self, *events: Event) -> None:
        await self.log.append(events)

    async def assistant(
        self, parent_id: str, text: str, calls: Sequence[ToolCall], usage: Usage
    ) -> None:
        sid, message_id = self.session_id, self.message_id()
        now = self.clock()
        await self._append(
            MessageAdded(
                session_id=sid,
                time_ms=now,
                message_id=message_id,
                role="assistant",
                parent_id=parent_id,
                agent="build",
                model=REF,
            ),
            PartAdded(
                session_id=sid,
                time_ms=now,
                part=StepStartPart(id=self.part_id(), message_id=message_id),
            ),
        )
        await self._append(
            PartAdded(
                session_id=sid,
                time_ms=self.clock(),
                part=TextPart(id=self.part_id(), message_id=message_id, text=text),
            )
        )
        for call in calls:
            part_id = self.part_id()
            await self._append(
                PartAdded(
                    session_id=sid,
                    time_ms=self.clock(),
                    part=ToolPart(
                        id=part_id,
                        message_id=message_id,
                        call_id=f"call_{part_id.removeprefix('prt_')}",
                        tool=call.tool,
                        state=ToolPending(input=call.input),
                    ),
                )
            )
            now = self.clock()
            state = ToolCompleted(
                input=call.input, output=call.output, started_ms=now, ended_ms=now
            )
            await self._append(
                ToolStateChanged(
                    session_id=sid, time_ms=now, message_id=message_id, part_id=part_id, state=state
                )
            )
        finish = "tool-calls" if calls else "stop"
        now = self.clock()
        await self._append(
            PartAdded(
                session_id=sid,
                time_ms=now,
                part=StepFinishPart(
                    id=self.part_id(), message_id=message_id, reason=finish, usage=usage
                ),
            ),
            AssistantFinished(
                session_id=sid, time_ms=now, message_id=message_id, finish=finish, usage=usage
            ),
        )


async def _drive_core(
    index: int, session: _CoreSession, turns: Sequence[Turn], timeline: Timeline, sample: _Sample
) -> None:
    async def build() -> None:
        start = time.perf_counter()
        size = await session.build()
        sample.latencies.append(time.perf_counter() - start)
        sample.last_bytes[index] = size

    for turn in turns:
        await timeline.pause()
        user = await session.add_user(turn.user)
        await build()
        await timeline.pause()
        await session.assistant(user, turn.step_text, turn.calls, turn.step_usage)
        await build()
        await timeline.pause()
        await session.assistant(user, turn.answer, (), turn.answer_usage)
    timeline.done()


# --- measuring -----------------------------------------------------------------------------


def _percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _figures(sample: _Sample, turns: int, seconds: float) -> dict[str, Any]:
    return {
        "turns_per_s": turns / seconds,
        "seconds": seconds,
        "builds": len(sample.latencies),
        "build_ms_p50": _percentile(sample.latencies, 0.50) * 1e3,
        "build_ms_p99": _percentile(sample.latencies, 0.99) * 1e3,
    }


async def _measure(
    path: str, scripts: Sequence[Sequence[Turn]]
) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """Both phases on one store: the core, then the runtime."""
    turns = sum(len(s) for s in scripts)
    config = Config()
    async with SQLiteStore.open(path) as store:
        times = _Clock()
        cores = [
            await _CoreSession.open(store, f"core-{i:04d}", times, config)
            for i in range(len(scripts))
        ]
        core = _Sample()
        timeline = Timeline(len(scripts), seed=1)
        gc.collect()
        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for i, (session, turns_) in enumerate(zip(cores, scripts, strict=True)):
                nursery.start_soon(_drive_core, i, session, turns_, timeline, core)
        core_figures = _figures(core, turns, time.perf_counter() - start)
        del cores
        ours = _Sample()
        timeline = Timeline(len(scripts), seed=1)
        async with Runtime.open(store, model=MODEL, config=config, wire=WIRE, clock=_Clock()) as rt:
            handles = [await rt.session(f"runtime-{i:04d}") for i in range(len(scripts))]
            gc.collect()
            start = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for i, (handle, turns_) in enumerate(zip(handles, scripts, strict=True)):
                    nursery.start_soon(_drive_runtime, i, handle, turns_, timeline, ours)
            runtime_figures = _figures(ours, turns, time.perf_counter() - start)
    return runtime_figures, core_figures, ours.last_bytes == core.last_bytes


def size(options: Options) -> tuple[int, int]:
    """(sessions, turns) for ``options``."""
    if options.events:
        sessions = max(2, min(SESSIONS, options.events // 200))
        turns = max(2, min(TURNS, options.events // (EVENTS_PER_TURN * sessions)))
        return sessions, turns
    return SESSIONS, TURNS


def run(options: Options) -> dict[str, Any]:
    """Measure and return the figures (see the module docstring)."""
    sessions, turns = size(options)
    scripts = [script(seed, turns) for seed in range(sessions)]
    with temp_dir("contextledger-actors-") as folder:
        ours, core, same = trio.run(_measure, os.path.join(folder, "actors.db"), scripts)
    overhead = ratio(ours["build_ms_p50"], core["build_ms_p50"])
    return {
        "sessions": sessions,
        "turns": turns,
        "issue_size": (sessions, turns) == (SESSIONS, TURNS),
        "runtime": ours,
        "core": core,
        "overhead_p50": overhead,
        "overhead_p99": ratio(ours["build_ms_p99"], core["build_ms_p99"]),
        "throughput_ratio": ratio(ours["turns_per_s"], core["turns_per_s"]),
        "same_bytes": same,
        "target_overhead_p50": TARGET_OVERHEAD,
        "target_met": overhead is not None and overhead <= TARGET_OVERHEAD,
    }


def render(result: dict[str, Any]) -> str:
    """The figures as a table."""
    rows = [["", "turns/s", "build p50 ms", "build p99 ms", "builds", "seconds"]]
    for label in ("runtime", "core"):
        r = result[label]
        rows.append(
            [
                label,
                f"{r['turns_per_s']:.0f}",
                f"{r['build_ms_p50']:.3f}",
                f"{r['build_ms_p99']:.3f}",
                str(r["builds"]),
                f"{r['seconds']:.1f}",
            ]
        )
    size_note = (
        "the issue's size"
        if result["issue_size"]
        else f"scaled down by --events from the issue's {SESSIONS} x {TURNS}"
    )
    text = (
        f"actors: {result['sessions']} sessions x {result['turns']} turns on SQLite "
        f"({size_note}), runtime vs pure core\n"
    )
    text += table(rows, right=[False] + [True] * 5)
    text += (
        f"overhead_p50: {result['overhead_p50']:.2f}x (target <= {TARGET_OVERHEAD:g}x, "
        f"{'met' if result['target_met'] else 'NOT met'}), "
        f"overhead_p99: {result['overhead_p99']:.2f}x\n"
        f"throughput: {result['throughput_ratio']:.2f}x the core's turns/s; "
        f"same request sizes on both sides: {'yes' if result['same_bytes'] else 'NO'}\n"
    )
    return text
