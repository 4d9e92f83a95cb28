"""Provider error classification (opencode-kilo §9.3 #57-#60) and the error policy (§9.5)."""

from __future__ import annotations

import pytest

from contextledger.policy._errors import (
    FATAL_CODES,
    OVERFLOW_MESSAGE,
    classify_error,
    decide_error,
    is_context_overflow,
)


def test_9_3_57_a_context_length_exceeded_code_is_an_overflow() -> None:
    error = classify_error("stream error", code="context_length_exceeded")
    assert error.name == "ContextOverflowError"
    assert error.message == OVERFLOW_MESSAGE


@pytest.mark.parametrize("code", sorted(FATAL_CODES))
def test_9_3_58_quota_and_plan_errors_are_not_retried(code: str) -> None:
    error = classify_error("whatever the provider said", status=400, code=code)
    assert error.name == "APIError" and not error.retryable
    assert error.message == FATAL_CODES[code]


def test_9_3_59_an_openai_server_error_chunk_is_retryable() -> None:
    error = classify_error("The server had an error", code="server_error")
    assert error.name == "APIError" and error.retryable


@pytest.mark.parametrize(
    "message",
    [
        "prompt is too long: 210000 tokens > 200000 maximum",
        "This request exceeds the context window of the model",
        "The input token count (1200000) exceeds the maximum number of tokens allowed",
        "Please reduce the length of the messages or completion.",
        "400 status code (no body)",
        "413 status code (no body)",
        "This model's maximum context length is 128000 tokens.",
        "input length and `max_tokens` exceed context limit: 25823 + 32000 > 32000, decrease "
        "input length or `max_tokens` and try again",
    ],
)
def test_9_3_60_provider_overflow_wordings_are_overflows(message: str) -> None:
    assert is_context_overflow(message)
    assert classify_error(message, status=400).name == "ContextOverflowError"


def test_other_errors_are_not_overflows() -> None:
    assert not is_context_overflow("Invalid API key provided")
    assert classify_error("Invalid API key provided", status=401).name == "AuthError"
    assert classify_error("rate limited", status=429).retryable
    assert not classify_error("bad request", status=400).retryable


def test_9_5_79_a_preflight_overflow_compacts_and_records_no_error() -> None:
    decision = decide_error("PreflightCompactionError")
    assert (decision.rule, decision.action) == ("preflight", "compact")
    assert not decision.record_error


def test_9_5_80_a_preflight_overflow_compacts_even_after_a_tool_ran() -> None:
    assert decide_error("PreflightCompactionError", tool_ran=True).action == "compact"
    # ...while a retryable error after a tool ran is not retried (its effects would repeat).
    assert decide_error("APIError", retryable=True, tool_ran=True).action == "fail"


def test_9_5_81_context_overflow_compacts_abort_stops_incomplete_is_reported() -> None:
    assert decide_error("ContextOverflowError").action == "compact"
    assert decide_error("ContextOverflowError").rule == "context-overflow"
    assert decide_error("AbortedError").action == "stop"
    assert decide_error("IncompleteResponseError").action == "incomplete"


def test_retryable_errors_retry_and_others_fail() -> None:
    assert decide_error("APIError", retryable=True).action == "retry"
    assert decide_error("APIError").action == "fail"


def test_a_rate_limit_that_mentions_tokens_is_retried_not_compacted() -> None:
    message = "ThrottlingException: Too many tokens, please wait before trying again."
    error = classify_error(message, status=429)
    assert error.name == "APIError" and error.retryable
    assert decide_error(error.name, retryable=error.retryable).action == "retry"
