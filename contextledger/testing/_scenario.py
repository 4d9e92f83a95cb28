"""What an agent-loop scenario runs (``Scenario``) and what it did (``ScenarioRun``), whose
properties are the checks a loop must pass and the figures the ``agentloop`` benchmark
reports."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import msgspec

from contextledger.cachesim import (
    SimRequest,
    anthropic_prefix,
    blocks_from_anthropic_body,
    blocks_from_chat_body,
    bound_shares,
)
from contextledger.config import Config
from contextledger.testing._body_replay import BodyReplay, body_hash
from contextledger.testing.loopback import Exchange, asks_for_summary, read_step
from contextledger.vocabulary import Model, ModelLimits

Wire = Literal["anthropic", "openai-chat"]
#: The model a scenario talks to on each wire, as its provider and model ids and its output
#: cap (Claude Sonnet 4.5's 64k, GPT-5's 128k: the runtime's output cap, ``output_cap``, not
#: the server's limit, decides what each request asks for); its window is the scenario's.
MODELS: Final[dict[str, tuple[str, str, int]]] = {
    "anthropic": ("anthropic", "claude-sonnet-4-5", 64_000),
    "openai-chat": ("openai", "gpt-5", 128_000),
}
#: How Anthropic's API begins a refusal of a request longer than the window (the prompt, or
#: the prompt and ``max_tokens``); OpenAI's carries the code ``context_length_exceeded``.
_WINDOW_ERRORS: Final = ("prompt is too long", "input length and `max_tokens` exceed")
_WINDOW_CODE: Final = "context_length_exceeded"

#: One wake-up of the lag ticker: its wall time (ms), how late it came (ms) and how long the
#: loop's thread meanwhile waited for a CPU the system gave others (ms).
Lag = tuple[float, float, float]


class Scenario(msgspec.Struct, frozen=True, kw_only=True):
    """What to run: ``sessions`` concurrent sessions of ``steps`` tool steps each on a
    ``window``-token model, tool outputs of ``output_min``..``output_max`` bytes (drawn
    log-uniformly), compaction summaries written by the ``summarizer``, requests sent on the
    ``wire`` (Anthropic Messages or OpenAI Chat Completions). The first
    ``children`` sessions also run a child session (a quarter of the steps) beside their own
    loop; the first ``slices`` run a sub-agent slice (``agent_id="explore"``, a quarter of the
    steps) half-way through theirs. ``fault_rate`` of a loop's requests meet one of
    ``FAULTS`` (a fifth of them twice in a row), drawn per loop; with ``overflow_at`` every
    loop's request after that many steps is refused once as too long.
    The runtime is cancelled at the loops' ``cancel_after``-th action (a call into the
    runtime or a request sent), or while the compaction asking for the
    ``cancel_in_summary``-th summary writes it; then a runtime is reopened on the same store,
    and every loop resumes where its log says it was."""

    sessions: int = 4
    steps: int = 8
    window: int = 32_000
    output_min: int = 200
    output_max: int = 50_000
    summarizer: Literal["extractive", "model"] = "extractive"
    wire: Wire = "anthropic"
    children: int = 0
    slices: int = 0
    fault_rate: float = 0.05
    overflow_at: int | None = None
    cancel_after: int | None = None
    cancel_in_summary: int | None = None
    seed: int = 0
    config: Config = Config()

    def __post_init__(self) -> None:
        if self.sessions < 1 or self.steps < 1:
            raise ValueError("a scenario needs at least one session of one step")
        if not 0 < self.output_min <= self.output_max:
            raise ValueError("tool outputs must satisfy 0 < output_min <= output_max")

    @property
    def model(self) -> Model:
        """The served model: the wire's (``MODELS``) with the scenario's window."""
        provider_id, model_id, output = MODELS[self.wire]
        limits = ModelLimits(context=self.window, output=output)
        return Model(provider_id=provider_id, model_id=model_id, limits=limits)


class Overflow(msgspec.Struct, kw_only=True):
    """A request the provider refused as too long: the session's ``seq`` when it was recorded,
    the outcome of the compaction ``record_error`` ran, (once one was) the ``seq`` after the
    next accepted answer was recorded, and the agent's compactions requested in between."""

    seq: int
    outcome: str | None
    accepted_seq: int | None = None
    compactions: int = 0


