from __future__ import annotations

import json
from itertools import pairwise

import msgspec

from contextledger.events._parts import ModelRef, ToolSchema
from contextledger.providers._errors import ContextOverflowError, ProviderAuthError, ProviderError
from contextledger.providers._gemini import GeminiGenerateContent, gemini_schema
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
    body_of,
    items_of,
    small_request,
    text_message,
)

MODEL = ModelRef(provider_id="google", model_id="gemini-2.5-pro")


def test_golden_request() -> None:
    check_golden(GeminiGenerateContent, MODEL)


def test_cache_marks_are_ignored() -> None:
    request = golden_request(MODEL)
    assert request.marks
    marked = GeminiGenerateContent().encode(request)
    unmarked = GeminiGenerateContent().encode(msgspec.structs.replace(request, marks=()))
    assert marked.body == unmarked.body
    assert b"cache" not in marked.body.lower()


def test_golden_roles_alternate_and_every_call_is_answered_in_the_next_content() -> None:
    contents = body_of(GeminiGenerateContent(), golden_request(MODEL))["contents"]
    roles = [c["role"] for c in contents]
    assert roles == ["user", "model"] * (len(roles) // 2) + ["user"] * (len(roles) % 2)
    for content, following in pairwise(contents):
        calls = [p["functionCall"]["name"] for p in content["parts"] if "functionCall" in p]
        answers = [
            p["functionResponse"]["name"] for p in following["parts"] if "functionResponse" in p
        ]
        assert calls == answers


def test_encoding_is_deterministic_and_independent_of_the_memo() -> None:
    assert_deterministic(GeminiGenerateContent, MODEL)


def test_tool_choice_cap_and_options_follow_the_contents() -> None:
    request = golden_request(MODEL)
    plain = GeminiGenerateContent().encode(request)
    varied = GeminiGenerateContent().encode(
        msgspec.structs.replace(
            request,
            tool_choice="required",
            max_output_tokens=2048,
            options={"generationConfig": {"temperature": 0.3}, "safetySettings": []},
        )
    )
    assert varied.body[: varied.messages_end] == plain.body[: plain.messages_end]
    body = json.loads(varied.body)
    assert list(body) == [
        "systemInstruction",
        "tools",
        "contents",
        "generationConfig",
        "toolConfig",
        "safetySettings",
    ]
    assert body["generationConfig"] == {"maxOutputTokens": 2048, "temperature": 0.3}
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    none = body_of(
        GeminiGenerateContent(),
        msgspec.structs.replace(request, tool_choice="none", max_output_tokens=None),
    )
    assert none["toolConfig"] == {"functionCallingConfig": {"mode": "NONE"}}
    assert "generationConfig" not in none


def test_thought_signature_goes_beside_the_call_and_reasoning_is_not_sent() -> None:
    message = ModelMessage(
        role="assistant",
        content=(
            ModelReasoning(
                text="thinking", provider_metadata={"google": {"thoughtSignature": "r-sig"}}
            ),
            ModelToolCall(
                call_id="c1",
                tool="read",
                input={"path": "a.py"},
                provider_metadata={"google": {"thoughtSignature": "CiQB-sig"}},
            ),
            ModelToolCall(call_id="c2", tool="read", input={"path": "b.py"}),
        ),
        source_id="a",
    )
    assert items_of(GeminiGenerateContent(), message) == [
        {
            "functionCall": {"name": "read", "args": {"path": "a.py"}},
            "thoughtSignature": "CiQB-sig",
        },
        {"functionCall": {"name": "read", "args": {"path": "b.py"}}},
    ]
    only_reasoning = ModelMessage(
        role="assistant", content=(ModelReasoning(text="x"),), source_id="b"
    )
    assert GeminiGenerateContent().encode_message(only_reasoning, None) == b""


def test_results_are_outputs_or_errors_and_keep_their_media() -> None:
    message = ModelMessage(
        role="tool",
        content=(
            ModelToolResult(
                call_id="c1",
                tool="screenshot",
                output="saved",
                attachments=(ModelFile(mime="image/png", url="data:image/png;base64,iVBO"),),
            ),
            ModelToolResult(call_id="c2", tool="bash", output="exit 2", is_error=True),
        ),
        source_id="a",
    )
    assert items_of(GeminiGenerateContent(), message) == [
        {
            "functionResponse": {
                "name": "screenshot",
                "response": {"output": "saved"},
                "parts": [{"inlineData": {"mimeType": "image/png", "data": "iVBO"}}],
            }
        },
        {"functionResponse": {"name": "bash", "response": {"error": "exit 2"}}},
    ]


def test_files_are_inline_data_or_file_data() -> None:
    message = ModelMessage(
        role="user",
        content=(
            ModelText(text="look"),
            ModelFile(mime="application/pdf", url="data:application/pdf;base64,JVBE"),
            ModelFile(
                mime="video/mp4",
                url="https://generativelanguage.googleapis.com/v1beta/files/abc",
            ),
        ),
        source_id="u",
    )
    assert items_of(GeminiGenerateContent(), message) == [
        {"text": "look"},
        {"inlineData": {"mimeType": "application/pdf", "data": "JVBE"}},
        {
            "fileData": {
                "mimeType": "video/mp4",
                "fileUri": "https://generativelanguage.googleapis.com/v1beta/files/abc",
            }
        },
    ]


def test_consecutive_user_messages_share_a_content() -> None:
    messages = (text_message("user", "one", "u1"), text_message("user", "two", "u2"))
    contents = body_of(GeminiGenerateContent(), small_request(MODEL, *messages))["contents"]
    assert contents == [{"role": "user", "parts": [{"text": "one"}, {"text": "two"}]}]


def test_schemas_keep_only_what_gemini_accepts() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "paths": {
                "type": "array",
                "items": {"type": "object", "additionalProperties": False, "properties": {}},
                "minItems": 1,
            },
            "mode": {"type": ["string", "null"], "enum": ["fast", "slow"], "const": "fast"},
            "limit": {"type": ["integer", "string"], "exclusiveMinimum": 0, "default": 10},
            "type": {"type": "string", "description": "a property named like a keyword"},
        },
        "required": ["paths"],
    }
    assert gemini_schema(schema) == {
        "type": "object",
        "properties": {
            "paths": {
                "type": "array",
                "items": {"type": "object", "properties": {}},
                "minItems": 1,
            },
            "mode": {"type": "string", "nullable": True, "enum": ["fast", "slow"]},
            "limit": {"anyOf": [{"type": "integer"}, {"type": "string"}], "default": 10},
            "type": {"type": "string", "description": "a property named like a keyword"},
        },
        "required": ["paths"],
    }


