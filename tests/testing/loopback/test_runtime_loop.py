"""A short scripted tool loop driven through ``contextledger.Runtime`` completes against the
loopback provider: on trio, on asyncio (``embed_in_asyncio``), and through faults."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from itertools import count

import pytest

from contextledger.actors import Runtime, SessionHandle, embed_in_asyncio
from contextledger.events._parts import ModelRef, ToolSchema
from contextledger.providers import ProviderClient, ProviderResponse, RetryPolicy, wire_format
from contextledger.request._builder import BuiltRequest, RequestInputs
from contextledger.request._system import SystemSegments
from contextledger.store._memory import MemoryStore
from contextledger.testing import check_tool_pairs
from contextledger.testing.loopback import Fault, LoopbackProvider, ModelStep, tool_loop
from contextledger.vocabulary._messages import ModelToolResult
from contextledger.vocabulary._models import Model, ModelLimits
from tests.testing.loopback.loop import record_step, run_tool_loop

STEPS = 4
MODELS = {
    "anthropic": Model(
        provider_id="anthropic",
        model_id="claude-sonnet-4-5",
        limits=ModelLimits(context=200_000, output=32_000),
    ),
    "openai-chat": Model(
        provider_id="openai", model_id="gpt-5", limits=ModelLimits(context=400_000, output=32_000)
    ),
}
#: Each API's stop reasons for a step that called tools and for the last one.
STOPS = {"anthropic": ("tool_use", "end_turn"), "openai-chat": ("tool_calls", "stop")}
TOOLS = (ToolSchema(name="bash", description="Run a command.", input_schema={"type": "object"}),)
RETRY = RetryPolicy(max_attempts=4, base_delay=0.0, max_delay=0.5)


def _inputs(wire: str) -> RequestInputs:
    model = MODELS[wire]
    return RequestInputs(
        model=ModelRef(provider_id=model.provider_id, model_id=model.model_id),
        segments=SystemSegments(prompt="Fix what the user asks.", environment="<env/>"),
        tools=TOOLS,
    )


def _clock() -> Callable[[], int]:
    ticks = count(1_900_000_000_000, 1000)
    return lambda: next(ticks)


def _output(n: int) -> str:
    return f"$ step {n}\n{n} passed"


async def _check_session(session: SessionHandle, responses: list[ProviderResponse]) -> None:
    """The log holds every step with its reported usage, the view pairs every call with the
    output the script expected, and the log replays exactly."""
    history = await session.history()
    usages = [m.usage for m in history.messages if m.role == "assistant"]
    assert usages == [r.usage for r in responses]
    view = await session.view()
    check_tool_pairs(view)
    results = [p for m in view for p in m.content if isinstance(p, ModelToolResult)]
    assert [r.output for r in results] == [_output(n) for n in range(1, STEPS + 1)]
    assert await session.replay()


@pytest.mark.parametrize("wire", ["anthropic", "openai-chat"])
async def test_a_scripted_tool_loop_completes_through_the_runtime_on_trio(wire: str) -> None:
    model = MODELS[wire]
    async with (
        LoopbackProvider(tool_loop(STEPS, output=_output), models=[model]) as provider,
        Runtime.open(MemoryStore(), model=model, wire=wire, clock=_clock()) as runtime,
        ProviderClient(wire_format(wire), provider.url, api_key="k", retry=RETRY) as client,
    ):
        session = await runtime.session("ses_loop")
        run = await run_tool_loop(session, client, provider, _inputs(wire))
        await _check_session(session, run.responses)

    calls, last = STOPS[wire]
    assert [s.stop for s in run.steps] == [calls] * STEPS + [last]
    assert run.steps[-1].text == "All scripted steps are done."
    assert [e.status for e in provider.received] == [200] * (STEPS + 1)
    assert provider.mismatches == [] and provider.errors == []
    assert len(run.built[-1].request.messages) == 2 * STEPS + 1


async def test_the_loop_completes_through_rate_limits_overloads_and_drops() -> None:
    model = MODELS["anthropic"]
    async with (
        LoopbackProvider(tool_loop(STEPS, output=_output), models=[model]) as provider,
        Runtime.open(MemoryStore(), model=model, clock=_clock()) as runtime,
        ProviderClient(wire_format("anthropic"), provider.url, api_key="k", retry=RETRY) as client,
    ):
        provider.inject(Fault.rate_limited(retry_after_ms=20), Fault.overloaded())
        session = await runtime.session("ses_faults")
        sent = 0

        def faults(n: int) -> None:
            nonlocal sent
            sent = n
            if n == 2:
                provider.inject(Fault.dropped(), Fault.overloaded(), Fault.server_error())

        run = await run_tool_loop(
            session, client, provider, _inputs("anthropic"), before_send=faults
        )
        await _check_session(session, run.responses)

    assert sent == STEPS
    assert [r.attempts for r in run.responses] == [3, 1, 4, 1, 1]
    assert [e.status for e in provider.received] == [
        429,
        529,
        200,
        200,
        None,
        529,
        500,
        200,
        200,
        200,
    ]
    assert provider.mismatches == []


def test_a_scripted_tool_loop_completes_through_the_runtime_on_asyncio() -> None:
    model = MODELS["anthropic"]
    inputs = _inputs("anthropic")

    async def main() -> tuple[list[ModelStep], list[int | None], bool]:
        async with (
            LoopbackProvider(tool_loop(STEPS, output=_output), models=[model]) as provider,
            embed_in_asyncio(MemoryStore(), model=model, clock=_clock()) as bridge,
        ):

            async def open_client(runtime: Runtime) -> ProviderClient:
                return ProviderClient(
                    wire_format("anthropic"), provider.url, api_key="k", retry=RETRY
                )

            client = await bridge.call(open_client)
            steps: list[ModelStep] = []
            try:
                user = await bridge.call_session("ses_async", lambda s: s.add_user("Fix it."))
                for _ in range(STEPS + 1):
                    built: BuiltRequest = await bridge.call_session(
                        "ses_async", lambda s: s.build_request(inputs)
                    )

                    async def send(
                        runtime: Runtime, built: BuiltRequest = built
                    ) -> ProviderResponse:
                        return await client.send(built.request, built.encoded)

                    response = await bridge.call(send)

                    async def record(
                        session: SessionHandle, response: ProviderResponse = response
                    ) -> ModelStep:
                        return await record_step(session, provider, user, response)

                    step = await bridge.call_session("ses_async", record)
                    steps.append(step)
                    if not step.calls:
                        break

                async def check(session: SessionHandle) -> bool:
                    view = await session.view()
                    check_tool_pairs(view)
                    return await session.replay()

                replayed = await bridge.call_session("ses_async", check)
            finally:

                async def close(runtime: Runtime) -> None:
                    await client.aclose()

                await bridge.call(close)
            return steps, [e.status for e in provider.received], replayed

    steps, statuses, replayed = asyncio.run(main())
    assert [s.stop for s in steps] == ["tool_use"] * STEPS + ["end_turn"]
    assert [c.input for s in steps for c in s.calls] == [
        {"command": f"step {n}"} for n in range(1, STEPS + 1)
    ]
    assert statuses == [200] * (STEPS + 1)
    assert replayed
