from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

import msgspec

from contextledger.events._parts import ModelRef, ToolSchema
from contextledger.providers._bedrock import BedrockConverse, document_name
from contextledger.providers._errors import ContextOverflowError, ProviderAuthError, ProviderError
from contextledger.vocabulary._messages import (
    ModelFile,
    ModelMessage,
    ModelReasoning,
    ModelText,
    ModelToolCall,
    ModelToolResult,
)
from contextledger.vocabulary._requests import CacheMark
from tests.providers.fixtures import golden_request
from tests.providers.harness import check_golden
from tests.providers.helpers import (
    assert_deterministic,
    body_of,
    items_of,
    small_request,
    text_message,
)

MODEL = ModelRef(provider_id="amazon-bedrock", model_id="anthropic.claude-sonnet-4-5-20250929-v1:0")


def cache_points(items: list[dict[str, Any]]) -> list[int]:
    return [i for i, item in enumerate(items) if "cachePoint" in item]


def test_golden_request() -> None:
    check_golden(BedrockConverse, MODEL)


def test_cache_points_follow_the_marked_system_block_and_tool_and_end_the_marked_messages() -> None:
    body = body_of(BedrockConverse(), golden_request(MODEL))
    assert cache_points(body["system"]) == [1]
    tools = body["toolConfig"]["tools"]
    assert cache_points(tools) == [len(tools) - 1]
    assert tools[-1] == {"cachePoint": {"type": "default", "ttl": "1h"}}
    last, before = body["messages"][-1]["content"], body["messages"][-2]["content"]
    assert last[-1] == {"cachePoint": {"type": "default"}}
    assert before[-1] == {"cachePoint": {"type": "default"}}
    marked = [m for m in body["messages"] if cache_points(m["content"])]
    assert [cache_points(m["content"]) for m in marked] == [[len(before) - 1], [len(last) - 1]]


def test_a_mark_on_a_message_sharing_a_turn_ends_that_message_not_the_turn() -> None:
    messages = (
        text_message("user", "run it", "u1"),
        ModelMessage(
            role="assistant",
            content=(ModelToolCall(call_id="c1", tool="bash", input={"command": "ls"}),),
            source_id="a1",
        ),
        ModelMessage(
            role="tool",
            content=(ModelToolResult(call_id="c1", tool="bash", output="a.txt"),),
            source_id="a1",
        ),
        text_message("user", "and now?", "u2"),
    )
    request = small_request(MODEL, *messages, marks=(CacheMark(target="message", index=2),))
    turns = body_of(BedrockConverse(), request)["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert turns[2]["content"] == [
        {"toolResult": {"toolUseId": "c1", "content": [{"text": "a.txt"}]}},
        {"cachePoint": {"type": "default"}},
        {"text": "and now?"},
    ]


def test_consecutive_messages_of_one_role_share_a_turn() -> None:
    messages = (
        text_message("user", "one", "u1"),
        text_message("user", "two", "u2"),
        text_message("assistant", "three", "a1"),
        text_message("assistant", "four", "a2"),
    )
    turns = body_of(BedrockConverse(), small_request(MODEL, *messages))["messages"]
    assert turns == [
        {"role": "user", "content": [{"text": "one"}, {"text": "two"}]},
        {"role": "assistant", "content": [{"text": "three"}, {"text": "four"}]},
    ]


