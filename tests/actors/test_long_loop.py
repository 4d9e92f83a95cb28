"""On the default configuration, a long tool loop on a small window holds: 32 steps whose
outputs run up to 47 KB, through a provider on loopback that refuses a request over its
32,000-token window, compact every few steps and end without an error, with the extractive
summarizer and with a model summarizer asking the same provider."""

from __future__ import annotations

from collections import Counter

import pytest

from contextledger.actors import Runtime
from contextledger.compaction import ModelSummarizer
from contextledger.providers import ProviderClient, wire_format
from contextledger.store._memory import MemoryStore
from contextledger.testing import check_tool_pairs
from contextledger.testing.loopback import LoopbackProvider, tool_loop
from tests.actors.test_preflight import SMALL
from tests.actors.test_runtime import REF
from tests.testing.loopback.loop import run_tool_loop
from tests.testing.loopback.test_runtime_loop import RETRY, _clock, _inputs

STEPS = 32


def _output(n: int) -> str:
    """Step ``n``'s output: 2 to 501 lines of 94 characters (0.2 to 47 KB), in no order."""
    return ("x" * 90 + f" {n:3d}\n") * (2 + (n * 997) % 500)


@pytest.mark.parametrize("summarizer", ["extractive", "model"])
async def test_a_long_tool_loop_on_a_small_window_holds_on_the_defaults(summarizer: str) -> None:
    async with (
        LoopbackProvider(tool_loop(STEPS, output=_output), models=[SMALL]) as provider,
        ProviderClient(wire_format("anthropic"), provider.url, api_key="k", retry=RETRY) as c,
        Runtime.open(
            MemoryStore(),
            model=SMALL,
            clock=_clock(),
            summarizer=ModelSummarizer(c, model=REF) if summarizer == "model" else None,
        ) as rt,
    ):
        session = await rt.session("ses_long")
        run = await run_tool_loop(session, c, provider, _inputs("anthropic"))
        history = await session.history()
    compactions = Counter(c.status for c in history.state.compactions.values())
    assert compactions["completed"] >= 4 and compactions["rolled_back"] == 0
    summaries = compactions["completed"] if summarizer == "model" else 0
    assert [e.status for e in provider.received] == [200] * (STEPS + 1 + summaries)
    assert len(run.steps) == STEPS + 1 and not run.steps[-1].calls
    for built in run.built:
        check_tool_pairs(built.request.messages)
