"""Specification of ``contextledger.providers._http``: the client posts the encoded bytes over
a real socket, decodes usage, retries what a retry can fix (after the backoff or the server's
``Retry-After``), raises what it cannot at once, and never logs or raises the API key."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from io import StringIO
from typing import Any

import httpx
import msgspec
import pytest
import structlog
import trio
from structlog.testing import capture_logs

from contextledger.logging import configure_logging, redact_secrets
from contextledger.providers._anthropic import AnthropicMessages
from contextledger.providers._errors import (
    ContextOverflowError,
    ProviderAuthError,
    ProviderError,
    ProviderTransportError,
)
from contextledger.providers._http import ProviderClient, RetryPolicy, retry_after
from contextledger.providers._registry import WIRE_FORMATS
from contextledger.vocabulary._requests import Request
from tests.providers.fixtures import golden_request
from tests.providers.loopback import Loopback, Reply, closed_port
from tests.providers.responses import ANSWERS, ProviderAnswers, body

FORMATS = sorted(WIRE_FORMATS)
ALL_FORMATS = {
    "anthropic",
    "openai-chat",
    "openai-responses",
    "openrouter",
    "openai-compatible",
    "bedrock",
    "gemini",
}
KEY = "sk-ant-test-SECRET123"
FAST = httpx.Timeout(5.0, read=1.0)
SERVER_ERROR = Reply(
    500, body({"error": {"message": "Internal server error", "type": "api_error"}})
)

by_format = pytest.mark.parametrize("name", FORMATS)


@pytest.fixture
async def server(nursery: trio.Nursery) -> Loopback:
    return await Loopback.start(nursery)


@pytest.fixture(autouse=True)
def default_logging() -> Iterator[None]:
    """structlog's defaults during each test (other tests may have configured it), restored
    afterwards."""
    saved = structlog.get_config()
    structlog.reset_defaults()
    yield
    structlog.configure(**saved)


def setup(
    name: str, url: str, *, attempts: int = 4, timeout: httpx.Timeout = FAST
) -> tuple[ProviderClient, Request, ProviderAnswers]:
    answers = ANSWERS[name]
    client = ProviderClient(
        WIRE_FORMATS[name](),
        url,
        api_key=KEY,
        timeout=timeout,
        retry=RetryPolicy(max_attempts=attempts),
        rng=random.Random(7),
    )
    return client, golden_request(answers.model), answers


def success(answers: ProviderAnswers) -> Reply:
    return Reply(200, body(answers.success))


# --- the response table -----------------------------------------------------------------------


def test_every_registered_format_has_answers() -> None:
    assert set(ANSWERS) == ALL_FORMATS
    assert set(WIRE_FORMATS) <= set(ANSWERS), "add the new format's answers to responses.py"


@pytest.mark.parametrize("name", sorted(ALL_FORMATS))
def test_the_answers_are_what_they_claim(name: str) -> None:
    answers = ANSWERS[name]
    assert answers.usage.cache_read > 0
    assert (answers.overflow.status, answers.rate_limit.status) == (400, 429)
    assert answers.auth.status in (401, 403)


# --- round trips over the socket ----------------------------------------------------------------


@by_format
async def test_a_success_posts_the_encoded_bytes_and_decodes_the_usage(
    name: str, server: Loopback
) -> None:
    client, request, answers = setup(name, server.url)
    server.script(success(answers))
    async with client:
        response = await client.send(request)
    wire = WIRE_FORMATS[name]()
    [seen] = server.received
    assert seen.method == "POST"
    assert seen.target == wire.path(request)
    assert seen.body == response.encoded.body == wire.encode(request).body
    for header, value in wire.headers(KEY).items():
        assert seen.headers[header.lower()] == value
    assert any(KEY in value for value in seen.headers.values()), "no header carries the key"
    assert response.usage == answers.usage
    assert response.body == answers.success
    assert (response.status, response.attempts) == (200, 1)


@by_format
async def test_a_rate_limit_is_retried(name: str, server: Loopback, autojump_clock: Any) -> None:
    client, request, answers = setup(name, server.url)
    server.script(answers.rate_limit, success(answers))
    with capture_logs() as logs:
        async with client:
            response = await client.send(request)
    assert response.attempts == 2
    assert response.usage == answers.usage
    first, second = server.received
    assert first.body == second.body == response.encoded.body
    assert [(e["event"], e["status"], e["attempt"]) for e in logs] == [
        ("provider call failed, retrying", 429, 1),
        ("provider call succeeded", 200, 2),
    ]
    wait = retry_after(httpx.Headers(answers.rate_limit.headers))
    assert logs[0]["delay"] == RetryPolicy().delay(1, random.Random(7), wait)
    assert {k for e in logs for k in e} == {
        "event",
        "log_level",
        "provider",
        "status",
        "attempt",
        "delay",
        "error",
    }


@by_format
async def test_server_errors_exhaust_the_attempts(
    name: str, server: Loopback, autojump_clock: Any
) -> None:
    client, request, _ = setup(name, server.url, attempts=3)
    server.script(SERVER_ERROR, SERVER_ERROR, Reply(503, b"upstream connect error"))
    start = trio.current_time()
    async with client:
        with pytest.raises(ProviderError) as raised:
            await client.send(request)
    assert len(server.received) == 3
    assert raised.value.status == 503
    assert raised.value.retryable
    assert trio.current_time() - start <= client.retry.base_delay * (1 + 2)


@by_format
async def test_a_context_overflow_is_raised_after_one_request(
    name: str, server: Loopback, autojump_clock: Any
) -> None:
    client, request, answers = setup(name, server.url)
    server.script(answers.overflow, success(answers))
    async with client:
        with pytest.raises(ContextOverflowError) as raised:
            await client.send(request)
    assert len(server.received) == 1
    assert not raised.value.retryable
    assert raised.value.status == 400


@by_format
async def test_an_auth_error_is_raised_after_one_request(
    name: str, server: Loopback, autojump_clock: Any
) -> None:
    client, request, answers = setup(name, server.url)
    server.script(answers.auth, success(answers))
    async with client:
        with pytest.raises(ProviderAuthError):
            await client.send(request)
    assert len(server.received) == 1


@by_format
async def test_retry_after_seconds_replace_the_backoff(
    name: str, server: Loopback, autojump_clock: Any
) -> None:
    client, request, answers = setup(name, server.url)
    limited = Reply(429, answers.rate_limit.body, {"retry-after": "7"})
    server.script(limited, success(answers))
    start = trio.current_time()
    async with client:
        response = await client.send(request)
    assert response.attempts == 2
    assert 7 <= trio.current_time() - start < 7.5


@by_format
async def test_a_retry_after_date_is_capped_at_the_maximum_delay(
    name: str, server: Loopback, autojump_clock: Any
) -> None:
    client, request, answers = setup(name, server.url)
    later = format_datetime(datetime.now(UTC) + timedelta(hours=1), usegmt=True)
    server.script(Reply(503, b"", {"retry-after": later}), success(answers))
    start = trio.current_time()
    async with client:
        await client.send(request)
    assert client.retry.max_delay <= trio.current_time() - start < client.retry.max_delay + 0.5


@by_format
async def test_a_read_timeout_is_retried_then_raised_as_a_transport_error(
    name: str, server: Loopback, autojump_clock: Any
) -> None:
    client, request, answers = setup(name, server.url, attempts=2)
    server.script(Reply(200, body(answers.success), delay=10), Reply(200, b"{}", delay=10))
    start = trio.current_time()
    async with client:
        with pytest.raises(ProviderTransportError) as raised:
            await client.send(request)
    assert len(server.received) == 2
    assert "ReadTimeout" in str(raised.value)
    assert server.url + client.wire.path(request).partition("?")[0] in str(raised.value)
    assert raised.value.retryable
    assert 2 <= trio.current_time() - start <= 2 + client.retry.base_delay


@by_format
async def test_a_timeout_then_an_answer_succeeds(
    name: str, server: Loopback, autojump_clock: Any
) -> None:
    client, request, answers = setup(name, server.url)
    server.script(Reply(200, b"{}", delay=10), success(answers))
    async with client:
        response = await client.send(request)
    assert response.attempts == 2
    assert response.usage == answers.usage


@by_format
async def test_a_refused_connection_is_retried_then_raised(name: str, autojump_clock: Any) -> None:
    client, request, _ = setup(name, f"http://127.0.0.1:{closed_port()}", attempts=3)
    with capture_logs() as logs:
        async with client:
            with pytest.raises(ProviderTransportError) as raised:
                await client.send(request)
    assert "ConnectError" in str(raised.value)
    assert [e["attempt"] for e in logs] == [1, 2, 3]
    assert [(e["status"], e["error"]) for e in logs] == [(None, "ConnectError")] * 3
    assert isinstance(raised.value.__cause__, httpx.ConnectError)


async def test_an_unsupported_url_scheme_is_not_retried() -> None:
    client, request, _ = setup("anthropic", "ftp://127.0.0.1")
    with capture_logs() as logs:
        async with client:
            with pytest.raises(ProviderTransportError, match="UnsupportedProtocol") as raised:
                await client.send(request)
    assert not raised.value.retryable
    assert len(logs) == 1


@by_format
async def test_a_successful_answer_that_is_not_json_is_an_error(
    name: str, server: Loopback
) -> None:
    client, request, _ = setup(name, server.url)
    server.script(
        Reply(200, b"<html><body>Gateway login</body></html>", {"content-type": "text/html"})
    )
    async with client:
        with pytest.raises(ProviderError, match="not a JSON object") as raised:
            await client.send(request)
    assert not raised.value.retryable
    assert len(server.received) == 1


# --- secrets ------------------------------------------------------------------------------------


@by_format
async def test_the_key_is_in_no_log_event_and_no_exception(
    name: str, server: Loopback, autojump_clock: Any
) -> None:
    client, request, answers = setup(name, server.url)
    server.script(answers.rate_limit, answers.auth)
    with capture_logs() as logs:
        async with client:
            with pytest.raises(ProviderAuthError) as raised:
                await client.send(request)
    assert len(logs) == 2
    for text in (repr(logs), str(raised.value), repr(raised.value), raised.value.error.message):
        assert KEY not in text
        assert "SECRET123" not in text
    assert b"careful software engineer" in server.received[0].body
    assert "careful software engineer" not in repr(logs)


@by_format
async def test_the_key_is_in_no_rendered_log_line(
    name: str, server: Loopback, autojump_clock: Any
) -> None:
    stream = StringIO()
    configure_logging("debug", json=True, stream=stream)
    client, request, answers = setup(name, server.url, attempts=2)
    server.script(answers.rate_limit, answers.auth)
    async with client:
        with pytest.raises(ProviderAuthError) as auth:
            await client.send(request)
    refused, _, _ = setup(name, f"http://127.0.0.1:{closed_port()}", attempts=2)
    async with refused:
        with pytest.raises(ProviderTransportError) as transport:
            await refused.send(request)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert len(lines) == 4
    assert all(line["provider"] == name for line in lines)
    for text in (stream.getvalue(), str(auth.value), str(transport.value)):
        assert "SECRET123" not in text


def test_redact_secrets_masks_secret_keys_at_any_depth_and_keys_in_text() -> None:
    event = {
        "event": "calling with Authorization: Bearer abc.def-ghi_jkl and key sk-ant-api03-Xy9_Zz",
        "api_key": "sk-proj-abcdefgh12345678",
        "X-Goog-Api-Key": "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUv",
        "headers": {"authorization": "Bearer t0ken-value", "content-type": "application/json"},
        "calls": [{"access_token": "ya29.a0AfH6SM", "max_tokens": 4096}],
        "config": ({"password": "hunter2", "host": "db"},),
        "note": "google key AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUv, task-12345678 stays",
        "token": None,
        "input_tokens": 12,
        "prose": "the bearer of bad news",
    }
    headers = event["headers"]
    redacted = redact_secrets(None, "info", dict(event))
    assert redacted == {
        "event": "calling with Authorization: Bearer [redacted] and key [redacted]",
        "api_key": "[redacted]",
        "X-Goog-Api-Key": "[redacted]",
        "headers": {"authorization": "[redacted]", "content-type": "application/json"},
        "calls": [{"access_token": "[redacted]", "max_tokens": 4096}],
        "config": ({"password": "[redacted]", "host": "db"},),
        "note": "google key [redacted], task-12345678 stays",
        "token": None,
        "input_tokens": 12,
        "prose": "the bearer of bad news",
    }
    assert event["headers"] is headers
    assert headers == {"authorization": "Bearer t0ken-value", "content-type": "application/json"}


def test_configured_logging_redacts() -> None:
    stream = StringIO()
    configure_logging("info", json=True, stream=stream)
    structlog.get_logger("test").info("sent", x_api_key=KEY, detail=f"key={KEY}")
    line = json.loads(stream.getvalue())
    assert line["x_api_key"] == "[redacted]"
    assert line["detail"] == "key=[redacted]"


# --- policy and lifecycle -----------------------------------------------------------------------


def test_the_backoff_is_full_jitter_under_a_growing_cap() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=5.0, multiplier=2.0)
    rng = random.Random(3)
    for attempt, cap in ((1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (40, 5.0)):
        draws = [policy.delay(attempt, rng) for _ in range(200)]
        assert all(0 <= d <= cap for d in draws)
        assert max(draws) > cap * 0.9
    assert policy.delay(1, rng, retry_after=3.0) == 3.0
    assert policy.delay(1, rng, retry_after=60.0) == 5.0
    assert policy.delay(1000, rng) <= 5.0


def test_the_same_seed_gives_the_same_delays() -> None:
    policy = RetryPolicy()
    first = [policy.delay(n, random.Random(11)) for n in (1, 2, 3)]
    assert first == [policy.delay(n, random.Random(11)) for n in (1, 2, 3)]


@pytest.mark.parametrize(
    "fields",
    [
        {"max_attempts": 0},
        {"base_delay": -1.0},
        {"base_delay": 9.0, "max_delay": 1.0},
        {"multiplier": 0.5},
    ],
)
def test_a_policy_rejects_nonsense(fields: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**fields)


def test_retry_after_reads_milliseconds_seconds_and_dates() -> None:
    now = datetime(2026, 11, 30, 10, 0, 0, tzinfo=UTC)
    assert retry_after(httpx.Headers({"Retry-After": "12"}), now) == 12.0
    assert retry_after(httpx.Headers({"retry-after-ms": "1500", "retry-after": "9"}), now) == 1.5
    assert retry_after(httpx.Headers({"Retry-After": "Mon, 30 Nov 2026 10:00:30 GMT"}), now) == 30
    assert retry_after(httpx.Headers({"Retry-After": "Mon, 30 Nov 2026 09:00:00 GMT"}), now) == 0
    assert retry_after(httpx.Headers({"Retry-After": "soon"}), now) is None
    assert retry_after(httpx.Headers({}), now) is None


async def test_an_injected_client_is_shared_and_gets_the_timeout() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=ANSWERS["anthropic"].success)

    timeout = httpx.Timeout(3.0, read=42.0)
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as shared:
        name = "anthropic"
        client = ProviderClient(
            WIRE_FORMATS[name](), "https://api.example.test/", client=shared, timeout=timeout
        )
        async with client:
            response = await client.send(golden_request(ANSWERS[name].model))
        assert not shared.is_closed
    assert str(seen[0].url) == "https://api.example.test/v1/messages"
    assert seen[0].extensions["timeout"]["read"] == 42.0
    assert response.usage == ANSWERS[name].usage


class _KeyInQuery(AnthropicMessages):
    """A format that authenticates with a query parameter, as Gemini's ``?key=`` does."""

    def path(self, request: Request) -> str:
        return f"/v1/messages?key={KEY}"