def test_golden_roles_alternate_and_every_tool_use_is_answered_in_the_next_turn() -> None:
    turns = body_of(BedrockConverse(), golden_request(MODEL))["messages"]
    roles = [t["role"] for t in turns]
    assert roles == ["user", "assistant"] * (len(roles) // 2) + ["user"] * (len(roles) % 2)
    for turn, following in pairwise(turns):
        uses = [b["toolUse"]["toolUseId"] for b in turn["content"] if "toolUse" in b]
        results = [b["toolResult"]["toolUseId"] for b in following["content"] if "toolResult" in b]
        assert uses == results


def test_the_prefix_before_the_last_message_is_repeated_by_the_next_step() -> None:
    request = golden_request(MODEL)
    tool_index = next(i for i, m in enumerate(request.messages) if m.role == "tool")
    wire = BedrockConverse()
    step = wire.encode(small_request(MODEL, *request.messages[: tool_index + 1]))
    later = wire.encode(small_request(MODEL, *request.messages[: tool_index + 3]))
    prefix = step.prefix_before_last_message()
    assert later.body.startswith(prefix)
    assert later.message_offsets[: tool_index + 1] == step.message_offsets
    assert later.body[step.message_offsets[-1] :].startswith(b'{"role":"user","content":[')
    assert later.body[later.message_offsets[tool_index + 1] :].startswith(b'{"text":')
    assert later.body[later.messages_end : later.messages_end + 1] == b"]"


def test_encoding_is_deterministic_and_independent_of_the_memo() -> None:
    assert_deterministic(BedrockConverse, MODEL)


def test_the_opening_does_not_depend_on_per_step_fields() -> None:
    request = golden_request(MODEL)
    plain = BedrockConverse().encode(request)
    varied = BedrockConverse().encode(
        msgspec.structs.replace(
            request,
            max_output_tokens=1000,
            tool_choice="required",
            options={"inferenceConfig": {"temperature": 0.2}, "additionalModelRequestFields": {}},
        )
    )
    assert varied.prefix_before_last_message() == plain.prefix_before_last_message()
    assert varied.body[: varied.messages_end] == plain.body[: plain.messages_end]
    body = json.loads(varied.body)
    assert "toolChoice" not in body["toolConfig"]
    assert body["inferenceConfig"] == {"maxTokens": 1000, "temperature": 0.2}
    assert body["additionalModelRequestFields"] == {}


def test_a_request_without_system_tools_or_cap_is_still_valid_json() -> None:
    body = body_of(BedrockConverse(), small_request(MODEL, text_message("user", "hi", "u")))
    assert body == {"messages": [{"role": "user", "content": [{"text": "hi"}]}]}


def test_the_path_url_encodes_the_model_id() -> None:
    wire = BedrockConverse()
    request = small_request(MODEL)
    assert wire.path(request) == "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse"
    profile = ModelRef(
        provider_id="amazon-bedrock",
        model_id="arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.x-v1:0",
    )
    assert wire.path(small_request(profile, stream=True)) == (
        "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile"
        "%2Fus.anthropic.x-v1%3A0/converse-stream"
    )


def test_api_key_is_a_bearer_token() -> None:
    assert BedrockConverse().headers("key-1") == {
        "content-type": "application/json",
        "authorization": "Bearer key-1",
    }
    assert "authorization" not in BedrockConverse().headers(None)


def test_reasoning_goes_back_only_when_signed() -> None:
    message = ModelMessage(
        role="assistant",
        content=(
            ModelReasoning(text="unsigned"),
            ModelReasoning(text="signed", provider_metadata={"bedrock": {"signature": "b-sig"}}),
            ModelText(text="answer"),
        ),
        source_id="a",
    )
    blocks = items_of(BedrockConverse(), message)
    assert blocks == [
        {"reasoningContent": {"reasoningText": {"text": "signed", "signature": "b-sig"}}},
        {"text": "answer"},
    ]
    only_unsigned = ModelMessage(
        role="assistant", content=(ModelReasoning(text="x"),), source_id="b"
    )
    assert BedrockConverse().encode_message(only_unsigned, None) == b""


def test_files_become_images_documents_or_notes() -> None:
    message = ModelMessage(
        role="user",
        content=(
            ModelFile(mime="image/jpeg", url="data:image/jpeg;base64,QUJD"),
            ModelFile(mime="application/pdf", url="s3://bucket/r.pdf", filename="Q3 report.v2.pdf"),
            ModelFile(mime="image/png", url="https://example.com/a.png", filename="a.png"),
            ModelFile(
                mime="application/zip", url="data:application/zip;base64,UEs=", filename="x.zip"
            ),
        ),
        source_id="u",
    )
    blocks = items_of(BedrockConverse(), message)
    assert blocks == [
        {"image": {"format": "jpeg", "source": {"bytes": "QUJD"}}},
        {
            "document": {
                "format": "pdf",
                "name": "Q3 report-v2",
                "source": {"s3Location": {"uri": "s3://bucket/r.pdf"}},
            }
        },
        {"text": "[Attached file: a.png (image/png)]"},
        {"text": "[Attached file: x.zip (application/zip)]"},
    ]


def test_document_names_keep_only_the_characters_converse_allows() -> None:
    def name(filename: str | None) -> str:
        return document_name(ModelFile(mime="application/pdf", url="", filename=filename))

    assert name("notes  (draft)_[1].pdf") == "notes (draft)-[1]"
    assert name("...pdf") == "document"
    assert name(None) == "document"


def test_a_tool_without_description_or_schema_gets_an_empty_object_schema() -> None:
    body = body_of(BedrockConverse(), small_request(MODEL, tools=(ToolSchema(name="noop"),)))
    assert body["toolConfig"]["tools"] == [
        {
            "toolSpec": {
                "name": "noop",
                "inputSchema": {"json": {"type": "object", "properties": {}}},
            }
        }
    ]


def test_usage_input_excludes_cache_reads_and_writes() -> None:
    usage = BedrockConverse().decode_usage(
        {
            "output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
            "stopReason": "end_turn",
            "usage": {
                "inputTokens": 12,
                "outputTokens": 85,
                "totalTokens": 5097,
                "cacheReadInputTokens": 3000,
                "cacheWriteInputTokens": 2000,
            },
            "metrics": {"latencyMs": 1404},
        }
    )
    assert (usage.input, usage.cache_read, usage.cache_write, usage.output) == (12, 3000, 2000, 85)
    assert usage.reasoning == 0
    assert usage.prompt + usage.output == 5097


def test_usage_without_cache_fields_or_with_nulls() -> None:
    plain = BedrockConverse().decode_usage(
        {"usage": {"inputTokens": 30, "outputTokens": 7, "totalTokens": 37}}
    )
    assert (plain.input, plain.output, plain.cache_read, plain.cache_write) == (30, 7, 0, 0)
    nulls = BedrockConverse().decode_usage(
        {"usage": {"inputTokens": None, "outputTokens": 3, "cacheReadInputTokens": None}}
    )
    assert (nulls.input, nulls.output, nulls.cache_read) == (0, 3, 0)
    assert BedrockConverse().decode_usage({}).total == 0


def test_input_too_long_is_a_context_overflow() -> None:
    error = BedrockConverse().error(
        400,
        b'{"message":"The model returned the following errors: '
        b'Input is too long for requested model."}',
    )
    assert isinstance(error, ContextOverflowError)
    assert not error.retryable
    assert "Input is too long" in error.detail


def test_too_many_input_tokens_is_a_context_overflow() -> None:
    error = BedrockConverse().error(
        400,
        b'{"message":"Too many input tokens. Max input tokens: 200000, '
        b'request input token count: 215311"}',
    )
    assert isinstance(error, ContextOverflowError)


def test_throttling_is_a_retryable_rate_limit_not_an_overflow() -> None:
    error = BedrockConverse().error(
        429, b'{"message":"Too many tokens, please wait before trying again."}'
    )
    assert type(error) is ProviderError
    assert error.retryable
    input_worded = BedrockConverse().error(429, b'{"message":"Too many input tokens per minute."}')
    assert type(input_worded) is ProviderError and input_worded.retryable


def test_bad_credentials_are_an_auth_error_and_unavailability_is_retryable() -> None:
    wire = BedrockConverse()
    auth = wire.error(403, b'{"message":"The security token included in the request is invalid."}')
    assert isinstance(auth, ProviderAuthError) and not auth.retryable
    unavailable = wire.error(503, b'{"message":"Service unavailable. Please try again later."}')
    assert type(unavailable) is ProviderError and unavailable.retryable
    invalid = wire.error(400, b'{"message":"messages.1.content: Field required"}')
    assert type(invalid) is ProviderError and not invalid.retryable
