"""Agent-loop scenarios: many sessions, each running a scripted tool loop through the runtime
against the loopback provider, with child sessions, agent slices, faults and an optional
cancellation of the runtime followed by a reopen and resume.

``run_scenario`` (trio) and ``run_scenario_in_asyncio`` (the runtime as a trio guest of an
asyncio loop) run a ``Scenario`` and return its ``ScenarioRun`` (``testing._scenario``): each
agent's outcome, every request the provider received with its verdict and cache usage, and
the bodies each session's log replays to (``testing._body_replay``).
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Final

import trio

from contextledger.actors import Runtime, SessionHandle, embed_in_asyncio
from contextledger.actors._runtime import INTERRUPTED_DETAIL
from contextledger.compaction import (
    ExtractiveSummarizer,
    ModelSummarizer,
    Summarizer,
    SummaryInput,
)
from contextledger.events import (
    MAIN_AGENT,
    CompactionCompleted,
    CompactionRequested,
    CompactionRolledBack,
    ModelRef,
    RecordedEvent,
    ToolPart,
    ToolPending,
    ToolRunning,
    ToolSchema,
)
from contextledger.providers import (
    ContextOverflowError,
    ProviderClient,
    RetryPolicy,
    wire_format,
)
from contextledger.request import RequestInputs, SystemSegments
from contextledger.store import EventStore
from contextledger.testing._body_replay import BodyReplay, replay_bodies
from contextledger.testing._invariants import InvariantViolation, check_tool_pairs
from contextledger.testing._scenario import (
    MODELS,
    AgentOutcome,
    Lag,
    Overflow,
    Scenario,
    ScenarioRun,
    Wire,
)
from contextledger.testing.loopback import (
    Fault,
    LoopbackProvider,
    Reaction,
    Reply,
    Script,
    ToolCall,
    read_step,
)

#: The summary the loopback model writes when asked for one: a summary request plays the
#: ``""`` conversation on Anthropic (it carries no ``metadata``), and on OpenAI a detour of
#: its session's (its ``prompt_cache_key``), answered with the script's ``tools_off``.
SUMMARY_TEXT: Final = (
    "## Goal\n- Finish the scripted task.\n\n## Progress\n- The scripted steps so far ran.\n\n"
    "## Next steps\n- Run the next scripted step."
)
#: Faults drawn for a loop's requests at ``Scenario.fault_rate``: rate limits with and
#: without a retry-after, 500, 529, dropped connections, and a provider that calls a fitting
#: request too long (an overflow the runtime must answer like a real one).
FAULTS: Final = (
    Fault.rate_limited(),
    Fault.rate_limited(retry_after=1),
    Fault.rate_limited(retry_after_ms=20),
    Fault.server_error(),
    Fault.overloaded(),
    Fault.dropped(),
    Fault.overflow(),
)
#: Retries with short waits (a retry-after is capped at ``max_delay``): six sends make a
#: run of faults that exhausts them rare enough not to matter at the default fault rate.
RETRY: Final = RetryPolicy(max_attempts=6, base_delay=0.005, max_delay=0.05)
#: Requests one agent may send before its loop counts as runaway: each step may meet an
#: overflow (one compaction, one resend) and a truncated answer.
REQUESTS_PER_STEP: Final = 4
#: The share of drawn faults that come as a burst of two (the retry meets a fault too);
#: never an overflow, which is not retried but answered with a compaction.
BURST_SHARE: Final = 0.2
#: How often the lag ticker wakes, in seconds.
TICK_S: Final = 0.005
TOOLS: Final = (
    ToolSchema(
        name="bash",
        description="Run a shell command.",
        input_schema={"type": "object", "properties": {"command": {"type": "string"}}},
    ),
)


def loop_inputs(session_id: str, agent_id: str, wire: Wire = "anthropic") -> RequestInputs:
    """What a loop builds its requests with on ``wire``: the wire's model, a short system
    prompt, the ``bash`` tool, and its conversation on the provider (``conversation``) as
    Anthropic's ``metadata.user_id`` or OpenAI's ``prompt_cache_key``."""
    key = conversation(session_id, agent_id)
    options = {"metadata": {"user_id": key}} if wire == "anthropic" else {"prompt_cache_key": key}
    return RequestInputs(
        model=model_ref(wire),
        segments=SystemSegments(prompt="Do what the user asks.", environment="cwd: /repo"),
        agent="build" if agent_id == MAIN_AGENT else agent_id,
        tools=TOOLS,
        options=options,
    )


def conversation(session_id: str, agent_id: str) -> str:
    """A loop's conversation on the provider: the session id, or ``<session>/<agent>`` for a
    slice."""
    return session_id if agent_id == MAIN_AGENT else f"{session_id}/{agent_id}"


def model_ref(wire: Wire) -> ModelRef:
    """The model a scenario on ``wire`` talks to (``MODELS``)."""
    provider_id, model_id, _ = MODELS[wire]
    return ModelRef(provider_id=provider_id, model_id=model_id)


# --- the loops --------------------------------------------------------------------------


class _Agent:
    """One loop's fixed facts and its outcome so far."""

    def __init__(
        self, outcome: AgentOutcome, steps: int, inputs: RequestInputs, faults: random.Random
    ) -> None:
        self.outcome = outcome
        self.steps = steps
        self.inputs = inputs
        self.faults = faults
        self.user: str | None = None
        self.overflow_injected = False


