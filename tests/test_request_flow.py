"""A model call end to end: prepare the request on a SQLite log, send it over a real socket
with an API key, record the usage, and check the key is nowhere in the log file or the logs."""

from __future__ import annotations

import io
from pathlib import Path

import structlog
import trio

from contextledger.events import UsageReported
from contextledger.ledger import SessionLog
from contextledger.logging import configure_logging
from contextledger.providers import ProviderClient, wire_format
from contextledger.request._builder import RequestBuilder, RequestInputs
from contextledger.request._prepare import prepare_request
from contextledger.request._recording import Finish, answer_events
from contextledger.request._system import SystemSegments
from contextledger.store._sqlite import SQLiteStore
from contextledger.testing._builder import SessionBuilder
from tests.providers.loopback import Loopback, Reply
from tests.providers.responses import ANTHROPIC, body

KEY = "sk-ant-api03-FLOWSECRET-0123456789"


async def test_a_call_records_request_and_usage_and_never_the_key(tmp_path: Path) -> None:
    stream = io.StringIO()
    configure_logging("debug", json=True, stream=stream)
    try:
        async with trio.open_nursery() as nursery:
            server = await Loopback.start(nursery)
            server.script(Reply(200, body(ANTHROPIC.success)))
            async with SQLiteStore.open(tmp_path / "flow.db") as store:
                log = await SessionLog.open(store, "ses_flow")
                b = SessionBuilder("ses_flow", model=ANTHROPIC.model)
                user = b.user("Run the tests.")
                await log.append(b.events)
                builder = RequestBuilder(wire_format("anthropic"))
                inputs = RequestInputs(
                    model=ANTHROPIC.model,
                    segments=SystemSegments(prompt="Be brief.", environment="<env/>"),
                )
                built = await prepare_request(log, builder, inputs, time_ms=b.tick())
                async with ProviderClient(builder.wire, server.url, api_key=KEY) as client:
                    response = await client.send(built.request, built.encoded)
                assert server.received[0].body == built.encoded.body
                message = b.assistant(user)
                await log.append(b.events[-2:])
                finish = Finish(message_id=message, usage=response.usage)
                stamp = {"session_id": "ses_flow", "time_ms": b.tick()}
                await log.append(answer_events(log.history, finish, stamp))
                recorded = await store.read("ses_flow")
                assert isinstance(recorded[-2].event, UsageReported)
                assert recorded[-2].event.usage == ANTHROPIC.usage
                assert recorded[-2].event.measure == built.measure
            nursery.cancel_scope.cancel()
        (seen,) = server.received
        assert seen.headers["x-api-key"] == KEY  # it was sent, to the provider only
        for path in tmp_path.iterdir():
            assert KEY.encode() not in path.read_bytes(), path
        assert stream.getvalue() and KEY not in stream.getvalue()
    finally:
        structlog.reset_defaults()
