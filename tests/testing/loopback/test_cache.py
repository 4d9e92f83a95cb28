"""Prompt-cache accounting: each answer reports, in its API's usage shape, the reads and
writes the provider's rules give (``contextledger.cachesim``): breakpoints, the 20-block
lookback, the minimum cacheable prefix, lifetimes."""

from __future__ import annotations

from collections.abc import Callable
from itertools import count
from typing import Any

import pytest

from contextledger.actors import Runtime
from contextledger.cachesim import (
    SimRequest,
    blocks_from_anthropic_body,
    blocks_from_chat_body,
    blocks_from_request,
    simulate,
)
from contextledger.events._parts import ModelRef, ToolSchema, Usage
from contextledger.prices._tables import price_for
from contextledger.providers import ProviderClient, RetryPolicy, wire_format
from contextledger.request._builder import RequestInputs
from contextledger.request._system import SystemSegments
from contextledger.store._memory import MemoryStore
from contextledger.testing.loopback import LoopbackCore, LoopbackProvider, tool_loop
from contextledger.vocabulary._models import Model, ModelLimits
from tests.testing.loopback.bodies import MODELS, SMALL, anthropic, chat, post, user
from tests.testing.loopback.loop import FakeClock, run_tool_loop

EPHEMERAL = {"type": "ephemeral"}
#: About 2,000 tokens of system prompt: above every model's minimum cacheable prefix here.
LONG_SYSTEM = "Follow the house rules. " * 330


def _marked_system(text: str, ttl: str | None = None) -> list[dict[str, Any]]:
    control = {**EPHEMERAL, "ttl": ttl} if ttl else EPHEMERAL
    return [{"type": "text", "text": text, "cache_control": control}]


def _usage(core: LoopbackCore, body: dict[str, Any], at: float) -> dict[str, Any]:
    reaction, answer = post(core, body, at=at)
    assert reaction.status == 200, answer
    usage: dict[str, Any] = answer["usage"]
    return usage


def _prefix(body: dict[str, Any], through: int) -> int:
    return sum(b.tokens for b in blocks_from_anthropic_body(body)[: through + 1])


def test_a_marked_prefix_is_written_then_read() -> None:
    core = LoopbackCore(models=MODELS)
    body = anthropic(user("go"), system=_marked_system(LONG_SYSTEM))
    prefix = _prefix(body, 1)  # the tool and the system block
    total = _prefix(body, 2)
    first = _usage(core, body, at=0)
    second = _usage(core, body, at=10)
    assert (first["cache_creation_input_tokens"], first["cache_read_input_tokens"]) == (prefix, 0)
    assert first["input_tokens"] == total - prefix
    assert first["cache_creation"] == {
        "ephemeral_5m_input_tokens": prefix,
        "ephemeral_1h_input_tokens": 0,
    }
    assert (second["cache_creation_input_tokens"], second["cache_read_input_tokens"]) == (
        0,
        prefix,
    )


def test_a_change_of_tool_choice_reads_the_tools_and_system_not_the_messages() -> None:
    core = LoopbackCore(models=MODELS)
    long = {"type": "text", "text": LONG_SYSTEM, "cache_control": EPHEMERAL}
    body = anthropic({"role": "user", "content": [long]}, system=_marked_system(LONG_SYSTEM))
    tools_and_system = _prefix(body, 1)
    through_message = _prefix(body, 2)
    _usage(core, body, at=0)
    changed = _usage(core, {**body, "tool_choice": {"type": "none"}}, at=10)
    assert changed["cache_read_input_tokens"] == tools_and_system
    assert changed["cache_creation_input_tokens"] == through_message - tools_and_system
    same = _usage(core, body, at=20)
    assert same["cache_read_input_tokens"] == through_message


def test_a_prefix_below_the_model_minimum_is_not_cached() -> None:
    core = LoopbackCore(models=MODELS)
    body = anthropic(user("go"), system=_marked_system("Be brief."))
    for at in (0, 10):
        usage = _usage(core, body, at=at)
        assert (usage["cache_creation_input_tokens"], usage["cache_read_input_tokens"]) == (0, 0)
        assert usage["input_tokens"] == _prefix(body, 2)


def test_a_five_minute_entry_expires_and_a_one_hour_entry_lives_on() -> None:
    core = LoopbackCore(models=MODELS)
    five = anthropic(user("go"), system=_marked_system(LONG_SYSTEM))
    hour = anthropic(user("go"), system=_marked_system(LONG_SYSTEM + "Hourly.", ttl="1h"))
    _usage(core, five, at=0)
    _usage(core, hour, at=0)
    later_five = _usage(core, five, at=301)
    later_hour = _usage(core, hour, at=600)
    assert later_five["cache_read_input_tokens"] == 0
    assert later_five["cache_creation_input_tokens"] == _prefix(five, 1)
    assert later_hour["cache_read_input_tokens"] == _prefix(hour, 1)
    assert _usage(core, hour, at=0)["cache_creation"]["ephemeral_1h_input_tokens"] == 0


