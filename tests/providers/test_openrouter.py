from __future__ import annotations

import msgspec

from contextledger.events._parts import ModelRef
from contextledger.providers._errors import ContextOverflowError, ProviderAuthError, ProviderError
from contextledger.providers._openrouter import OpenRouter
from contextledger.providers._registry import wire_format
from contextledger.vocabulary._messages import (
    ModelFile,
    ModelMessage,
    ModelText,
    ModelToolCall,
    ModelToolResult,
)
from contextledger.vocabulary._requests import CacheMark
from tests.providers.fixtures import golden_request
from tests.providers.harness import check_golden
from tests.providers.helpers import (
    EPHEMERAL,
    assert_deterministic,
    assert_steps_only_change_the_closing,
    body_of,
    controls,
    items_of,
)

MODEL = ModelRef(provider_id="openrouter", model_id="anthropic/claude-sonnet-4.5")
MARK = CacheMark(target="message", index=0)
HOUR = CacheMark(target="message", index=0, ttl="1h")


def test_golden_request() -> None:
    check_golden(OpenRouter, MODEL)


def test_registered_by_name() -> None:
    assert type(wire_format("openrouter")) is OpenRouter


def test_encoding_is_deterministic() -> None:
    assert_deterministic(OpenRouter, MODEL)


def test_per_step_fields_come_after_the_messages_without_a_cache_key() -> None:
    assert_steps_only_change_the_closing(OpenRouter, MODEL)
    request = msgspec.structs.replace(golden_request(MODEL), stream=True)
    parsed = body_of(OpenRouter(), request)
    assert list(parsed) == ["model", "tools", "messages", "max_tokens", "stream", "stream_options"]
    assert OpenRouter().path(request) == "/api/v1/chat/completions"


def test_marks_land_on_the_system_block_and_the_last_part_of_marked_messages() -> None:
    parsed = body_of(OpenRouter(), golden_request(MODEL))
    system = parsed["messages"][:2]
    assert system[0]["content"] == [
        {"type": "text", "text": "You are a careful software engineer.", "cache_control": EPHEMERAL}
    ]
    assert isinstance(system[1]["content"], str)
    last = parsed["messages"][-1]
    assert last["role"] == "tool"
    assert last["content"][-1]["cache_control"] == EPHEMERAL
    assert controls(parsed["tools"]) == []
    # The assistant message marked before it has only tool calls: no part to carry a marker.
    assert controls(parsed) == [EPHEMERAL, EPHEMERAL]


def test_a_marked_user_message_marks_its_last_part() -> None:
    message = ModelMessage(
        role="user",
        content=(
            ModelText(text="look"),
            ModelFile(mime="image/png", url="data:image/png;base64,AAAA"),
        ),
        source_id="u",
    )
    (item,) = items_of(OpenRouter(), message, HOUR)
    assert "cache_control" not in item["content"][0]
    assert item["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,AAAA"},
        "cache_control": {"type": "ephemeral", "ttl": "1h"},
    }
    assert controls(items_of(OpenRouter(), message, None)) == []


def test_a_marked_assistant_message_gets_a_text_part() -> None:
    call = ModelToolCall(call_id="c1", tool="bash", input={"command": "ls"})
    message = ModelMessage(
        role="assistant", content=(ModelText(text="Listing."), call), source_id="a"
    )
    (item,) = items_of(OpenRouter(), message, MARK)
    assert item["content"] == [{"type": "text", "text": "Listing.", "cache_control": EPHEMERAL}]
    assert item["tool_calls"][0]["id"] == "c1"


def test_a_marked_tool_message_marks_only_its_last_item() -> None:
    image = ModelFile(mime="image/png", url="https://example.com/a.png")
    message = ModelMessage(
        role="tool",
        content=(
            ModelToolResult(call_id="c1", tool="read", output="one"),
            ModelToolResult(call_id="c2", tool="read", output="two"),
        ),
        source_id="t",
    )
    first, second = items_of(OpenRouter(), message, MARK)
    assert first == {"role": "tool", "tool_call_id": "c1", "content": "one"}
    assert second["content"] == [{"type": "text", "text": "two", "cache_control": EPHEMERAL}]
    with_media = ModelMessage(
        role="tool",
        content=(ModelToolResult(call_id="c1", tool="read", output="x", attachments=(image,)),),
        source_id="t",
    )
    tool, media = items_of(OpenRouter(), with_media, MARK)
    assert tool["content"] == "x"
    assert media["content"][-1]["cache_control"] == EPHEMERAL


