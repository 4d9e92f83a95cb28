"""Faults the loopback provider answers with on demand, instead of handling a request.

A fault is taken when a request arrives, before the request is authenticated or validated
(as a real API's edge rejects a request before the model sees it), and the request never
reaches the script or the prompt cache. Each API answers in its own shape.
"""

from __future__ import annotations

from typing import Literal

import msgspec

FaultKind = Literal["rate_limit", "server_error", "overloaded", "dropped", "hang", "overflow"]


class Fault(msgspec.Struct, frozen=True, kw_only=True):
    """One faulty answer. Build it with the class methods:

    - ``rate_limited(retry_after=None, retry_after_ms=None)``: 429, with the ``retry-after``
      (seconds) and ``retry-after-ms`` headers given;
    - ``server_error()``: 500;
    - ``overloaded()``: 529 ``overloaded_error`` on Anthropic, 503 on OpenAI (its overload
      answer);
    - ``dropped()``: the connection is closed after the request is read, with no answer;
    - ``hang(seconds)``: no answer for ``seconds``, then the connection is closed (longer
      than the client's read timeout, it provokes a timeout);
    - ``overflow()``: the API's context-overflow error (Anthropic's 400 "prompt is too
      long", OpenAI's 400 ``context_length_exceeded``), whatever the request's size.
    """

    kind: FaultKind
    retry_after: float | None = None
    retry_after_ms: int | None = None
    seconds: float = 0.0

    @classmethod
    def rate_limited(
        cls, *, retry_after: float | None = None, retry_after_ms: int | None = None
    ) -> Fault:
        """A 429, telling the client how long to wait if given."""
        return cls(kind="rate_limit", retry_after=retry_after, retry_after_ms=retry_after_ms)

    @classmethod
    def server_error(cls) -> Fault:
        """A 500."""
        return cls(kind="server_error")

    @classmethod
    def overloaded(cls) -> Fault:
        """A 529 (Anthropic) or 503 (OpenAI)."""
        return cls(kind="overloaded")

    @classmethod
    def dropped(cls) -> Fault:
        """The connection closed without an answer."""
        return cls(kind="dropped")

    @classmethod
    def hang(cls, seconds: float) -> Fault:
        """No answer for ``seconds``, then the connection closed."""
        if seconds < 0:
            raise ValueError("a hang lasts zero seconds or more")
        return cls(kind="hang", seconds=seconds)

    @classmethod
    def overflow(cls) -> Fault:
        """The API's context-overflow error."""
        return cls(kind="overflow")

    def headers(self) -> dict[str, str]:
        """The headers of this fault's answer that say when to retry."""
        headers: dict[str, str] = {}
        if self.retry_after is not None:
            headers["retry-after"] = _seconds(self.retry_after)
        if self.retry_after_ms is not None:
            headers["retry-after-ms"] = str(self.retry_after_ms)
        return headers


def _seconds(value: float) -> str:
    """Whole seconds as an integer (what the APIs send), anything else as a decimal."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))
