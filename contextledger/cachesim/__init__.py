"""Provider prompt-cache simulator: what a session's calls would read, write and pay.

See ``docs/cachesim.md`` for the rules per provider and the lower bound.
"""

from contextledger.cachesim.blocks import (
    Block,
    SimRequest,
    blocks_from_request,
    prefixes,
    sim_request,
)
from contextledger.cachesim.pricing import FAMILIES, Family, ModelPrice, load_prices, price_for
from contextledger.cachesim.simulate import (
    RequestCost,
    SessionCost,
    lower_bound,
    simulate,
)
from contextledger.cachesim.validate import ReadGrowthErrors, read_growth_errors

__all__ = [
    "FAMILIES",
    "Block",
    "Family",
    "ModelPrice",
    "ReadGrowthErrors",
    "RequestCost",
    "SessionCost",
    "SimRequest",
    "blocks_from_request",
    "load_prices",
    "lower_bound",
    "prefixes",
    "price_for",
    "read_growth_errors",
    "sim_request",
    "simulate",
]
