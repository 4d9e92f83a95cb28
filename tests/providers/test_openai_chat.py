from __future__ import annotations

from typing import Any

import msgspec
import pytest

from contextledger.events._parts import ModelRef, ToolSchema
from contextledger.providers._errors import ContextOverflowError, ProviderAuthError, ProviderError
from contextledger.providers._openai_chat import OpenAIChat
from contextledger.providers._registry import wire_format
from contextledger.vocabulary._messages import (
    ModelFile,
    ModelMessage,
    ModelReasoning,
    ModelText,
    ModelToolCall,
    ModelToolResult,
)
from tests.providers.fixtures import golden_request
from tests.providers.harness import check_golden
from tests.providers.helpers import (
    assert_deterministic,
    assert_steps_only_change_the_closing,
    body_of,
    items_of,
    small_request,
    view_message,
)

MODEL = ModelRef(provider_id="openai", model_id="gpt-5.1")


def test_golden_request() -> None:
    check_golden(OpenAIChat, MODEL)


def test_registered_by_name() -> None:
    assert type(wire_format("openai-chat")) is OpenAIChat


def test_encoding_is_deterministic() -> None:
    assert_deterministic(OpenAIChat, MODEL)


def test_per_step_fields_come_after_the_messages() -> None:
    assert_steps_only_change_the_closing(OpenAIChat, MODEL)
    request = msgspec.structs.replace(
        golden_request(MODEL), tool_choice="required", stream=True, options={"temperature": 0}
    )
    parsed = body_of(OpenAIChat(), request)
    assert list(parsed) == [
        "model",
        "tools",
        "messages",
        "max_completion_tokens",
        "tool_choice",
        "stream",
        "stream_options",
        "prompt_cache_key",
        "temperature",
    ]
    assert parsed["stream_options"] == {"include_usage": True}
    assert parsed["tool_choice"] == "required"


def test_a_request_with_no_per_step_fields_is_still_valid_json() -> None:
    request = small_request(MODEL, view_message("user", ModelText(text="hi")))
    assert body_of(OpenAIChat(), request)["prompt_cache_key"] == "s"

    class NoKey(OpenAIChat):
        sends_cache_key = False

    parsed = body_of(NoKey(), request)
    assert parsed == {
        "model": "gpt-5.1",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }


def test_tool_choice_is_only_sent_with_tools() -> None:
    request = small_request(MODEL, tool_choice="auto")
    assert "tool_choice" not in body_of(OpenAIChat(), request)
    tools = (ToolSchema(name="noop"),)
    parsed = body_of(OpenAIChat(), msgspec.structs.replace(request, tools=tools))
    assert parsed["tool_choice"] == "auto"
    assert parsed["tools"][0]["function"]["parameters"] == {"type": "object", "properties": {}}


def test_system_blocks_lead_the_messages_and_marks_are_ignored() -> None:
    request = golden_request(MODEL)
    parsed = body_of(OpenAIChat(), request)
    assert parsed["messages"][:2] == [
        {"role": "system", "content": request.system[0]},
        {"role": "system", "content": request.system[1]},
    ]
    unmarked = msgspec.structs.replace(request, marks=())
    assert OpenAIChat().encode(unmarked).body == OpenAIChat().encode(request).body
    assert b"cache_control" not in OpenAIChat().encode(request).body


def test_each_tool_call_is_answered_by_a_tool_item_before_any_other_item() -> None:
    messages = body_of(OpenAIChat(), golden_request(MODEL))["messages"]
    for index, message in enumerate(messages):
        calls = [c["id"] for c in message.get("tool_calls", [])]
        if calls:
            following = messages[index + 1 : index + 1 + len(calls)]
            assert [m["role"] for m in following] == ["tool"] * len(calls)
            assert [m["tool_call_id"] for m in following] == calls