def test_a_tool_without_parameters_has_no_parameters_field() -> None:
    tools = (
        ToolSchema(name="noop", description="Do nothing."),
        ToolSchema(
            name="empty",
            description="Also nothing.",
            input_schema={"type": "object", "properties": {}, "additionalProperties": False},
        ),
    )
    body = body_of(GeminiGenerateContent(), small_request(MODEL, tools=tools))
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {"name": "noop", "description": "Do nothing."},
                {"name": "empty", "description": "Also nothing."},
            ]
        }
    ]


def test_path_and_headers() -> None:
    wire = GeminiGenerateContent()
    request = small_request(MODEL)
    assert wire.path(request) == "/v1beta/models/gemini-2.5-pro:generateContent"
    assert wire.path(msgspec.structs.replace(request, stream=True)) == (
        "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    )
    assert wire.headers("AIza-key") == {
        "content-type": "application/json",
        "x-goog-api-key": "AIza-key",
    }
    assert "x-goog-api-key" not in wire.headers(None)


def test_a_request_without_system_tools_or_cap_is_still_valid_json() -> None:
    message = text_message("user", "hi", "u")
    body = body_of(GeminiGenerateContent(), small_request(MODEL, message))
    assert body == {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}


def test_usage_splits_implicit_cache_reads_out_of_the_prompt() -> None:
    usage = GeminiGenerateContent().decode_usage(
        {
            "candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}}],
            "usageMetadata": {
                "promptTokenCount": 10500,
                "candidatesTokenCount": 120,
                "totalTokenCount": 11020,
                "cachedContentTokenCount": 8192,
                "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 10500}],
                "cacheTokensDetails": [{"modality": "TEXT", "tokenCount": 8192}],
                "thoughtsTokenCount": 400,
            },
            "modelVersion": "gemini-2.5-pro",
        }
    )
    assert (usage.input, usage.cache_read, usage.cache_write) == (2308, 8192, 0)
    assert (usage.output, usage.reasoning) == (120, 400)
    assert usage.total == 11020


def test_usage_without_cache_with_tool_prompts_or_with_nulls() -> None:
    plain = GeminiGenerateContent().decode_usage(
        {
            "usageMetadata": {
                "promptTokenCount": 812,
                "candidatesTokenCount": 45,
                "toolUsePromptTokenCount": 300,
                "totalTokenCount": 1157,
            }
        }
    )
    assert (plain.input, plain.cache_read, plain.output, plain.reasoning) == (1112, 0, 45, 0)
    assert plain.total == 1157
    nulls = GeminiGenerateContent().decode_usage(
        {"usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": None}}
    )
    assert (nulls.input, nulls.output) == (9, 0)
    assert GeminiGenerateContent().decode_usage({}).total == 0