async def test_a_transport_error_names_the_url_without_its_query_or_userinfo(
    server: Loopback, autojump_clock: Any
) -> None:
    base = server.url.replace("http://", "http://user:pw@") + "/proxy"
    client = ProviderClient(_KeyInQuery(), base, api_key=KEY, timeout=FAST, rng=random.Random(1))
    server.script(*[Reply(200, b"{}", delay=10)] * 4)
    async with client:
        with pytest.raises(ProviderTransportError) as raised:
            await client.send(golden_request(ANSWERS["anthropic"].model))
    assert server.received[0].target == f"/proxy/v1/messages?key={KEY}"
    assert f"ReadTimeout on POST {server.url}/proxy/v1/messages" in str(raised.value)
    assert "key=" not in str(raised.value)
    assert "user:pw" not in str(raised.value)


async def test_an_own_client_is_closed_on_exit(server: Loopback) -> None:
    client, request, answers = setup("anthropic", server.url)
    server.script(success(answers))
    async with client:
        await client.send(request)
    with pytest.raises(RuntimeError, match="closed"):
        await client.send(request)


def test_a_traceback_in_a_log_line_is_redacted() -> None:
    stream = StringIO()
    configure_logging("warning", json=True, stream=stream)
    try:
        raise RuntimeError("upstream said: Bearer sk-ant-test-SECRET123 is not valid")
    except RuntimeError:
        structlog.get_logger("test").exception("call failed")
    assert "SECRET123" not in stream.getvalue()
    assert "RuntimeError" in stream.getvalue()


