"""A model summarizer's request reads the session's prompt cache: it opens, byte for byte on
the wire, with the session's last request, and in a simulation most of its input is read from
the cache, with nothing written that no later call reads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import pytest

from contextledger.cachesim import PromptCache, SimRequest, sim_request
from contextledger.compaction import _compactor as compactor
from contextledger.compaction._summarizers import KEPT_NOTE, REST_OPENING
from contextledger.config import Config, ViewConfig
from contextledger.events._catalogue import RecordedEvent, SessionStarted, ToolOutputCleared
from contextledger.events._parts import ModelRef, ToolPart, ToolSchema, Usage
from contextledger.history._projection import History
from contextledger.history._view import model_view
from contextledger.policy._compaction import CompactionPlan, plan_compaction
from contextledger.policy._tokens import measure_messages, measure_request
from contextledger.policy._transform import TransformContext
from contextledger.prices._tables import price_for
from contextledger.providers._registry import WIRE_FORMATS
from contextledger.request._builder import BuiltRequest, RequestInputs
from contextledger.request._system import SystemSegments
from contextledger.simulation import LocalLog, LocalSession, raw_events, strategy_steps
from contextledger.simulation._summaries import PricedSummarizer
from contextledger.simulation._synthetic import synthetic_session
from contextledger.strategies import Strategy, TransformStrategy, strategy
from contextledger.testing import check_tool_pairs
from contextledger.vocabulary import Model, ModelLimits
from contextledger.vocabulary._messages import ModelMessage, ModelText, ModelToolResult
from contextledger.vocabulary._requests import Request

REF = ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5")
INPUTS = RequestInputs(
    model=REF,
    segments=SystemSegments(prompt="Fix what the user asks. " * 40, environment="<env/>"),
    tools=(
        ToolSchema(name="bash", description="Run a command.", input_schema={"type": "object"}),
        ToolSchema(name="read", description="Read a file.", input_schema={"type": "object"}),
    ),
)


def _model(context: int) -> Model:
    return Model(
        provider_id="anthropic",
        model_id="claude-sonnet-4-5",
        limits=ModelLimits(context=context, output=context // 4),
    )


async def _session(
    wire: str,
    turns: int,
    context: int = 200_000,
    chosen: Strategy | None = None,
    config: Config | None = None,
) -> tuple[LocalSession, PricedSummarizer, BuiltRequest | None]:
    """A session of ``turns`` answered requests (each answer a tool call and its output)
    under ``chosen`` (by default ``runtime``) and ``config``; its summarizer, and its last
    request."""
    ticks = iter(range(1_767_225_600_000, 1_767_225_600_000 + 10**8, 1_000))
    log = LocalLog(History("ses_prefix"))
    await log.append([SessionStarted(session_id="ses_prefix", time_ms=next(ticks))])
    summarizer = PricedSummarizer()
    session = LocalSession(
        log,
        chosen or strategy("runtime"),
        model=_model(context),
        wire=WIRE_FORMATS[wire](),
        clock=lambda: next(ticks),
        config=config,
        summarizer=summarizer,
    )
    built: BuiltRequest | None = None
    for turn in range(turns):
        user = await session.add_user(f"Step {turn}: read src/mod_{turn}.py and fix it.")
        built = await session.build_request(INPUTS)
        output = f"def f_{turn}():\n    return {turn}\n" * 60
        await session.record_assistant(
            user,
            text=f"Reading module {turn}.",
            tool_calls=[("read", {"path": f"src/mod_{turn}.py"}, output)],
            usage=Usage(input=built.estimated_tokens, output=40),
        )
    return session, summarizer, built


@pytest.mark.parametrize("wire", ["anthropic", "openai-chat"])
async def test_the_summary_request_opens_with_the_last_request_byte_for_byte(wire: str) -> None:
    session, summarizer, last = await _session(wire, turns=6)
    assert last is not None
    result = await session.compact()
    assert result.outcome == "completed" and result.tail_start_id is not None
    (call,) = summarizer.calls
    request = call.request
    sent = last.encoded
    body = WIRE_FORMATS[wire]().encode(request).body
    # Everything the last request sent before its closing fields, breakpoints included.
    assert body.startswith(sent.body[: sent.messages_end])
    assert request.messages[: len(last.request.messages)] == last.request.messages
    if wire == "anthropic":  # OpenAI's chat format has no breakpoints: its cache is automatic
        assert request.marks == last.request.marks
    # Only the instruction follows, and it names the kept tail, which opens with the
    # user's message of the first kept turn.
    (instruction,) = request.messages[len(last.request.messages) :]
    (text,) = instruction.content
    assert isinstance(text, ModelText) and "Create a new anchored summary" in text.text
    first_kept = next(
        i for i, m in enumerate(request.messages) if m.source_id == result.tail_start_id
    )
    kept = len(request.messages) - 1 - first_kept
    assert kept > 0 and KEPT_NOTE.split("{count}")[0] + f"{kept} messages" in text.text
    opening = request.messages[first_kept].content[0]
    assert isinstance(opening, ModelText) and opening.text.startswith("Step ")
    assert f'user\'s message that opens with "{opening.text}"' in text.text
    assert request.messages[0].role == "user"
    check_tool_pairs(request.messages[:-1])


async def test_a_sub_agent_s_request_sent_during_the_last_call_leaves_the_summary_its_prefix() -> (
    None
):
    """A sub-agent's request is sent while the main agent's last call runs: the main slice's
    summary request still opens, byte for byte, with the main agent's last request."""
    session, summarizer, _ = await _session("anthropic", turns=5)
    user = await session.add_user("Step 5: read src/mod_5.py and fix it.")
    last = await session.build_request(INPUTS)
    ask = await session.add_user("Find the parser.", agent_id="explore")
    await session.build_request(INPUTS, agent_id="explore")
    await session.record_assistant(
        user,
        text="Reading module 5.",
        tool_calls=[("read", {"path": "src/mod_5.py"}, "def f_5():\n    return 5\n" * 60)],
        usage=Usage(input=last.estimated_tokens, output=40),
    )
    result = await session.compact()
    assert result.outcome == "completed"
    (call,) = summarizer.calls
    body = WIRE_FORMATS["anthropic"]().encode(call.request).body
    assert body.startswith(last.encoded.body[: last.encoded.messages_end])
    assert call.request.messages[: len(last.request.messages)] == last.request.messages
    assert ask not in {m.source_id for m in call.request.messages}


