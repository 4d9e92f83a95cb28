"""Specification of ``contextledger.policy._cache``: where prompt-cache breakpoints go.

Scenarios come from opencode-kilo.md §7: the AI-SDK rule (§7.1: first two system blocks,
last two messages, at most four), the native automatic policy (§7.3: last tool, last system
block, latest user message; manual hints never overwritten) and which formats take inline
marks at all (§7.3, §7.4).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextledger.events._parts import ModelRef
from contextledger.policy._cache import (
    LOOKBACK_BLOCKS,
    MAX_MARKS,
    ai_sdk_marks,
    anthropic_like,
    auto_marks,
    marked_messages,
    place_marks,
    watermark_mark,
    writes_at_the_end,
)
from contextledger.providers import WIRE_FORMATS
from contextledger.vocabulary._messages import (
    ModelMessage,
    ModelRole,
    ModelText,
    ModelToolCall,
    ModelToolResult,
)
from contextledger.vocabulary._requests import (
    CacheMark,
    CacheMode,
    CachePolicy,
    CacheTTL,
    MarkTarget,
)


def _message(role: ModelRole, *, synthetic: bool = False, n: int = 0) -> ModelMessage:
    content = (ModelText(text=f"{role} {n}"),)
    return ModelMessage(role=role, content=content, source_id=f"msg_{n}", synthetic=synthetic)


def _conversation(*roles: ModelRole) -> list[ModelMessage]:
    return [_message(role, n=n) for n, role in enumerate(roles)]


def _turns(count: int) -> list[ModelMessage]:
    """``count`` exchanges of a user message and an assistant reply."""
    roles: list[ModelRole] = ["user", "assistant"]
    return _conversation(*(roles * count))


def _tool_step(n: int) -> list[ModelMessage]:
    """One step of a tool loop: the assistant's call and its result."""
    call = ModelToolCall(call_id=f"call_{n}", tool="bash")
    result = ModelToolResult(call_id=f"call_{n}", tool="bash", output="ok")
    return [
        ModelMessage(role="assistant", content=(call,), source_id=f"msg_a{n}"),
        ModelMessage(role="tool", content=(result,), source_id=f"msg_a{n}"),
    ]


def _mark(target: MarkTarget, index: int, ttl: CacheTTL | None = None) -> CacheMark:
    return CacheMark(target=target, index=index, ttl=ttl)


def _places(marks: Sequence[CacheMark]) -> list[tuple[str, int]]:
    return [(m.target, m.index) for m in marks]


# --- the AI-SDK rule (§7.1) -------------------------------------------------------------------


def test_ai_sdk_marks_the_first_two_system_blocks_and_the_last_two_messages() -> None:
    messages = _conversation("user", "assistant", "user", "assistant", "user")
    assert _places(ai_sdk_marks(3, messages)) == [
        ("system", 0),
        ("system", 1),
        ("message", 3),
        ("message", 4),
    ]


def test_ai_sdk_never_exceeds_four_marks() -> None:
    messages = _turns(6)
    assert len(ai_sdk_marks(7, messages)) == MAX_MARKS == 4
    policy = CachePolicy(mode="ai-sdk")
    assert len(place_marks(policy, tools=9, system_blocks=7, messages=messages)) == 4


def test_ai_sdk_dedupes_when_there_are_fewer_than_two_messages() -> None:
    assert _places(ai_sdk_marks(2, _conversation("user"))) == [
        ("system", 0),
        ("system", 1),
        ("message", 0),
    ]
    assert _places(ai_sdk_marks(1, [])) == [("system", 0)]
    assert ai_sdk_marks(0, []) == ()


def test_ai_sdk_mode_marks_no_tool() -> None:
    policy = CachePolicy(mode="ai-sdk")
    marks = place_marks(policy, tools=5, system_blocks=1, messages=_conversation("user"))
    assert _places(marks) == [("system", 0), ("message", 0)]


# --- the native automatic policy (§7.3) -------------------------------------------------------


def test_auto_marks_the_last_tool_the_last_system_block_and_the_latest_user_message() -> None:
    messages = _conversation("user", "assistant", "user", "assistant")
    marks = place_marks(CachePolicy(), tools=5, system_blocks=2, messages=messages)
    assert _places(marks) == [("tool", 4), ("system", 1), ("message", 2)]


def test_auto_latest_user_mark_stays_put_across_a_tool_loop() -> None:
    turn = _conversation("user", "assistant", "user")
    steps = [turn, turn + _tool_step(1), turn + _tool_step(1) + _tool_step(2)]
    marked = [marked_messages(step, "latest-user-message") for step in steps]
    assert marked == [[2], [2], [2]]
    per_step = [
        place_marks(CachePolicy(), tools=3, system_blocks=1, messages=step) for step in steps
    ]
    assert per_step[0] == per_step[1] == per_step[2]


