"""Upcasters: functions that turn an event stored under an older schema version into the
next version's shape, so old logs stay readable after an event type evolves.

An upcaster takes the stored fields as a plain dict (version ``n``) and returns the fields of
version ``n + 1``. The registry chains them until the current version is reached.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

RawEvent = dict[str, Any]
Upcaster = Callable[[RawEvent], RawEvent]


class UpcasterRegistry:
    """Upcasters keyed by (event tag, version they read)."""

    __slots__ = ("_upcasters",)

    def __init__(self, upcasters: Mapping[tuple[str, int], Upcaster] | None = None) -> None:
        self._upcasters: dict[tuple[str, int], Upcaster] = dict(upcasters or {})

    def register(self, tag: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
        """Decorator: register ``fn`` as the upcaster of ``tag`` from ``from_version``."""

        def decorate(fn: Upcaster) -> Upcaster:
            key = (tag, from_version)
            if key in self._upcasters:
                raise ValueError(f"an upcaster for {tag} v{from_version} is registered already")
            self._upcasters[key] = fn
            return fn

        return decorate

    def upcast(self, tag: str, version: int, target: int, raw: RawEvent) -> RawEvent:
        """Apply the chain of upcasters from ``version`` to ``target``.

        Raises ``LookupError`` naming the missing step when the chain has a gap.
        """
        while version < target:
            try:
                step = self._upcasters[(tag, version)]
            except KeyError:
                raise LookupError(f"no upcaster for {tag} from v{version}") from None
            raw = step(raw)
            version += 1
        return raw


#: The package's own upcasters, one per event type and version it reads.
UPCASTERS = UpcasterRegistry()


@UPCASTERS.register("prefix.pinned", 1)
@UPCASTERS.register("prefix.rotated", 1)
def _prefix_without_tool_table(raw: RawEvent) -> RawEvent:
    """Version 1 did not record the tool definitions: version 2 reads that as an empty
    ``tool_table`` (the builder then takes the current definitions in the pinned order)."""
    return raw


@UPCASTERS.register("request.sent", 1)
def _request_without_measure(raw: RawEvent) -> RawEvent:
    """Version 1 did not record the prompt's measure: version 2 reads that as None (the
    usage report of its answer then carries none, and calibration skips it)."""
    return raw


@UPCASTERS.register("request.sent", 2)
def _request_without_tool_choice(raw: RawEvent) -> RawEvent:
    """Version 2 did not record the tool choice: version 3 reads that as None, unset (the
    choice of most requests then; a last step's ``"none"`` is not known)."""
    return raw