def test_tool_result_media_follow_the_tool_items_in_a_user_message() -> None:
    image = ModelFile(mime="image/png", url="data:image/png;base64,AAAA")
    message = ModelMessage(
        role="tool",
        content=(
            ModelToolResult(call_id="c1", tool="read", output="one", attachments=(image,)),
            ModelToolResult(call_id="c2", tool="bash", output="boom", is_error=True),
        ),
        source_id="t",
    )
    assert items_of(OpenAIChat(), message) == [
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        {"role": "tool", "tool_call_id": "c2", "content": "boom"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Attached media from tool result c1:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
    ]


def test_arguments_keep_the_input_key_order_compactly() -> None:
    call = ModelToolCall(call_id="c", tool="edit", input={"z": 1, "a": [1, 2], "m": {"y": "é"}})
    message = ModelMessage(role="assistant", content=(call,), source_id="a")
    (item,) = items_of(OpenAIChat(), message)
    assert item["tool_calls"][0]["function"]["arguments"] == '{"z":1,"a":[1,2],"m":{"y":"é"}}'
    assert item["content"] == ""


def test_reasoning_is_not_sent_back() -> None:
    signed = ModelReasoning(text="hmm", provider_metadata={"openai": {"itemId": "rs_1"}})
    only = ModelMessage(role="assistant", content=(signed,), source_id="a")
    assert OpenAIChat().encode_message(only, None) == b""
    mixed = ModelMessage(role="assistant", content=(signed, ModelText(text="ok")), source_id="a")
    assert items_of(OpenAIChat(), mixed) == [{"role": "assistant", "content": "ok"}]


def test_files_become_image_file_or_text_parts() -> None:
    message = view_message(
        "user",
        ModelFile(mime="image/jpeg", url="https://example.com/a.jpg"),
        ModelFile(mime="application/pdf", url="data:application/pdf;base64,JVBE", filename="r.pdf"),
        ModelFile(mime="application/pdf", url="https://example.com/r.pdf"),
        ModelFile(mime="application/zip", url="file:///x.zip", filename="x.zip"),
    )
    (item,) = items_of(OpenAIChat(), message)
    assert item["content"] == [
        {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg"}},
        {
            "type": "file",
            "file": {"filename": "r.pdf", "file_data": "data:application/pdf;base64,JVBE"},
        },
        {
            "type": "text",
            "text": "[Attached file: https://example.com/r.pdf (application/pdf)]",
        },
        {"type": "text", "text": "[Attached file: x.zip (application/zip)]"},
    ]


def test_headers_carry_a_bearer_key() -> None:
    assert OpenAIChat().headers("sk-test") == {
        "content-type": "application/json",
        "authorization": "Bearer sk-test",
    }
    assert "authorization" not in OpenAIChat().headers(None)
    assert OpenAIChat().path(golden_request(MODEL)) == "/v1/chat/completions"


def test_usage_splits_cached_input_and_reasoning_output() -> None:
    response = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "usage": {
            "prompt_tokens": 2006,
            "completion_tokens": 300,
            "total_tokens": 2306,
            "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 192,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
    }
    usage = OpenAIChat().decode_usage(response)
    assert (usage.input, usage.cache_read, usage.cache_write) == (86, 1920, 0)
    assert (usage.output, usage.reasoning) == (108, 192)
    assert usage.prompt == 2006
    assert usage.total == 2306


def test_usage_reads_cache_writes_where_reported() -> None:
    nested = {
        "usage": {
            "prompt_tokens": 5000,
            "completion_tokens": 10,
            "prompt_tokens_details": {"cached_tokens": 1000, "cache_write_tokens": 3000},
        }
    }
    usage = OpenAIChat().decode_usage(nested)
    assert (usage.input, usage.cache_read, usage.cache_write) == (1000, 1000, 3000)
    flat = {"usage": {"prompt_tokens": 5000, "completion_tokens": 10, "cache_write_tokens": 3000}}
    assert OpenAIChat().decode_usage(flat).cache_write == 3000


@pytest.mark.parametrize(
    "response",
    [
        {},
        {"usage": None},
        {"usage": {"prompt_tokens": None, "completion_tokens": None}},
        {"usage": {"prompt_tokens_details": None, "completion_tokens_details": None}},
    ],
)
def test_missing_or_null_usage_is_zero(response: dict[str, Any]) -> None:
    assert OpenAIChat().decode_usage(response).total == 0


def test_usage_without_details_is_all_uncached_input() -> None:
    usage = OpenAIChat().decode_usage({"usage": {"prompt_tokens": 12, "completion_tokens": 5}})
    assert (usage.input, usage.output, usage.reasoning, usage.cache_read) == (12, 5, 0, 0)


def test_context_length_exceeded_is_an_overflow() -> None:
    error = OpenAIChat().error(
        400,
        b'{"error":{"message":"This model\'s maximum context length is 400000 tokens. However, '
        b'your messages resulted in 412345 tokens. Please reduce the length of the messages.",'
        b'"type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}',
    )
    assert isinstance(error, ContextOverflowError)
    assert not error.retryable
    assert "412345" in error.detail


def test_rate_limit_is_retryable_and_a_bad_key_is_an_auth_error() -> None:
    wire = OpenAIChat()
    limited = wire.error(
        429,
        b'{"error":{"message":"Rate limit reached for gpt-5.1 in organization org-x on tokens '
        b'per min (TPM): Limit 30000, Used 29000, Requested 2000. Please try again in 2s.",'
        b'"type":"tokens","param":null,"code":"rate_limit_exceeded"}}',
    )
    assert type(limited) is ProviderError and limited.retryable
    auth = wire.error(
        401,
        b'{"error":{"message":"Incorrect API key provided: sk-abc. You can find your API key '
        b'at https://platform.openai.com/account/api-keys.","type":"invalid_request_error",'
        b'"param":null,"code":"invalid_api_key"}}',
    )
    assert isinstance(auth, ProviderAuthError) and not auth.retryable


def test_exhausted_quota_is_not_retried() -> None:
    error = OpenAIChat().error(
        429,
        b'{"error":{"message":"You exceeded your current quota, please check your plan and '
        b'billing details.","type":"insufficient_quota","param":null,'
        b'"code":"insufficient_quota"}}',
    )
    assert not error.retryable
