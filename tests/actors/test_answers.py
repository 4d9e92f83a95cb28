"""What the runtime records when a model call ends: the provider's usage as ``UsageReported``
(which the configured counter learns from) and ``PrefixAdvanced`` after a successful step,
driven as an orchestrator drives it, through the loopback provider."""

from __future__ import annotations

from typing import NamedTuple

import msgspec
import pytest

from contextledger.actors import Runtime
from contextledger.config import Config, TokensConfig
from contextledger.events._catalogue import MAIN_AGENT, Event, PrefixAdvanced, UsageReported
from contextledger.events._parts import MessageError, ToolPart, Usage
from contextledger.history._projection import History
from contextledger.policy._tokens import EstimateCounter
from contextledger.providers import ProviderClient, ProviderError, wire_format
from contextledger.request import InvalidCommand
from contextledger.request._builder import BuiltRequest
from contextledger.store._memory import MemoryStore
from contextledger.testing.loopback import (
    LoopbackProvider,
    Reply,
    Script,
    ToolCall,
    read_step,
    tool_loop,
)
from tests.actors.agent import INPUTS, MODEL, clock
from tests.testing.loopback.loop import LoopRun, run_tool_loop

DEFAULT = Config()
CALIBRATED = Config(tokens=TokensConfig(counter="calibrated"))


class Loop(NamedTuple):
    """One user turn run to its end, and the session's events afterwards."""

    run: LoopRun
    history: History
    events: list[Event]


async def _loop(script: Script, config: Config = DEFAULT) -> Loop:
    async with (
        LoopbackProvider(script, models=[MODEL]) as provider,
        Runtime.open(MemoryStore(), model=MODEL, config=config, clock=clock()) as runtime,
        ProviderClient(wire_format("anthropic"), provider.url, api_key="k") as client,
    ):
        session = await runtime.session("ses_answers")
        run = await run_tool_loop(session, client, provider, INPUTS)
        events = [r.event for r in await runtime.store.read("ses_answers")]
        return Loop(run, await session.history(), events)


def _output(n: int) -> str:
    # Outputs of very different sizes, so consecutive calls teach different gains.
    return "\n".join(f"{n}.{i}: " + "ok " * (5 * n) for i in range(20 * n))


async def test_each_answer_with_usage_is_recorded_with_its_request_s_measure() -> None:
    run, history, _ = await _loop(tool_loop(4, output=_output))
    reports = history.state.usage_reports
    assert [r.usage for r in reports] == [r.usage for r in run.responses]
    assert [r.measure for r in reports] == [b.measure for b in run.built]
    assert [r.estimated_tokens for r in reports] == [b.estimated_tokens for b in run.built]
    assert {r.model for r in reports} == {INPUTS.model}
    answers = [m.id for m in history.messages if m.role == "assistant"]
    assert [r.message_id for r in reports] == answers


async def test_the_calibrated_counter_learns_from_reported_usage() -> None:
    """Before any usage the calibrated counter estimates as the plain one; once the provider
    has reported usage for a few calls, its estimate of the next request moves toward what
    the provider then charges."""
    run = (await _loop(tool_loop(5, output=_output), CALIBRATED)).run
    plain = [EstimateCounter().count_measure(b.measure) for b in run.built]
    estimated = [b.estimated_tokens for b in run.built]
    charged = [r.usage.prompt for r in run.responses]
    assert estimated[0] == plain[0]  # nothing learnt yet
    assert estimated[-1] != plain[-1]
    assert abs(estimated[-1] - charged[-1]) < abs(plain[-1] - charged[-1])


async def test_the_plain_estimate_ignores_reported_usage() -> None:
    run = (await _loop(tool_loop(3, output=_output))).run
    assert [b.estimated_tokens for b in run.built] == [
        round(len(b.encoded.body) / 4) for b in run.built
    ]


async def test_a_successful_step_advances_the_pinned_prefix_to_what_it_sent() -> None:
    run, history, events = await _loop(tool_loop(3, output=_output))
    advances = [e for e in events if isinstance(e, PrefixAdvanced)]
    sent = [b.request.messages[-1].source_id for b in run.built]
    assert [a.message_id for a in advances] == sent
    assert history.state.prefix is not None
    assert {a.key for a in advances} == {history.state.prefix.key}
    assert history.state.prefix.advanced_to == sent[-1]


async def test_a_failed_call_neither_advances_the_prefix_nor_reports_usage() -> None:
    async with Runtime.open(MemoryStore(), model=MODEL, clock=clock()) as runtime:
        session = await runtime.session("ses_failed")
        user = await session.add_user("Fix the failing test.")
        await session.build_request(INPUTS)
        answer = await session.start_assistant(user)
        error = ProviderError(
            "anthropic", MessageError(name="APIError", message="internal error"), status=500
        )
        await session.record_error(answer, error)
        events = [r.event for r in await runtime.store.read("ses_failed")]
    assert not [e for e in events if isinstance(e, PrefixAdvanced | UsageReported)]


