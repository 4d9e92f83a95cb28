"""Realistic answers of every provider API, for the HTTP client tests.

For each wire format: the model a request names, a successful (non-streamed) answer whose
usage has cache reads and, where the API reports them, cache writes, the ``Usage`` it decodes
to, a context-overflow error, a rate-limit error and an authentication error, each as the API
sends it (status, body, relevant headers). ``Usage.input`` is the uncached input and
``output`` excludes reasoning, so ``Usage.total`` counts no token twice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from contextledger.events._parts import ModelRef, Usage
from tests.providers.loopback import Reply


@dataclass(frozen=True)
class ProviderAnswers:
    """What one provider API answers."""

    model: ModelRef
    success: dict[str, Any]
    usage: Usage
    overflow: Reply
    rate_limit: Reply
    auth: Reply


def body(value: Any) -> bytes:
    """A JSON body as a server sends it."""
    return json.dumps(value).encode()


_OPENAI_CHAT_USAGE = {
    "prompt_tokens": 20512,
    "completion_tokens": 310,
    "total_tokens": 20822,
    "prompt_tokens_details": {"cached_tokens": 19968, "audio_tokens": 0},
    "completion_tokens_details": {
        "reasoning_tokens": 0,
        "audio_tokens": 0,
        "accepted_prediction_tokens": 0,
        "rejected_prediction_tokens": 0,
    },
}


def _chat_completion(model: str, usage: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-CXqL0Jx9bE2v7Qf1Yk3sT8mNa4pRz",
        "object": "chat.completion",
        "created": 1764496800,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "The tests pass: 3 passed in 0.02s.",
                    "refusal": None,
                    "annotations": [],
                },
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": usage,
        **extra,
    }


def _openai_error(status: int, message: str, kind: str, code: str | None, **extra: Any) -> Reply:
    error = {"message": message, "type": kind, "param": None, "code": code}
    return Reply(status, body({"error": error}), **extra)


_OPENAI_RATE_LIMIT = _openai_error(
    429,
    "Rate limit reached for gpt-4.1 in organization org-Zx8f3kQ2 on tokens per min (TPM): "
    "Limit 30000, Used 28512, Requested 20512. Please try again in 38.048s. Visit "
    "https://platform.openai.com/account/rate-limits to learn more.",
    "tokens",
    "rate_limit_exceeded",
    headers={"x-ratelimit-limit-tokens": "30000", "x-ratelimit-reset-tokens": "38.048s"},
)
_OPENAI_AUTH = _openai_error(
    401,
    "Incorrect API key provided: sk-ant-t*********T123. You can find your API key at "
    "https://platform.openai.com/account/api-keys.",
    "invalid_request_error",
    "invalid_api_key",
)

ANTHROPIC = ProviderAnswers(
    model=ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5"),
    success={
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": "The tests pass: 3 passed in 0.02s."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 12,
            "cache_creation_input_tokens": 2048,
            "cache_read_input_tokens": 18000,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 2048},
            "output_tokens": 150,
            "service_tier": "standard",
        },
    },
    usage=Usage(input=12, output=150, cache_read=18000, cache_write=2048),
    overflow=Reply(
        400,
        body(
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "prompt is too long: 215849 tokens > 200000 maximum",
                },
                "request_id": "req_011CVZ8pTqXkq4bT1mS2nHcD",
            }
        ),
        headers={"request-id": "req_011CVZ8pTqXkq4bT1mS2nHcD"},
    ),
    rate_limit=Reply(
        429,
        body(
            {
                "type": "error",
                "error": {
                    "type": "rate_limit_error",
                    "message": "This request would exceed the rate limit for your organization "
                    "(4b5e3f2a-8c1d-4e6f-9a7b-2c3d4e5f6a7b) of 30,000 input tokens per minute. "
                    "For details, refer to: https://docs.claude.com/en/api/rate-limits.",
                },
                "request_id": "req_011CVZ9aUr2LmN3oP4qR5sT6",
            }
        ),
        headers={"anthropic-ratelimit-input-tokens-remaining": "0"},
    ),
    auth=Reply(
        401,
        body(
            {
                "type": "error",
                "error": {"type": "authentication_error", "message": "invalid x-api-key"},
                "request_id": "req_011CVZAbVs3MnO4pQ5rS6tU7",
            }
        ),
    ),
)

OPENAI_CHAT = ProviderAnswers(
    model=ModelRef(provider_id="openai", model_id="gpt-4.1"),
    success=_chat_completion(
        "gpt-4.1-2025-04-14",
        _OPENAI_CHAT_USAGE,
        service_tier="default",
        system_fingerprint="fp_b3f1157249",
    ),
    usage=Usage(input=544, output=310, cache_read=19968),
    overflow=_openai_error(
        400,
        "This model's maximum context length is 1047576 tokens. However, your messages resulted "
        "in 1103211 tokens (1102705 in the messages, 506 in the functions). Please reduce the "
        "length of the messages or functions.",
        "invalid_request_error",
        "context_length_exceeded",
    ),
    rate_limit=_OPENAI_RATE_LIMIT,
    auth=_OPENAI_AUTH,
)

OPENAI_RESPONSES = ProviderAnswers(
    model=ModelRef(provider_id="openai", model_id="gpt-5"),
    success={
        "id": "resp_68f1c2d3e4a5b6c7d8e9f0a1b2c3d4e5",
        "object": "response",
        "created_at": 1764496800,
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "model": "gpt-5-2025-08-07",
        "output": [
            {
                "id": "rs_68f1c2d3e4a5b6c7d8e9f0a1",
                "type": "reasoning",
                "summary": [],
                "encrypted_content": "gAAAAABo8cLT...",
            },
            {
                "id": "msg_68f1c2d3e4a5b6c7d8e9f0a2",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [
                    {
                        "type": "output_text",
                        "text": "The tests pass: 3 passed in 0.02s.",
                        "annotations": [],
                        "logprobs": [],
                    }
                ],
            },
        ],
        "prompt_cache_key": "ses_golden",
        "reasoning": {"effort": "medium", "summary": None},
        "store": False,
        "usage": {
            "input_tokens": 20512,
            "input_tokens_details": {"cached_tokens": 19968},
            "output_tokens": 1210,
            "output_tokens_details": {"reasoning_tokens": 896},
            "total_tokens": 21722,
        },
    },
    usage=Usage(input=544, output=314, reasoning=896, cache_read=19968),
    overflow=_openai_error(
        400,
        "Your input exceeds the context window of this model. Please adjust your input and try "
        "again.",
        "invalid_request_error",
        "context_length_exceeded",
    ),
    rate_limit=_OPENAI_RATE_LIMIT,
    auth=_OPENAI_AUTH,
)

OPENROUTER = ProviderAnswers(
    model=ModelRef(provider_id="openrouter", model_id="anthropic/claude-sonnet-4.5"),
    success=_chat_completion(
        "anthropic/claude-sonnet-4.5",
        {
            "prompt_tokens": 20512,
            "completion_tokens": 310,
            "total_tokens": 20822,
            "cost": 0.0151116,
            "is_byok": False,
            "prompt_tokens_details": {
                "cached_tokens": 18000,
                "cache_write_tokens": 2048,
                "audio_tokens": 0,
            },
            "cost_details": {"upstream_inference_cost": None},
            "completion_tokens_details": {"reasoning_tokens": 0, "image_tokens": 0},
        },
        id="gen-1764496800-Qm3xR7tYp2LkV9sW4nZb",
        provider="Anthropic",
    ),
    usage=Usage(input=464, output=310, cache_read=18000, cache_write=2048),
    overflow=Reply(
        400,
        body(
            {
                "error": {
                    "message": "This endpoint's maximum context length is 200000 tokens. "
                    "However, you requested about 231262 tokens (223070 of text input, 8192 in "
                    "the output). Please reduce the length of either one, or use the "
                    '"middle-out" transform to compress your prompt automatically.',
                    "code": 400,
                    "metadata": {"provider_name": None},
                },
                "user_id": "user_2yQ8mX4nB7vK1pR3",
            }
        ),
    ),
    rate_limit=Reply(
        429,
        body(
            {
                "error": {
                    "message": "Provider returned error",
                    "code": 429,
                    "metadata": {
                        "raw": "anthropic/claude-sonnet-4.5 is temporarily rate-limited "
                        "upstream. Please retry shortly.",
                        "provider_name": "Anthropic",
                    },
                },
                "user_id": "user_2yQ8mX4nB7vK1pR3",
            }
        ),
    ),
    auth=Reply(401, body({"error": {"message": "No auth credentials found", "code": 401}})),
)

OPENAI_COMPATIBLE = ProviderAnswers(
    model=ModelRef(provider_id="vllm", model_id="Qwen/Qwen3-Coder-30B-A3B-Instruct"),
    success=_chat_completion(
        "Qwen/Qwen3-Coder-30B-A3B-Instruct",
        {
            "prompt_tokens": 20512,
            "total_tokens": 20822,
            "completion_tokens": 310,
            "prompt_tokens_details": {"cached_tokens": 19968},
        },
        prompt_logprobs=None,
        kv_transfer_params=None,
    ),
    usage=Usage(input=544, output=310, cache_read=19968),
    overflow=Reply(
        400,
        body(
            {
                "error": {
                    "message": "This model's maximum context length is 32768 tokens. However, "
                    "you requested 40960 tokens (32768 in the messages, 8192 in the completion). "
                    "Please reduce the length of the messages or completion.",
                    "type": "BadRequestError",
                    "param": None,
                    "code": 400,
                }
            }
        ),
    ),
    rate_limit=Reply(
        429,
        body(
            {
                "error": {
                    "message": "Too many requests: the server is at capacity.",
                    "type": "TooManyRequests",
                    "param": None,
                    "code": 429,
                }
            }
        ),
        headers={"retry-after": "1"},
    ),
    auth=Reply(401, body({"error": "Unauthorized"})),
)

_BEDROCK_ERROR = "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"

BEDROCK = ProviderAnswers(
    model=ModelRef(
        provider_id="amazon-bedrock", model_id="us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    ),
    success={
        "output": {
            "message": {
                "role": "assistant",
                "content": [{"text": "The tests pass: 3 passed in 0.02s."}],
            }
        },
        "stopReason": "end_turn",
        "usage": {
            "inputTokens": 12,
            "outputTokens": 150,
            "totalTokens": 20210,
            "cacheReadInputTokens": 18000,
            "cacheWriteInputTokens": 2048,
        },
        "metrics": {"latencyMs": 2310},
    },
    usage=Usage(input=12, output=150, cache_read=18000, cache_write=2048),
    overflow=Reply(
        400,
        body({"message": "Input is too long for requested model."}),
        headers={
            "x-amzn-errortype": _BEDROCK_ERROR,
            "x-amzn-requestid": "7a4bfff1-fdfb-4bda-90e8-81cc52a9189c",
        },
    ),
    rate_limit=Reply(
        429,
        body({"message": "Too many tokens, please wait before trying again."}),
        headers={
            "x-amzn-errortype": "ThrottlingException:http://internal.amazon.com/coral/"
            "com.amazon.bedrock/"
        },
    ),
    auth=Reply(
        403,
        body({"message": "The security token included in the request is invalid."}),
        headers={"x-amzn-errortype": "UnrecognizedClientException:http://internal.amazon.com/"},
    ),
)

GEMINI = ProviderAnswers(
    model=ModelRef(provider_id="google", model_id="gemini-2.5-pro"),
    success={
        "candidates": [
            {
                "content": {
                    "parts": [{"text": "The tests pass: 3 passed in 0.02s."}],
                    "role": "model",
                },
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 20512,
            "candidatesTokenCount": 310,
            "totalTokenCount": 21718,
            "cachedContentTokenCount": 19968,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 20512}],
            "cacheTokensDetails": [{"modality": "TEXT", "tokenCount": 19968}],
            "thoughtsTokenCount": 896,
        },
        "modelVersion": "gemini-2.5-pro",
        "responseId": "kFUsaeC2LMqPz7IPnL2o0Qs",
    },
    usage=Usage(input=544, output=310, reasoning=896, cache_read=19968),
    overflow=Reply(
        400,
        body(
            {
                "error": {
                    "code": 400,
                    "message": "The input token count (1200293) exceeds the maximum number of "
                    "tokens allowed (1048576).",
                    "status": "INVALID_ARGUMENT",
                }
            }
        ),
    ),
    rate_limit=Reply(
        429,
        body(
            {
                "error": {
                    "code": 429,
                    "message": "Resource has been exhausted (e.g. check quota).",
                    "status": "RESOURCE_EXHAUSTED",
                    "details": [
                        {
                            "@type": "type.googleapis.com/google.rpc.RetryInfo",
                            "retryDelay": "21s",
                        }
                    ],
                }
            }
        ),
    ),
    auth=Reply(
        401,
        body(
            {
                "error": {
                    "code": 401,
                    "message": "Request had invalid authentication credentials. Expected OAuth 2 "
                    "access token, login cookie or other valid authentication credential.",
                    "status": "UNAUTHENTICATED",
                }
            }
        ),
    ),
)

#: Every wire format's answers, by wire-format name.
ANSWERS: dict[str, ProviderAnswers] = {
    "anthropic": ANTHROPIC,
    "openai-chat": OPENAI_CHAT,
    "openai-responses": OPENAI_RESPONSES,
    "openrouter": OPENROUTER,
    "openai-compatible": OPENAI_COMPATIBLE,
    "bedrock": BEDROCK,
    "gemini": GEMINI,
}
