"""Context strategies: view transforms (pi's ``transformContext``) and the strategies that
decide when to compact (the policy strategies through ``policy._decisions``, as the runtime
does). See ``docs/strategies.md``."""

from contextledger.policy._cadence import estimate_view_tokens
from contextledger.policy._transform import (
    StrategyError,
    Transform,
    TransformContext,
    apply_transform,
    load_transform,
    view_transform,
)
from contextledger.strategies._registry import STRATEGIES, StrategyFactory, strategy
from contextledger.strategies._transforms import (
    PLACEHOLDER,
    TRUNCATED_MARKER,
    age_truncate,
    baseline,
    cap_tool_outputs,
    per_tool_keep_last,
    shorten,
    truncate,
)
from contextledger.strategies._turns import (
    CompactAt,
    CompactOnce,
    DefaultStrategy,
    MimoTiers,
    OpencodeDefault,
    PolicyStrategy,
    RuntimePolicy,
    Strategy,
    TransformStrategy,
    pi_overflow,
    strategy_view,
    transform_context,
)

__all__ = [
    "PLACEHOLDER",
    "STRATEGIES",
    "TRUNCATED_MARKER",
    "CompactAt",
    "CompactOnce",
    "DefaultStrategy",
    "MimoTiers",
    "OpencodeDefault",
    "PolicyStrategy",
    "RuntimePolicy",
    "Strategy",
    "StrategyError",
    "StrategyFactory",
    "Transform",
    "TransformContext",
    "TransformStrategy",
    "age_truncate",
    "apply_transform",
    "baseline",
    "cap_tool_outputs",
    "estimate_view_tokens",
    "load_transform",
    "per_tool_keep_last",
    "pi_overflow",
    "shorten",
    "strategy",
    "strategy_view",
    "transform_context",
    "truncate",
    "view_transform",
]
