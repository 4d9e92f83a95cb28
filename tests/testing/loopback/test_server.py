"""The HTTP shell: it records what it receives, serves many clients at once, works with or
without an event loop, and stops without leaving a thread or a socket behind."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import msgspec
import pytest
import trio

from contextledger.events._parts import ModelRef, ToolSchema
from contextledger.providers import ProviderClient, RetryPolicy, wire_format
from contextledger.testing.loopback import Fault, LoopbackProvider, Script, read_step, tool_loop
from contextledger.vocabulary._messages import ModelMessage, ModelText
from contextledger.vocabulary._models import Model, ModelLimits
from contextledger.vocabulary._requests import Request
from tests.testing.loopback.bodies import ANTHROPIC_HEADERS, MODELS, anthropic
from tests.testing.loopback.conftest import loopback_threads


@pytest.fixture(autouse=True)
def _no_thread_outlives_its_test() -> Iterator[None]:
    yield
    assert loopback_threads() == []


def _request(session_id: str) -> Request:
    return Request(
        model=ModelRef(provider_id="openai", model_id="gpt-5"),
        session_id=session_id,
        tools=(ToolSchema(name="bash", description="Run.", input_schema={"type": "object"}),),
        messages=(ModelMessage(role="user", content=(ModelText(text="go"),), source_id="m1"),),
        max_output_tokens=64,
    )


async def test_it_records_each_request_as_bytes_and_json_with_the_key_masked() -> None:
    async with LoopbackProvider(tool_loop(1)) as provider:
        wire = wire_format("openai-chat")
        async with ProviderClient(wire, provider.url, api_key="sk-secret") as client:
            response = await client.send(_request("ses_rec"))
    (exchange,) = provider.received
    assert exchange.body == response.encoded.body
    assert exchange.json == msgspec.json.decode(response.encoded.body)
    assert (exchange.method, exchange.path, exchange.conversation) == (
        "POST",
        "/v1/chat/completions",
        "ses_rec",
    )
    assert exchange.headers["authorization"] == "[redacted]"
    assert "sk-secret" not in repr(exchange)
    assert (exchange.index, exchange.status, exchange.response) == (1, 200, response.body)


async def test_many_clients_at_once_are_each_answered_from_their_own_script() -> None:
    answers: dict[str, list[str]] = {}
    async with LoopbackProvider(tool_loop(3)) as provider:
        wire = wire_format("openai-chat")
        async with ProviderClient(wire, provider.url, api_key="k") as client:

            async def converse(session_id: str) -> None:
                for _ in range(3):
                    response = await client.send(_request(session_id))
                    step = read_step(response.body)
                    answers.setdefault(session_id, []).extend(
                        c.input["command"] for c in step.calls
                    )

            async with trio.open_nursery() as nursery:
                for n in range(12):
                    nursery.start_soon(converse, f"ses_{n}")
    assert len(provider.received) == 36
    assert sorted(e.index for e in provider.received) == list(range(1, 37))
    assert answers == {f"ses_{n}": ["step 1", "step 2", "step 3"] for n in range(12)}


def test_it_serves_without_an_event_loop_and_takes_chunked_bodies() -> None:
    body = msgspec.json.encode(anthropic())
    with LoopbackProvider() as provider, httpx.Client(base_url=provider.url) as client:
        plain = client.post("/v1/messages", content=body, headers=ANTHROPIC_HEADERS)
        chunked = client.post(
            "/v1/messages",
            content=iter([body[:10], body[10:]]),
            headers=ANTHROPIC_HEADERS,
        )
        assert provider.received[1].headers["transfer-encoding"] == "chunked"
    assert (plain.status_code, chunked.status_code) == (200, 200)
    assert provider.received[1].body == body


def test_it_serves_an_asyncio_program() -> None:
    async def main() -> int:
        async with (
            LoopbackProvider() as provider,
            httpx.AsyncClient(base_url=provider.url) as client,
        ):
            response = await client.post(
                "/v1/messages", json=anthropic(), headers=ANTHROPIC_HEADERS
            )
            return response.status_code

    assert asyncio.run(main()) == 200
    assert loopback_threads() == []


async def test_stopping_closes_idle_and_hanging_connections_and_joins_every_thread() -> None:
    provider = LoopbackProvider()
    async with (
        provider,
        httpx.AsyncClient(base_url=provider.url) as idle,
        httpx.AsyncClient(base_url=provider.url) as waiting,
    ):
        await idle.post("/v1/messages", json=anthropic(), headers=ANTHROPIC_HEADERS)
        provider.inject(Fault.hang(60))
        async with trio.open_nursery() as nursery:

            async def hung() -> None:
                with pytest.raises(httpx.RemoteProtocolError):
                    await waiting.post("/v1/messages", json=anthropic(), headers=ANTHROPIC_HEADERS)

            nursery.start_soon(hung)
            while provider.queued_faults:
                await trio.sleep(0.01)
            assert len(loopback_threads()) == 3  # the listener, the idle and the hung
            started = time.monotonic()
            provider.stop()
            assert time.monotonic() - started < 2
    assert loopback_threads() == []
    with pytest.raises(RuntimeError, match="not running"):
        _ = provider.url


def test_a_provider_can_be_started_again_but_not_twice_at_once() -> None:
    provider = LoopbackProvider()
    with provider:
        first = provider.port
        with pytest.raises(RuntimeError, match="running already"):
            provider.start()
    provider.stop()  # stopping a stopped provider does nothing
    with provider, httpx.Client(base_url=provider.url) as client:
        response = client.post("/v1/messages", json=anthropic(), headers=ANTHROPIC_HEADERS)
        assert provider.port != 0
    assert response.status_code == 200
    assert first != 0
    assert [e.index for e in provider.received] == [1]


def test_a_failure_inside_the_provider_is_a_500_and_kept_in_errors() -> None:
    def broken(key: str) -> Script:
        raise LookupError(f"no script for {key!r}")

    with LoopbackProvider(broken) as provider, httpx.Client(base_url=provider.url) as client:
        response = client.post("/v1/messages", json=anthropic(), headers=ANTHROPIC_HEADERS)
    assert response.status_code == 500
    (error,) = provider.errors
    assert "LookupError: no script for ''" in error


def test_an_unknown_model_id_without_a_price_is_refused_at_construction() -> None:
    odd = Model(provider_id="x", model_id="mystery-1", limits=ModelLimits(context=1000))
    with pytest.raises(ValueError, match="no price table entry matches model 'mystery-1'"):
        LoopbackProvider(models=[*MODELS, odd])


async def test_the_client_retries_reach_the_same_server_over_keep_alive() -> None:
    async with LoopbackProvider(tool_loop(1)) as provider:
        provider.inject(Fault.server_error(), times=2)
        retry = RetryPolicy(base_delay=0.0)
        wire = wire_format("openai-chat")
        async with ProviderClient(wire, provider.url, api_key="k", retry=retry) as client:
            response = await client.send(_request("ses_keep"))
    assert response.attempts == 3
    assert [e.status for e in provider.received] == [500, 500, 200]