def _reads(step: int, calls: int, lines: int) -> tuple[ToolCall, ...]:
    return tuple(
        ToolCall(name="bash", input={"command": f"cat {step}.{i}"}, output="x = 1\n" * lines)
        for i in range(calls)
    )


async def test_the_request_after_a_wide_step_reads_the_prompt_the_step_before_cached() -> None:
    """A step of 25 parallel calls puts more than 20 blocks between the end of the last
    cached prompt and the request's next marks; the prefix's advance tells the builder where
    that prompt ended, and its mark there makes the provider read it."""
    script = Script(
        steps=(
            Reply(text="Reading the log.", tool_calls=_reads(1, 1, 1000)),
            Reply(text="Reading every module.", tool_calls=_reads(2, 25, 50)),
            Reply(text="Done."),
        )
    )
    run = (await _loop(script)).run
    before, after = run.responses[1].usage, run.responses[2].usage
    assert before.cache_write > 0  # the prompt before the wide step was cached ...
    assert after.cache_read == before.prompt  # ... and is read after it
    end = len(run.built[1].request.messages) - 1
    assert end in run.built[2].request.message_marks()


async def test_a_whole_step_keeps_the_provider_s_call_ids() -> None:
    """An orchestrator that records each answer whole (``record_assistant``) passes the
    provider's ids, so the next request answers each call under the id the provider gave."""
    script = tool_loop(3, output=_output)
    async with (
        LoopbackProvider(script, models=[MODEL]) as provider,
        Runtime.open(MemoryStore(), model=MODEL, clock=clock()) as runtime,
        ProviderClient(wire_format("anthropic"), provider.url, api_key="k") as client,
    ):
        session = await runtime.session("ses_ids")
        user = await session.add_user("Fix the failing test.")
        given: list[str] = []
        for _ in range(4):
            built = await session.build_request(INPUTS)
            response = await client.send(built.request, built.encoded)
            step = read_step(response.body)
            calls = [(c.name, c.input, provider.expected_output(c.id) or "") for c in step.calls]
            given += [c.id for c in step.calls]
            await session.record_assistant(
                user,
                text=step.text,
                tool_calls=calls,
                call_ids=[c.id for c in step.calls],
                usage=response.usage,
            )
        with pytest.raises(InvalidCommand, match="expected one id per tool call"):
            await session.record_assistant(
                user, tool_calls=[("bash", {}, "ok")], call_ids=["toolu_a", "toolu_b"]
            )
        history = await session.history()
    stored = [p.call_id for m in history.messages for p in m.parts if isinstance(p, ToolPart)]
    assert stored == given and len(given) == 3
    assert provider.mismatches == [] and provider.errors == []
    assert [e.status for e in provider.received] == [200] * 4


async def test_each_agent_s_answers_advance_its_own_prefix_and_report_its_own_measure() -> None:
    reviewer, review_inputs = "reviewer", msgspec.structs.replace(INPUTS, agent="review")
    async with Runtime.open(MemoryStore(), model=MODEL, clock=clock()) as runtime:
        session = await runtime.session("ses_agents")
        built: dict[str, list[BuiltRequest]] = {MAIN_AGENT: [], reviewer: []}
        for n in range(2):
            for agent_id, inputs, agent in (
                (MAIN_AGENT, INPUTS, "build"),
                (reviewer, review_inputs, "review"),
            ):
                user = await session.add_user(f"Step {n}.", agent=agent, agent_id=agent_id)
                built[agent_id].append(await session.build_request(inputs, agent_id=agent_id))
                await session.record_assistant(
                    user, text="Done.", usage=Usage(input=100 + n), agent=agent, agent_id=agent_id
                )
        history = await session.history()
        events = [r.event for r in await runtime.store.read("ses_agents")]
    for agent_id in (MAIN_AGENT, reviewer):
        pinned = history.pinned_prefix(agent_id)
        advances = [e for e in events if isinstance(e, PrefixAdvanced) and e.agent_id == agent_id]
        reports = [e for e in events if isinstance(e, UsageReported) and e.agent_id == agent_id]
        sent = [b.request.messages[-1].source_id for b in built[agent_id]]
        assert pinned is not None and pinned.advanced_to == sent[-1]
        assert [(a.key, a.message_id) for a in advances] == [(pinned.key, s) for s in sent]
        assert [r.measure for r in reports] == [b.measure for b in built[agent_id]]
