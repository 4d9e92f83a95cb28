"""Encoding events to bytes and back, with upcasting of older versions on read.

Events are stored as msgpack (compact and fast to decode); the store keeps each event's type
tag and schema version in columns beside the bytes, so the current-version fast path decodes
straight into typed Structs and only old versions take the dict-and-upcast path.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

import msgspec

from contextledger.events.catalogue import EVENT_TYPES, Event, EventBase, event_tag
from contextledger.events.errors import EventDecodeError, EventEncodeError
from contextledger.events.parts import struct_tag
from contextledger.events.upcasting import UPCASTERS, UpcasterRegistry


class EventCodec:
    """Encodes events of a tagged union and decodes them, upcasting older versions.

    Built once and reused: the msgspec encoder and decoders are created in ``__init__``.
    ``union`` and ``types`` default to the package's catalogue; an application with events
    of its own passes its own union, types and upcasters.
    """

    __slots__ = ("_current", "_decoder", "_encoder", "_raw_decoder", "_union", "_upcasters")

    def __init__(
        self,
        union: Any = Event,
        types: Iterable[type[EventBase]] = EVENT_TYPES,
        upcasters: UpcasterRegistry = UPCASTERS,
    ) -> None:
        self._union = union
        self._current = {event_tag(t): t.VERSION for t in types}
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(union)
        self._raw_decoder = msgspec.msgpack.Decoder(dict[str, Any])
        self._upcasters = upcasters

    def version_of(self, tag: str) -> int:
        """The current schema version of the event type tagged ``tag``."""
        return self._current[tag]

    def encode(self, event: EventBase) -> bytes:
        """Encode one event (its tag is part of the bytes); raise ``EventEncodeError`` when
        it cannot be encoded."""
        try:
            return self._encoder.encode(event)
        except (UnicodeEncodeError, TypeError, OverflowError) as exc:
            raise EventEncodeError(struct_tag(event), str(exc)) from exc

    def decode(
        self, tag: str, version: int, data: bytes, *, stream: str = "", position: int = 0
    ) -> Event:
        """Decode bytes stored under ``tag`` at schema ``version``.

        Raises ``EventDecodeError`` naming ``stream`` and ``position`` when the bytes are
        malformed, the type is unknown, the version is newer than this release knows, or an
        upcaster is missing or fails.
        """
        current = self._current.get(tag)
        if current is None:
            raise EventDecodeError(stream, position, f"unknown event type {tag!r}")
        try:
            if version == current:
                event = self._decoder.decode(data)
                if struct_tag(event) != tag:
                    raise EventDecodeError(
                        stream, position, f"stored as {tag} but holds {struct_tag(event)}"
                    )
                return cast(Event, event)
            if version > current:
                raise EventDecodeError(
                    stream, position, f"{tag} v{version} is newer than this release (v{current})"
                )
            raw = self._raw_decoder.decode(data)
            try:
                raw = self._upcasters.upcast(tag, version, current, raw)
            except LookupError:
                raise
            except Exception as exc:
                raise EventDecodeError(
                    stream, position, f"upcasting {tag} from v{version} failed: {exc!r}"
                ) from exc
            raw["type"] = tag
            return cast(Event, msgspec.convert(raw, self._union))
        except EventDecodeError:
            raise
        except (msgspec.DecodeError, msgspec.ValidationError, LookupError) as exc:
            raise EventDecodeError(stream, position, str(exc)) from exc

    def tag_of(self, event: EventBase) -> str:
        """The stored tag of ``event``."""
        return struct_tag(event)


DEFAULT_CODEC = EventCodec()
