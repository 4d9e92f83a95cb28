"""The HTTP client that posts encoded requests to a provider, with retries.

``ProviderClient.send`` encodes a ``Request`` with its wire format, posts the exact bytes and
returns the parsed answer with its usage. Error answers become the wire format's typed
``ProviderError``: retryable ones (rate limits, server errors, overloads) and transport
failures are tried again after a full-jitter exponential backoff, or after the server's
``Retry-After``; context overflows and authentication errors are raised at once. Sleeps use
``trio.sleep``, so a trio ``MockClock`` drives them in tests.

Each attempt logs one event (provider, status, attempt, delay). Neither the logs nor the
exceptions carry the API key, the request headers or the body.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from types import TracebackType
from typing import Any, Final, Self

import httpx
import msgspec
import structlog
import trio

from contextledger.events._parts import MessageError, Usage
from contextledger.logging import REDACTED, mask_secrets
from contextledger.providers._base import EncodedRequest, WireFormat
from contextledger.providers._errors import ProviderError, ProviderTransportError
from contextledger.vocabulary._requests import Request

#: Connect quickly or fail; a long non-streamed answer may take minutes to arrive.
DEFAULT_TIMEOUT: Final = httpx.Timeout(connect=10.0, read=600.0, write=60.0, pool=10.0)

_log = structlog.get_logger(__name__)


class RetryPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """How often and how long to wait before sending a failed request again.

    ``max_attempts`` counts every send, the first included. After failed attempt ``n``
    (from 1) the wait is drawn from ``uniform(0, min(max_delay, base_delay *
    multiplier ** (n - 1)))`` (full jitter). A server's ``Retry-After`` replaces the draw,
    capped at ``max_delay``, so a server cannot stall the caller beyond what it allowed;
    raise ``max_delay`` to honour longer waits.
    """

    max_attempts: int = 4
    base_delay: float = 0.5
    max_delay: float = 30.0
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if not 0 <= self.base_delay <= self.max_delay:
            raise ValueError("delays must satisfy 0 <= base_delay <= max_delay")
        if self.multiplier < 1:
            raise ValueError(f"multiplier must be at least 1, got {self.multiplier}")

    def delay(self, attempt: int, rng: random.Random, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt ``attempt`` (counted from 1)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay)
        exponent = min(attempt - 1, 64)
        return rng.uniform(0.0, min(self.max_delay, self.base_delay * self.multiplier**exponent))


class ProviderResponse(msgspec.Struct, frozen=True, kw_only=True):
    """A successful call: the parsed JSON body, its usage, what was sent, the HTTP status and
    how many sends it took."""

    body: dict[str, Any]
    usage: Usage
    encoded: EncodedRequest
    status: int
    attempts: int


def retry_after(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """Seconds the server asked to wait before retrying, or None when it did not say (or
    said it unreadably). ``retry-after-ms`` (sent by OpenAI and Anthropic) wins over
    ``Retry-After``, which is read as seconds or as an HTTP date (relative to ``now``)."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)


