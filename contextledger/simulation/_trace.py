"""What a context strategy would have cost on a recorded trace, per provider.

``strategy_steps`` replays a trace's recorded turns (``replay.recorded_turns``, from its
conversation without the context management a runtime recorded: ``raw_events``) in a
``LocalSession`` under the strategy, as ``replay.TurnReplay`` drives any session: before each
model call the session decides whether to compact and builds the request (Anthropic wire for
``anthropic``, OpenAI chat for ``openai``), and after each turn it prunes, all through the
functions the runtime calls. The calls are then simulated with ``cachesim.PromptCache`` and the
provider's price entry (``anthropic``: the trace's model, else ``claude-sonnet-4-5``;
``openai``: ``gpt-5``). ``simulate_paths`` does so for every session of every transcript.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from itertools import accumulate
from pathlib import Path
from typing import Final, Literal

import msgspec
import trio

from contextledger.cachesim import PromptCache, lower_bound
from contextledger.cachesim._blocks import Block, SimRequest
from contextledger.compaction._compactor import CompactionExhausted
from contextledger.compaction._summarizers import Summarizer
from contextledger.events._catalogue import (
    AssistantFinished,
    CompactionCompleted,
    CompactionRequested,
    CompactionRolledBack,
    EnvironmentCaptured,
    Event,
    MessageAdded,
    PartAdded,
    PartsStripped,
    PartUpdated,
    PrefixAdvanced,
    PrefixPinned,
    PrefixRotated,
    RequestSent,
    SessionStarted,
    ToolOutputCleared,
    ToolOutputTrimmed,
    ToolStateChanged,
    UsageReported,
)
from contextledger.events._parts import (
    ModelRef,
    TextPart,
    ToolPart,
    ToolSchema,
)
from contextledger.history._projection import History
from contextledger.importers._claude_code import ImportedSession
from contextledger.importers._detect import TRANSCRIPT_SUFFIXES as TRANSCRIPT_SUFFIXES
from contextledger.importers._detect import import_trace, transcripts_under
from contextledger.prices._tables import price_for
from contextledger.providers._anthropic import AnthropicMessages
from contextledger.providers._base import WireFormat
from contextledger.providers._openai_chat import OpenAIChat
from contextledger.request._builder import RequestInputs
from contextledger.request._system import SystemSegments, family_prompt
from contextledger.simulation._local import LocalLog, LocalSession
from contextledger.simulation._replay import (
    ReplayClock,
    ReplayedCall,
    ReplayFailed,
    TurnReplay,
    recorded_turns,
)
from contextledger.simulation._retention import FactMemo, Retention, RetentionCounter
from contextledger.simulation._summaries import (
    PricedSummarizer,
    SummarizerName,
    SummaryMemo,
    TailOnlySummarizer,
)
from contextledger.strategies import Strategy, strategy
from contextledger.vocabulary._defaults import OUTPUT_TOKEN_MAX
from contextledger.vocabulary._models import Model, ModelLimits

Provider = Literal["anthropic", "openai"]
PROVIDERS: Final[tuple[Provider, ...]] = ("anthropic", "openai")
#: The window a replay (and the CLI's ``compact`` and ``prune``) sizes the model for unless
#: told: the 200,000 tokens of the Claude models the shared traces were recorded with.
DEFAULT_WINDOW: Final = 200_000
DEFAULT_MODELS: Final[dict[Provider, str]] = {
    "anthropic": "claude-sonnet-4-5",
    "openai": "gpt-5",
}
#: The largest output limit a replay's model gets (``sized_model``): the default output cap,
#: above which a model's own limit changes nothing.
OUTPUT_LIMIT: Final = OUTPUT_TOKEN_MAX


#: The strategies ``simulate`` compares by default: pi's four (``baseline``, ``truncate-500``,
#: ``age-truncate-500-keep-3``, ``compact-at-12000-structured``), Kilo's and opencode's
#: (``opencode``), MiMo Code's (``mimo-tiers``) and ours (``default``). Each sizes itself to
#: the window it is simulated with.
DEFAULT_STRATEGIES: Final[tuple[str, ...]] = (
    "baseline",
    "truncate-500",
    "age-truncate-500-keep-3",
    "compact-at-12000-structured",
    "opencode",
    "mimo-tiers",
    "default",
)


class TraceResult(msgspec.Struct, frozen=True, kw_only=True):
    """One session under one strategy and provider: per call, the prompt tokens, the
    uncached, cache-written and cache-read tokens, the input cost (USD) and what the strategy
    did before it (``actions``, empty when nothing); the billed input cost (USD), the peak
    prompt, the lower bound (USD) and the cost over the lower bound. ``lower_bound`` is the
    least the session's requests could cost, its summary calls included: the input side of
    ``cachesim.lower_bound`` over the calls and the summary calls in the order they were sent
    (each summary right before the call it was written for), plus the summaries' output
    tokens (``cost`` counts both); ``calls_lower_bound`` is the same over the calls alone, so
    ``cost_vs_calls_lower_bound`` also charges each summary call's whole cost as excess.
    ``failed_at`` is the call (from 1) the strategy could not make: it was still over the
    window after ``compaction.max_attempts`` compactions (``CompactionExhausted``, as a
    runtime raises), so the replay stopped there and the figures cover the calls before it;
    None when every call was made. ``over_window_calls`` counts the requests the provider
    refused as over the window (``replay.over_window``): not priced, each answered by an
    overflow compaction.
    ``compactions`` counts the compactions that completed; ``summarizer`` is what wrote their
    summaries, and under ``model`` each summary was a model call (``summaries.PricedSummarizer``):
    ``summary_calls`` of them, ``summary_input_tokens`` read and ``summary_output_tokens``
    written, costing ``summary_cost`` (USD, input and output), priced through the cache
    simulator in that order with the session's calls; ``summary_call_costs`` holds each
    summary call's cost with the index (from 0) of the call it was written for. ``cost`` is
    the billed input cost plus the summaries'. ``facts_needed`` and ``facts_retained`` count
    the facts the agent used again and those its requests held, ``facts_needed_older`` and
    ``facts_retained_older`` the same for the facts last mentioned more than
    ``_retention.RECENT_CALLS`` calls back (``_retention.RetentionCounter``)."""

    strategy: str
    provider: Provider
    model: str
    prompt_tokens: tuple[int, ...]
    uncached: tuple[int, ...]
    cache_write: tuple[int, ...]
    cache_read: tuple[int, ...]
    input_cost: tuple[float, ...]
    actions: tuple[str, ...]
    billed_input_cost: float
    peak_prompt: int
    lower_bound: float
    calls_lower_bound: float
    failed_at: int | None = None
    over_window_calls: int = 0
    compactions: int = 0
    summarizer: SummarizerName = "extractive"
    summary_calls: int = 0
    summary_input_tokens: int = 0
    summary_output_tokens: int = 0
    summary_cost: float = 0.0
    summary_call_costs: tuple[tuple[int, float], ...] = ()
    facts_needed: int = 0
    facts_retained: int = 0
    facts_needed_older: int = 0
    facts_retained_older: int = 0

    @property
    def _retention(self) -> Retention:
        return Retention(
            self.facts_needed,
            self.facts_retained,
            self.facts_needed_older,
            self.facts_retained_older,
        )

    @property
    def retention(self) -> float | None:
        """The share of the facts the agent used again that its requests held
        (``_retention.RetentionCounter``); None when it used none again."""
        return self._retention.share

    @property
    def retention_older(self) -> float | None:
        """``retention`` over the facts last mentioned more than ``_retention.RECENT_CALLS``
        calls back; None when it used none of them again."""
        return self._retention.share_older

    @property
    def cost(self) -> float:
        """What the session cost: its calls' input and its summary calls (USD)."""
        return self.billed_input_cost + self.summary_cost

    @property
    def calls(self) -> int:
        """The number of model calls."""
        return len(self.prompt_tokens)

    @property
    def running_costs(self) -> tuple[float, ...]:
        """What the session would have cost had it ended after each call (USD): the calls so
        far and the summary calls written for them. A summary written for the call that
        failed is in ``cost`` only."""
        extra = [0.0] * self.calls
        for call, cost in self.summary_call_costs:
            if call < self.calls:
                extra[call] += cost
        return tuple(accumulate(c + e for c, e in zip(self.input_cost, extra, strict=True)))

    @property
    def cost_vs_lower_bound(self) -> float | None:
        """``cost / lower_bound``, summaries in both; None when the lower bound is zero."""
        return self.cost / self.lower_bound if self.lower_bound else None

    @property
    def cost_vs_calls_lower_bound(self) -> float | None:
        """``cost / calls_lower_bound``: summaries in the cost only; None when it is zero."""
        return self.cost / self.calls_lower_bound if self.calls_lower_bound else None

    def summary(self) -> dict[str, float | int | str | None]:
        """The headline figures, as ``simulate --json`` prints them."""
        return {
            "billed_input_cost": self.billed_input_cost,
            "peak_prompt": self.peak_prompt,
            "lower_bound": self.lower_bound,
            "cost_vs_lower_bound": self.cost_vs_lower_bound,
            "calls_lower_bound": self.calls_lower_bound,
            "cost_vs_calls_lower_bound": self.cost_vs_calls_lower_bound,
            "calls": self.calls,
            "failed_at": self.failed_at,
            "over_window_calls": self.over_window_calls,
            "compactions": self.compactions,
            "summarizer": self.summarizer,
            "summary_calls": self.summary_calls,
            "summary_input_tokens": self.summary_input_tokens,
            "summary_output_tokens": self.summary_output_tokens,
            "summary_cost": self.summary_cost,
            "cost": self.cost,
            "facts_needed": self.facts_needed,
            "facts_retained": self.facts_retained,
            "retention": self.retention,
            "facts_needed_older": self.facts_needed_older,
            "facts_retained_older": self.facts_retained_older,
            "retention_older": self.retention_older,
        }


