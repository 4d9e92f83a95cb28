"""The demo: one coding session replayed through the runtime under the default policy.

``load_session`` picks the session: a transcript given by path, else the newest Claude Code
session under ``~/.claude/projects/``, else a generated one (``synthetic_session``).
``replay_session`` drives a ``Runtime`` with its recorded turns through
``simulation.TurnReplay`` (which says how a replay records, builds, prices and restates the
usage), on the ``default`` strategy's configuration; ``turn_rows`` sums the calls per user
turn, and ``simulate_strategies`` prices the same session under the other strategies.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import msgspec
import structlog

from contextledger.actors._runtime import Runtime
from contextledger.config import Config
from contextledger.events._catalogue import Event, SessionStarted
from contextledger.importers._detect import import_trace
from contextledger.importers._errors import TraceImportError
from contextledger.simulation import (
    DEFAULT_STRATEGIES,
    ReplayClock,
    ReplayedCall,
    TraceResult,
    TurnReplay,
    describe_actions,
    recorded_turns,
    request_inputs,
    simulate_trace_async,
    sized_model,
    trace_result,
)
from contextledger.simulation._synthetic import synthetic_session
from contextledger.store._protocol import EventStore
from contextledger.strategies import strategy

DEMO_WINDOW: Final = 32_000
#: Turns of the generated session: about 240 model calls, replayed and simulated in seconds.
DEMO_TURNS: Final = 8
DEMO_SEED: Final = 7
#: The report's name for the runtime replay's series.
RUNTIME_SERIES: Final = "runtime"
SourceKind = Literal["trace", "claude-code", "synthetic"]

_logger = structlog.get_logger(__name__)


#: How many skipped sessions the demo's header names with their reason (the log has all).
SKIPPED_SHOWN: Final = 3


class SkippedSession(msgspec.Struct, frozen=True, kw_only=True):
    """A Claude Code session the demo passed over: its ``path`` and why it did not import."""

    path: str
    reason: str


class SessionSource(msgspec.Struct, frozen=True, kw_only=True):
    """Where the demo's session came from: ``kind``, the transcript's ``path`` (None for a
    generated one), a short ``label`` for the report, and the newer Claude Code sessions
    ``skipped`` because they did not import."""

    kind: SourceKind
    path: str | None
    label: str
    skipped: tuple[SkippedSession, ...] = ()

    def describe(self) -> str:
        """One line for the demo's header."""
        if self.kind == "trace":
            said = f"the transcript {self.path}"
        elif self.kind == "claude-code":
            said = f"your most recent Claude Code session, {self.path}"
        else:
            said = f"a generated coding session ({self.label})"
        if self.skipped:
            n = len(self.skipped)
            shown = self.skipped[:SKIPPED_SHOWN]
            why = "; ".join(f"{Path(s.path).name}: {s.reason}" for s in shown)
            more = f"; {n - SKIPPED_SHOWN:,} more in the log" if n > SKIPPED_SHOWN else ""
            said += (
                f"; skipped {n} Claude Code session{'' if n == 1 else 's'} that did not import "
                f"({why}{more})"
            )
        return said


# --- choosing the session --------------------------------------------------------------------


def claude_code_sessions(home: Path) -> list[Path]:
    """The Claude Code sessions under ``home/.claude/projects/``, newest first: the
    ``*.jsonl`` files directly in a project folder (sub-agent folders are left out)."""
    projects = home / ".claude" / "projects"
    if not projects.is_dir():
        return []
    found = [p for p in projects.glob("*/*.jsonl") if p.is_file()]
    return sorted(found, key=lambda p: (p.stat().st_mtime, str(p)), reverse=True)


def _calls(events: Sequence[Event]) -> int:
    return sum(len(turn.calls) for turn in recorded_turns(events))


def import_session(path: Path) -> list[Event]:
    """The events of the first session of the transcript at ``path`` that has a model call.
    Raises ``ValueError`` when it cannot be read or has none, ``TraceImportError`` when it is
    in no supported format."""
    try:
        sessions = import_trace(path)
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc}") from exc
    for session in sessions:
        if _calls(session.events):
            return session.events
    raise ValueError(f"{path} holds no model call to replay")