class AgentOutcome(msgspec.Struct, kw_only=True):
    """One agent loop: a session's main agent, a slice of it or a child session.

    ``conversation`` is the loopback conversation its requests play; ``steps`` counts the
    answers that called tools; ``unpaired`` the built requests whose calls were not each
    answered in the next message; ``error`` the exception that ended the loop, if one did."""

    session_id: str
    agent_id: str
    conversation: str
    steps: int = 0
    requests: int = 0
    unpaired: int = 0
    overflows: list[Overflow] = []
    resumed: bool = False
    done: bool = False
    error: str | None = None


class ScenarioRun(msgspec.Struct, kw_only=True):
    """What a scenario did: every agent's outcome, every request received (``exchanges``,
    the loopback's records), the request bodies replayed from each session's log, the host
    loop's lag samples (``Lag``), the compactions' wall-clock intervals, the
    compactions a reopened runtime found open (``interrupted``: session and seq of the
    rollback it wrote for each), and the CPU seconds of the process and of the loopback
    server's request handling."""

    scenario: Scenario
    agents: list[AgentOutcome]
    exchanges: list[Exchange]
    replays: list[BodyReplay]
    lags: list[Lag]
    compactions: list[tuple[int, int]]
    interrupted: list[tuple[str, int]]
    cpu_seconds: float
    server_cpu_seconds: float
    cancelled: bool

    @property
    def failed(self) -> list[AgentOutcome]:
        """Agents whose loop raised or did not end."""
        return [a for a in self.agents if a.error is not None or not a.done]

    @property
    def over_window(self) -> list[Exchange]:
        """Requests the provider refused as longer than the window (injected overflow faults
        are not counted: they refuse fitting requests)."""
        return [e for e in self.exchanges if e.fault is None and _window_error(e.response)]

    @property
    def bad_overflows(self) -> list[tuple[str, str, Overflow]]:
        """Overflows not followed by exactly one compaction, completed, and then an accepted
        request."""
        return [
            (a.session_id, a.agent_id, o)
            for a in self.agents
            for o in a.overflows
            if o.outcome != "completed" or o.accepted_seq is None or o.compactions != 1
        ]

    @property
    def refused(self) -> list[Exchange]:
        """Requests the provider refused as invalid (a 400 that is neither an injected fault
        nor over the window: unpaired calls, a first message from the assistant, ...)."""
        return [
            e
            for e in self.exchanges
            if e.status == 400 and e.fault is None and not _window_error(e.response)
        ]

    @property
    def unpaired(self) -> int:
        """Built requests with a call not answered in the next message."""
        return sum(a.unpaired for a in self.agents)

    @property
    def crossed_calls(self) -> list[tuple[int, str]]:
        """Tool calls a loop's request carries that the provider issued to another loop (a
        slice's calls in the main agent's request, say): each agent's request holds its own
        slice. As (exchange index, call id)."""
        issued = {
            call.id: e.conversation
            for e in self.exchanges
            if e.status == 200
            for call in read_step(e.response).calls
        }
        return [
            (e.index, call_id)
            for e in self.exchanges
            if _loop_request(e)
            for call_id in _carried_calls(e.json)
            if issued.get(call_id, e.conversation) != e.conversation
        ]

    @property
    def replay_mismatches(self) -> list[BodyReplay]:
        """Recorded requests whose body the log does not rebuild byte for byte."""
        return [r for r in self.replays if r.recorded != r.replayed]

    @property
    def unrecorded_bodies(self) -> list[Exchange]:
        """Accepted requests of an agent loop whose body is not one the log replays to."""
        replayed = {r.replayed for r in self.replays}
        return [
            e
            for e in self.exchanges
            if _loop_request(e) and e.status == 200 and body_hash(e.body) not in replayed
        ]

    @property
    def cache_read_share(self) -> float:
        """The share of accepted requests' prompt tokens the provider read from its cache."""
        read = prompt = 0
        for exchange in self.exchanges:
            if exchange.status == 200:
                usage = exchange.response["usage"]
                if "prompt_tokens" in usage:  # OpenAI: the whole prompt, its cached part
                    read += usage["prompt_tokens_details"]["cached_tokens"]
                    prompt += usage["prompt_tokens"]
                else:
                    read += usage["cache_read_input_tokens"]
                    prompt += (
                        usage["input_tokens"]
                        + usage["cache_creation_input_tokens"]
                        + usage["cache_read_input_tokens"]
                    )
        return read / prompt if prompt else 0.0

    @property
    def cache_read_share_lower_bound(self) -> float:
        """The same share for the cache simulator's lower bound (``cachesim.lower_bound``):
        each accepted request reads the longest prefix it shares with any earlier one."""
        return lower_bound_read_share(
            [e.json for e in self.exchanges if e.status == 200 and isinstance(e.json, dict)],
            wire=self.scenario.wire,
        )

    @property
    def loop_lag_p99_ms(self) -> float:
        """The 99th percentile of the host loop's lag over the ticks that overlap a
        compaction (0 when none ran)."""
        return _p99([lag for at, lag, _ in self.lags if self._in_compaction(at, lag)])

    @property
    def loop_lag_p99_own_ms(self) -> float:
        """The same, each lag less the time the loop's thread was ready to run with no CPU
        free (the system ran other threads; on a loaded machine mostly other programs'): the
        lag the process causes itself, as on a machine with a core to spare."""
        return _p99(
            [max(0.0, lag - wait) for at, lag, wait in self.lags if self._in_compaction(at, lag)]
        )

    @property
    def loop_lag_p99_outside_compactions_ms(self) -> float:
        """The same over the ticks that overlap none: the lag the loops' other work causes."""
        return _p99([lag for at, lag, _ in self.lags if not self._in_compaction(at, lag)])

    def _in_compaction(self, at: float, lag: float) -> bool:
        """Whether the tick late by ``lag`` at ``at`` waited while a compaction ran."""
        return any(start <= at and at - lag <= end for start, end in self.compactions)

    @property
    def runtime_cpu_share(self) -> float:
        """The process's CPU outside the loopback server's request handling, as a share of
        all of it: the runtime, the store and the client side of the loop."""
        if self.cpu_seconds <= 0:
            return 0.0
        return max(0.0, self.cpu_seconds - self.server_cpu_seconds) / self.cpu_seconds