def test_input_token_count_over_the_maximum_is_a_context_overflow() -> None:
    error = GeminiGenerateContent().error(
        400,
        b'{"error":{"code":400,"message":"The input token count (1200293) exceeds the maximum '
        b'number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}',
    )
    assert isinstance(error, ContextOverflowError)
    assert not error.retryable
    assert "1200293" in error.detail
    streamed = GeminiGenerateContent().error(
        400,
        b'[{"error":{"code":400,"message":"The input token count exceeds the maximum number of '
        b'tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}]',
    )
    assert isinstance(streamed, ContextOverflowError)


def test_resource_exhausted_and_server_errors_are_retryable() -> None:
    wire = GeminiGenerateContent()
    exhausted = wire.error(
        429,
        b'{"error":{"code":429,"message":"You exceeded your current quota, please check your '
        b'plan and billing details.","status":"RESOURCE_EXHAUSTED"}}',
    )
    assert type(exhausted) is ProviderError and exhausted.retryable
    overloaded = wire.error(
        503,
        b'{"error":{"code":503,"message":"The model is overloaded. Please try again later.",'
        b'"status":"UNAVAILABLE"}}',
    )
    assert type(overloaded) is ProviderError and overloaded.retryable


def test_denied_and_invalid_keys_are_auth_errors() -> None:
    wire = GeminiGenerateContent()
    denied = wire.error(
        403,
        b'{"error":{"code":403,"message":"Method doesn\'t allow unregistered callers.",'
        b'"status":"PERMISSION_DENIED"}}',
    )
    assert isinstance(denied, ProviderAuthError) and not denied.retryable
    invalid_key = wire.error(
        400,
        b'{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.",'
        b'"status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.'
        b'ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}',
    )
    assert isinstance(invalid_key, ProviderAuthError)
    assert invalid_key.status == 400 and not invalid_key.retryable
    assert invalid_key.detail == "API key not valid. Please pass a valid API key."
    bad_request = wire.error(
        400,
        b'{"error":{"code":400,"message":"Invalid JSON payload received. Unknown name '
        b'\\"additionalProperties\\"","status":"INVALID_ARGUMENT"}}',
    )
    assert type(bad_request) is ProviderError and not bad_request.retryable


def test_an_overflow_stays_an_overflow_even_if_the_body_names_a_key_reason() -> None:
    body = (
        b'{"error":{"code":400,"message":"The input token count (2000000) exceeds the maximum '
        b'number of tokens allowed (1048576).","status":"INVALID_ARGUMENT","details":'
        b'[{"reason":"API_KEY_INVALID"}]}}'
    )
    assert isinstance(GeminiGenerateContent().error(400, body), ContextOverflowError)
