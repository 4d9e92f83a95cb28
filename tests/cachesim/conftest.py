from __future__ import annotations

from collections.abc import Sequence

from contextledger.cachesim import Block, SimRequest
from contextledger.cachesim._blocks import Ttl


def blocks(
    names: Sequence[str], tokens: int | Sequence[int], marks: dict[int, Ttl] | None = None
) -> tuple[Block, ...]:
    """Blocks keyed by ``names``; ``marks`` maps a block index to its breakpoint TTL."""
    sizes = [tokens] * len(names) if isinstance(tokens, int) else list(tokens)
    marks = marks or {}
    return tuple(
        Block(key=n, tokens=t, breakpoint=marks.get(i))
        for i, (n, t) in enumerate(zip(names, sizes, strict=True))
    )


def req(bs: tuple[Block, ...], at: float, output: int = 0) -> SimRequest:
    return SimRequest(blocks=bs, at=at, output_tokens=output)


def names(n: int, prefix: str = "b") -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]
