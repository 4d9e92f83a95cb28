from __future__ import annotations

import msgspec

from contextledger.events._parts import ModelRef
from contextledger.providers._errors import ContextOverflowError, ProviderAuthError, ProviderError
from contextledger.providers._openai_compatible import OpenAICompatible
from contextledger.providers._registry import wire_format
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
    text_message,
)

MODEL = ModelRef(provider_id="deepseek", model_id="deepseek-chat")


def test_golden_request() -> None:
    check_golden(OpenAICompatible, MODEL)


def test_registered_by_name() -> None:
    assert type(wire_format("openai-compatible")) is OpenAICompatible


def test_encoding_is_deterministic() -> None:
    assert_deterministic(OpenAICompatible, MODEL)


def test_per_step_fields_come_after_the_messages() -> None:
    assert_steps_only_change_the_closing(OpenAICompatible, MODEL)
    parsed = body_of(OpenAICompatible(), golden_request(MODEL))
    assert list(parsed) == ["model", "tools", "messages", "max_tokens"]
    assert OpenAICompatible().path(golden_request(MODEL)) == "/chat/completions"
    assert OpenAICompatible().headers("k")["authorization"] == "Bearer k"


def test_prompt_cache_key_only_when_the_options_ask_for_it() -> None:
    request = msgspec.structs.replace(
        golden_request(MODEL), options={"prompt_cache_key": "ses_golden", "temperature": 0}
    )
    parsed = body_of(OpenAICompatible(), request)
    assert list(parsed)[-3:] == ["max_tokens", "prompt_cache_key", "temperature"]
    assert parsed["prompt_cache_key"] == "ses_golden"


def test_marks_are_plain_ephemeral_markers_on_last_parts() -> None:
    parsed = body_of(OpenAICompatible(), golden_request(MODEL))
    assert parsed["messages"][0]["content"][-1]["cache_control"] == EPHEMERAL
    assert parsed["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL
    assert controls(parsed) == [EPHEMERAL, EPHEMERAL]
    message = text_message("user", "hi")
    hour = CacheMark(target="message", index=0, ttl="1h")
    assert items_of(OpenAICompatible(), message, hour) == [
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": EPHEMERAL}]}
    ]


def test_deepseek_usage_uses_its_cache_hit_and_miss_counts() -> None:
    response = {
        "id": "930c60df",
        "object": "chat.completion",
        "model": "deepseek-chat",
        "usage": {
            "prompt_tokens": 1500,
            "completion_tokens": 210,
            "total_tokens": 1710,
            "prompt_tokens_details": {"cached_tokens": 1280},
            "prompt_cache_hit_tokens": 1280,
            "prompt_cache_miss_tokens": 220,
        },
    }
    usage = OpenAICompatible().decode_usage(response)
    assert (usage.input, usage.cache_read, usage.cache_write, usage.output) == (220, 1280, 0, 210)
    assert usage.total == 1710


def test_deepseek_reasoner_usage_splits_reasoning() -> None:
    response = {
        "usage": {
            "prompt_tokens": 64,
            "completion_tokens": 900,
            "prompt_cache_hit_tokens": 0,
            "prompt_cache_miss_tokens": 64,
            "completion_tokens_details": {"reasoning_tokens": 700},
        }
    }
    usage = OpenAICompatible().decode_usage(response)
    assert (usage.input, usage.cache_read, usage.output, usage.reasoning) == (64, 0, 200, 700)


def test_usage_of_other_servers_is_the_chat_shape() -> None:
    wire = OpenAICompatible()
    chat = wire.decode_usage(
        {
            "usage": {
                "prompt_tokens": 900,
                "completion_tokens": 30,
                "prompt_tokens_details": {"cached_tokens": 600},
                "prompt_cache_hit_tokens": None,
            }
        }
    )
    assert (chat.input, chat.cache_read, chat.output) == (300, 600, 30)
    bare = wire.decode_usage({"usage": {"prompt_tokens": 10, "completion_tokens": None}})
    assert (bare.input, bare.output, bare.cache_read) == (10, 0, 0)
    assert wire.decode_usage({"choices": []}).total == 0


def test_deepseek_overflow_is_an_overflow() -> None:
    error = OpenAICompatible().error(
        400,
        b'{"error":{"message":"This model\'s maximum context length is 131072 tokens. However, '
        b"you requested 140000 tokens (131808 in the messages, 8192 in the completion). Please "
        b'reduce the length of the messages or completion.","type":"invalid_request_error",'
        b'"param":null,"code":"invalid_request_error"}}',
    )
    assert isinstance(error, ContextOverflowError)
    assert not error.retryable


def test_rate_limit_is_retryable_and_a_bad_key_is_an_auth_error() -> None:
    wire = OpenAICompatible()
    limited = wire.error(
        429,
        b'{"error":{"message":"Rate limit reached for requests","type":"rate_limit_error",'
        b'"param":null,"code":"rate_limit_exceeded"}}',
    )
    assert type(limited) is ProviderError and limited.retryable
    auth = wire.error(
        401,
        b'{"error":{"message":"Authentication Fails, Your api key: ****abcd is invalid",'
        b'"type":"authentication_error","param":null,"code":"invalid_request_error"}}',
    )
    assert isinstance(auth, ProviderAuthError) and not auth.retryable
    assert isinstance(wire.error(413, b""), ContextOverflowError)