class _Loops:
    """The agents of a scenario and what they share: the provider, the client, the counts of
    actions and summaries (for the cancellation) and the cancel scope of the runtime."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.provider = _TimedProvider(self.script, models=[scenario.model])
        self.actions = 0
        self.summaries = 0
        self.scope: trio.CancelScope | None = None
        self.client: ProviderClient | None = None
        self.main: list[_Agent] = []
        self.slices: dict[str, _Agent] = {}
        self.children: dict[str, _Agent] = {}
        for n in range(scenario.sessions):
            session_id = f"ses_loop_{n:03d}"
            self.main.append(self._agent(session_id, MAIN_AGENT, scenario.steps))
            quarter = max(1, scenario.steps // 4)
            if n < scenario.slices:
                self.slices[session_id] = self._agent(session_id, "explore", quarter)
            if n < scenario.children:
                self.children[session_id] = self._agent(f"{session_id}_child", MAIN_AGENT, quarter)

    def _agent(self, session_id: str, agent_id: str, steps: int) -> _Agent:
        inputs = loop_inputs(session_id, agent_id, self.scenario.wire)
        key = conversation(session_id, agent_id)
        outcome = AgentOutcome(session_id=session_id, agent_id=agent_id, conversation=key)
        faults = random.Random(f"{self.scenario.seed}:faults:{key}")
        return _Agent(outcome, steps, inputs, faults)

    @property
    def agents(self) -> list[_Agent]:
        return [*self.main, *self.slices.values(), *self.children.values()]

    def script(self, key: str) -> Script:
        """The steps of conversation ``key``: tool calls with outputs drawn from its own
        seeded generator; a summary request (the ``""`` conversation, or a detour: one that
        may not call tools) is answered with ``SUMMARY_TEXT``."""
        summary = Reply(text=SUMMARY_TEXT)
        if not key:
            return Script(final=summary)
        agent = next(a for a in self.agents if a.outcome.conversation == key)
        draw = random.Random(f"{self.scenario.seed}:{key}")
        low, high = math.log(self.scenario.output_min), math.log(self.scenario.output_max)
        replies = tuple(
            Reply(
                text=f"Step {n}: running the next command.",
                tool_calls=(
                    ToolCall(
                        name="bash",
                        input={"command": f"step {n}"},
                        output=_output(n, round(math.exp(draw.uniform(low, high))), draw),
                    ),
                ),
            )
            for n in range(1, agent.steps + 1)
        )
        return Script(
            steps=(*replies, Reply(text="Done.")), final=Reply(text="Done."), tools_off=summary
        )

    def act(self) -> None:
        """Count one action of a loop; cancel the runtime at the ``cancel_after``-th."""
        self.actions += 1
        if self.scope is not None and self.actions == self.scenario.cancel_after:
            self.scope.cancel()

    def count_summary(self) -> None:
        """Count one summary asked for; cancel the runtime at the ``cancel_in_summary``-th."""
        self.summaries += 1
        if self.scope is not None and self.summaries == self.scenario.cancel_in_summary:
            self.scope.cancel()

    async def run_session(self, runtime: Runtime, index: int) -> None:
        """Run (or resume) session ``index``: its main loop with its slice half-way through,
        and its child session beside it."""
        main = self.main[index]
        handle = await runtime.session(main.outcome.session_id)
        async with trio.open_nursery() as nursery:
            child = self.children.get(main.outcome.session_id)
            if child is not None and not child.outcome.done:
                if child.outcome.session_id in await runtime.children(main.outcome.session_id):
                    child_handle = await runtime.session(child.outcome.session_id)
                else:
                    child_handle = await handle.start_subtask(child.outcome.session_id)
                nursery.start_soon(self.run_agent, child_handle, child, None)
            await self.run_agent(handle, main, self.slices.get(main.outcome.session_id))

    async def run_agent(self, handle: SessionHandle, agent: _Agent, inner: _Agent | None) -> None:
        """Run ``agent``'s loop to its end (``inner``, a slice, runs to its end once half the
        steps are done); an exception ends it as the outcome's ``error``."""
        outcome = agent.outcome
        if outcome.done or outcome.error is not None:
            return
        try:
            await self._resume(handle, agent)
            while not outcome.done:
                if (
                    inner is not None
                    and not inner.outcome.done
                    and outcome.steps >= agent.steps // 2
                ):
                    await self.run_agent(handle, inner, None)
                    if inner.outcome.error is not None:
                        raise RuntimeError(f"its slice failed: {inner.outcome.error}")
                await self._step(handle, agent)
        except Exception as exc:  # the outcome, not a crash of the scenario
            outcome.error = f"{type(exc).__name__}: {exc}"

    async def _resume(self, handle: SessionHandle, agent: _Agent) -> None:
        """Start the agent's turn, or after a reopen pick it up as the log left it: run the
        tools of calls without a result and finish an unfinished message."""
        outcome = agent.outcome
        history = await handle.history()
        users = [
            m
            for m in history.messages
            if m.role == "user" and m.agent_id == outcome.agent_id and not m.synthetic
        ]
        if agent.user is None and not users:
            agent.user = await handle.add_user(
                "Work through the scripted steps.",
                agent=agent.inputs.agent,
                agent_id=outcome.agent_id,
            )
            return
        agent.user = agent.user or users[-1].id
        for message in history.messages:
            if message.role != "assistant" or message.agent_id != outcome.agent_id:
                continue
            if message.finished_ms is not None or message.summary:
                continue
            outcome.resumed = True
            calls = [p for p in message.parts if isinstance(p, ToolPart)]
            for part in calls:
                if isinstance(part.state, ToolPending | ToolRunning):
                    output = self.provider.expected_output(part.call_id) or ""
                    await handle.record_tool_result(part.id, output, agent_id=outcome.agent_id)
            finish = "tool-calls" if calls else "stop"
            await handle.finish(message.id, finish=finish, agent_id=outcome.agent_id)

    def _draw_fault(self, agent: _Agent) -> None:
        """Queue the faults the agent's next request meets: drawn from its own generator (so
        each loop meets the same faults however the loops interleave), and the overflow of
        ``overflow_at``."""
        outcome, draw = agent.outcome, agent.faults
        if outcome.steps == self.scenario.overflow_at and not agent.overflow_injected:
            agent.overflow_injected = True
            self.provider.inject(Fault.overflow(), conversation=outcome.conversation)
        elif draw.random() < self.scenario.fault_rate:
            fault = draw.choice(FAULTS)
            burst = draw.random() < BURST_SHARE
            if fault.kind == "overflow":
                # Once, and not on the request answering an overflow: that one must be able
                # to be accepted.
                if outcome.overflows and outcome.overflows[-1].accepted_seq is None:
                    return
                burst = False
            self.provider.inject(fault, times=2 if burst else 1, conversation=outcome.conversation)

    async def _step(self, handle: SessionHandle, agent: _Agent) -> None:
        """Build, send and record one request of ``agent``; an overflow is recorded with
        ``record_error`` (which compacts). Each call into the runtime or the provider is an
        action (``act``), where the runtime may be cancelled."""
        outcome, agent_id = agent.outcome, agent.outcome.agent_id
        if outcome.requests >= REQUESTS_PER_STEP * (agent.steps + 1):
            raise RuntimeError(f"no end after {outcome.requests} requests")
        assert agent.user is not None and self.client is not None
        self.act()
        built = await handle.build_request(agent.inputs, agent_id=agent_id)
        # Drawn once the request is built: a compaction it ran first may have sent a summary
        # request in the loop's conversation (OpenAI's ``prompt_cache_key``).
        self._draw_fault(agent)
        outcome.requests += 1
        try:
            check_tool_pairs(list(built.request.messages))
        except InvariantViolation:
            outcome.unpaired += 1
        self.act()
        try:
            response = await self.client.send(built.request, built.encoded)
        except ContextOverflowError as exc:
            self.act()
            message = await handle.start_assistant(agent.user, agent_id=agent_id)
            seq = (await handle.history()).seq
            self.act()
            result = await handle.record_error(message, exc, agent_id=agent_id)
            outcome.overflows.append(
                Overflow(seq=seq, outcome=result.outcome if result is not None else None)
            )
            return
        step = read_step(response.body)
        self.act()
        message = await handle.start_assistant(agent.user, agent_id=agent_id)
        if step.text:
            self.act()
            await handle.add_text(message, step.text, agent_id=agent_id)
        for call in step.calls:
            self.act()
            part = await handle.call_tool(
                message, call.name, call.input, call_id=call.id, agent_id=agent_id
            )
            self.act()
            output = self.provider.expected_output(call.id) or ""
            await handle.record_tool_result(part, output, agent_id=agent_id)
        self.act()
        finish = "tool-calls" if step.calls else "stop"
        await handle.finish(message, finish=finish, usage=response.usage, agent_id=agent_id)
        if outcome.overflows and outcome.overflows[-1].accepted_seq is None:
            outcome.overflows[-1].accepted_seq = (await handle.history()).seq
        outcome.steps += bool(step.calls)
        outcome.done = step.stop in ("end_turn", "stop")