def _p99(samples: list[float]) -> float:
    """The 99th percentile (nearest rank) of ``samples``; 0 without any."""
    if not samples:
        return 0.0
    ranked = sorted(samples)
    return ranked[min(len(ranked) - 1, math.ceil(0.99 * len(ranked)) - 1)]


def lower_bound_read_share(
    bodies: Sequence[Mapping[str, Any]], *, wire: Wire = "anthropic"
) -> float:
    """The share of prompt tokens read if every body of ``wire`` (in arrival order) read the
    longest block-boundary prefix it shares with any earlier one: the reads of
    ``cachesim.lower_bound`` (``cachesim.bound_shares``)."""
    requests = [_sim_request(body, wire) for body in bodies]
    shares = bound_shares(requests, "anthropic" if wire == "anthropic" else "openai")
    prompt = sum(tokens for tokens, _, _ in shares)
    read = sum(earlier for _, earlier, _ in shares)
    return read / prompt if prompt else 0.0


def _sim_request(body: Mapping[str, Any], wire: Wire) -> SimRequest:
    """A body of ``wire`` as the cache simulator takes it, with its model (and on Anthropic
    its tool choice and opening blocks)."""
    model = str(body.get("model", ""))
    if wire == "anthropic":
        choice, head = anthropic_prefix(body)
        blocks = blocks_from_anthropic_body(body)
        return SimRequest(
            blocks=blocks, at=0.0, model=model, tool_choice=choice, prefix_blocks=head
        )
    return SimRequest(blocks=blocks_from_chat_body(body), at=0.0, model=model)


def _window_error(response: Any) -> bool:
    error = response.get("error") if isinstance(response, dict) else None
    if not isinstance(error, dict):
        return False
    message = error.get("message", "")
    return error.get("code") == _WINDOW_CODE or (
        isinstance(message, str) and message.startswith(_WINDOW_ERRORS)
    )


def _loop_request(exchange: Exchange) -> bool:
    """Whether a request is an agent loop's: it names a conversation and asks for no summary
    (a summary request, ``asks_for_summary``, is the compaction's)."""
    body = exchange.json
    if not exchange.conversation or not isinstance(body, dict):
        return False
    return not asks_for_summary(body)


def _carried_calls(body: Any) -> list[str]:
    """The ids of the tool calls a request body's messages carry (Anthropic ``tool_use``
    blocks, OpenAI ``tool_calls``)."""
    ids: list[str] = []
    for message in body.get("messages", ()) if isinstance(body, dict) else ():
        content = message.get("content")
        if isinstance(content, list):
            ids.extend(b["id"] for b in content if b.get("type") == "tool_use")
        ids.extend(call["id"] for call in message.get("tool_calls") or ())
    return ids