def load_session(
    trace: Path | None, home: Path, *, seed: int = DEMO_SEED, turns: int = DEMO_TURNS
) -> tuple[SessionSource, list[Event]]:
    """The demo's session: ``trace`` when given (its errors raise), else the newest Claude
    Code session under ``home`` that imports (those that do not are logged and skipped),
    else the generated session of ``seed`` and ``turns``."""
    if trace is not None:
        return SessionSource(kind="trace", path=str(trace), label=trace.name), import_session(trace)
    if turns < 1:
        raise ValueError(f"--turns must be 1 or more, not {turns}")
    skipped: list[SkippedSession] = []
    for path in claude_code_sessions(home):
        try:
            events = import_session(path)
        except (TraceImportError, ValueError) as exc:
            _logger.warning("claude code session skipped", path=str(path), error=str(exc))
            reason = exc.reason if isinstance(exc, TraceImportError) else str(exc)
            where = f"line {exc.line}: " if isinstance(exc, TraceImportError) and exc.line else ""
            skipped.append(SkippedSession(path=str(path), reason=where + reason))
            continue
        label = f"{path.parent.name}/{path.name}"
        source = SessionSource(
            kind="claude-code", path=str(path), label=label, skipped=tuple(skipped)
        )
        return source, events
    label = f"synthetic, seed {seed}, {turns} turn{'' if turns == 1 else 's'}"
    events = synthetic_session("ses_synthetic", seed=seed, turns=turns)
    source = SessionSource(kind="synthetic", path=None, label=label, skipped=tuple(skipped))
    return source, events


# --- what was recorded -----------------------------------------------------------------------


def session_title(events: Sequence[Event]) -> str:
    """The recorded session's title, or ``""``."""
    started = next((e for e in events if isinstance(e, SessionStarted)), None)
    return started.title if started is not None else ""


# --- the replay ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Replay:
    """A session replayed through the runtime: its id in the store, the simulated figures of
    each call (``result``, strategy ``runtime``), each call's turn (0-based), and per turn
    what the runtime did during it (compactions before its calls, the after-turn prune)."""

    session_id: str
    result: TraceResult
    call_turns: tuple[int, ...]
    turn_actions: tuple[str, ...]


def tally(actions: Sequence[str]) -> str:
    """``actions`` joined with ``"; "``, each distinct one once, repeats counted:
    ``["compacted", "compacted", "cleared 2 outputs (900 tokens)"]`` gives
    ``"compacted x2; cleared 2 outputs (900 tokens)"``."""
    counts = Counter(a for a in actions if a)
    return "; ".join(a if n == 1 else f"{a} x{n}" for a, n in counts.items())


async def replay_session(
    store: EventStore,
    session_id: str,
    events: Sequence[Event],
    *,
    model_id: str,
    window: int = DEMO_WINDOW,
    on_progress: Callable[[int, int, str], None] | None = None,
) -> Replay:
    """Write ``events`` into ``store`` as ``session_id`` by driving a ``Runtime`` with their
    recorded turns (``simulation.TurnReplay``) under the ``default`` strategy's configuration
    and a ``window``-token context, priced as ``model_id``. ``on_progress(done, total,
    label)`` is called before each turn and once at the end."""
    if window < 1:
        raise ValueError("the window must be positive")
    turns = recorded_turns(events)
    inputs = request_inputs(events, "anthropic", model_id)
    config = strategy("default").configure(Config())
    clock = ReplayClock(events[0].time_ms if events else 0)
    calls: list[ReplayedCall] = []
    async with Runtime.open(
        store, model=sized_model("anthropic", model_id, window), config=config, clock=clock
    ) as runtime:
        session = await runtime.session(session_id, title=session_title(events))
        replay = TurnReplay(session, turns, inputs, clock, context=window)
        async for call in replay.calls():
            if on_progress is not None and (not calls or calls[-1].turn != call.turn):
                on_progress(call.turn, len(turns), f"turn {call.turn + 1}")
            calls.append(call)
    if on_progress is not None:
        on_progress(len(turns), len(turns), "")
    turn_actions: list[list[str]] = [[] for _ in turns]
    for call in calls:  # a prune is the turn's that ran it: the call before's
        if call.compactions:
            turn_actions[call.turn].extend(call.compactions)
        if call.pruned:
            turn_actions[calls[call.call - 1].turn].append(describe_actions((), call.pruned))
    if replay.trailing_pruned and calls:
        turn_actions[calls[-1].turn].append(describe_actions((), replay.trailing_pruned))
    result = trace_result(
        RUNTIME_SERIES,
        "anthropic",
        model_id,
        [c.sim for c in calls],
        [c.actions for c in calls],
    )
    return Replay(
        session_id,
        result,
        tuple(c.turn for c in calls),
        tuple(tally(done) for done in turn_actions),
    )


