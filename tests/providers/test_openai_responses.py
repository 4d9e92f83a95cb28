from __future__ import annotations

import msgspec

from contextledger.events._parts import ModelRef
from contextledger.providers._errors import ContextOverflowError, ProviderAuthError, ProviderError
from contextledger.providers._openai_responses import OpenAIResponses
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
    view_message,
)

MODEL = ModelRef(provider_id="openai", model_id="gpt-5.1")


def test_golden_request() -> None:
    check_golden(OpenAIResponses, MODEL)


def test_registered_by_name() -> None:
    assert type(wire_format("openai-responses")) is OpenAIResponses


def test_encoding_is_deterministic() -> None:
    assert_deterministic(OpenAIResponses, MODEL)


def test_per_step_fields_come_after_the_input() -> None:
    assert_steps_only_change_the_closing(OpenAIResponses, MODEL)
    request = msgspec.structs.replace(
        golden_request(MODEL),
        tool_choice="none",
        stream=True,
        options={"include": ["reasoning.encrypted_content"], "reasoning": {"effort": "low"}},
    )
    parsed = body_of(OpenAIResponses(), request)
    assert list(parsed) == [
        "model",
        "tools",
        "input",
        "max_output_tokens",
        "tool_choice",
        "stream",
        "prompt_cache_key",
        "store",
        "include",
        "reasoning",
    ]
    assert (parsed["tool_choice"], parsed["stream"], parsed["store"]) == ("none", True, False)
    assert parsed["prompt_cache_key"] == "ses_golden"


def test_system_blocks_are_developer_items_and_tools_are_flat_and_not_strict() -> None:
    request = golden_request(MODEL)
    parsed = body_of(OpenAIResponses(), request)
    assert parsed["input"][:2] == [
        {"role": "developer", "content": request.system[0]},
        {"role": "developer", "content": request.system[1]},
    ]
    assert parsed["tools"][1] == {
        "type": "function",
        "name": "bash",
        "description": "Run a shell command.",
        "parameters": request.tools[1].input_schema,
        "strict": False,
    }
    assert OpenAIResponses().path(request) == "/v1/responses"
    assert OpenAIResponses().headers("sk-x")["authorization"] == "Bearer sk-x"


def test_marks_are_ignored() -> None:
    request = golden_request(MODEL)
    unmarked = msgspec.structs.replace(request, marks=())
    assert OpenAIResponses().encode(unmarked).body == OpenAIResponses().encode(request).body


def test_every_function_call_has_its_output() -> None:
    parsed = body_of(OpenAIResponses(), golden_request(MODEL))["input"]
    calls = [i["call_id"] for i in parsed if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in parsed if i.get("type") == "function_call_output"]
    assert calls == outputs == ["call_0001", "call_0002", "call_0003"]


def test_reasoning_without_openai_state_is_dropped() -> None:
    parsed = body_of(OpenAIResponses(), golden_request(MODEL))["input"]
    assert not [i for i in parsed if i.get("type") == "reasoning"]
    no_secret = ModelReasoning(text="hmm", provider_metadata={"openai": {"itemId": "rs_1"}})
    no_id = ModelReasoning(
        text="hmm", provider_metadata={"openai": {"reasoningEncryptedContent": "gAAA"}}
    )
    message = view_message("assistant", no_secret, no_id, ModelText(text="ok"))
    assert items_of(OpenAIResponses(), message) == [
        {"role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}
    ]


def test_encrypted_reasoning_goes_back_before_the_items_it_produced() -> None:
    first = ModelReasoning(
        text="Look at the parser.",
        provider_metadata={"openai": {"itemId": "rs_1", "reasoningEncryptedContent": "gAAA"}},
    )
    second = ModelReasoning(text="Then test.", provider_metadata={"openai": {"itemId": "rs_1"}})
    native = ModelReasoning(
        text="", provider_metadata={"openai": {"item_id": "rs_2", "encrypted_content": "gBBB"}}
    )
    call = ModelToolCall(call_id="c1", tool="read", input={"path": "a.py"})
    assert items_of(OpenAIResponses(), view_message("assistant", first, second, native, call)) == [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [
                {"type": "summary_text", "text": "Look at the parser."},
                {"type": "summary_text", "text": "Then test."},
            ],
            "encrypted_content": "gAAA",
        },
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gBBB"},
        {"type": "function_call", "call_id": "c1", "name": "read", "arguments": '{"path":"a.py"}'},
    ]


