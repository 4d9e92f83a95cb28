"""The shared vocabulary: the types and defaults every layer above speaks.

A leaf package: it imports nothing of contextledger but ``contextledger.events``.

- ``messages``: the provider-neutral messages a model view is made of (``ModelMessage``).
- ``requests``: the provider-neutral request (``Request``), its cache marks and the
  breakpoint policy's settings (``CachePolicy``).
- ``models``: a model's identity and token limits (``Model``, ``ModelLimits``).
- ``options``: the names of the rules a config chooses between (``OverflowVariant``, ...).
- ``quantities``: token quantities and ratios as a config writes them (``"300K"``, ``"75%"``).
- ``defaults``: the thresholds the config's defaults and the policy's functions share, each
  defined once with its reason and precedent.

The types and parsers are re-exported here; the defaults are read from their module.
"""

from contextledger.events._parts import ToolChoice
from contextledger.vocabulary._messages import (
    ModelContent,
    ModelFile,
    ModelMessage,
    ModelReasoning,
    ModelRole,
    ModelText,
    ModelToolCall,
    ModelToolResult,
)
from contextledger.vocabulary._models import BEDROCK_PROVIDERS, Model, ModelLimits
from contextledger.vocabulary._options import (
    OutputBudgetRule,
    OverflowVariant,
    TemplateName,
    TokenCountRule,
)
from contextledger.vocabulary._quantities import (
    Quantity,
    is_reset_budget,
    parse_quantity,
    parse_trigger_ratio,
)
from contextledger.vocabulary._requests import (
    CacheMark,
    CacheMode,
    CachePolicy,
    CacheTTL,
    MarkTarget,
    MessageTarget,
    Request,
)

__all__ = [
    "BEDROCK_PROVIDERS",
    "CacheMark",
    "CacheMode",
    "CachePolicy",
    "CacheTTL",
    "MarkTarget",
    "MessageTarget",
    "Model",
    "ModelContent",
    "ModelFile",
    "ModelLimits",
    "ModelMessage",
    "ModelReasoning",
    "ModelRole",
    "ModelText",
    "ModelToolCall",
    "ModelToolResult",
    "OutputBudgetRule",
    "OverflowVariant",
    "Quantity",
    "Request",
    "TemplateName",
    "TokenCountRule",
    "ToolChoice",
    "is_reset_budget",
    "parse_quantity",
    "parse_trigger_ratio",
]
