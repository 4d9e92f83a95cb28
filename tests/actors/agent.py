"""What the tests of an agent's loop through the runtime share: the model, the inputs of its
requests (one ``bash`` tool) and a clock that ticks a second per reading."""

from __future__ import annotations

from collections.abc import Callable
from itertools import count

from contextledger.events._parts import ModelRef, ToolSchema
from contextledger.request._builder import RequestInputs
from contextledger.request._system import SystemSegments
from contextledger.vocabulary._models import Model, ModelLimits

MODEL = Model(
    provider_id="anthropic",
    model_id="claude-sonnet-4-5",
    limits=ModelLimits(context=200_000, output=32_000),
)
BASH = ToolSchema(name="bash", description="Run a command.", input_schema={"type": "object"})
INPUTS = RequestInputs(
    model=ModelRef(provider_id=MODEL.provider_id, model_id=MODEL.model_id),
    segments=SystemSegments(prompt="Fix what the user asks.", environment="<env/>"),
    tools=(BASH,),
)


def clock() -> Callable[[], int]:
    """Milliseconds from 1,900,000,000,000, a second more at each reading."""
    ticks = count(1_900_000_000_000, 1000)
    return lambda: next(ticks)