def _wire(provider: Provider) -> WireFormat:
    return AnthropicMessages() if provider == "anthropic" else OpenAIChat()


def _trace_model(events: Sequence[Event]) -> str | None:
    for event in events:
        if isinstance(event, MessageAdded) and event.model is not None:
            return event.model.model_id
        if isinstance(event, SessionStarted) and event.model is not None:
            return event.model.model_id
    return None


def priced_model(provider: Provider, events: Sequence[Event]) -> str:
    """The model a replay of ``events`` on ``provider`` is priced as: for ``anthropic`` the
    trace's own model when the price table has it, else ``DEFAULT_MODELS[provider]``."""
    if provider == "anthropic":
        traced = _trace_model(events)
        if traced is not None:
            try:
                price_for(traced, "anthropic")
            except KeyError:
                pass
            else:
                return traced
    return DEFAULT_MODELS[provider]


def request_inputs(events: Sequence[Event], provider: Provider, model_id: str) -> RequestInputs:
    """The inputs of every request a replay of ``events`` builds: the provider family's system
    prompt and one schema per tool the session called."""
    return RequestInputs(
        model=ModelRef(provider_id=provider, model_id=model_id),
        segments=SystemSegments(prompt=family_prompt(provider), environment="<env>\n</env>"),
        tools=_tools(events),
    )


