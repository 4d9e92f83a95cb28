"""Typed errors raised when events cannot be read or must not be written."""

from __future__ import annotations


class LedgerError(Exception):
    """Base class of every error contextledger raises on purpose."""


class EventDecodeError(LedgerError):
    """A stored event could not be decoded: malformed bytes, an unknown type, a version
    newer than this release, or an upcaster that failed. Names where it is stored."""

    def __init__(self, stream: str, position: int, reason: str) -> None:
        super().__init__(f"cannot decode event at stream {stream!r} position {position}: {reason}")
        self.stream = stream
        self.position = position
        self.reason = reason


class EventEncodeError(LedgerError):
    """An event could not be encoded (e.g. text holding a lone UTF-16 surrogate, which UTF-8
    cannot carry); nothing was written. Sanitise such text where it enters the system."""

    def __init__(self, event_type: str, reason: str) -> None:
        super().__init__(f"cannot encode {event_type}: {reason}")
        self.event_type = event_type
        self.reason = reason


class InvalidEvent(LedgerError):
    """An event that would make the session inconsistent, or that does not match its
    schema; nothing was written.

    ``index`` is the event's position in the rejected batch; ``field`` the dotted path of
    the field whose value has the wrong type (``part.text``), or None when the event is well
    typed but may not follow the session.
    """

    def __init__(
        self, index: int, event_type: str, reason: str, *, field: str | None = None
    ) -> None:
        where = f"{field}: " if field else ""
        super().__init__(f"invalid {event_type} at batch index {index}: {where}{reason}")
        self.index = index
        self.event_type = event_type
        self.reason = reason
        self.field = field
