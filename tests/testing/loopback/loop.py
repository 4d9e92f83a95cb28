"""An agent loop as an orchestrator writes it, over the runtime and the loopback provider:
build the request, send it, record the answer, run the tools (their output is what the
script expects), until the model stops calling tools."""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from contextledger.actors import SessionHandle
from contextledger.providers import ProviderClient, ProviderResponse
from contextledger.request._builder import BuiltRequest, RequestInputs
from contextledger.testing.loopback import LoopbackProvider, ModelStep, read_step


class LoopRun(msgspec.Struct, kw_only=True):
    """What a loop sent and got back, step by step."""

    built: list[BuiltRequest] = []
    responses: list[ProviderResponse] = []
    steps: list[ModelStep] = []


class FakeClock:
    """Seconds, set by the test: the server's clock for cache lifetimes."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def record_step(
    session: SessionHandle,
    provider: LoopbackProvider,
    parent_id: str,
    response: ProviderResponse,
) -> ModelStep:
    """Record one answer: its text, its calls (under the provider's ids) with the outputs the
    script expects, finished with the reported usage."""
    step = read_step(response.body)
    message = await session.start_assistant(parent_id)
    if step.text:
        await session.add_text(message, step.text)
    for call in step.calls:
        part = await session.call_tool(message, call.name, call.input, call_id=call.id)
        await session.record_tool_result(part, provider.expected_output(call.id) or "")
    finish = "tool-calls" if step.calls else "stop"
    await session.finish(message, finish=finish, usage=response.usage)
    return step


async def run_tool_loop(
    session: SessionHandle,
    client: ProviderClient,
    provider: LoopbackProvider,
    inputs: RequestInputs,
    *,
    task: str = "Fix the failing test.",
    max_steps: int = 50,
    before_send: Callable[[int], None] | None = None,
) -> LoopRun:
    """Run one user turn to its end (an answer without tool calls); ``before_send(n)`` runs
    before the ``n``-th request (from 0) is sent."""
    run = LoopRun()
    user = await session.add_user(task)
    for n in range(max_steps):
        built = await session.build_request(inputs)
        if before_send is not None:
            before_send(n)
        response = await client.send(built.request, built.encoded)
        step = await record_step(session, provider, user, response)
        run.built.append(built)
        run.responses.append(response)
        run.steps.append(step)
        if not step.calls:
            return run
    raise AssertionError(f"the loop did not end within {max_steps} steps")