def test_a_breakpoint_reads_an_entry_up_to_20_blocks_back_and_no_further() -> None:
    def body(turns: int, system: list[dict[str, Any]], mark: int) -> dict[str, Any]:
        """``turns`` user messages, the one at ``mark`` with a breakpoint."""
        made = anthropic(*(user(f"note {n}: " + "detail " * 40) for n in range(turns)))
        made["system"] = system
        made["messages"][mark]["content"][0]["cache_control"] = EPHEMERAL
        return made

    first = body(5, _marked_system(LONG_SYSTEM), mark=4)
    unmarked = [{"type": "text", "text": LONG_SYSTEM}]
    # The entry ends at block 6 (tool, system, five messages); block 26 is 20 blocks on.
    near = body(25, unmarked, mark=24)
    far = body(26, unmarked, mark=25)
    core = LoopbackCore(models=MODELS)
    _usage(core, first, at=0)
    assert _usage(core, near, at=1)["cache_read_input_tokens"] == _prefix(first, 6)
    core = LoopbackCore(models=MODELS)
    _usage(core, first, at=0)
    assert _usage(core, far, at=1)["cache_read_input_tokens"] == 0


def test_chat_completions_reads_the_longest_prefix_floored_to_128_token_steps() -> None:
    core = LoopbackCore(models=MODELS)
    body = chat({"role": "user", "content": LONG_SYSTEM})
    prompt = sum(b.tokens for b in blocks_from_chat_body(body))
    _, first = post(core, body, api="chat", at=0)
    _, second = post(core, body, api="chat", at=10)
    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert second["usage"]["prompt_tokens"] == prompt
    cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached == 1024 + (prompt - 1024) // 128 * 128
    assert "cache_write_tokens" not in second["usage"]["prompt_tokens_details"]


# --- requests built by the runtime's RequestBuilder --------------------------------------------

SEGMENTS = SystemSegments(prompt="Work carefully. " * 400, environment="<env>cwd: /repo</env>")
TOOLS = (
    ToolSchema(name="bash", description="Run a shell command.", input_schema={"type": "object"}),
)
#: Seconds at which each step is sent: a tool loop, then a pause past the five-minute TTL.
SCHEDULE = (0.0, 20.0, 45.0, 80.0, 400.0, 410.0, 430.0, 440.0)


def _clock() -> Callable[[], int]:
    ticks = count(1_900_000_000_000, 1000)
    return lambda: next(ticks)


@pytest.mark.parametrize(
    ("wire", "model_id", "cut"),
    [
        ("anthropic", "claude-sonnet-4-5", blocks_from_anthropic_body),
        ("openai-chat", "gpt-5", blocks_from_chat_body),
    ],
)
async def test_usage_matches_cachesim_for_requests_built_by_the_runtime(
    wire: str, model_id: str, cut: Callable[[dict[str, Any]], Any]
) -> None:
    model = Model(
        provider_id="anthropic" if wire == "anthropic" else "openai",
        model_id=model_id,
        limits=ModelLimits(context=200_000, output=32_000),
    )
    inputs = RequestInputs(
        model=ModelRef(provider_id=model.provider_id, model_id=model_id),
        segments=SEGMENTS,
        tools=TOOLS,
    )
    clock = FakeClock()
    script = tool_loop(len(SCHEDULE) - 1, output=lambda n: f"step {n}\n" + "log line\n" * 150)
    retry = RetryPolicy(max_attempts=1)
    async with (
        LoopbackProvider(script, models=[model], clock=clock) as provider,
        Runtime.open(MemoryStore(), model=model, wire=wire, clock=_clock()) as runtime,
        ProviderClient(wire_format(wire), provider.url, api_key="k", retry=retry) as client,
    ):
        session = await runtime.session("ses_cache")

        def at(n: int) -> None:
            clock.now = SCHEDULE[n]

        run = await run_tool_loop(session, client, provider, inputs, before_send=at)

    exchanges = provider.received
    assert [e.status for e in exchanges] == [200] * len(SCHEDULE)
    sims = [SimRequest(blocks=cut(e.json), at=e.at) for e in exchanges]
    expected = simulate(sims, price_for(model_id)).requests
    reported = [r.usage for r in run.responses]
    assert reported == [
        Usage(
            input=c.uncached,
            output=r.usage.output,
            cache_read=c.cache_read,
            cache_write=c.cache_write,
        )
        for c, r in zip(expected, run.responses, strict=True)
    ]
    reads = [c.cache_read for c in expected]
    assert reads[0] == 0 and all(r > 0 for r in reads[1:4])
    assert reads[4] < reads[3]  # the pause outlived the five-minute entries
    assert reads[-1] > reads[4]
    if wire == "anthropic":
        writes = [c.cache_write for c in expected]
        assert all(w > 0 for w in writes)
        for built, sim in zip(run.built, sims, strict=True):
            marks = [b.breakpoint for b in blocks_from_request(built.request)]
            assert [b.breakpoint for b in sim.blocks] == marks
            assert sum(m is not None for m in marks) == len(built.request.marks)


def test_the_window_holds_the_prompt_the_model_reads_without_the_thinking_it_drops() -> None:
    # Claude Sonnet 4 drops the thinking of earlier turns once a user text follows: a request
    # whose blocks sum over the 2,000-token window but whose read prompt does not is taken.
    thinking = {"type": "thinking", "thinking": "t" * 9_000, "signature": "sig"}
    answer = {"role": "assistant", "content": [thinking, {"type": "text", "text": "done"}]}
    body = anthropic(user("go"), answer, user("and now?"), model=SMALL.model_id, max_tokens=10)
    blocks = blocks_from_anthropic_body(body)
    assert sum(b.tokens for b in blocks) > SMALL.limits.context
    reaction, answered = post(LoopbackCore(models=MODELS), body)
    assert reaction.status == 200, answered
    read = answered["usage"]
    prompt = read["input_tokens"] + read["cache_creation_input_tokens"]
    assert prompt + read["cache_read_input_tokens"] < SMALL.limits.context