def _tools(events: Sequence[Event]) -> tuple[ToolSchema, ...]:
    names = sorted(
        {e.part.tool for e in events if isinstance(e, PartAdded) and isinstance(e.part, ToolPart)}
    )
    return tuple(
        ToolSchema(name=n, description=f"The {n} tool.", input_schema={"type": "object"})
        for n in names
    )


#: The events of context management and request bookkeeping: what a runtime did to the
#: conversation and sent, as opposed to the conversation itself.
MANAGEMENT_EVENTS: Final = (
    ToolOutputCleared,
    ToolOutputTrimmed,
    PartsStripped,
    CompactionRequested,
    CompactionCompleted,
    CompactionRolledBack,
    PrefixPinned,
    PrefixRotated,
    PrefixAdvanced,
    RequestSent,
    UsageReported,
)


def raw_events(events: Sequence[Event]) -> list[Event]:
    """The conversation of ``events`` as the agent had it, without the context management a
    runtime applied to it: no prunes, compactions (their requests, summaries and the
    synthetic messages that resumed after them: a "continue" message wherever it is, a replayed
    request right after the compaction) or request records. A message whose parent
    was left out takes that message's nearest kept ancestor as its parent. A strategy replays
    this, so a session a runtime already compacted is not compacted again on top."""
    dropped: dict[str, str | None] = {}  # a left-out message's id: its own parent
    parts: set[str] = set()
    continues = {  # the "continue" messages compactions added, wherever they landed
        e.part.message_id
        for e in events
        if isinstance(e, PartAdded)
        and isinstance(e.part, TextPart)
        and e.part.metadata.get("compaction_continue")
    }
    resuming = False
    kept: list[Event] = []

    def ancestor(message_id: str | None) -> str | None:
        while message_id in dropped:
            message_id = dropped[message_id]
        return message_id

    for event in events:
        if isinstance(event, MANAGEMENT_EVENTS):
            if isinstance(event, CompactionRequested):
                dropped[event.message_id] = event.parent_id
            resuming = resuming or isinstance(event, CompactionCompleted)
            continue
        if isinstance(event, MessageAdded):
            resumed = event.synthetic and event.role == "user"
            if event.summary or (resumed and (resuming or event.message_id in continues)):
                dropped[event.message_id] = event.parent_id
                continue
            if event.parent_id in dropped:
                event = msgspec.structs.replace(event, parent_id=ancestor(event.parent_id))
        elif isinstance(event, (PartAdded, PartUpdated)) and event.part.message_id in dropped:
            parts.add(event.part.id)
            continue
        elif _of_dropped(event, dropped, parts):
            continue
        resuming = False
        kept.append(event)
    return kept


