"""Faults on demand, and what our ``ProviderClient`` makes of them: rate limits with and
without ``retry-after``, server errors, overloads, bursts, dropped connections, hangs and
forced overflows, over real sockets."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import trio

from contextledger.events._parts import ModelRef
from contextledger.providers import (
    ContextOverflowError,
    ProviderClient,
    ProviderError,
    ProviderTransportError,
    RetryPolicy,
    wire_format,
)
from contextledger.testing.loopback import Fault, LoopbackCore, LoopbackProvider, tool_loop
from contextledger.vocabulary._messages import ModelMessage, ModelText
from contextledger.vocabulary._requests import Request
from tests.testing.loopback.bodies import GPT, MODELS, SONNET, anthropic, post

WIRES = ["anthropic", "openai-chat"]
#: Each API's overload status: Anthropic's 529, OpenAI's 503.
OVERLOADED = {"anthropic": 529, "openai-chat": 503}


def _request(wire: str, session_id: str = "ses_faults") -> Request:
    model = SONNET if wire == "anthropic" else GPT
    return Request(
        model=ModelRef(provider_id="test", model_id=model),
        session_id=session_id,
        system=("Be brief.",),
        messages=(ModelMessage(role="user", content=(ModelText(text="go"),), source_id="m1"),),
        max_output_tokens=256,
    )


def _client(
    provider: LoopbackProvider,
    wire: str,
    *,
    attempts: int = 4,
    max_delay: float = 1.0,
    timeout: httpx.Timeout | None = None,
) -> ProviderClient:
    """A client whose own backoff waits nothing (``base_delay=0``), so any wait is the
    server's ``retry-after``."""
    retry = RetryPolicy(max_attempts=attempts, base_delay=0.0, max_delay=max_delay)
    if timeout is None:
        return ProviderClient(wire_format(wire), provider.url, api_key="test-key", retry=retry)
    return ProviderClient(
        wire_format(wire), provider.url, api_key="test-key", retry=retry, timeout=timeout
    )


@pytest.fixture
def provider() -> Iterator[LoopbackProvider]:
    with LoopbackProvider(tool_loop(3), models=MODELS) as server:
        yield server


def _statuses(provider: LoopbackProvider) -> list[int | None]:
    return [e.status for e in provider.received]


@pytest.mark.parametrize("wire", WIRES)
async def test_a_rate_limit_with_retry_after_ms_is_waited_out(
    provider: LoopbackProvider, wire: str
) -> None:
    provider.inject(Fault.rate_limited(retry_after_ms=150))
    async with _client(provider, wire) as client:
        response = await client.send(_request(wire))
    first, second = provider.received
    assert (response.status, response.attempts) == (200, 2)
    assert (first.status, first.fault, second.status) == (429, "rate_limit", 200)
    assert second.at - first.at >= 0.15


async def test_retry_after_in_seconds_is_honoured_up_to_the_policy_cap(
    provider: LoopbackProvider,
) -> None:
    provider.inject(Fault.rate_limited(retry_after=0.2))
    async with _client(provider, "anthropic", max_delay=1.0) as client:
        await client.send(_request("anthropic"))
    provider.inject(Fault.rate_limited(retry_after=30))
    async with _client(provider, "anthropic", max_delay=0.3) as client:
        started = trio.current_time()
        response = await client.send(_request("anthropic"))
        elapsed = trio.current_time() - started
    at = [e.at for e in provider.received]
    assert _statuses(provider) == [429, 200, 429, 200]
    assert at[1] - at[0] >= 0.2
    assert at[3] - at[2] >= 0.3
    assert elapsed < 5
    assert response.attempts == 2


@pytest.mark.parametrize("wire", WIRES)
async def test_a_rate_limit_without_retry_after_is_retried_after_the_backoff(
    provider: LoopbackProvider, wire: str
) -> None:
    provider.inject(Fault.rate_limited())
    async with _client(provider, wire) as client:
        response = await client.send(_request(wire))
    assert response.attempts == 2
    assert _statuses(provider) == [429, 200]
    error = provider.received[0].response["error"]
    assert error["type"] == ("rate_limit_error" if wire == "anthropic" else "tokens")


@pytest.mark.parametrize("wire", WIRES)
async def test_a_burst_of_overloads_is_retried_until_it_passes(
    provider: LoopbackProvider, wire: str
) -> None:
    provider.inject(Fault.overloaded(), times=3)
    async with _client(provider, wire, attempts=4) as client:
        response = await client.send(_request(wire))
    assert response.attempts == 4
    assert _statuses(provider) == [OVERLOADED[wire]] * 3 + [200]


