from __future__ import annotations

import math

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextledger.cachesim import (
    BlockMemo,
    blocks_from_request,
    prefixes,
    sim_request,
    simulate,
)
from contextledger.cachesim._blocks import PrefixChain
from contextledger.events._parts import ModelRef, ToolSchema
from contextledger.prices._tables import price_for
from contextledger.vocabulary._messages import (
    ModelFile,
    ModelMessage,
    ModelReasoning,
    ModelText,
    ModelToolCall,
    ModelToolResult,
)
from contextledger.vocabulary._requests import CacheMark, Request

TOOL = ToolSchema(name="read", description="Read a file.", input_schema={"type": "object"})
USER = ModelMessage(role="user", content=(ModelText(text="hello " * 400),), source_id="m1")
ASSISTANT = ModelMessage(
    role="assistant",
    content=(ModelText(text="reading"), ModelToolCall(call_id="c1", tool="read")),
    source_id="m2",
)


def make_request(messages: tuple[ModelMessage, ...], marks: tuple[CacheMark, ...]) -> Request:
    return Request(
        model=ModelRef(provider_id="anthropic", model_id="claude-sonnet-4"),
        session_id="s",
        system=("You are terse.",),
        tools=(TOOL,),
        messages=messages,
        marks=marks,
    )


def test_small_request_becomes_tool_system_and_content_part_blocks() -> None:
    marks = (CacheMark(target="system", index=0, ttl="1h"), CacheMark(target="message", index=1))
    bs = blocks_from_request(make_request((USER, ASSISTANT), marks))
    assert len(bs) == 5
    assert [b.breakpoint for b in bs] == [None, "1h", None, None, "5m"]
    payloads = [TOOL, "You are terse.", *USER.content, *ASSISTANT.content]
    expected = [math.ceil(len(msgspec.json.encode(p).decode()) / 4) for p in payloads]
    assert [b.tokens for b in bs] == expected


def test_same_content_gives_same_keys_and_role_changes_the_key() -> None:
    first = blocks_from_request(make_request((USER,), ()))
    again = blocks_from_request(make_request((USER,), ()))
    as_assistant = msgspec.structs.replace(USER, role="assistant")
    other = blocks_from_request(make_request((as_assistant,), ()))
    assert [b.key for b in first] == [b.key for b in again]
    assert first[-1].key != other[-1].key


def test_builder_requests_can_be_simulated() -> None:
    mark = (CacheMark(target="message", index=0),)
    r1 = sim_request(make_request((USER,), mark), at=0, output_tokens=5)
    r2 = sim_request(make_request((USER, ASSISTANT), mark), at=5)
    result = simulate([r1, r2], price_for("claude-opus-5"))
    assert result.requests[0].cache_write == result.requests[1].cache_read > 0


def test_a_prefix_chain_gives_each_request_its_prefixes_sharing_what_repeats() -> None:
    first = blocks_from_request(make_request((USER,), ()))
    longer = blocks_from_request(make_request((USER, ASSISTANT), ()))
    other = blocks_from_request(make_request((ASSISTANT, USER), ()))
    chain = PrefixChain()
    seen = [chain(blocks) for blocks in (first, longer, other, longer)]
    assert seen == [prefixes(b) for b in (first, longer, other, longer)]
    # The blocks ``longer`` repeats of ``first`` keep first's entries, not copies of them.
    assert all(a is b for a, b in zip(seen[0], seen[1], strict=False))
    assert seen[2][-1] is not seen[1][-1]


_POOL = (
    USER,
    ASSISTANT,
    ModelMessage(
        role="user", content=(USER.content[0], ModelText(text="and more")), source_id="m3"
    ),
    ModelMessage(role="assistant", content=USER.content, source_id="m4"),  # a part of two roles
    ModelMessage(role="user", content=(), source_id="m5"),
)


@given(
    st.lists(
        st.tuples(
            st.lists(st.tuples(st.integers(0, len(_POOL) - 1), st.booleans()), max_size=6),
            st.lists(st.integers(0, 5), max_size=2),
            st.booleans(),
        ),
        max_size=6,
    )
)
def test_a_block_memo_cuts_each_request_as_blocks_from_request_does(
    steps: list[tuple[list[tuple[int, bool]], list[int], bool]],
) -> None:
    # Messages repeat as the very objects or as equal copies; marks move from one to another.
    memo = BlockMemo()
    for chosen, marked, system_marked in steps:
        messages = tuple(
            _POOL[i] if same else msgspec.structs.replace(_POOL[i]) for i, same in chosen
        )
        marks = tuple(CacheMark(target="message", index=i, ttl="1h") for i in marked)
        if system_marked:
            marks += (CacheMark(target="system", index=0),)
        request = make_request(messages, marks)
        assert memo(request) == blocks_from_request(request)


