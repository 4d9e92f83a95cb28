"""A model summarizer's requests fit its own window, with the session's system blocks and
tool table, however large the head: checked by a provider on loopback that refuses a prompt
and output cap over the window, as the real APIs do."""

from __future__ import annotations

import pytest

from contextledger.actors import Runtime
from contextledger.compaction._summarizers import ModelSummarizer, SummaryInput
from contextledger.events._parts import ToolSchema
from contextledger.policy._compaction import CHUNK_OUTPUT_TOKENS
from contextledger.providers import ProviderClient, wire_format
from contextledger.request._builder import RequestInputs
from contextledger.request._system import SystemSegments
from contextledger.store._memory import MemoryStore
from contextledger.testing.loopback import LoopbackProvider
from tests.actors.test_preflight import SMALL
from tests.actors.test_runtime import REF, _clock

#: A system prompt and tool table of about 3,000 tokens, repeated by every summary request.
INPUTS = RequestInputs(
    model=REF,
    segments=SystemSegments(prompt="Fix what the user asks. " * 300, environment="<env/>"),
    tools=tuple(
        ToolSchema(name=f"tool_{n}", description="Run it. " * 40, input_schema={"type": "object"})
        for n in range(8)
    ),
)


class Wordy(ModelSummarizer):
    """Sends every request to the provider, but answers a chunk with a long list of facts
    (about 2,000 tokens, as a model asked for up to 2,048 may), so that the merge of many
    chunks is larger than the window."""

    async def summarize(self, task: SummaryInput) -> str:
        text = await super().summarize(task)
        if task.max_output_tokens != CHUNK_OUTPUT_TOKENS:
            return text
        return "\n".join(f"- step {i}: read src/mod_{i}.py, it sets x = {i}" for i in range(170))


@pytest.mark.parametrize(("turns", "merges"), [(12, 0), (60, 1), (250, 3)])
async def test_every_summary_request_fits_the_window(turns: int, merges: int) -> None:
    """12 turns of 8 KB outputs (the head's messages alone nearly fill the window: the
    request carries its transcript), 60 (several windows: chunks, then their merge) and 250
    (so many chunks that their merge is merged in runs first)."""
    async with (
        LoopbackProvider(models=[SMALL]) as provider,
        ProviderClient(wire_format("anthropic"), provider.url, api_key="k") as client,
        Runtime.open(
            MemoryStore(), model=SMALL, clock=_clock(), summarizer=Wordy(client, model=REF)
        ) as rt,
    ):
        session = await rt.session("ses_big")
        await session.build_request(INPUTS)  # pins the system blocks and the tool table
        for n in range(turns):
            user = await session.add_user(f"Step {n}: read src/mod_{n}.py")
            output = "x = 1\n" * 1_400
            await session.record_assistant(
                user, text="Read it.", tool_calls=[("read", {"path": f"m{n}.py"}, output)]
            )
        result = await session.compact()
        received = list(provider.received)
    assert result.outcome == "completed", result.detail
    assert received and [e.status for e in received] == [200] * len(received)
    bodies = [e.json for e in received]
    assert all(b is not None and b["messages"][0]["role"] == "user" for b in bodies)
    merge_requests = sum(b"The conversation was condensed in" in e.body for e in received)
    assert merge_requests == merges  # 250 turns: the chunks merged in two runs, then merged