async def test_a_key_echoed_in_an_error_body_is_masked(server: Loopback) -> None:
    client, request, _ = setup("anthropic", server.url)
    echoed = {
        "type": "error",
        "error": {"type": "authentication_error", "message": f"bad key {KEY}"},
    }
    server.script(Reply(401, body(echoed)))
    async with client:
        with pytest.raises(ProviderAuthError) as raised:
            await client.send(request)
    assert KEY not in str(raised.value) and KEY not in raised.value.detail


async def test_a_short_key_is_masked_as_a_whole_token_only(server: Loopback) -> None:
    """A test key such as "k" is masked where it stands alone, not in every word that has
    its letter."""
    request = golden_request(ANSWERS["anthropic"].model)
    client = ProviderClient(WIRE_FORMATS["anthropic"](), server.url, api_key="k", timeout=FAST)
    message = "unknown key k for the bucket at https://k.example/k"
    echoed = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    server.script(Reply(400, body(echoed)))
    async with client:
        with pytest.raises(ProviderError) as raised:
            await client.send(request)
    assert raised.value.detail.endswith(
        "unknown key [redacted] for the bucket at https://k.example/[redacted]"
    )


async def test_given_bytes_are_posted_as_they_are(server: Loopback) -> None:
    client, request, answers = setup("anthropic", server.url)
    encoded = client.wire.encode(request)
    server.script(success(answers))
    async with client:
        response = await client.send(request, encoded)
    assert response.encoded is encoded
    assert server.received[0].body == encoded.body


async def test_a_streamed_request_is_refused_before_anything_is_sent(server: Loopback) -> None:
    client, request, _ = setup("anthropic", server.url)
    async with client:
        with pytest.raises(ValueError, match="stream"):
            await client.send(msgspec.structs.replace(request, stream=True))
    assert server.received == []
