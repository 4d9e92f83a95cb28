"""Blocks from providers' JSON bodies, and the call-by-call cache (``PromptCache``)."""

from __future__ import annotations

import math

import msgspec

from contextledger.cachesim import (
    PromptCache,
    anthropic_prefix,
    blocks_from_anthropic_body,
    blocks_from_chat_body,
    blocks_from_request,
    simulate,
)
from contextledger.events._parts import ModelRef, ToolSchema
from contextledger.prices._tables import price_for
from contextledger.providers import wire_format
from contextledger.vocabulary._messages import (
    ModelMessage,
    ModelReasoning,
    ModelText,
    ModelToolCall,
    ModelToolResult,
)
from contextledger.vocabulary._requests import CacheMark, Request
from tests.cachesim.conftest import blocks, names, req

TOOL = {"name": "bash", "description": "Run.", "input_schema": {"type": "object"}}


def _tokens(item: object) -> int:
    return math.ceil(len(msgspec.json.encode(item).decode()) / 4)


def test_an_anthropic_body_is_cut_into_tool_system_and_content_blocks() -> None:
    body = {
        "model": "claude-sonnet-4-5",
        "tools": [TOOL],
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "hello"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "running"},
                    {"type": "tool_use", "id": "t1", "name": "bash", "input": {}},
                ],
            },
        ],
        "max_tokens": 100,
    }
    found = blocks_from_anthropic_body(body)
    assert [b.tokens for b in found] == [
        _tokens(TOOL),
        _tokens({"type": "text", "text": "Be brief."}),
        _tokens({"type": "text", "text": "hello"}),
        _tokens({"type": "text", "text": "running"}),
        _tokens({"type": "tool_use", "id": "t1", "name": "bash", "input": {}}),
    ]
    assert all(b.breakpoint is None for b in found)


def test_a_marker_sets_the_breakpoint_without_changing_the_key_or_the_count() -> None:
    text = {"type": "text", "text": "hello"}
    plain = {"messages": [{"role": "user", "content": [text]}]}
    one_hour = {"type": "ephemeral", "ttl": "1h"}
    marked = {"messages": [{"role": "user", "content": [{**text, "cache_control": one_hour}]}]}
    (a,) = blocks_from_anthropic_body(plain)
    (b,) = blocks_from_anthropic_body(marked)
    assert (a.key, a.tokens, a.breakpoint) == (b.key, b.tokens, None)
    assert b.breakpoint == "1h"


def test_the_role_is_part_of_the_key() -> None:
    user = blocks_from_anthropic_body({"messages": [{"role": "user", "content": "x"}]})
    assistant = blocks_from_anthropic_body({"messages": [{"role": "assistant", "content": "x"}]})
    assert user[0].key != assistant[0].key


def test_automatic_caching_marks_the_last_block() -> None:
    body = {
        "cache_control": {"type": "ephemeral"},
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
    }
    assert [b.breakpoint for b in blocks_from_anthropic_body(body)] == [None, None, "5m"]


def test_an_encoded_request_has_the_blocks_and_breakpoints_of_its_request() -> None:
    call = ModelToolCall(call_id="c1", tool="bash", input={"command": "ls"})
    result = ModelToolResult(call_id="c1", tool="bash", output="a\nb")
    request = Request(
        model=ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5"),
        session_id="s",
        system=("You are terse.", "<env/>"),
        tools=(ToolSchema(name="bash", description="Run.", input_schema={"type": "object"}),),
        messages=(
            ModelMessage(role="user", content=(ModelText(text="list"),), source_id="m1"),
            ModelMessage(role="assistant", content=(ModelText(text="ok"), call), source_id="m2"),
            ModelMessage(role="tool", content=(result,), source_id="m2"),
        ),
        marks=(
            CacheMark(target="tool", index=0, ttl="1h"),
            CacheMark(target="system", index=1),
            CacheMark(target="message", index=1),
            CacheMark(target="message", index=2),
        ),
    )
    body = msgspec.json.decode(wire_format("anthropic").encode(request).body)
    from_body = blocks_from_anthropic_body(body)
    from_request = blocks_from_request(request)
    assert [b.breakpoint for b in from_body] == [b.breakpoint for b in from_request]
    assert [b.breakpoint for b in from_body] == ["1h", None, "5m", None, None, "5m", "5m"]


