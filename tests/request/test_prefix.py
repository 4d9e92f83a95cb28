"""Specification of ``contextledger.request._prefix``: the pinned system text and tool table.

Adapted from MiMo's ``prefix-snapshot.ts`` (mimo-pi.md §4 and the ``prefix-snapshot.test.ts``
lines of §6): the profile key is SHA-256 of sorted-key JSON; the first request pins, an
unchanged one keeps the pin, a real change rotates it; new tools are appended after the
pinned block in name order; a tool that goes away keeps its slot and its frozen definition
and is answered as unavailable; duplicated tool names are de-duplicated.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextledger.events._catalogue import PrefixPinned, PrefixProfile, PrefixRotated
from contextledger.events._parts import ToolSchema
from contextledger.history._projection import PinnedPrefix
from contextledger.request._prefix import (
    PrefixDecision,
    arrange_tools,
    decide_prefix,
    prefix_key,
    stable_json,
    unavailable_output,
)

PROFILE = PrefixProfile(
    provider_id="anthropic",
    model_id="claude-sonnet-4",
    agent="main",
    system_mode="default",
    system=("You are helpful.", "Today is 2026-01-01."),
    tools=(),
    permissions={"edit": "ask", "bash": "allow"},
)


def _tool(name: str, version: int = 1) -> ToolSchema:
    schema = {"type": "object", "properties": {"arg": {"type": "string"}}}
    return ToolSchema(name=name, description=f"{name} v{version}", input_schema=schema)


def _tools(*names: str) -> list[ToolSchema]:
    return [_tool(name) for name in names]


def _names(tools: Sequence[ToolSchema]) -> list[str]:
    return [t.name for t in tools]


def _pin(decision: PrefixDecision) -> PinnedPrefix:
    """The pin in force after appending ``decision.event``."""
    return PinnedPrefix(key=decision.key, profile=decision.profile, tool_table=decision.tools)


def _pinned(*names: str, profile: PrefixProfile = PROFILE) -> PinnedPrefix:
    return _pin(decide_prefix(None, profile, _tools(*names)))


def _profile(**changes: Any) -> PrefixProfile:
    return msgspec.structs.replace(PROFILE, **changes)


# --- the key ------------------------------------------------------------------------------------


def test_the_key_is_sha256_of_the_sorted_key_json() -> None:
    profile = _profile(system=("You are helpful.",), tools=("bash", "read"))
    expected_json = (
        b'{"agent":"main","model_id":"claude-sonnet-4",'
        b'"permissions":{"bash":"allow","edit":"ask"},"provider_id":"anthropic",'
        b'"system":["You are helpful."],"system_mode":"default","tools":["bash","read"]}'
    )
    assert stable_json(profile) == expected_json
    # Computed once with hashlib (and `sha256sum`): the key must never change across runs.
    expected = "e32c6776c9a74752f11e41b76172ef65ff187677db9a6a4037be0fc65ea32e4c"
    assert hashlib.sha256(expected_json).hexdigest() == expected
    tools = b'"tools":[]}'
    assert (
        prefix_key(profile, ())
        == hashlib.sha256(b'{"profile":' + expected_json + b"," + tools).hexdigest()
    )


def test_the_key_does_not_depend_on_dict_key_order() -> None:
    one = _profile(permissions={"edit": "ask", "bash": {"rm *": "deny", "ls": "allow"}})
    other = _profile(permissions={"bash": {"ls": "allow", "rm *": "deny"}, "edit": "ask"})
    denied = _profile(permissions={"bash": {"ls": "deny", "rm *": "deny"}, "edit": "ask"})
    assert prefix_key(one, ()) == prefix_key(other, ())
    assert prefix_key(denied, ()) != prefix_key(one, ())


def test_stable_json_sorts_nested_keys_and_keeps_array_order() -> None:
    value = {"b": {"d": 1, "c": [3, 1, {"z": 0, "y": 1}]}, "a": "x"}
    assert stable_json(value) == b'{"a":"x","b":{"c":[3,1,{"y":1,"z":0}],"d":1}}'


def test_stable_json_writes_non_finite_numbers_as_null() -> None:
    assert stable_json([float("nan"), float("inf"), -float("inf"), 1.5]) == b"[null,null,null,1.5]"


def test_the_key_depends_on_the_tool_order() -> None:
    assert prefix_key(PROFILE, _tools("bash", "read")) != prefix_key(
        PROFILE, _tools("read", "bash")
    )
    assert prefix_key(PROFILE, _tools("bash", "read")) == prefix_key(
        PROFILE, _tools("bash", "read")
    )


# --- pin and keep -------------------------------------------------------------------------------


def test_the_first_request_pins_the_profile() -> None:
    decision = decide_prefix(None, PROFILE, _tools("read", "bash"))
    assert decision.action == "pin"
    assert decision.tools == tuple(_tools("read", "bash"))
    assert decision.profile == _profile(tools=("read", "bash"))
    assert decision.key == prefix_key(decision.profile, decision.tools)
    assert decision.system == PROFILE.system
    assert decision.unavailable == frozenset()


def test_nothing_changed_keeps_the_pin() -> None:
    pinned = _pinned("read", "bash")
    decision = decide_prefix(pinned, PROFILE, _tools("read", "bash"))
    assert decision.action == "keep"
    assert decision.key == pinned.key
    assert decision.tools == pinned.tool_table
    assert decision.unavailable == frozenset()


def test_another_registry_order_keeps_the_pinned_order() -> None:
    pinned = _pinned("read", "bash", "edit")
    decision = decide_prefix(pinned, PROFILE, _tools("edit", "bash", "read"))
    assert decision.action == "keep"
    assert _names(decision.tools) == ["read", "bash", "edit"]


def test_the_system_text_is_the_pinned_one_even_when_the_candidate_differs() -> None:
    pinned = _pinned("read")
    candidate = _profile(system=("You are helpful.", "Today is 2026-01-02."))
    decision = decide_prefix(pinned, candidate, _tools("read"))
    assert decision.action == "keep"
    assert decision.system == PROFILE.system
    assert decision.key == pinned.key


def test_the_pinned_system_text_survives_a_tool_rotation() -> None:
    pinned = _pinned("read")
    candidate = _profile(system=("You are helpful.", "Today is 2026-01-02."))
    decision = decide_prefix(pinned, candidate, _tools("read", "bash"))
    assert decision.action == "rotate"
    assert decision.system == decision.profile.system == PROFILE.system


def test_a_keep_sends_the_pinned_definitions_byte_for_byte() -> None:
    """Equal definitions whose schema a registry serialises in another key order must not
    change the bytes already cached: a keep sends the pinned definitions."""
    pinned = _pinned("read")
    schema = dict(reversed(list(_tool("read").input_schema.items())))
    drifted = msgspec.structs.replace(_tool("read"), input_schema=schema)
    decision = decide_prefix(pinned, PROFILE, [drifted])
    assert decision.action == "keep"
    assert msgspec.json.encode(decision.tools) == msgspec.json.encode(pinned.tool_table)


# --- tool changes -------------------------------------------------------------------------------


def test_a_new_tool_rotates_and_is_appended_after_the_pinned_ones_in_name_order() -> None:
    pinned = _pinned("read", "bash")
    decision = decide_prefix(pinned, PROFILE, _tools("zed", "bash", "edit", "read"))
    assert decision.action == "rotate"
    assert decision.reason == "tools"
    assert _names(decision.tools) == ["read", "bash", "edit", "zed"]
    assert decision.profile.tools == ("read", "bash", "edit", "zed")
    assert decision.key == prefix_key(decision.profile, decision.tools) != pinned.key


def test_a_changed_definition_rotates_in_place() -> None:
    pinned = _pinned("read", "bash", "edit")
    decision = decide_prefix(pinned, PROFILE, [_tool("read"), _tool("bash", 2), _tool("edit")])
    assert decision.action == "rotate"
    assert decision.reason == "tools"
    assert decision.tools == (_tool("read"), _tool("bash", 2), _tool("edit"))
    assert decision.profile.tools == pinned.profile.tools
    assert prefix_key(PROFILE, decision.tools) != prefix_key(PROFILE, pinned.tool_table)


def test_a_disappearing_tool_keeps_its_slot_and_definition_and_is_unavailable() -> None:
    pinned = _pinned("read", "bash", "edit")
    decision = decide_prefix(pinned, PROFILE, _tools("read", "edit"))
    assert decision.action == "keep"
    assert decision.tools == pinned.tool_table
    assert decision.unavailable == {"bash"}
    assert decision.event("ses_1") is None


def test_a_returning_tool_does_not_reorder_the_table_or_rotate() -> None:
    pinned = _pinned("read", "bash", "edit")
    assert decide_prefix(pinned, PROFILE, _tools("read", "edit")).action == "keep"
    decision = decide_prefix(pinned, PROFILE, _tools("edit", "bash", "read"))
    assert decision.action == "keep"
    assert decision.tools == pinned.tool_table
    assert decision.unavailable == frozenset()


def test_a_tool_rotation_keeps_the_slot_of_a_missing_tool() -> None:
    pinned = _pinned("read", "bash", "edit")
    decision = decide_prefix(pinned, PROFILE, _tools("read", "edit", "grep"))
    assert decision.action == "rotate"
    assert _names(decision.tools) == ["read", "bash", "edit", "grep"]
    assert decision.unavailable == {"bash"}
    assert decision.tools[1] == _tool("bash")
    back = decide_prefix(_pin(decision), PROFILE, _tools("bash", "grep", "edit", "read"))
    assert back.action == "keep"
    assert back.tools == decision.tools


def test_a_missing_tool_is_answered_as_unavailable() -> None:
    assert unavailable_output("bash") == 'The tool "bash" is unavailable for this request.'


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"provider_id": "bedrock"}, "provider"),
        ({"model_id": "claude-opus-4"}, "model"),
        ({"agent": "plan"}, "agent"),
        ({"system_mode": "replace"}, "system_mode"),
        ({"permissions": {"edit": "deny", "bash": "allow"}}, "permissions"),
    ],
)
def test_an_identity_change_rotates_with_its_reason_and_rebuilds_the_table(
    changes: dict[str, Any], reason: str
) -> None:
    pinned = _pinned("read", "bash", "edit")
    candidate = _profile(system=("Another prompt.",), **changes)
    decision = decide_prefix(pinned, candidate, _tools("grep", "edit", "read"))
    assert decision.action == "rotate"
    assert decision.reason == reason
    assert _names(decision.tools) == ["read", "edit", "grep"]
    assert decision.unavailable == frozenset()
    assert decision.system == ("Another prompt.",)
    assert decision.profile == msgspec.structs.replace(candidate, tools=("read", "edit", "grep"))
    assert decision.key == prefix_key(decision.profile, decision.tools)


def test_an_identity_change_takes_the_current_definitions() -> None:
    pinned = _pinned("read", "bash")
    decision = decide_prefix(pinned, _profile(model_id="x"), [_tool("bash", 2), _tool("read")])
    assert decision.tools == (_tool("read"), _tool("bash", 2))


def test_duplicated_tool_names_are_deduplicated_first_wins() -> None:
    tools = [_tool("bash", 1), _tool("read"), _tool("bash", 2)]
    pinned = _pin(decide_prefix(None, PROFILE, tools))
    assert pinned.tool_table == (_tool("bash", 1), _tool("read"))
    assert pinned.profile.tools == ("bash", "read")
    assert decide_prefix(pinned, PROFILE, tools).action == "keep"
    table, changed = arrange_tools(pinned.tool_table, [_tool("bash", 2), _tool("bash", 1)])
    assert table == (_tool("bash", 2), _tool("read"))
    assert changed


def _v1_key(profile: PrefixProfile) -> str:
    """How pins recorded before tool tables were keyed: by the profile alone."""
    return hashlib.sha256(stable_json(profile)).hexdigest()


def test_a_version_1_pin_uses_the_current_definitions_in_the_pinned_name_order() -> None:
    profile = _profile(tools=("read", "bash", "edit"))
    pinned = PinnedPrefix(key=_v1_key(profile), profile=profile, tool_table=())
    current = [_tool("edit", 2), _tool("bash", 3), _tool("read", 4)]
    decision = decide_prefix(pinned, PROFILE, current)
    # The order and definitions sent do not change; the rotation only records the table.
    assert decision.action == "rotate" and decision.reason == "tool-table"
    assert decision.tools == (_tool("read", 4), _tool("bash", 3), _tool("edit", 2))
    assert decision.system == pinned.profile.system
    event = decision.event("ses_test")
    assert isinstance(event, PrefixRotated) and event.tool_table == decision.tools


def test_a_version_1_pin_rotates_for_a_new_tool() -> None:
    profile = _profile(tools=("read", "bash"))
    pinned = PinnedPrefix(key=_v1_key(profile), profile=profile, tool_table=())
    decision = decide_prefix(pinned, PROFILE, _tools("grep", "bash", "read"))
    assert decision.action == "rotate"
    assert _names(decision.tools) == ["read", "bash", "grep"]


def test_arrange_tools_reports_only_real_changes() -> None:
    pinned = _tools("read", "bash")
    assert arrange_tools(pinned, _tools("bash")) == (tuple(pinned), False)
    assert arrange_tools(pinned, _tools("bash", "read")) == (tuple(pinned), False)
    assert arrange_tools(pinned, _tools("b", "a")) == (
        tuple(_tools("read", "bash", "a", "b")),
        True,
    )


# --- events -------------------------------------------------------------------------------------


def test_a_pin_decision_is_a_prefix_pinned_event() -> None:
    decision = decide_prefix(None, PROFILE, _tools("read"))
    assert decision.event("ses_1", time_ms=5, agent_id="explore") == PrefixPinned(
        session_id="ses_1",
        agent_id="explore",
        time_ms=5,
        key=decision.key,
        profile=decision.profile,
        tool_table=(_tool("read"),),
    )


def test_a_rotate_decision_is_a_prefix_rotated_event() -> None:
    decision = decide_prefix(_pinned("read"), PROFILE, _tools("read", "bash"))
    assert decision.event("ses_1", time_ms=7) == PrefixRotated(
        session_id="ses_1",
        time_ms=7,
        key=decision.key,
        profile=decision.profile,
        reason="tools",
        tool_table=(_tool("read"), _tool("bash")),
    )


def test_a_keep_decision_has_no_event() -> None:
    pinned = _pinned("read")
    assert decide_prefix(pinned, PROFILE, _tools("read")).event("ses_1") is None


# --- property -----------------------------------------------------------------------------------

_NAMES = ["bash", "edit", "grep", "read", "skill", "write"]
#: One request's tools: (name, definition version) pairs in registry order; a name may repeat.
_TOOL_SETS = st.lists(st.tuples(st.sampled_from(_NAMES), st.integers(1, 3)), max_size=8)


def _common_order(a: Sequence[ToolSchema], b: Sequence[ToolSchema]) -> tuple[list[str], ...]:
    common = set(_names(a)) & set(_names(b))
    return tuple([name for name in _names(t) if name in common] for t in (a, b))


@given(st.lists(_TOOL_SETS, min_size=2, max_size=10))
def test_tools_present_in_consecutive_tables_keep_their_relative_order(
    steps: list[list[tuple[str, int]]],
) -> None:
    pinned: PinnedPrefix | None = None
    tables: list[tuple[ToolSchema, ...]] = []
    for step in steps:
        decision = decide_prefix(pinned, PROFILE, [_tool(name, v) for name, v in step])
        assert len(set(_names(decision.tools))) == len(decision.tools)
        assert {name for name, _ in step} <= set(_names(decision.tools))
        if decision.action != "keep":
            pinned = _pin(decision)
        tables.append(decision.tools)
    for before, after in itertools.pairwise(tables):
        old_order, new_order = _common_order(before, after)
        assert old_order == new_order
