"""What a provider's error means and what the turn does about it.

``classify_error`` turns a provider failure (HTTP status, error code, message) into the
message error the log records; context overflows get their own name, because they are the
one error the runtime answers with a compaction instead of a retry or a stop.
``decide_error`` is Kilo Code's error policy: the rule that applies and the action.
Both are pure; transports feed them what they received.
"""

from __future__ import annotations

import re
from typing import Final, Literal

import msgspec

from contextledger.events._parts import MessageError

#: Provider wordings of "the prompt does not fit" (opencode's list and pi's
#: ``isContextOverflow``), matched case-insensitively anywhere in the message.
OVERFLOW_PATTERNS: Final = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"prompt is too long",
        r"exceeds the context window",
        r"input token count.*exceeds the maximum",
        r"reduce the length of the messages",
        r"maximum context length is \d+ tokens",
        r"context[_ ]length[_ ]exceeded",
        r"too many tokens",
        r"context window (?:of|limit).*exceeded",
        r"request too large for model",
        r"input is too long",
        r"exceeds the available context size",
        # Anthropic, when the prompt fits but prompt plus max_tokens does not.
        r"input length and `?max_tokens`? exceed context limit",
    )
)
#: A 400 or 413 with no body: what some gateways answer for an oversized request (opencode).
_NO_BODY: Final = re.compile(r"\b(400|413) status code \(no body\)", re.IGNORECASE)
#: The message recorded for a context overflow (opencode's wording).
OVERFLOW_MESSAGE: Final = "Input exceeds context window of this model"
#: Codes that retrying cannot fix, with the message recorded for each.
FATAL_CODES: Final = {
    "insufficient_quota": "Quota exceeded: check the plan and billing of this API key.",
    "usage_not_included": "This model is not included in the plan of this API key.",
    "invalid_prompt": "The provider rejected the prompt as invalid.",
}
#: Statuses worth retrying: rate limits and server-side failures.
RETRYABLE_STATUSES: Final = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
_RETRYABLE_CODES: Final = frozenset({"server_error", "rate_limit_exceeded", "overloaded_error"})


def is_context_overflow(message: str, code: str | None = None, status: int | None = None) -> bool:
    """Whether a provider error says the prompt did not fit the model's window. A 429 never
    does: "too many tokens" there means a rate limit (Bedrock's ThrottlingException)."""
    if status == 429:
        return False
    if code in ("context_length_exceeded", "exceed_context_size_error"):
        return True
    return bool(_NO_BODY.search(message)) or any(p.search(message) for p in OVERFLOW_PATTERNS)


def classify_error(
    message: str, *, status: int | None = None, code: str | None = None
) -> MessageError:
    """The error to record for a failed model call.

    Context overflows become ``ContextOverflowError`` (never retried: compact instead);
    codes in ``FATAL_CODES`` a non-retryable ``APIError`` with a fixed message; rate limits
    and server errors a retryable ``APIError``; 401/403 an ``AuthError``.
    """
    if is_context_overflow(message, code, status):
        return MessageError(name="ContextOverflowError", message=OVERFLOW_MESSAGE)
    if code in FATAL_CODES:
        return MessageError(name="APIError", message=FATAL_CODES[code], retryable=False)
    if status in (401, 403):
        return MessageError(name="AuthError", message=message)
    retryable = status in RETRYABLE_STATUSES or code in _RETRYABLE_CODES
    return MessageError(name="APIError", message=message, retryable=retryable)


ErrorAction = Literal["compact", "incomplete", "stop", "retry", "fail"]
ErrorKind = Literal[
    "PreflightCompactionError",
    "IncompleteResponseError",
    "AbortedError",
    "ContextOverflowError",
    "APIError",
    "AuthError",
    "OutputLengthError",
    "StructuredOutputError",
    "UnknownError",
]


class ErrorDecision(msgspec.Struct, frozen=True):
    """Which rule of the error policy applied, what the turn does, and whether the assistant
    message records the error (a preflight stop is not an error: nothing was sent)."""

    rule: str
    action: ErrorAction
    record_error: bool = True


def decide_error(
    name: ErrorKind, *, retryable: bool = False, tool_ran: bool = False
) -> ErrorDecision:
    """Kilo Code's error policy, rules in order: a preflight overflow compacts, whatever ran
    before it, and records no error (the request was never sent); an incomplete response is
    reported as such; an abort stops; a context overflow compacts (and replays the turn); a
    retryable error is retried, but only if no tool ran in the failed step (a retry would
    run its side effects again); anything else fails the turn."""
    if name == "PreflightCompactionError":
        return ErrorDecision("preflight", "compact", record_error=False)
    if name == "IncompleteResponseError":
        return ErrorDecision("incomplete-response", "incomplete")
    if name == "AbortedError":
        return ErrorDecision("abort", "stop")
    if name == "ContextOverflowError":
        return ErrorDecision("context-overflow", "compact")
    if retryable and not tool_ran:
        return ErrorDecision("retryable", "retry")
    return ErrorDecision("fatal", "fail")