def test_auto_policy_latest_assistant() -> None:
    messages = _conversation("user", "assistant", "user", "assistant", "tool", "user")
    policy = CachePolicy(messages="latest-assistant")
    marks = place_marks(policy, tools=0, system_blocks=0, messages=messages)
    assert _places(marks) == [("message", 3)]


def test_auto_policy_tail_n() -> None:
    messages = _conversation("user", "assistant", "user", "assistant", "user")
    policy = CachePolicy(tools=False, system=False, messages=3)
    marks = place_marks(policy, tools=2, system_blocks=2, messages=messages)
    assert _places(marks) == [("message", 2), ("message", 3), ("message", 4)]


def test_auto_tail_n_keeps_the_newest_messages_when_the_limit_is_reached() -> None:
    messages = _turns(4)
    marks = place_marks(CachePolicy(messages=6), tools=1, system_blocks=1, messages=messages)
    assert _places(marks) == [("tool", 0), ("system", 0), ("message", 6), ("message", 7)]


def test_auto_policy_can_leave_out_tools_and_system() -> None:
    policy = CachePolicy(tools=False, system=False)
    marks = auto_marks(4, 2, _conversation("user", "assistant"), policy)
    assert _places(marks) == [("message", 0)]


def test_auto_places_nothing_where_there_is_nothing_to_mark() -> None:
    assert auto_marks(0, 0, _conversation("assistant", "tool"), CachePolicy()) == ()


def test_synthetic_user_messages_are_not_the_latest_user_message() -> None:
    messages = [
        _message("user", n=0),
        *_tool_step(1),
        _message("user", synthetic=True, n=3),
    ]
    assert marked_messages(messages, "latest-user-message") == [0]
    assert marked_messages([_message("user", synthetic=True)], "latest-user-message") == []


# --- hints, limits and ttl ----------------------------------------------------------------------


def test_mode_none_places_only_hints() -> None:
    hints = [_mark("message", 1, "1h")]
    messages = _conversation("user", "assistant", "user")
    marks = place_marks(
        CachePolicy(mode="none"), tools=3, system_blocks=2, messages=messages, hints=hints
    )
    assert marks == tuple(hints)
    assert place_marks(CachePolicy(mode="none"), tools=3, system_blocks=2, messages=messages) == ()


def test_explicit_hints_win_over_automatic_marks_at_the_same_place() -> None:
    hint = _mark("message", 2, "5m")
    messages = _conversation("user", "assistant", "user")
    marks = place_marks(
        CachePolicy(ttl="1h"), tools=1, system_blocks=1, messages=messages, hints=[hint]
    )
    assert marks == (_mark("tool", 0, "1h"), _mark("system", 0, "1h"), hint)


def test_hints_come_first_and_automatic_marks_fill_up_to_the_limit() -> None:
    hints = [_mark("message", 0), _mark("message", 1)]
    messages = _conversation("user", "assistant", "user")
    marks = place_marks(CachePolicy(), tools=2, system_blocks=2, messages=messages, hints=hints)
    # Automatic marks in order of value: tool, system, message; only two fit after the hints.
    assert _places(marks) == [("tool", 1), ("system", 1), ("message", 0), ("message", 1)]
    marks = place_marks(
        CachePolicy(), tools=2, system_blocks=2, messages=messages, hints=hints, limit=3
    )
    assert _places(marks) == [("tool", 1), ("message", 0), ("message", 1)]


def test_marks_never_exceed_the_limit() -> None:
    hints = [_mark("message", i) for i in range(6)]
    messages = _turns(3)
    marks = place_marks(CachePolicy(), tools=2, system_blocks=2, messages=messages, hints=hints)
    assert _places(marks) == [("message", i) for i in range(4)]
    assert place_marks(CachePolicy(), tools=2, system_blocks=2, messages=messages, limit=0) == ()


def test_ttl_is_written_into_automatic_marks() -> None:
    messages = _conversation("user")
    modes: tuple[CacheMode, ...] = ("auto", "ai-sdk")
    for mode in modes:
        policy = CachePolicy(mode=mode, ttl="1h")
        marks = place_marks(policy, tools=1, system_blocks=1, messages=messages)
        assert marks
        assert {m.ttl for m in marks} == {"1h"}
    default = place_marks(CachePolicy(), tools=1, system_blocks=1, messages=messages)
    assert {m.ttl for m in default} == {None}