@pytest.mark.parametrize("wire", WIRES)
async def test_a_burst_longer_than_the_attempts_is_raised(
    provider: LoopbackProvider, wire: str
) -> None:
    provider.inject(Fault.overloaded(), times=4)
    async with _client(provider, wire, attempts=4) as client:
        with pytest.raises(ProviderError) as raised:
            await client.send(_request(wire))
    assert (raised.value.status, raised.value.retryable) == (OVERLOADED[wire], True)
    assert _statuses(provider) == [OVERLOADED[wire]] * 4
    assert provider.queued_faults == 0


@pytest.mark.parametrize("wire", WIRES)
async def test_a_mixed_burst_of_server_errors_and_rate_limits_is_retried(
    provider: LoopbackProvider, wire: str
) -> None:
    provider.inject(Fault.server_error(), Fault.rate_limited(retry_after=0), Fault.server_error())
    async with _client(provider, wire) as client:
        response = await client.send(_request(wire))
    assert response.attempts == 4
    assert _statuses(provider) == [500, 429, 500, 200]


@pytest.mark.parametrize("wire", WIRES)
async def test_a_dropped_connection_is_retried(provider: LoopbackProvider, wire: str) -> None:
    provider.inject(Fault.dropped())
    async with _client(provider, wire) as client:
        response = await client.send(_request(wire))
    assert response.attempts == 2
    assert _statuses(provider) == [None, 200]
    assert provider.received[0].fault == "dropped"


async def test_a_dropped_connection_on_the_last_attempt_is_a_transport_error(
    provider: LoopbackProvider,
) -> None:
    provider.inject(Fault.dropped())
    async with _client(provider, "anthropic", attempts=1) as client:
        with pytest.raises(ProviderTransportError, match="RemoteProtocolError"):
            await client.send(_request("anthropic"))


async def test_a_hang_beyond_the_read_timeout_is_a_retried_timeout(
    provider: LoopbackProvider,
) -> None:
    provider.inject(Fault.hang(30))
    timeout = httpx.Timeout(5.0, read=0.2)
    async with _client(provider, "anthropic", timeout=timeout) as client:
        started = trio.current_time()
        response = await client.send(_request("anthropic"))
    assert trio.current_time() - started < 5
    assert response.attempts == 2
    assert _statuses(provider) == [None, 200]
    assert provider.received[0].fault == "hang"


@pytest.mark.parametrize("wire", WIRES)
async def test_a_forced_overflow_is_a_context_overflow_and_not_retried(
    provider: LoopbackProvider, wire: str
) -> None:
    provider.inject(Fault.overflow())
    async with _client(provider, wire) as client:
        with pytest.raises(ContextOverflowError):
            await client.send(_request(wire))
    assert _statuses(provider) == [400]
    error = provider.received[0].response["error"]
    if wire == "anthropic":
        assert error["message"].startswith("prompt is too long: 200001 tokens > 200000 maximum")
    else:
        assert error["code"] == "context_length_exceeded"


async def test_faults_for_one_conversation_leave_the_others_alone(
    provider: LoopbackProvider,
) -> None:
    provider.inject(Fault.server_error(), conversation="ses_b")
    async with _client(provider, "openai-chat", attempts=1) as client:
        await client.send(_request("openai-chat", "ses_a"))
        with pytest.raises(ProviderError):
            await client.send(_request("openai-chat", "ses_b"))
    assert [(e.conversation, e.status) for e in provider.received] == [
        ("ses_a", 200),
        ("ses_b", 500),
    ]


async def test_faulted_requests_take_no_step_and_touch_no_cache(
    provider: LoopbackProvider,
) -> None:
    provider.inject(Fault.rate_limited(), Fault.overloaded(), Fault.dropped())
    async with _client(provider, "anthropic") as client:
        faulted = await client.send(_request("anthropic"))
    with LoopbackProvider(tool_loop(3), models=MODELS) as fresh:
        async with _client(fresh, "anthropic") as client:
            clean = await client.send(_request("anthropic"))
    assert faulted.attempts == 4
    assert faulted.body["content"] == clean.body["content"]
    assert faulted.usage == clean.usage


def test_random_faults_follow_their_seed() -> None:
    def run(seed: int) -> list[str | None]:
        core = LoopbackCore(tool_loop(50), models=MODELS)
        core.random_faults(0.3, (Fault.server_error(), Fault.rate_limited()), seed)
        for _ in range(40):
            post(core, anthropic())
        return [e.fault for e in core.exchanges]

    first = run(7)
    assert first == run(7)
    assert first != run(8)
    assert 0 < sum(f is not None for f in first) < 40
    assert set(first) == {None, "server_error", "rate_limit"}


def test_the_retry_headers_of_a_rate_limit() -> None:
    assert Fault.rate_limited(retry_after=2).headers() == {"retry-after": "2"}
    assert Fault.rate_limited(retry_after=0.5, retry_after_ms=500).headers() == {
        "retry-after": "0.5",
        "retry-after-ms": "500",
    }
    assert Fault.rate_limited().headers() == {}
    with pytest.raises(ValueError, match="zero seconds or more"):
        Fault.hang(-1)