def test_moving_a_mark_changes_only_the_messages_it_left_and_reached() -> None:
    request = golden_request(MODEL)
    on_five = msgspec.structs.replace(request, marks=(CacheMark(target="message", index=5),))
    on_seven = msgspec.structs.replace(request, marks=(CacheMark(target="message", index=7),))
    wire = OpenRouter()
    a, b = wire.encode(on_five), wire.encode(on_seven)
    start = a.message_offsets[5]
    assert a.message_offsets[:6] == b.message_offsets[:6]
    assert a.body[:start] == b.body[:start]
    assert a.body[a.message_offsets[8] :] == b.body[b.message_offsets[8] :]
    assert a.body != b.body


def test_usage_with_cache_reads_writes_and_cost() -> None:
    response = {
        "id": "gen-1",
        "provider": "Anthropic",
        "model": "anthropic/claude-sonnet-4.5",
        "usage": {
            "prompt_tokens": 10300,
            "completion_tokens": 420,
            "total_tokens": 10720,
            "cost": 0.0213,
            "is_byok": False,
            "prompt_tokens_details": {
                "cached_tokens": 8000,
                "cache_write_tokens": 2000,
                "audio_tokens": 0,
            },
            "cost_details": {"upstream_inference_cost": None},
            "completion_tokens_details": {"reasoning_tokens": 120, "image_tokens": 0},
        },
    }
    usage = OpenRouter().decode_usage(response)
    assert (usage.input, usage.cache_read, usage.cache_write) == (300, 8000, 2000)
    assert (usage.output, usage.reasoning) == (300, 120)
    assert usage.total == 10720


def test_usage_without_cache_fields() -> None:
    usage = OpenRouter().decode_usage(
        {
            "usage": {
                "prompt_tokens": 50,
                "completion_tokens": 9,
                "prompt_tokens_details": None,
                "completion_tokens_details": {"reasoning_tokens": None},
            }
        }
    )
    assert (usage.input, usage.output, usage.reasoning, usage.cache_read, usage.cache_write) == (
        50,
        9,
        0,
        0,
        0,
    )


def test_an_upstream_overflow_relayed_in_metadata_is_an_overflow() -> None:
    error = OpenRouter().error(
        400,
        b'{"error":{"message":"Provider returned error","code":400,"metadata":{"raw":'
        b'"{\\"type\\":\\"error\\",\\"error\\":{\\"type\\":\\"invalid_request_error\\",'
        b'\\"message\\":\\"prompt is too long: 215000 tokens > 200000 maximum\\"}}",'
        b'"provider_name":"Anthropic"}},"user_id":"user_1"}',
    )
    assert isinstance(error, ContextOverflowError)
    assert "215000" in error.detail


def test_openrouter_own_overflow_message_is_an_overflow() -> None:
    error = OpenRouter().error(
        400,
        b'{"error":{"message":"This endpoint\'s maximum context length is 200000 tokens. '
        b"However, you requested about 231000 tokens (223000 of text input, 8000 in the output)."
        b' Please reduce the length of either one.","code":400,"metadata":{}}}',
    )
    assert isinstance(error, ContextOverflowError)


def test_rate_limit_is_retryable_and_a_bad_key_is_an_auth_error() -> None:
    wire = OpenRouter()
    limited = wire.error(
        429,
        b'{"error":{"message":"Rate limit exceeded: limit_rpm/anthropic/claude-sonnet-4.5",'
        b'"code":429,"metadata":{"headers":{"X-RateLimit-Limit":"20"}}}}',
    )
    assert type(limited) is ProviderError and limited.retryable
    auth = wire.error(401, b'{"error":{"message":"No auth credentials found","code":401}}')
    assert isinstance(auth, ProviderAuthError) and not auth.retryable
    assert auth.detail == "No auth credentials found"
