"""Pure decisions: every choice about a session's context, as functions of the history, the
model, the config and the caller's clock, with no I/O.

``decisions`` is where the runtime, the strategies, the simulation and the CLI decide:
``compaction_due`` before a request, ``prune_plans`` after a turn. The planners they use are
here too, for those who want only the core: overflow and budgets (``overflow``), the
economic cadence (``cadence``), compaction selection (``compaction``), prunes (``prune``),
cache breakpoints (``cache``), provider errors (``errors``) and view transforms
(``transform``).
"""

from contextledger.policy._cache import anthropic_like, place_marks
from contextledger.policy._cadence import (
    Economics,
    compaction_cost,
    early_compaction_due,
    economic_threshold,
    estimate_view_tokens,
)
from contextledger.policy._compaction import CompactionPlan, plan_compaction, tail_budget
from contextledger.policy._decisions import (
    CompactionReason,
    DecisionViews,
    SliceFacts,
    after_compaction,
    compaction_due,
    last_reported_prompt,
    latest_answer,
    prune_plans,
    reported_prompt,
    slice_facts,
    slice_pressure,
    slice_view,
)
from contextledger.policy._errors import ErrorDecision, classify_error, decide_error
from contextledger.policy._overflow import (
    PreflightDecision,
    PreflightMeasure,
    Window,
    compaction_limit,
    context_window,
    is_overflow,
    measure_preflight,
    output_budget,
    pressure_level,
    should_compact_preflight,
    usable,
)
from contextledger.policy._prune import (
    BatchBudget,
    Plan,
    PrunePlan,
    StripPlan,
    TrimPlan,
    plan_after_turn,
    plan_batch,
    plan_events,
    plan_prune,
)
from contextledger.policy._transform import (
    StrategyError,
    Transform,
    TransformContext,
    apply_transform,
    load_transform,
)

__all__ = [
    "BatchBudget",
    "CompactionPlan",
    "CompactionReason",
    "DecisionViews",
    "Economics",
    "ErrorDecision",
    "Plan",
    "PreflightDecision",
    "PreflightMeasure",
    "PrunePlan",
    "SliceFacts",
    "StrategyError",
    "StripPlan",
    "Transform",
    "TransformContext",
    "TrimPlan",
    "Window",
    "after_compaction",
    "anthropic_like",
    "apply_transform",
    "classify_error",
    "compaction_cost",
    "compaction_due",
    "compaction_limit",
    "context_window",
    "decide_error",
    "early_compaction_due",
    "economic_threshold",
    "estimate_view_tokens",
    "is_overflow",
    "last_reported_prompt",
    "latest_answer",
    "load_transform",
    "measure_preflight",
    "output_budget",
    "place_marks",
    "plan_after_turn",
    "plan_batch",
    "plan_compaction",
    "plan_events",
    "plan_prune",
    "pressure_level",
    "prune_plans",
    "reported_prompt",
    "should_compact_preflight",
    "slice_facts",
    "slice_pressure",
    "slice_view",
    "tail_budget",
    "usable",
]
