"""On the default configuration, a step inside a tool loop whose request would reach the
compaction limit is compacted before it is built, and the request keeps every tool call
with its result."""

from __future__ import annotations

import pytest

from contextledger.actors import Runtime, SessionHandle
from contextledger.config import Config
from contextledger.events._parts import Usage
from contextledger.policy._overflow import usable
from contextledger.store._memory import MemoryStore
from contextledger.testing import check_tool_pairs
from contextledger.vocabulary._models import Model, ModelLimits
from tests.actors.test_runtime import INPUTS, _clock

SMALL = Model(
    provider_id="anthropic",
    model_id="claude-sonnet-4-5",
    limits=ModelLimits(context=32_000, output=8_000),
)
LIMIT = usable(SMALL, Config())


async def _loop_step(session: SessionHandle, output_tokens: int) -> None:
    """A turn whose first step reported a prompt 3,000 tokens under the limit and called a
    tool that answered with about ``output_tokens``."""
    user = await session.add_user("Run the tests and fix what fails.")
    await session.record_assistant(
        user,
        text="Running them.",
        tool_calls=[("bash", {"command": "pytest"}, "F" * (4 * output_tokens))],
        usage=Usage(input=LIMIT - 3_000, output=40),
    )


@pytest.mark.parametrize(("output_tokens", "compactions"), [(3_000, ["completed"]), (1_000, [])])
async def test_a_step_is_compacted_before_it_is_sent_only_when_its_results_reach_the_limit(
    output_tokens: int, compactions: list[str]
) -> None:
    async with Runtime.open(MemoryStore(), model=SMALL, clock=_clock()) as rt:
        session = await rt.session("ses_loop")
        await _loop_step(session, output_tokens)
        built = await session.build_request(INPUTS)
        history = await session.history()
    assert [c.status for c in history.state.compactions.values()] == compactions
    check_tool_pairs(built.request.messages)
    if compactions:
        assert built.request.messages[0].content[0].text == "What did we do so far?"  # type: ignore[union-attr]