# --- which models and formats -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "model", "expected"),
    [
        ("anthropic", "claude-sonnet-4", True),
        ("anthropic", "some-future-model", True),
        ("google-vertex-anthropic", "sonnet-4@20250514", True),
        ("Anthropic", "x", True),
        ("openrouter", "anthropic/claude-sonnet-4.5", True),
        ("amazon-bedrock", "us.anthropic.claude-3-7-sonnet-v1:0", True),
        ("kilo", "Claude-Opus-4", True),
        ("openai", "gpt-5", False),
        ("openrouter", "openai/gpt-5", False),
        ("google", "gemini-2.5-pro", False),
        ("deepseek", "deepseek-chat", False),
    ],
)
def test_anthropic_like_models(provider: str, model: str, expected: bool) -> None:
    assert anthropic_like(ModelRef(provider_id=provider, model_id=model)) is expected


def test_openai_and_gemini_formats_take_no_marks() -> None:
    limits = {name: wire.max_marks for name, wire in WIRE_FORMATS.items()}
    assert limits == {
        "anthropic": 4,
        "bedrock": 4,
        "openrouter": 4,
        "openai-compatible": 4,
        "openai-chat": 0,
        "openai-responses": 0,
        "gemini": 0,
    }
    marks = place_marks(
        CachePolicy(), tools=1, system_blocks=1, messages=_conversation("user"), limit=0
    )
    assert marks == ()


def test_gateways_take_no_tool_marks() -> None:
    for name in ("openrouter", "openai-compatible"):
        assert WIRE_FORMATS[name].markable == {"system", "message"}
    for name in ("anthropic", "bedrock"):
        assert WIRE_FORMATS[name].markable == {"tool", "system", "message"}


# --- properties ---------------------------------------------------------------------------------

_ROLES: list[ModelRole] = ["user", "assistant", "tool"]
_ORDER = {"tool": 0, "system": 1, "message": 2}
_TARGETS: list[MarkTarget] = ["tool", "system", "message"]
_TTLS: list[CacheTTL | None] = [None, "5m", "1h"]
_MESSAGES = st.lists(
    st.builds(
        lambda role, synthetic: _message(role, synthetic=synthetic),
        st.sampled_from(_ROLES),
        st.booleans(),
    ),
    max_size=10,
)
_POLICIES = st.builds(
    CachePolicy,
    mode=st.sampled_from(["auto", "ai-sdk", "none"]),
    tools=st.booleans(),
    system=st.booleans(),
    messages=st.sampled_from(["latest-user-message", "latest-assistant"]) | st.integers(0, 12),
    ttl=st.sampled_from(_TTLS),
)


class _Case(NamedTuple):
    policy: CachePolicy
    tools: int
    system_blocks: int
    messages: list[ModelMessage]
    hints: list[CacheMark]
    limit: int

    def place(self, *, hints: bool = True, limit: int | None = None) -> tuple[CacheMark, ...]:
        return place_marks(
            self.policy,
            tools=self.tools,
            system_blocks=self.system_blocks,
            messages=self.messages,
            hints=self.hints if hints else (),
            limit=self.limit if limit is None else limit,
        )

    def size(self, target: MarkTarget) -> int:
        sizes = {"tool": self.tools, "system": self.system_blocks, "message": len(self.messages)}
        return sizes[target]


@st.composite
def _cases(draw: st.DrawFn) -> _Case:
    case = _Case(
        draw(_POLICIES), draw(st.integers(0, 5)), draw(st.integers(0, 4)), draw(_MESSAGES), [], 0
    )
    targets = [t for t in _TARGETS if case.size(t)]
    for _ in range(draw(st.integers(0, 6)) if targets else 0):
        target = draw(st.sampled_from(targets))
        index = draw(st.integers(0, case.size(target) - 1))
        case.hints.append(_mark(target, index, draw(st.sampled_from(_TTLS))))
    return case._replace(limit=draw(st.integers(0, 6)))


@given(_cases())
def test_place_marks_keeps_every_rule(case: _Case) -> None:
    marks = case.place()
    places = _places(marks)
    assert len(marks) <= case.limit
    assert len(set(places)) == len(places)
    assert places == sorted(places, key=lambda p: (_ORDER[p[0]], p[1]))
    assert all(0 <= m.index < case.size(m.target) for m in marks)
    first_hints: dict[tuple[str, int], CacheMark] = {}
    for hint in case.hints:
        if len(first_hints) < case.limit:
            first_hints.setdefault((hint.target, hint.index), hint)
    assert set(first_hints.values()) <= set(marks)


