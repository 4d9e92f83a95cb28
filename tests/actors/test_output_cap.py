"""Every request the runtime builds asks for an output that fits the window beside its prompt."""

from __future__ import annotations

import json

from contextledger import (
    Config,
    MemoryStore,
    Model,
    ModelLimits,
    ModelRef,
    RequestInputs,
    Runtime,
    SystemSegments,
    Usage,
)

MODEL = Model(
    provider_id="anthropic",
    model_id="claude-sonnet-4-5",
    limits=ModelLimits(context=32_000, output=32_000),
)
INPUTS = RequestInputs(
    model=ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5"),
    segments=SystemSegments(prompt="You are a coding agent.", environment="<env>\n</env>"),
)


async def test_a_request_beside_a_large_prompt_asks_for_less_output() -> None:
    async with Runtime.open(MemoryStore(), model=MODEL, config=Config()) as runtime:
        session = await runtime.session("ses_cap")
        user = await session.add_user("Read the log and fix the failure.")
        first = json.loads((await session.build_request(INPUTS)).encoded.body)
        log = "\n".join(f"line {n}: " + "x" * 60 for n in range(500))  # about 9,000 tokens
        await session.record_assistant(
            user,
            tool_calls=[("read", {"path": "build.log"}, log)],
            usage=Usage(input=200, output=40),
        )
        built = await session.build_request(INPUTS)
    second = json.loads(built.encoded.body)
    prompt = len(built.encoded.body) // 4
    assert second["max_tokens"] < first["max_tokens"]
    assert second["max_tokens"] + prompt <= MODEL.limits.context
    assert built.request.max_output_tokens == second["max_tokens"]
