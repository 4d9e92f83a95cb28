"""A model as the context rules see it: its identity and its token limits.

The window, overflow and output rules (``contextledger.policy._overflow``) take a ``Model``; the
simulation and the runtime's callers build one from a provider's published limits.
"""

from __future__ import annotations

from typing import Final

import msgspec


class ModelLimits(msgspec.Struct, frozen=True, kw_only=True):
    """A model's token limits. ``context`` 0 means unknown (overflow handling is then off);
    ``input`` 0 or None means no separate input limit; ``output`` 0 means unknown."""

    context: int
    output: int = 0
    input: int | None = None


#: The provider ids of Amazon Bedrock, whose Converse API (the ``bedrock`` wire format) takes
#: images only inside tool results and sends no tool choice.
BEDROCK_PROVIDERS: Final = frozenset({"amazon-bedrock", "bedrock"})


class Model(msgspec.Struct, frozen=True, kw_only=True):
    """A model as these rules see it: its identity and its limits."""

    provider_id: str
    model_id: str
    limits: ModelLimits

    @property
    def key(self) -> str:
        """``provider/model``, what ``compaction.max_context`` patterns are matched against."""
        return f"{self.provider_id}/{self.model_id}"