def test_files_become_input_parts() -> None:
    message = ModelMessage(
        role="user",
        content=(
            ModelText(text="see"),
            ModelFile(mime="image/png", url="https://example.com/a.png"),
            ModelFile(mime="application/pdf", url="data:application/pdf;base64,JVBE"),
            ModelFile(mime="application/pdf", url="https://example.com/r.pdf"),
            ModelFile(mime="text/csv", url="file:///d.csv", filename="d.csv"),
        ),
        source_id="u",
    )
    assert items_of(OpenAIResponses(), message) == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "see"},
                {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"},
                {
                    "type": "input_file",
                    "filename": "document.pdf",
                    "file_data": "data:application/pdf;base64,JVBE",
                },
                {"type": "input_file", "file_url": "https://example.com/r.pdf"},
                {"type": "input_text", "text": "[Attached file: d.csv (text/csv)]"},
            ],
        }
    ]


def test_tool_result_media_stay_in_the_output() -> None:
    image = ModelFile(mime="image/png", url="data:image/png;base64,AAAA")
    result = ModelToolResult(call_id="c1", tool="read", output="done", attachments=(image,))
    message = ModelMessage(role="tool", content=(result,), source_id="t")
    assert items_of(OpenAIResponses(), message) == [
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": [
                {"type": "input_text", "text": "done"},
                {"type": "input_image", "image_url": image.url, "detail": "auto"},
            ],
        }
    ]


def test_usage_splits_cached_input_and_reasoning_output() -> None:
    response = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "usage": {
            "input_tokens": 12000,
            "input_tokens_details": {"cached_tokens": 11520},
            "output_tokens": 900,
            "output_tokens_details": {"reasoning_tokens": 640},
            "total_tokens": 12900,
        },
    }
    usage = OpenAIResponses().decode_usage(response)
    assert (usage.input, usage.cache_read, usage.cache_write) == (480, 11520, 0)
    assert (usage.output, usage.reasoning) == (260, 640)
    assert usage.total == 12900


def test_usage_with_cache_writes_nulls_and_no_details() -> None:
    wire = OpenAIResponses()
    written = wire.decode_usage(
        {
            "usage": {
                "input_tokens": 4000,
                "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 3500},
                "output_tokens": 10,
            }
        }
    )
    assert (written.input, written.cache_write, written.output) == (500, 3500, 10)
    nulls = wire.decode_usage(
        {"usage": {"input_tokens": 7, "input_tokens_details": None, "output_tokens": None}}
    )
    assert (nulls.input, nulls.cache_read, nulls.output, nulls.reasoning) == (7, 0, 0, 0)
    assert wire.decode_usage({"usage": None}).total == 0


def test_context_window_errors_are_overflows() -> None:
    error = OpenAIResponses().error(
        400,
        b'{"error":{"message":"Your input exceeds the context window of this model. Please '
        b'adjust your input and try again.","type":"invalid_request_error","param":"input",'
        b'"code":"context_length_exceeded"}}',
    )
    assert isinstance(error, ContextOverflowError)
    assert not error.retryable


def test_rate_limit_is_retryable_and_a_bad_key_is_an_auth_error() -> None:
    wire = OpenAIResponses()
    limited = wire.error(
        429,
        b'{"error":{"message":"Rate limit reached for gpt-5.1 on requests per min (RPM): '
        b'Limit 500, Used 500, Requested 1.","type":"requests","param":null,'
        b'"code":"rate_limit_exceeded"}}',
    )
    assert type(limited) is ProviderError and limited.retryable
    auth = wire.error(
        401,
        b'{"error":{"message":"Incorrect API key provided: sk-abc.",'
        b'"type":"invalid_request_error","param":null,"code":"invalid_api_key"}}',
    )
    assert isinstance(auth, ProviderAuthError)
    assert auth.error.name == "AuthError"