# --- the table -------------------------------------------------------------------------------

TABLE_COLUMNS: Final = (
    "turn",
    "calls",
    "peak_prompt",
    "cache_read",
    "cache_write",
    "uncached",
    "input_cost_usd",
    "actions",
)


def turn_rows(replay: Replay) -> list[dict[str, Any]]:
    """One row per user turn (``TABLE_COLUMNS``): its calls, their peak prompt, the cache
    read, written and uncached tokens and input cost summed, and what the runtime did."""
    result = replay.result
    rows: list[dict[str, Any]] = []
    for turn, actions in enumerate(replay.turn_actions):
        calls = [i for i, t in enumerate(replay.call_turns) if t == turn]
        rows.append(
            {
                "turn": turn + 1,
                "calls": len(calls),
                "peak_prompt": max((result.prompt_tokens[i] for i in calls), default=0),
                "cache_read": sum(result.cache_read[i] for i in calls),
                "cache_write": sum(result.cache_write[i] for i in calls),
                "uncached": sum(result.uncached[i] for i in calls),
                "input_cost_usd": sum(result.input_cost[i] for i in calls),
                "actions": actions,
            }
        )
    return rows


def totals(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The rows summed (the peak prompt is their maximum), with the number of turns and of
    turns in which the runtime did something."""
    return {
        "turns": len(rows),
        "calls": sum(r["calls"] for r in rows),
        "peak_prompt": max((r["peak_prompt"] for r in rows), default=0),
        "cache_read": sum(r["cache_read"] for r in rows),
        "cache_write": sum(r["cache_write"] for r in rows),
        "uncached": sum(r["uncached"] for r in rows),
        "input_cost_usd": sum(r["input_cost_usd"] for r in rows),
        "turns_with_actions": sum(1 for r in rows if r["actions"]),
    }


# --- the run ---------------------------------------------------------------------------------


def next_session_id(existing: Iterable[str]) -> str:
    """The first ``ses_demo_NNN`` (from 001) not in ``existing``."""
    taken = set(existing)
    number = 1
    while f"ses_demo_{number:03d}" in taken:
        number += 1
    return f"ses_demo_{number:03d}"


async def simulate_strategies(
    events: Sequence[Event],
    window: int = DEMO_WINDOW,
    on_progress: Callable[[int, int, str], None] | None = None,
) -> dict[str, TraceResult]:
    """``events`` simulated on Anthropic under each of ``DEFAULT_STRATEGIES`` at
    ``window``, by strategy name; ``on_progress(done, total, name)`` before each and once at
    the end."""
    names = DEFAULT_STRATEGIES
    results: dict[str, TraceResult] = {}
    for done, name in enumerate(names):
        if on_progress is not None:
            on_progress(done, len(names), name)
        results[name] = await simulate_trace_async(events, strategy_name=name, window=window)
    if on_progress is not None:
        on_progress(len(names), len(names), "")
    return results


def report_results(
    label: str, simulated: Mapping[str, TraceResult], replay: Replay
) -> dict[str, dict[str, dict[str, TraceResult]]]:
    """What ``render_report`` takes: ``{label: {strategy: {"anthropic": result}}}``, the
    simulated strategies and the runtime replay (``RUNTIME_SERIES``)."""
    series = {name: {"anthropic": result} for name, result in simulated.items()}
    series[RUNTIME_SERIES] = {"anthropic": replay.result}
    return {label: series}