@pytest.mark.parametrize("wire", ["anthropic", "openai-chat"])
async def test_a_summary_after_a_last_step_keeps_its_tool_choice(wire: str) -> None:
    """The session's last request closed a turn (tool choice ``"none"``): the summary request
    continues it with the same choice, since Anthropic keys its cached messages by it."""
    session, summarizer, _ = await _session(wire, turns=5)
    user = await session.add_user("Step 5: say what is left.")
    last = await session.build_request(msgspec.structs.replace(INPUTS, last_step=True))
    await session.record_assistant(
        user, text="Nothing is left.", usage=Usage(input=last.estimated_tokens, output=10)
    )
    result = await session.compact()
    assert result.outcome == "completed"
    (call,) = summarizer.calls
    request = call.request
    assert last.request.tool_choice == request.tool_choice == "none"
    # It opens with what the last request sent before its closing prompt, and reads that
    # from the cache the last request wrote.
    assert request.messages[: len(last.request.messages) - 1] == last.request.messages[:-1]
    if wire == "anthropic":
        cache = PromptCache(price_for("claude-sonnet-4-5", "anthropic"))
        cache.charge(sim_request(last.request, 0.0))
        summary = call.sim(60.0)
        assert cache.charge(summary).cache_read >= 0.75 * summary.prompt_tokens


def shout(view: Sequence[ModelMessage], context: TransformContext) -> list[ModelMessage]:
    """Every assistant text in capitals: a view transform that changes texts only."""
    return [
        msgspec.structs.replace(
            m,
            content=tuple(
                msgspec.structs.replace(c, text=c.text.upper()) if isinstance(c, ModelText) else c
                for c in m.content
            ),
        )
        if m.role == "assistant"
        else m
        for m in view
    ]


