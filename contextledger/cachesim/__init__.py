"""Provider prompt-cache simulator: what a session's calls would read, write and pay.

See ``docs/cachesim.md`` for the rules per provider and the lower bound. The prices it charges
are the tables of ``contextledger.prices``.
"""

from contextledger.cachesim._blocks import (
    Block,
    BlockMemo,
    SimRequest,
    blocks_from_request,
    drops_earlier_thinking,
    prefixes,
    processed_blocks,
    sim_request,
)
from contextledger.cachesim._simulate import (
    PromptCache,
    RequestCost,
    SessionCost,
    bound_shares,
    lower_bound,
    simulate,
)
from contextledger.cachesim._validate import ReadGrowthErrors, read_growth_errors
from contextledger.cachesim._wire import (
    anthropic_prefix,
    blocks_from_anthropic_body,
    blocks_from_chat_body,
)

__all__ = [
    "Block",
    "BlockMemo",
    "PromptCache",
    "ReadGrowthErrors",
    "RequestCost",
    "SessionCost",
    "SimRequest",
    "anthropic_prefix",
    "blocks_from_anthropic_body",
    "blocks_from_chat_body",
    "blocks_from_request",
    "bound_shares",
    "drops_earlier_thinking",
    "lower_bound",
    "prefixes",
    "processed_blocks",
    "read_growth_errors",
    "sim_request",
    "simulate",
]
