"""The thin shell around ``RequestBuilder``: capture, build, guard, record.

``prepare_request`` is what a session does before each model call: it pins the memory block
and captures the system instruction files the first time they are offered, builds the
request, runs the payload guard (clear old tool outputs with reason ``payload-limit``, then
strip historical media; if still over, warn and send anyway), and appends the prefix
decision and ``RequestSent``. Every decision is the builder's; this only appends events.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from contextledger.events._catalogue import Event, InstructionLoaded, MemoryPinned
from contextledger.ledger import EventLog
from contextledger.request._builder import BuiltRequest, RequestBuilder, RequestInputs
from contextledger.request._instructions import InstructionFile

_log = structlog.get_logger(__name__)


def capture_events(
    log: EventLog,
    *,
    memory: str | None,
    instructions: Sequence[InstructionFile],
    time_ms: int,
) -> list[Event]:
    """Events capturing what the host offers and the log does not hold yet: the memory block
    (pinned once) and the system instruction files (captured once, when none are)."""
    state = log.history.state
    events: list[Event] = []
    if memory is not None and state.memory is None:
        events.append(MemoryPinned(session_id=log.session_id, time_ms=time_ms, text=memory))
    if instructions and not any(i.source != "directory" for i in state.instructions):
        events.extend(
            InstructionLoaded(
                session_id=log.session_id,
                time_ms=time_ms,
                path=f.path,
                text=f.text,
                source=f.source,
            )
            for f in instructions
            if f.source != "directory"
        )
    return events


async def prepare_request(
    log: EventLog,
    builder: RequestBuilder,
    inputs: RequestInputs,
    *,
    time_ms: int,
    memory: str | None = None,
    instructions: Sequence[InstructionFile] = (),
) -> BuiltRequest:
    """Build the session's next request and append what it implies; return it to send."""
    captured = capture_events(log, memory=memory, instructions=instructions, time_ms=time_ms)
    if captured:
        await log.append(captured)
    built = builder.build(log.history, inputs)
    if built.over_limit:
        limit = len(built.encoded.body)
        prune = builder.payload_prune(log.history, time_ms=time_ms)
        if prune is not None:
            await log.append([prune])
        built = builder.build(log.history, inputs, strip_media=True)
        _log.info(
            "payload_guard",
            session_id=log.session_id,
            before_bytes=limit,
            after_bytes=len(built.encoded.body),
            cleared=len(prune.part_ids) if prune else 0,
        )
        if built.over_limit:
            _log.warning(
                "payload_over_limit",
                session_id=log.session_id,
                body_bytes=len(built.encoded.body),
            )
    events: list[Event] = []
    agent_id = builder.agent_id
    prefix = built.prefix.event(log.session_id, time_ms=time_ms, agent_id=agent_id)
    if prefix is not None:
        events.append(prefix)
    events.append(built.sent_event(log.session_id, time_ms=time_ms, agent_id=agent_id))
    await log.append(events)
    return built