@pytest.mark.parametrize("route", ["shout", "named shout", "truncate-500"])
async def test_through_a_view_transform_the_summary_request_opens_with_what_was_sent(
    route: str,
) -> None:
    """The session's requests go through a transform (a strategy's, or the one the config
    names) that changes texts only, or cuts tool outputs: the summary request opens with the
    messages the last request sent, as the transform made them, byte for byte on the wire."""
    if route == "named shout":
        config = Config(view=ViewConfig(transform=f"{__name__}:shout"))
        session, summarizer, last = await _session("anthropic", 6, config=config)
    else:
        chosen = TransformStrategy("shout", shout) if route == "shout" else strategy(route)
        session, summarizer, last = await _session("anthropic", 6, chosen=chosen)
    assert last is not None
    sent = last.request.messages
    assert sent != tuple(model_view(session.log.history)[: len(sent)])  # the transform's work
    result = await session.compact()
    assert result.outcome == "completed"
    (call,) = summarizer.calls
    request = call.request
    assert request.messages[: len(sent)] == sent
    body = WIRE_FORMATS["anthropic"]().encode(request).body
    assert body.startswith(last.encoded.body[: last.encoded.messages_end])
    assert request.marks == last.request.marks


async def test_a_transform_that_gives_the_view_otherwise_now_claims_no_cached_prefix() -> None:
    """A transform whose result the compactor cannot make again (here it depends on how often
    it ran): the summary request claims none of the session's cache, so it places no
    breakpoint on its messages."""
    runs = 0

    def lengthening(view: Sequence[ModelMessage], context: TransformContext) -> list[ModelMessage]:
        nonlocal runs
        runs += 1
        first = view[0]
        note = ModelText(text="." * runs)
        return [msgspec.structs.replace(first, content=(*first.content, note)), *view[1:]]

    chosen = TransformStrategy("lengthening", lengthening)
    session, summarizer, last = await _session("anthropic", 6, chosen=chosen)
    assert last is not None and any(m.target == "message" for m in last.request.marks)
    result = await session.compact()
    assert result.outcome == "completed"
    (call,) = summarizer.calls
    assert {m.target for m in call.request.marks} == {"tool", "system"}


async def test_a_head_past_the_last_request_goes_as_text_after_it_when_it_would_not_fit() -> None:
    """Steps since the last request too large for the window with the session's prompt:
    the summary request still opens with that prompt, and carries the head's part after it as
    a transcript (outputs cut)."""
    session, summarizer, last = await _session("anthropic", turns=3, context=16_000)
    assert last is not None
    user = await session.add_user("Step 3: read the generated parsers.")
    for n in range(8):
        await session.record_assistant(
            user,
            text="Reading one.",
            tool_calls=[("read", {"path": f"gen_{n}.py"}, "x = 1\n" * 1_400)],
        )
    result = await session.compact()
    assert result.outcome == "completed"
    (call,) = summarizer.calls
    request = call.request
    assert request.messages[:-1] == last.request.messages
    rest = request.messages[-1].content[0]
    assert isinstance(rest, ModelText) and rest.text.startswith(REST_OPENING)
    # The answer to the last request is the head's, its output cut; the later steps are kept.
    assert "[Assistant]: Reading module 2." in rest.text and "characters truncated" in rest.text
    assert "gen_7.py" not in rest.text


async def test_after_a_compaction_and_no_request_since_no_message_breakpoint_is_written() -> None:
    """No request was sent since the last compaction: the session's cached prompt opens with
    the head that compaction summarised, which no request will send again."""
    session, summarizer, _ = await _session("anthropic", turns=6)
    await session.compact()
    for turn in range(6, 10):
        user = await session.add_user(f"Step {turn}: fix it.")
        await session.record_assistant(user, text="Done.", tool_calls=[("bash", {}, "ok")])
    await session.compact()
    first, second = summarizer.calls
    assert {m.target for m in first.request.marks} == {"tool", "system", "message"}
    assert {m.target for m in second.request.marks} == {"tool", "system"}