def _output(n: int, size: int, draw: random.Random) -> str:
    """A tool output of about ``size`` bytes: numbered lines of test-runner-like text."""
    lines = [f"$ step {n}"]
    total = len(lines[0])
    while total < size:
        line = f"tests/test_{draw.randrange(1000):03d}.py::case_{len(lines)} PASSED"
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)[:size]


class _TimedProvider(LoopbackProvider):
    """The loopback provider, adding up the CPU time its threads spend handling requests."""

    cpu_seconds = 0.0

    def _react(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Reaction:
        start = time.thread_time()
        try:
            return super()._react(method, path, headers, body)
        finally:
            self.cpu_seconds += time.thread_time() - start


# --- running a scenario ------------------------------------------------------------------


class _CountedSummarizer:
    """A summarizer that tells the loops each time a compaction asks it for a summary (so
    the runtime can be cancelled in the middle of one)."""

    def __init__(self, inner: Summarizer, loops: _Loops) -> None:
        self.inner = inner
        self.loops = loops
        self.max_input_tokens = inner.max_input_tokens

    async def summarize(self, task: SummaryInput) -> str:
        self.loops.count_summary()
        return await self.inner.summarize(task)


def _summarizer(loops: _Loops, client: ProviderClient) -> Summarizer:
    inner: Summarizer = ExtractiveSummarizer()
    if loops.scenario.summarizer == "model":
        inner = ModelSummarizer(client, model=model_ref(loops.scenario.wire))
    return _CountedSummarizer(inner, loops)


def _client(provider: LoopbackProvider, wire: Wire) -> ProviderClient:
    return ProviderClient(wire_format(wire), provider.url, api_key="test", retry=RETRY)


async def _ticker(sleep: Callable[[float], Awaitable[object]], lags: list[Lag]) -> None:
    """Sleep ``TICK_S`` over and over with the host loop's ``sleep``, appending for each
    wake-up the wall time (ms), how much later than asked it came (the loop's lag) and how
    long the loop's thread meanwhile waited for a CPU (``cpu_wait_ms``)."""
    while True:
        start, waited = time.monotonic(), cpu_wait_ms()
        await sleep(TICK_S)
        lag = (time.monotonic() - start - TICK_S) * 1000
        lags.append((time.time() * 1000, max(lag, 0.0), cpu_wait_ms() - waited))


def cpu_wait_ms() -> float:
    """Milliseconds the calling thread has spent ready to run while the system ran others
    (Linux's ``/proc/thread-self/schedstat``); 0 where the system does not say. On a loaded
    machine this is lag no program can avoid."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as stats:
            return int(stats.read().split()[1]) / 1e6
    except (OSError, IndexError, ValueError):
        return 0.0


async def run_scenario(scenario: Scenario, store: EventStore) -> ScenarioRun:
    """Run ``scenario`` on trio against a fresh loopback provider, its sessions in ``store``,
    and return what happened (see ``ScenarioRun``)."""
    cpu = time.process_time()
    lags: list[Lag] = []
    loops = _Loops(scenario)
    async with loops.provider as provider:
        async with _client(provider, scenario.wire) as client, trio.open_nursery() as ticking:
            loops.client = client
            ticking.start_soon(_ticker, trio.sleep, lags)
            with trio.CancelScope() as scope:
                loops.scope = scope
                await _run_all(loops, store, client)
            cancelled = scope.cancelled_caught
            loops.scope = None
            if cancelled:
                await _run_all(loops, store, client)
            ticking.cancel_scope.cancel()
        cpu_seconds = time.process_time() - cpu
    return await _collect(loops, store, lags, cpu_seconds, cancelled=cancelled)


async def _run_all(loops: _Loops, store: EventStore, client: ProviderClient) -> None:
    scenario = loops.scenario
    async with (
        Runtime.open(
            store,
            model=scenario.model,
            config=scenario.config,
            wire=scenario.wire,
            summarizer=_summarizer(loops, client),
        ) as runtime,
        trio.open_nursery() as nursery,
    ):
        for index in range(scenario.sessions):
            nursery.start_soon(loops.run_session, runtime, index)


def run_scenario_in_asyncio(
    scenario: Scenario, store: EventStore | AbstractAsyncContextManager[EventStore]
) -> ScenarioRun:
    """Run ``scenario`` from an asyncio program (``asyncio.run``): the runtime embedded with
    ``embed_in_asyncio`` as a trio guest of the asyncio loop on ``store`` (or the store an
    async context manager such as ``SQLiteStore.open(path)`` opens inside trio), one asyncio
    task per session calling into it, the lag ticker on the asyncio loop. ``cancel_after``
    and ``cancel_in_summary`` must be None: cancellation is ``run_scenario``'s."""
    if scenario.cancel_after is not None or scenario.cancel_in_summary is not None:
        raise ValueError("run_scenario_in_asyncio does not cancel; use run_scenario")
    return asyncio.run(_asyncio_main(scenario, store))


async def _asyncio_main(
    scenario: Scenario, store: EventStore | AbstractAsyncContextManager[EventStore]
) -> ScenarioRun:
    cpu = time.process_time()
    lags: list[Lag] = []
    opened: list[EventStore] = []

    @asynccontextmanager
    async def keep(
        store: EventStore | AbstractAsyncContextManager[EventStore],
    ) -> AsyncIterator[EventStore]:
        if isinstance(store, AbstractAsyncContextManager):
            async with store as inner:
                opened.append(inner)
                yield inner
        else:
            opened.append(store)
            yield store

    loops = _Loops(scenario)
    async with loops.provider as provider:
        client = loops.client = _client(provider, scenario.wire)
        ticker = asyncio.create_task(_ticker(asyncio.sleep, lags))
        try:
            async with embed_in_asyncio(
                keep(store),
                model=scenario.model,
                config=scenario.config,
                wire=scenario.wire,
                summarizer=_summarizer(loops, client),
            ) as bridge:

                def session(index: int) -> Callable[[Runtime], Awaitable[None]]:
                    return lambda runtime: loops.run_session(runtime, index)

                try:
                    await asyncio.gather(
                        *(bridge.call(session(n)) for n in range(scenario.sessions))
                    )
                finally:

                    async def close(runtime: Runtime) -> None:
                        await client.aclose()

                    await bridge.call(close)
                ticker.cancel()
                cpu_seconds = time.process_time() - cpu

                async def collect(runtime: Runtime) -> ScenarioRun:
                    return await _collect(loops, opened[0], lags, cpu_seconds, cancelled=False)

                return await bridge.call(collect)
        finally:
            ticker.cancel()


async def _collect(
    loops: _Loops,
    store: EventStore,
    lags: list[Lag],
    cpu_seconds: float,
    *,
    cancelled: bool,
) -> ScenarioRun:
    """The run's record: outcomes, the provider's exchanges, the bodies each session's log
    replays to and its compactions' intervals."""
    scenario = loops.scenario
    replays: list[BodyReplay] = []
    compactions: list[tuple[int, int]] = []
    interrupted: list[tuple[str, int]] = []
    sessions: dict[str, list[_Agent]] = {}
    for agent in loops.agents:
        sessions.setdefault(agent.outcome.session_id, []).append(agent)
    for session_id, agents in sessions.items():
        recorded = await store.read(session_id)
        inputs = {a.outcome.agent_id: a.inputs for a in agents}
        replays.extend(
            replay_bodies(
                recorded,
                config=scenario.config,
                model=scenario.model,
                inputs=inputs,
                wire=scenario.wire,
            )
        )
        compactions.extend(_compaction_intervals(recorded))
        interrupted.extend(
            (session_id, r.seq)
            for r in recorded
            if isinstance(r.event, CompactionRolledBack) and r.event.detail == INTERRUPTED_DETAIL
        )
        for agent in agents:
            for overflow in agent.outcome.overflows:
                end = overflow.accepted_seq if overflow.accepted_seq is not None else math.inf
                overflow.compactions = sum(
                    isinstance(r.event, CompactionRequested)
                    and r.event.agent_id == agent.outcome.agent_id
                    and overflow.seq < r.seq <= end
                    for r in recorded
                )
    return ScenarioRun(
        scenario=scenario,
        agents=[a.outcome for a in loops.agents],
        exchanges=loops.provider.received,
        replays=replays,
        lags=lags,
        compactions=compactions,
        interrupted=interrupted,
        cpu_seconds=cpu_seconds,
        server_cpu_seconds=loops.provider.cpu_seconds,
        cancelled=cancelled,
    )


def _compaction_intervals(recorded: Sequence[RecordedEvent]) -> list[tuple[int, int]]:
    """Each compaction's (requested, completed or rolled back) times in ms."""
    started: dict[str, int] = {}
    intervals: list[tuple[int, int]] = []
    for record in recorded:
        event = record.event
        if isinstance(event, CompactionRequested):
            started[event.message_id] = event.time_ms
        elif isinstance(event, CompactionCompleted | CompactionRolledBack):
            start = started.pop(event.request_message_id, None)
            if start is not None:
                intervals.append((start, event.time_ms))
    return intervals