def test_a_chat_body_has_no_breakpoints_and_a_block_per_part_call_and_result() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    body = {
        "tools": [{"type": "function", "function": TOOL}],
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "go"}]},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "done"},
        ],
    }
    found = blocks_from_chat_body(body)
    assert [b.tokens for b in found] == [
        _tokens({"type": "function", "function": TOOL}),
        _tokens({"type": "text", "text": "Be brief."}),
        _tokens({"type": "text", "text": "go"}),
        _tokens(call),
        _tokens({"tool_call_id": "c1", "content": "done"}),
    ]
    assert all(b.breakpoint is None for b in found)


def test_charging_call_by_call_gives_what_simulate_gives() -> None:
    sonnet = price_for("claude-sonnet-4-5")
    calls = [
        req(blocks(names(10), 200, {9: "5m"}), at=0),
        req(blocks(names(14), 200, {13: "5m"}), at=60),
        req(blocks(names(18), 200, {17: "1h"}), at=500),
        req(blocks(names(20), 200, {19: "5m"}), at=1000),
    ]
    cache = PromptCache(sonnet)
    assert tuple(cache.charge(c) for c in calls) == simulate(calls, sonnet).requests
    gpt = price_for("gpt-5")
    cache = PromptCache(gpt, ttl_s=86_400)
    got = tuple(cache.charge(c) for c in calls)
    assert got == simulate(calls, gpt, ttl_s=86_400).requests
    assert got[-1].cache_read > 0


def test_a_body_without_tools_has_no_tool_choice_to_key_the_messages_by() -> None:
    system = [{"type": "text", "text": "Be brief."}]
    messages = [{"role": "user", "content": "hello"}]
    choice = {"type": "none"}
    with_tools = {"tools": [TOOL], "system": system, "messages": messages, "tool_choice": choice}
    without = {"system": system, "messages": messages, "tool_choice": choice}
    assert anthropic_prefix(with_tools) == ("none", 2)
    assert anthropic_prefix(without) == (None, 1)


def test_thinking_blocks_and_a_user_s_blocks_but_tool_results_carry_their_part() -> None:
    body = {
        "tools": [TOOL],
        "messages": [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "t", "signature": "s"},
                    {"type": "redacted_thinking", "data": "d"},
                    {"type": "tool_use", "id": "t1", "name": "bash", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "sunny"},
                    {"type": "text", "text": "and tomorrow?"},
                ],
            },
        ],
    }
    parts = [b.part for b in blocks_from_anthropic_body(body)]
    assert parts == [None, "user_input", "thinking", "thinking", None, None, "user_input"]


def test_an_encoded_request_s_blocks_carry_the_parts_of_its_request_s() -> None:
    reasoning = ModelReasoning(text="hm", provider_metadata={"anthropic": {"signature": "s"}})
    call = ModelToolCall(call_id="c1", tool="bash", input={})
    request = Request(
        model=ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5"),
        session_id="s",
        tools=(ToolSchema(name="bash", description="Run.", input_schema={"type": "object"}),),
        messages=(
            ModelMessage(role="user", content=(ModelText(text="list"),), source_id="m1"),
            ModelMessage(role="assistant", content=(reasoning, call), source_id="m2"),
            ModelMessage(
                role="tool",
                content=(ModelToolResult(call_id="c1", tool="bash", output="a"),),
                source_id="m2",
            ),
            ModelMessage(role="user", content=(ModelText(text="thanks"),), source_id="m3"),
        ),
    )
    body = msgspec.json.decode(wire_format("anthropic").encode(request).body)
    from_body = [b.part for b in blocks_from_anthropic_body(body)]
    assert from_body == [b.part for b in blocks_from_request(request)]
    assert from_body == [None, "user_input", "thinking", None, None, "user_input"]