class ProviderClient:
    """Sends requests of one wire format to one provider endpoint.

    ``base_url`` is joined with ``wire.path(request)`` by plain concatenation (the wire
    format's path starts with ``/``). ``timeout`` applies to every request, also on an
    injected ``client``. A client passed in is shared: ``aclose`` leaves it open; one created
    here is closed by ``aclose`` or at the end of ``async with``. ``rng`` draws the jitter.
    """

    def __init__(
        self,
        wire: WireFormat,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        client: httpx.AsyncClient | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.wire = wire
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self._api_key = api_key
        self._owns_client = client is None
        self._client = client if client is not None else httpx.AsyncClient()
        self._rng = rng or random.Random()

    def __repr__(self) -> str:
        return f"ProviderClient({self.wire.name!r}, {self.base_url!r})"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._owns_client:
            await self._client.aclose()

    async def send(
        self, request: Request, encoded: EncodedRequest | None = None
    ) -> ProviderResponse:
        """Post ``request`` and return the provider's answer, retrying as the policy allows.
        ``encoded`` is its encoding when the caller has it already (``BuiltRequest.encoded``);
        the bytes are then posted as they are.

        Raises the wire format's ``ProviderError`` for an error answer (the last one when
        attempts run out), ``ProviderTransportError`` when no answer came, and a
        ``ProviderError`` when a successful answer is not a JSON object. Error texts are
        masked like log lines (``mask_secrets``, and the key itself), in case a provider
        echoes the key. Raises ``ValueError`` for a streamed request: this client reads whole
        answers only.
        """
        if request.stream:
            raise ValueError("ProviderClient.send reads whole answers: send stream=False")
        encoded = encoded or self.wire.encode(request)
        url = self.base_url + self.wire.path(request)
        attempt = 0
        while True:
            attempt += 1
            status: int | None = None
            wait: float | None = None
            cause: httpx.TransportError | None = None
            try:
                response = await self._client.post(
                    url,
                    content=encoded.body,
                    headers=self.wire.headers(self._api_key),
                    timeout=self.timeout,
                )
            except httpx.TransportError as exc:
                cause = exc
                error: ProviderError = self._transport_error(exc, url)
            else:
                status = response.status_code
                if not response.is_success:
                    error = self.wire.error(status, self._masked(response.content))
                    wait = retry_after(response.headers)
                elif (body := _json_object(response.content)) is None:
                    message = f"{status} response body is not a JSON object"
                    error = ProviderError(
                        self.wire.name,
                        MessageError(name="APIError", message=message),
                        status=status,
                    )
                else:
                    _log.debug(
                        "provider call succeeded",
                        provider=self.wire.name,
                        status=status,
                        attempt=attempt,
                        delay=None,
                    )
                    return ProviderResponse(
                        body=body,
                        usage=self.wire.decode_usage(body),
                        encoded=encoded,
                        status=status,
                        attempts=attempt,
                    )
            retrying = error.retryable and attempt < self.retry.max_attempts
            delay = self.retry.delay(attempt, self._rng, wait) if retrying else None
            _log.warning(
                "provider call failed, retrying" if retrying else "provider call failed",
                provider=self.wire.name,
                status=status,
                attempt=attempt,
                delay=delay,
                error=type(cause).__name__ if cause else error.error.name,
            )
            if delay is None:
                raise error from cause
            await trio.sleep(delay)

    def _masked(self, content: bytes) -> bytes:
        """An error body with anything that looks like a key masked, and the key itself."""
        return self._without_key(content.decode("utf-8", "replace")).encode()

    def _without_key(self, text: str) -> str:
        """``text`` masked (``mask_secrets``), and the API key itself wherever it stands as a
        whole token (not inside a longer word, so a short test key such as ``"k"`` does not
        mangle every word that holds its letters)."""
        text = mask_secrets(text)
        if not self._api_key:
            return text
        token = re.compile(rf"(?<![\w.-]){re.escape(self._api_key)}(?![\w.-])")
        return token.sub(REDACTED, text)

    def _transport_error(self, exc: httpx.TransportError, url: str) -> ProviderTransportError:
        """The error for a request that got no answer. Its message names the URL without
        userinfo or query and the exception type; a bad URL scheme is not retryable."""
        reason = self._without_key(str(exc))
        where = httpx.URL(url).copy_with(userinfo=b"", query=None, fragment=None)
        message = f"{type(exc).__name__} on POST {where}" + (f": {reason}" if reason else "")
        retryable = not isinstance(exc, httpx.UnsupportedProtocol)
        error = MessageError(name="APIError", message=message, retryable=retryable)
        return ProviderTransportError(self.wire.name, error)


def _json_object(content: bytes) -> dict[str, Any] | None:
    try:
        body = msgspec.json.decode(content)
    except msgspec.DecodeError:
        return None
    return body if isinstance(body, dict) else None
