"""Typed errors of provider calls.

Every failed call becomes a ``ProviderError`` that says whether a retry can help. A prompt
that does not fit the model's window is a ``ContextOverflowError``: it is never retried, the
runtime compacts instead. The messages never contain request headers, so API keys cannot
leak through them.
"""

from __future__ import annotations

from contextledger.events._parts import MessageError
from contextledger.policy._errors import classify_error


class ProviderError(Exception):
    """A provider call failed. ``error`` is what the log records for it."""

    def __init__(
        self,
        provider: str,
        error: MessageError,
        *,
        status: int | None = None,
        detail: str = "",
    ) -> None:
        super().__init__(f"{provider}: {error.name}: {detail or error.message}")
        self.provider = provider
        self.error = error
        self.status = status
        self.detail = detail

    @property
    def retryable(self) -> bool:
        """Whether the same request may succeed if sent again."""
        return self.error.retryable


class ContextOverflowError(ProviderError):
    """The prompt exceeded the model's context window; compact, do not retry."""


class ProviderAuthError(ProviderError):
    """The API key was missing, wrong or not allowed to use this model."""


class ProviderTransportError(ProviderError):
    """The request never got an HTTP answer: connection failure or timeout."""


def provider_error(
    provider: str, message: str, *, status: int | None = None, code: str | None = None
) -> ProviderError:
    """The typed exception for a provider's error answer (``classify_error`` decides)."""
    error = classify_error(message, status=status, code=code)
    kind: type[ProviderError] = ProviderError
    if error.name == "ContextOverflowError":
        kind = ContextOverflowError
    elif error.name == "AuthError":
        kind = ProviderAuthError
    return kind(provider, error, status=status, detail=message)
