"""Prefix snapshots: the system text and tool table a session's requests are pinned to.

A profile (provider, model, agent, system mode, system text, tool order, permissions) is
keyed by the SHA-256 of its sorted-key JSON. The first request pins it; later requests use
the pinned system text and tool order, so nothing that drifts outside the log (a date in the
``<env>`` block, a tool registry that lists tools in another order) changes bytes already
cached. The table is rotated when it really changes: a new tool (appended after the pinned
ones, in name order), a tool whose definition changed (in place), or another model, agent,
system mode or permission set (the table is then rebuilt from the tools present). A tool
that disappears keeps its slot and its pinned definition, so its return does not reorder
anything; the host answers a call to it with ``unavailable_output``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from contextledger.events._catalogue import MAIN_AGENT, PrefixPinned, PrefixProfile, PrefixRotated
from contextledger.events._parts import ToolSchema
from contextledger.history._projection import PinnedPrefix

_sorted_json = msgspec.json.Encoder(order="sorted").encode

PrefixAction = Literal["keep", "pin", "rotate"]


def stable_json(value: Any) -> bytes:
    """JSON with object keys sorted at every level; non-finite numbers become null."""
    return _sorted_json(value)


def prefix_key(profile: PrefixProfile, tools: Sequence[ToolSchema]) -> str:
    """The key of a pinned prefix: SHA-256 hex of the sorted-key JSON of the profile and the
    tool table, so a changed tool definition gives a new key (``PrefixAdvanced`` compares
    keys, and an advance made under the old definitions must not count for the new)."""
    return hashlib.sha256(stable_json({"profile": profile, "tools": list(tools)})).hexdigest()


def unavailable_output(tool: str) -> str:
    """What a call to a pinned tool that is gone this turn is answered with."""
    return f'The tool "{tool}" is unavailable for this request.'


class PrefixDecision(msgspec.Struct, frozen=True, kw_only=True):
    """What to send and whether to pin or rotate first. ``system`` and ``tools`` are what
    the request uses; ``unavailable`` names pinned tools absent this turn."""

    action: PrefixAction
    key: str
    profile: PrefixProfile
    system: tuple[str, ...]
    tools: tuple[ToolSchema, ...]
    unavailable: frozenset[str] = frozenset()
    reason: str | None = None

    def event(
        self, session_id: str, *, time_ms: int = 0, agent_id: str = MAIN_AGENT
    ) -> PrefixPinned | PrefixRotated | None:
        """The event to append before sending, or None when the pin is kept."""
        if self.action == "pin":
            return PrefixPinned(
                session_id=session_id,
                agent_id=agent_id,
                time_ms=time_ms,
                key=self.key,
                profile=self.profile,
                tool_table=self.tools,
            )
        if self.action == "rotate":
            return PrefixRotated(
                session_id=session_id,
                agent_id=agent_id,
                time_ms=time_ms,
                key=self.key,
                profile=self.profile,
                reason=self.reason or "tools",
                tool_table=self.tools,
            )
        return None


def _unique(tools: Sequence[ToolSchema]) -> list[ToolSchema]:
    seen: dict[str, ToolSchema] = {}
    for tool in tools:
        seen.setdefault(tool.name, tool)
    return list(seen.values())


def arrange_tools(
    pinned: Sequence[ToolSchema], current: Sequence[ToolSchema]
) -> tuple[tuple[ToolSchema, ...], bool]:
    """The pinned table updated with ``current``: pinned tools in their slots (a changed
    definition replaces the pinned one; a missing tool keeps its pinned one), then new tools
    sorted by name. Also whether anything other than absences changed."""
    present = {t.name: t for t in _unique(current)}
    table: list[ToolSchema] = []
    changed = False
    for tool in pinned:
        now = present.pop(tool.name, None)
        if now is not None and now != tool:
            changed = True
            table.append(now)
        else:
            # The pinned object, not an equal one: equality ignores the key order inside a
            # schema, the wire bytes do not.
            table.append(tool)
    if present:
        changed = True
        table.extend(sorted(present.values(), key=lambda t: t.name))
    return tuple(table), changed


def _identity(profile: PrefixProfile) -> tuple[Any, ...]:
    return (
        profile.provider_id,
        profile.model_id,
        profile.agent,
        profile.system_mode,
        stable_json(profile.permissions),
    )


def _changed_field(pinned: PrefixProfile, candidate: PrefixProfile) -> str:
    names = ("provider_id", "model_id", "agent", "system_mode", "permissions")
    for name, a, b in zip(names, _identity(pinned), _identity(candidate), strict=True):
        if a != b:
            return name.removesuffix("_id")
    return "profile"


def decide_prefix(
    pinned: PinnedPrefix | None,
    candidate: PrefixProfile,
    tools: Sequence[ToolSchema],
) -> PrefixDecision:
    """What this request's prefix is, given the pin in force (if any), the profile the
    request would have now (its ``tools`` field is ignored) and the tools present now."""
    if pinned is None:
        return _decision("pin", candidate, candidate.system, tuple(_unique(tools)), None)
    present = {t.name for t in tools}
    if _identity(pinned.profile) != _identity(candidate):
        ordered = [t for t in _pinned_table(pinned, tools) if t.name in present]
        table, _ = arrange_tools(ordered, tools)
        return _decision(
            "rotate", candidate, candidate.system, table, _changed_field(pinned.profile, candidate)
        )
    table, changed = arrange_tools(_pinned_table(pinned, tools), tools)
    system = pinned.profile.system
    if changed:
        return _decision("rotate", pinned.profile, system, table, "tools", present)
    if not pinned.tool_table and table:
        # A pin recorded before tool tables were: record the definitions, bytes unchanged.
        return _decision("rotate", pinned.profile, system, table, "tool-table", present)
    return PrefixDecision(
        action="keep",
        key=pinned.key,
        profile=pinned.profile,
        system=system,
        tools=table,
        unavailable=frozenset(t.name for t in table if t.name not in present),
    )


def _pinned_table(pinned: PinnedPrefix, tools: Sequence[ToolSchema]) -> list[ToolSchema]:
    """The pinned definitions; for a pin recorded without them, the current definitions of
    the pinned names, in the pinned order."""
    if pinned.tool_table:
        return list(pinned.tool_table)
    present = {t.name: t for t in _unique(tools)}
    return [present[name] for name in pinned.profile.tools if name in present]


def _decision(
    action: PrefixAction,
    base: PrefixProfile,
    system: tuple[str, ...],
    table: tuple[ToolSchema, ...],
    reason: str | None,
    present: set[str] | None = None,
) -> PrefixDecision:
    profile = msgspec.structs.replace(base, system=system, tools=tuple(t.name for t in table))
    names = {t.name for t in table} if present is None else present
    return PrefixDecision(
        action=action,
        key=prefix_key(profile, table),
        profile=profile,
        system=system,
        tools=table,
        unavailable=frozenset(t.name for t in table if t.name not in names),
        reason=reason,
    )