def _priced(
    requests: list[SimRequest], summaries: list[tuple[int, SimRequest]], provider: str
) -> list[tuple[int, int, int]]:
    """Each summary call's prompt, cache-read and cache-written tokens, every call charged in
    the order it was sent (a summary right before the session call it was written for)."""
    model = "claude-sonnet-4-5" if provider == "anthropic" else "gpt-5"
    cache = PromptCache(price_for(model, provider))
    counts = []
    for k, request in enumerate(requests):
        for summary in (s for j, s in summaries if j == k):
            cost = cache.charge(summary)
            counts.append((summary.prompt_tokens, cost.cache_read, cost.cache_write))
        cache.charge(request)
    return counts


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_in_a_simulation_a_summary_call_reads_most_of_its_input_from_the_cache(
    provider: str,
) -> None:
    events = raw_events(synthetic_session("ses_cache", seed=5, turns=12))
    summarizer = PricedSummarizer()
    requests: list[SimRequest] = []
    summaries: list[tuple[int, SimRequest]] = []
    steps = strategy_steps(
        events, strategy("default"), provider=provider, window=32_000, summarizer=summarizer
    )
    async for call in steps:
        written = summarizer.calls[len(summaries) :]
        summaries.extend((len(requests), c.sim(call.sim.at)) for c in written)
        requests.append(call.sim)
    counts = _priced(requests, summaries, provider)
    assert len(counts) >= 3
    prompt = sum(p for p, _, _ in counts)
    read = sum(r for _, r, _ in counts)
    assert read >= 0.75 * prompt, counts
    if provider == "anthropic":
        # A breakpoint after the prefix the session cached would write what no call reads.
        assert sum(w for _, _, w in counts) <= 0.05 * prompt, counts


async def test_after_a_prune_since_the_last_request_no_message_breakpoint_is_written() -> None:
    """A prune changed an output the last request sent: its cached prompt is no prefix of the
    view any more, and a breakpoint on the view would write a prompt no request reads."""
    session, summarizer, _ = await _session("anthropic", turns=6)
    history = await session.history()
    (oldest, *_) = (p.id for m in history.messages for p in m.parts if isinstance(p, ToolPart))
    cleared = ToolOutputCleared(
        session_id="ses_prefix", time_ms=1_767_300_000_000, part_ids=(oldest,), reason="normal"
    )
    await session.log.append([cleared])
    await session.compact()
    (call,) = summarizer.calls
    assert {m.target for m in call.request.marks} == {"tool", "system"}


async def test_a_head_too_long_as_text_goes_in_one_request_when_its_messages_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The planner cuts a head into chunks by its transcript's length (four characters a
    token, inflated); a request opening with the session's cached prompt is sized by the
    provider's count of that prompt, and when it fits, the head is summarised in it alone."""
    summarizer = PricedSummarizer()
    plans: list[tuple[int, int]] = []  # per compaction: its chunks, the summary calls before

    def planned(*args: Any, **kwargs: Any) -> CompactionPlan:
        plan = plan_compaction(*args, **kwargs)
        plans.append((len(plan.chunks), len(summarizer.calls)))
        return plan

    monkeypatch.setattr(compactor, "plan_compaction", planned)
    events = raw_events(synthetic_session("ses_chunks", seed=5, turns=12))
    steps = strategy_steps(events, strategy("default"), window=16_000, summarizer=summarizer)
    async for _ in steps:
        pass
    ends = [before for _, before in plans[1:]] + [len(summarizer.calls)]
    chunked = [
        summarizer.calls[before:end]
        for (chunks, before), end in zip(plans, ends, strict=True)
        if chunks
    ]
    single = [calls for calls in chunked if len(calls) == 1]
    assert single and all(calls[0].request.messages[:-1] for calls in single)


def test_what_a_view_holds_is_counted_as_a_request_measure_counts_it() -> None:
    events = synthetic_session("ses_held", seed=3, turns=6)
    history = History.rebuild(
        "ses_held", [RecordedEvent("ses_held", i, i, e) for i, e in enumerate(events, 1)]
    )
    view = model_view(history)
    assert any(isinstance(c, ModelToolResult) for m in view for c in m.content)
    for end in range(0, len(view) + 1, 7):
        request = Request(
            model=REF,
            session_id="ses_held",
            system=("Be brief.",),
            tools=INPUTS.tools,
            messages=tuple(view[:end]),
        )
        held = compactor._held(measure_messages(view[:end], cut=False))
        assert held == compactor._held(measure_request(request))
