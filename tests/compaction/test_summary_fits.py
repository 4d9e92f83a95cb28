"""A model summarizer's requests fit its own window, with the session's system blocks and
tool table, however large the head: checked by a provider on loopback that refuses a prompt
and output cap over the window, as the real APIs do."""

from __future__ import annotations

from collections import Counter

import msgspec
import pytest

from contextledger.actors import Runtime
from contextledger.compaction import _compactor as compactor
from contextledger.compaction._compactor import CompactionResult
from contextledger.compaction._summarizers import ModelSummarizer, SummaryInput, summary_request
from contextledger.config import Config
from contextledger.events._parts import ToolSchema
from contextledger.policy._compaction import CHUNK_OUTPUT_TOKENS
from contextledger.policy._decisions import output_cap
from contextledger.providers import ProviderClient, wire_format
from contextledger.request._builder import RequestInputs
from contextledger.request._system import SystemSegments
from contextledger.store._memory import MemoryStore
from contextledger.testing.loopback import Exchange, LoopbackProvider
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
    result, received = await _compacted(turns, Wordy)
    assert result.outcome == "completed", result.detail
    assert received and [e.status for e in received] == [200] * len(received)
    bodies = [e.json for e in received]
    assert all(b is not None and b["messages"][0]["role"] == "user" for b in bodies)
    merge_requests = sum(b"The conversation was condensed in" in e.body for e in received)
    assert merge_requests == merges  # 250 turns: the chunks merged in two runs, then merged


@pytest.mark.parametrize("turns", [3, 12, 60])
async def test_each_candidate_summary_request_is_measured_once(
    turns: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fitting a summary request measures each request it tries once (the one it sends
    included, whose measure also sizes its output cap), and a merge is judged on the measure
    its fitting took: 3 turns (the head's messages fit), 12 (they do not: the transcript) and
    60 (chunks, then their merge)."""
    measured: Counter[bytes] = Counter()
    prompts: dict[bytes, int] = {}
    tokens = compactor._Run._tokens

    def counting(run: compactor._Run, task: SummaryInput) -> int:
        key = _request_key(task)
        measured[key] += 1
        prompts[key] = tokens(run, task)
        return prompts[key]

    monkeypatch.setattr(compactor._Run, "_tokens", counting)
    sent: list[SummaryInput] = []

    class Recorded(Wordy):
        async def summarize(self, task: SummaryInput) -> str:
            sent.append(task)
            return await super().summarize(task)

    result, _ = await _compacted(turns, Recorded)
    assert result.outcome == "completed", result.detail
    assert measured and max(measured.values()) == 1
    # The answer's room is what the window leaves beside the measure of what is sent.
    final = sent[-1]
    prompt = prompts[_request_key(final)]
    assert final.max_output_tokens == output_cap(
        SMALL, Config(), requested=None, prompt_tokens=prompt
    )


def _request_key(task: SummaryInput) -> bytes:
    """The request a model summarizer sends for ``task``, whatever output it asks for."""
    return msgspec.json.encode(summary_request(task, model=REF, max_output_tokens=1))


async def _compacted(
    turns: int, summarizer: type[Wordy]
) -> tuple[CompactionResult, list[Exchange]]:
    """A runtime session of ``turns`` steps of 8 KB outputs compacted by ``summarizer``
    through a loopback provider; the compaction's result and the requests it received."""
    async with (
        LoopbackProvider(models=[SMALL]) as provider,
        ProviderClient(wire_format("anthropic"), provider.url, api_key="k") as client,
        Runtime.open(
            MemoryStore(), model=SMALL, clock=_clock(), summarizer=summarizer(client, model=REF)
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
        return await session.compact(), list(provider.received)