@given(_cases())
def test_automatic_marks_fill_every_free_place_up_to_the_limit(case: _Case) -> None:
    automatic = case.place(hints=False, limit=100)
    wanted = set(_places(case.hints)) | set(_places(automatic))
    assert len(case.place()) == min(case.limit, len(wanted))


def test_an_automatic_mark_before_a_one_hour_hint_gets_one_hour_too() -> None:
    messages = _conversation("user", "assistant", "user")
    hint = _mark("message", 2, "1h")
    marks = place_marks(CachePolicy(), tools=2, system_blocks=1, messages=messages, hints=[hint])
    assert [m.ttl for m in marks] == ["1h", "1h", "1h"]
    assert marks[-1] is hint


# --- the watermark: where the last successful step's prompt was cached -------------------------


def _step(source: str, calls: int) -> list[ModelMessage]:
    """An assistant message with ``calls`` tool calls and the message of their results."""
    ids = [f"{source}_{i}" for i in range(calls)]
    return [
        ModelMessage(
            role="assistant",
            source_id=source,
            content=tuple(ModelToolCall(call_id=i, tool="read", input={}) for i in ids),
        ),
        ModelMessage(
            role="tool",
            source_id=source,
            content=tuple(ModelToolResult(call_id=i, tool="read", output="x") for i in ids),
        ),
    ]


def _last_two(messages: Sequence[ModelMessage]) -> tuple[CacheMark, ...]:
    return place_marks(CachePolicy(messages=2), tools=0, system_blocks=0, messages=messages)


def test_a_step_within_the_lookback_needs_no_watermark_mark() -> None:
    view = [ModelMessage(role="user", source_id="u", content=(ModelText(text="go"),))]
    view += _step("a", LOOKBACK_BLOCKS // 2)  # the assistant's mark is 10 blocks after "u"
    assert watermark_mark(view, "u", _last_two(view)) is None


def test_a_step_beyond_the_lookback_gets_a_mark_where_the_last_prompt_ended() -> None:
    view = [ModelMessage(role="user", source_id="u", content=(ModelText(text="go"),))]
    view += _step("a", LOOKBACK_BLOCKS + 1)
    assert watermark_mark(view, "u", _last_two(view), "1h") == CacheMark(
        target="message", index=0, ttl="1h"
    )


def test_the_watermark_is_the_last_message_of_its_source() -> None:
    view = _step("a", 1) + _step("b", LOOKBACK_BLOCKS + 1)
    marks = _last_two(view)
    assert watermark_mark(view, "a", marks) == CacheMark(target="message", index=1)
    assert watermark_mark(view, "b", marks) is None  # nothing after it
    assert watermark_mark(view, "gone", marks) is None  # compacted away
    assert watermark_mark(view, None, marks) is None


def test_only_policies_that_mark_the_last_message_leave_a_watermark() -> None:
    assert writes_at_the_end(CachePolicy(messages=2))
    assert writes_at_the_end(CachePolicy(mode="ai-sdk"))
    assert not writes_at_the_end(CachePolicy(messages="latest-user-message"))
    assert not writes_at_the_end(CachePolicy(mode="none"))


def _reads(view: Sequence[ModelMessage], end: int, marks: Sequence[CacheMark]) -> bool:
    """Whether a message mark at or after ``end`` lies within the lookback of its end."""
    return any(
        m.target == "message"
        and m.index >= end
        and sum(len(view[i].content) for i in range(end + 1, m.index + 1)) <= LOOKBACK_BLOCKS
        for m in marks
    )


@st.composite
def _views(draw: st.DrawFn) -> tuple[list[ModelMessage], str]:
    sizes = draw(st.lists(st.tuples(st.sampled_from("abcd"), st.integers(1, 15)), min_size=1))
    view = [
        ModelMessage(
            role="user",
            source_id=source,
            content=tuple(ModelText(text="x") for _ in range(size)),
        )
        for source, size in sizes
    ]
    return view, draw(st.sampled_from("abcde"))


@given(case=_views(), last=st.integers(1, 4))
def test_with_the_watermark_mark_the_last_cached_prompt_is_always_read(
    case: tuple[list[ModelMessage], str], last: int
) -> None:
    view, watermark = case
    marks = place_marks(CachePolicy(messages=last), tools=0, system_blocks=0, messages=view)
    found = [i for i, m in enumerate(view) if m.source_id == watermark]
    mark = watermark_mark(view, watermark, marks)
    if not found or found[-1] == len(view) - 1:
        assert mark is None
        return
    end = found[-1]
    assert _reads(view, end, [*marks, *([mark] if mark else [])])
    assert (mark is None) == _reads(view, end, marks)  # only when no mark reads it already
