from __future__ import annotations

import pytest

from contextledger.cachesim import blocks_from_request
from contextledger.events._parts import ModelRef
from contextledger.providers._anthropic import AnthropicMessages, content_block
from contextledger.providers._bedrock import content_block as bedrock_block
from contextledger.providers._errors import ContextOverflowError, ProviderAuthError, ProviderError
from contextledger.vocabulary._messages import ModelReasoning, ModelText
from contextledger.vocabulary._requests import Request
from tests.providers.fixtures import golden_request
from tests.providers.harness import check_golden
from tests.providers.helpers import body_of, items_of, view_message

MODEL = ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5")


def test_golden_request() -> None:
    check_golden(AnthropicMessages, MODEL)


def test_marks_become_cache_control_on_the_tool_system_block_and_last_content_blocks() -> None:
    body = body_of(AnthropicMessages(), golden_request(MODEL))
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert "cache_control" not in body["tools"][0]
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    last, before = body["messages"][-1], body["messages"][-2]
    assert last["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert before["content"][-1]["cache_control"] == {"type": "ephemeral"}
    marked = [
        block
        for message in body["messages"]
        for block in message["content"]
        if "cache_control" in block
    ]
    assert len(marked) == 2


def test_unsigned_reasoning_is_not_sent_back() -> None:
    message = view_message("assistant", ModelReasoning(text="thinking"), ModelText(text="answer"))
    (fragment,) = items_of(AnthropicMessages(), message)
    assert fragment["content"] == [{"type": "text", "text": "answer"}]


def test_thinking_goes_back_signed_even_when_its_text_was_omitted() -> None:
    sealed = {"anthropic": {"signature": "EqAPsig"}}
    message = view_message(
        "assistant", ModelReasoning(text="", provider_metadata=sealed), ModelText(text="answer")
    )
    (fragment,) = items_of(AnthropicMessages(), message)
    assert fragment["content"][0] == {"type": "thinking", "thinking": "", "signature": "EqAPsig"}


def test_redacted_thinking_goes_back_as_its_data() -> None:
    """Importers keep a ``redacted_thinking`` block's data under ``redactedData`` (the AI
    SDK's name, as opencode stores it)."""
    redacted = {"anthropic": {"redactedData": "EmwKAhgB"}}
    message = view_message(
        "assistant", ModelReasoning(text="", provider_metadata=redacted), ModelText(text="answer")
    )
    (fragment,) = items_of(AnthropicMessages(), message)
    assert fragment["content"][0] == {"type": "redacted_thinking", "data": "EmwKAhgB"}


@pytest.mark.parametrize(
    "metadata",
    [
        {},
        {"anthropic": "EqAPsig"},
        {"anthropic": {"signature": ""}},
        {"anthropic": {"signature": "EqAPsig"}},
        {"anthropic": {"redactedData": "EmwKAhgB"}},
        {"bedrock": {"signature": "EqAPsig"}},
        {"bedrock": {"signature": ""}, "anthropic": {}},
        {"openai": {"itemId": "rs_1"}},
    ],
)
def test_the_reasoning_a_claude_wire_sends_back_is_what_the_cache_simulator_calls_thinking(
    metadata: dict[str, object],
) -> None:
    part = ModelReasoning(text="thinking", provider_metadata=metadata)
    request = Request(model=MODEL, session_id="ses_1", messages=(view_message("assistant", part),))
    counted = any(block.part == "thinking" for block in blocks_from_request(request))
    sent = content_block(part) is not None or bedrock_block(part) is not None
    assert sent == counted


def test_usage_splits_cache_reads_and_writes() -> None:
    usage = AnthropicMessages().decode_usage(
        {
            "usage": {
                "input_tokens": 500,
                "output_tokens": 100,
                "cache_read_input_tokens": 200,
                "cache_creation_input_tokens": 300,
            }
        }
    )
    assert (usage.input, usage.cache_read, usage.cache_write, usage.output) == (500, 200, 300, 100)
    assert usage.prompt == 1000


def test_usage_with_missing_fields_is_zero() -> None:
    usage = AnthropicMessages().decode_usage({"usage": {"input_tokens": None}})
    assert usage.total == 0


def test_prompt_too_long_is_a_context_overflow() -> None:
    body = (
        b'{"type":"error","error":{"type":"invalid_request_error",'
        b'"message":"prompt is too long: 210000 tokens > 200000 maximum"}}'
    )
    error = AnthropicMessages().error(400, body)
    assert isinstance(error, ContextOverflowError)
    assert not error.retryable
    assert "210000" in error.detail


def test_overloaded_is_retryable_and_bad_key_is_an_auth_error() -> None:
    wire = AnthropicMessages()
    overloaded = wire.error(
        529, b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    )
    assert type(overloaded) is ProviderError and overloaded.retryable
    auth = wire.error(
        401,
        b'{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}',
    )
    assert isinstance(auth, ProviderAuthError) and not auth.retryable


def test_an_empty_413_is_an_overflow() -> None:
    assert isinstance(AnthropicMessages().error(413, b""), ContextOverflowError)
