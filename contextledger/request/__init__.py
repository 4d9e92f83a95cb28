"""Request assembly: system segments, per-turn context, instructions, prefix snapshots, cache
breakpoints and the builder that turns a history into a provider-neutral ``Request``."""

from contextledger.request.types import CacheMark, CacheTTL, MarkTarget, Request, ToolChoice

__all__ = ["CacheMark", "CacheTTL", "MarkTarget", "Request", "ToolChoice"]
