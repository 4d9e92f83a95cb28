"""The typed commands a ``Session`` actor accepts besides the recording commands
(``request._recording``). Each is answered by the reply its docstring names; a command that
cannot apply (an unknown message, an invalid event) is answered by the error, raised in the
caller, and nothing is written."""

from __future__ import annotations

from contextledger.events._catalogue import Event
from contextledger.ledger import Compose
from contextledger.request._recording import Command


class Append(Command, frozen=True):
    """Append these events as one batch. Reply: the events as recorded (``RecordedEvent``)."""

    events: tuple[Event, ...]


class AppendNew(Command, frozen=True):
    """Append the batch ``compose`` makes when the session comes to this command, with ids
    the session issues then (``EventLog.append_new``). Reply: the events as recorded."""

    compose: Compose


class Seq(Command, frozen=True):
    """Reply: the session's seq (every command before this one is applied)."""