def _of_dropped(event: Event, messages: Mapping[str, str | None], parts: set[str]) -> bool:
    """Whether ``event`` is a tool state, an end or a captured environment of a left-out
    message."""
    match event:
        case ToolStateChanged():
            return event.part_id in parts
        case AssistantFinished():
            return event.message_id in messages
        case EnvironmentCaptured():
            return event.user_message_id in messages
    return False


def sized_model(provider: Provider, model_id: str, window: int) -> Model:
    """``model_id`` with a ``window``-token context and an output limit of a quarter of it
    (at most ``OUTPUT_LIMIT``): the model a replay sizes its budgets for."""
    return Model(
        provider_id=provider,
        model_id=model_id,
        limits=ModelLimits(context=window, output=min(OUTPUT_LIMIT, window // 4)),
    )


async def strategy_steps(
    events: Sequence[Event],
    chosen: Strategy,
    *,
    provider: Provider = "anthropic",
    model_id: str | None = None,
    window: int = DEFAULT_WINDOW,
    summarizer: Summarizer | None = None,
) -> AsyncIterator[ReplayedCall]:
    """Replay the recorded turns of ``events`` (``recorded_turns``) in a ``LocalSession``
    under ``chosen``, yielding each model call (see the module docstring). ``model_id``
    defaults to the one ``simulate`` prices the provider with; ``summarizer`` (the
    extractive one by default) writes the compactions' summaries."""
    if not events:
        return
    model_id = model_id or priced_model(provider, events)
    clock = ReplayClock(events[0].time_ms)
    log = LocalLog(History(events[0].session_id))
    model = sized_model(provider, model_id, window)
    await log.append([_started(events, model_id, provider, clock())])
    session = LocalSession(
        log, chosen, model=model, wire=_wire(provider), clock=clock, summarizer=summarizer
    )
    inputs = request_inputs(events, provider, model_id)
    replay = TurnReplay(session, recorded_turns(events), inputs, clock, context=window)
    async for call in replay.calls():
        yield call


def _started(events: Sequence[Event], model_id: str, provider: Provider, time_ms: int) -> Event:
    """The ``SessionStarted`` a runtime writes for the replayed session."""
    started = next((e for e in events if isinstance(e, SessionStarted)), None)
    return SessionStarted(
        session_id=events[0].session_id,
        time_ms=time_ms,
        title=started.title if started is not None else "",
        model=ModelRef(provider_id=provider, model_id=model_id),
    )


def interned(request: SimRequest, known: dict[Block, Block]) -> SimRequest:
    """``request`` with each block replaced by the equal one in ``known`` (added when new):
    a replay's requests repeat most of the blocks of the one before, and keeping one copy of
    each makes the memory follow the session rather than the sum of its prompts."""
    return msgspec.structs.replace(
        request, blocks=tuple(known.setdefault(b, b) for b in request.blocks)
    )


def trace_result(
    strategy_name: str,
    provider: Provider,
    model_id: str,
    requests: Sequence[SimRequest],
    actions: Sequence[str],
    *,
    failed_at: int | None = None,
    over_window_calls: int = 0,
    compactions: int = 0,
    summarizer: SummarizerName = "extractive",
    summaries: Sequence[tuple[int, SimRequest]] = (),
    retention: Retention | None = None,
) -> TraceResult:
    """``requests`` (one per call, ``actions`` what preceded each) and the ``summaries`` (one
    per summary call, with the index of the call it was written for: ``len(requests)`` for
    the call that failed) simulated together in the order they were sent (each summary right
    before the call it was written for, after the calls before that one, whatever their
    times) and priced with ``model_id``'s entry for ``provider``; ``retention`` the facts
    counted over the calls."""
    price = price_for(model_id, provider)
    order = sorted(
        [(before, 0, i) for i, (before, _) in enumerate(summaries)]
        + [(i, 1, i) for i in range(len(requests))]
    )
    sent = [summaries[i][1] if kind == 0 else requests[i] for _, kind, i in order]
    cache = PromptCache(price)
    priced = [cache.charge(r) for r in sent]
    calls = [priced[n] for n, (_, kind, _) in enumerate(order) if kind == 1]
    summary_costs = [
        (before, priced[n].input_cost + priced[n].output_cost)
        for n, (before, kind, _) in enumerate(order)
        if kind == 0
    ]
    prompts = tuple(r.prompt_tokens for r in requests)
    counted = retention or Retention()
    return TraceResult(
        strategy=strategy_name,
        provider=provider,
        model=model_id,
        prompt_tokens=prompts,
        uncached=tuple(r.uncached for r in calls),
        cache_write=tuple(r.cache_write for r in calls),
        cache_read=tuple(r.cache_read for r in calls),
        input_cost=tuple(r.input_cost for r in calls),
        actions=tuple(actions),
        billed_input_cost=sum((r.input_cost for r in calls), 0.0),
        peak_prompt=max(prompts, default=0),
        lower_bound=lower_bound(sent, price, output=False)
        + sum(r.output_tokens for _, r in summaries) * price.output / 1e6,
        calls_lower_bound=lower_bound(requests, price, output=False),
        failed_at=failed_at,
        over_window_calls=over_window_calls,
        compactions=compactions,
        summarizer=summarizer,
        summary_calls=len(summaries),
        summary_input_tokens=sum(r.prompt_tokens for _, r in summaries),
        summary_output_tokens=sum(r.output_tokens for _, r in summaries),
        summary_cost=sum((cost for _, cost in summary_costs), 0.0),
        summary_call_costs=tuple(summary_costs),
        facts_needed=counted.needed,
        facts_retained=counted.retained,
        facts_needed_older=counted.needed_older,
        facts_retained_older=counted.retained_older,
    )


async def simulate_trace_async(
    events: Sequence[Event],
    *,
    strategy_name: str,
    window: int = DEFAULT_WINDOW,
    provider_family: Provider = "anthropic",
    summarizer: SummarizerName = "extractive",
    facts: FactMemo | None = None,
    summary_memo: SummaryMemo | None = None,
) -> TraceResult:
    """``simulate_trace`` inside a running trio loop."""
    if window < 1:
        raise ValueError("the window must be positive")
    if provider_family not in PROVIDERS:
        raise ValueError(f"unknown provider {provider_family!r}; known: {', '.join(PROVIDERS)}")
    chosen = strategy(strategy_name)
    events = raw_events(events)
    model_id = priced_model(provider_family, events)
    extractive = summary_memo or SummaryMemo()
    priced = PricedSummarizer(extractive) if summarizer == "model" else None
    writer = TailOnlySummarizer() if summarizer == "tail-only" else priced or extractive
    retention = RetentionCounter(recorded_turns(events), facts)
    blocks: dict[Block, Block] = {}
    requests: list[SimRequest] = []
    actions: list[str] = []
    summaries: list[tuple[int, SimRequest]] = []
    compactions = 0
    failed_at: int | None = None
    refused = 0
    steps = strategy_steps(
        events,
        chosen,
        provider=provider_family,
        model_id=model_id,
        window=window,
        summarizer=writer,
    )
    try:
        async for call in steps:
            retention.observe(call.call, call.built.request.messages)
            requests.append(interned(call.sim, blocks))
            actions.append(call.actions)
            refused += call.refused
            compactions += call.compactions.count("compacted")
            if priced is not None:  # the summaries written while this call was built
                written = priced.calls[len(summaries) :]
                summaries.extend((len(requests) - 1, c.sim(call.sim.at)) for c in written)
    except (CompactionExhausted, ReplayFailed) as exc:
        failed_at = len(requests) + 1
        refused += exc.refused if isinstance(exc, ReplayFailed) else 0
        if priced is not None and requests:  # written for the call that failed
            written = priced.calls[len(summaries) :]
            summaries.extend((len(requests), c.sim(requests[-1].at)) for c in written)
    return trace_result(
        chosen.name,
        provider_family,
        model_id,
        requests,
        actions,
        failed_at=failed_at,
        over_window_calls=refused,
        compactions=compactions,
        summarizer=summarizer,
        summaries=summaries,
        retention=retention.result,
    )


def simulate_trace(
    events: Sequence[Event],
    *,
    strategy_name: str,
    window: int = DEFAULT_WINDOW,
    provider_family: Provider = "anthropic",
    summarizer: SummarizerName = "extractive",
    facts: FactMemo | None = None,
    summary_memo: SummaryMemo | None = None,
) -> TraceResult:
    """Replay ``events`` under ``strategy_name`` and simulate its calls on ``provider_family``
    (see the module docstring), its compactions summarised by ``summarizer`` (``model``: each
    summary priced as a model call; ``tail-only``: no summary, only the kept tail). ``facts``
    finds the facts retention counts (``retention.FactMemo``; one shared by the simulations of
    one trace reads each text once) and ``summary_memo`` writes the extractive summaries
    (``SummaryMemo``; one shared likewise writes each summary once). Raises
    ``StrategyError`` for an unknown strategy and ``ValueError`` for a bad window or provider."""
    return trio.run(
        lambda: simulate_trace_async(
            events,
            strategy_name=strategy_name,
            window=window,
            provider_family=provider_family,
            summarizer=summarizer,
            facts=facts,
            summary_memo=summary_memo,
        )
    )


def transcripts(paths: Iterable[str | Path]) -> list[Path]:
    """``paths`` with each folder replaced by the transcripts under it (``.jsonl``, ``.json``,
    ``.traj`` files, aider histories, OpenHands V1 conversation folders; see
    ``importers.transcripts_under``), sorted; a V1 conversation folder stays itself. Raises
    ``ValueError`` for a path that does not exist."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found.extend(transcripts_under(path))
        elif path.is_file():
            found.append(path)
        else:
            raise ValueError(f"no transcript or folder at {path}")
    return found


def trace_sessions(path: Path) -> list[tuple[str, ImportedSession]]:
    """The sessions of the transcript at ``path``, named ``folder/file`` (``folder/file#N``
    when it holds several)."""
    sessions = import_trace(path, lenient=True)
    base = f"{path.parent.name}/{path.name}" if path.parent.name else path.name
    if len(sessions) == 1:
        return [(base, sessions[0])]
    return [(f"{base}#{n}", s) for n, s in enumerate(sessions, 1)]


async def simulate_paths_async(
    paths: Iterable[str | Path],
    strategies: Sequence[str],
    providers: Sequence[Provider],
    window: int = DEFAULT_WINDOW,
    on_progress: Callable[[int, int, str], None] | None = None,
    summarizer: SummarizerName = "extractive",
) -> dict[str, dict[str, dict[str, TraceResult]]]:
    """``simulate_paths`` inside a running trio loop."""
    for name in strategies:
        strategy(name)
    sessions = [named for path in transcripts(paths) for named in trace_sessions(path)]
    total = len(sessions) * len(strategies) * len(providers)
    done = 0
    results: dict[str, dict[str, dict[str, TraceResult]]] = {}
    for name, session in sessions:
        per_strategy = results.setdefault(name, {})
        for strategy_name in strategies:
            per_provider = per_strategy.setdefault(strategy_name, {})
            for provider in providers:
                if on_progress is not None:
                    on_progress(done, total, f"{name} {strategy_name} {provider}")
                per_provider[provider] = await simulate_trace_async(
                    session.events,
                    strategy_name=strategy_name,
                    window=window,
                    provider_family=provider,
                    summarizer=summarizer,
                )
                done += 1
    if on_progress is not None:
        on_progress(done, total, "")
    return results


def simulate_paths(
    paths: Iterable[str | Path],
    strategies: Sequence[str],
    providers: Sequence[Provider],
    window: int = DEFAULT_WINDOW,
    on_progress: Callable[[int, int, str], None] | None = None,
    summarizer: SummarizerName = "extractive",
) -> dict[str, dict[str, dict[str, TraceResult]]]:
    """``{trace: {strategy: {provider: TraceResult}}}`` for every session of every transcript
    at ``paths`` (a folder stands for the transcripts under it). ``on_progress(done, total,
    label)``, when given, is called before each (session, strategy, provider) simulation with
    the number finished so far and what runs next, and once at the end with ``done == total``."""
    return trio.run(
        lambda: simulate_paths_async(
            paths, strategies, providers, window, on_progress, summarizer=summarizer
        )
    )