def test_a_block_memo_keeps_the_blocks_of_what_the_request_before_held() -> None:
    memo = BlockMemo()
    first = memo(make_request((USER,), ()))
    second = memo(make_request((USER, ASSISTANT), (CacheMark(target="message", index=1),)))
    assert all(a is b for a, b in zip(first, second[: len(first)], strict=True))
    copy = msgspec.structs.replace(USER, content=(ModelText(text="hello " * 400),))
    third = memo(make_request((copy,), ()))
    assert third == first and third[-1] is not first[-1]


def test_a_request_without_tools_sends_no_tool_choice_so_the_cache_keeps_no_key_for_it() -> None:
    # A last step asks for "none"; without tools the wire formats send no tool choice (and
    # Anthropic refuses one), so that request reads what the request before it wrote.
    mark = (CacheMark(target="message", index=0),)
    plain = msgspec.structs.replace(make_request((USER,), mark), tools=())
    last_step = msgspec.structs.replace(plain, tool_choice="none")
    first, second = sim_request(plain, at=0), sim_request(last_step, at=5)
    assert second.tool_choice is None
    costs = simulate([first, second], price_for("claude-opus-5")).requests
    assert costs[1].cache_read == costs[0].cache_write > 0
    # With tools it is sent, and keys the cached messages.
    assert sim_request(msgspec.structs.replace(last_step, tools=(TOOL,)), at=0).tool_choice == (
        "none"
    )


@pytest.mark.parametrize("provider", ["bedrock", "amazon-bedrock", "Amazon-Bedrock"])
def test_a_request_to_bedrock_is_sent_no_tool_choice_so_the_cache_keeps_no_key_for_it(
    provider: str,
) -> None:
    # Converse keeps the tool choice beside the tools; the bedrock wire format sends none.
    mark = (CacheMark(target="message", index=0),)
    plain = make_request((USER,), mark)
    plain = msgspec.structs.replace(
        plain, tools=(TOOL,), model=ModelRef(provider_id=provider, model_id="claude-opus-5")
    )
    last_step = msgspec.structs.replace(plain, tool_choice="none")
    first, second = sim_request(plain, at=0), sim_request(last_step, at=5)
    assert second.tool_choice is None
    costs = simulate([first, second], price_for("claude-opus-5")).requests
    assert costs[1].cache_read == costs[0].cache_write > 0


def test_reasoning_is_a_thinking_block_and_a_user_s_text_or_file_a_user_input_block() -> None:
    reasoning = ModelReasoning(text="think", provider_metadata={"anthropic": {"signature": "s"}})
    file = ModelFile(mime="image/png", url="data:image/png;base64,AA==")
    result = ModelToolResult(call_id="c1", tool="read", output="text")
    messages = (
        ModelMessage(role="user", content=(ModelText(text="hi"), file), source_id="m1"),
        ModelMessage(role="assistant", content=(reasoning, *ASSISTANT.content), source_id="m2"),
        ModelMessage(role="tool", content=(result,), source_id="m2"),
    )
    request = make_request(messages, ())
    parts = [b.part for b in blocks_from_request(request)]
    assert parts == [None, None, "user_input", "user_input", "thinking", None, None, None]
    assert [b.part for b in BlockMemo()(request)] == parts
    assert sim_request(request, at=0).model == "claude-sonnet-4"


def test_reasoning_anthropic_does_not_take_back_is_no_thinking_block() -> None:
    # Another provider's reasoning (an OpenAI item, say) carries no Anthropic signature.
    openai = ModelReasoning(text="t", provider_metadata={"openai": {"itemId": "rs_1"}})
    redacted = ModelReasoning(text="", provider_metadata={"anthropic": {"redactedData": "d"}})
    message = ModelMessage(role="assistant", content=(openai, redacted), source_id="m1")
    assert [b.part for b in blocks_from_request(make_request((message,), ()))] == [
        None,
        None,
        None,
        "thinking",
    ]
