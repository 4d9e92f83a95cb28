"""Replaying a session's recorded requests from its log: ``replay_bodies`` rebuilds every
request body a ``RequestSent`` records, as the runtime's request builder built it."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from contextledger.config import Config
from contextledger.events import (
    PrefixPinned,
    PrefixRotated,
    RecordedEvent,
    RequestSent,
)
from contextledger.history import History
from contextledger.policy import usable
from contextledger.providers import wire_format
from contextledger.request import RequestBuilder, RequestInputs
from contextledger.vocabulary import Model


class BodyReplay(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded request: its ``seq``, agent, the body hash ``RequestSent`` recorded and
    the one rebuilt from the log before it."""

    session_id: str
    seq: int
    agent_id: str
    recorded: str
    replayed: str


def replay_bodies(
    recorded: Sequence[RecordedEvent],
    *,
    config: Config,
    model: Model,
    inputs: Mapping[str, RequestInputs],
    wire: str = "anthropic",
) -> list[BodyReplay]:
    """Rebuild every recorded request of a session from its log: for each ``RequestSent``,
    the body a fresh ``RequestBuilder`` of its agent (as the runtime's) builds from the events
    before it, with ``inputs[agent_id]``, and its SHA-256 beside the recorded one."""
    events = [r.event for r in recorded]
    history = History(recorded[0].stream if recorded else "")
    builders: dict[str, RequestBuilder] = {}
    built: dict[int, str] = {}
    replays: list[BodyReplay] = []
    for index, record in enumerate(recorded):
        sent = _sent_after(events, index)
        if sent is not None:
            agent = events[sent].agent_id
            builder = builders.get(agent)
            if builder is None:
                builder = builders[agent] = RequestBuilder(
                    wire_format(wire),
                    config,
                    agent_id=agent,
                    usable_tokens=usable(model, config),
                    model=model,
                )
            body = builder.build(history, inputs[agent]).encoded.body
            built[sent] = body_hash(body)
        event = record.event
        if isinstance(event, RequestSent):
            replays.append(
                BodyReplay(
                    session_id=record.stream,
                    seq=record.seq,
                    agent_id=event.agent_id,
                    recorded=event.body_hash,
                    replayed=built.get(index, ""),
                )
            )
        history.apply(record)
    return replays


def _sent_after(events: Sequence[Any], index: int) -> int | None:
    """The index of the ``RequestSent`` that was built from the events before ``index``:
    the event at ``index``, or the one after a prefix event there (appended together)."""
    event = events[index]
    if isinstance(event, RequestSent):
        before = events[index - 1] if index else None
        return None if isinstance(before, PrefixPinned | PrefixRotated) else index
    if isinstance(event, PrefixPinned | PrefixRotated) and index + 1 < len(events):
        return index + 1 if isinstance(events[index + 1], RequestSent) else None
    return None


def body_hash(body: bytes) -> str:
    """The SHA-256 of a request body, as ``RequestSent.body_hash`` records it."""
    return hashlib.sha256(body).hexdigest()
