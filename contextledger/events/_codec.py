"""Encoding events to bytes and back, with upcasting of older versions on read.

Events are stored as msgpack (compact and fast to decode), their type tag included; the store
keeps each event's schema version in a column beside the bytes. A read decodes the bytes
straight into a typed Struct and checks the version against that type's current version; only
an older version (or bytes the typed decoder refuses) takes the dict-and-upcast path.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import accumulate, pairwise
from typing import Any, NamedTuple, cast

import msgspec

from contextledger.events._catalogue import (
    EVENT_TYPES,
    Event,
    EventBase,
    RecordedEvent,
    event_tag,
)
from contextledger.events._errors import EventDecodeError, EventEncodeError, InvalidEvent
from contextledger.events._parts import struct_tag
from contextledger.events._strict import ENCODE_ERRORS, mismatch, unencodable, wrong_type
from contextledger.events._upcasting import UPCASTERS, UpcasterRegistry


class EncodedBatch(NamedTuple):
    """Events encoded for storage: their schema versions, the length of each one's bytes, and
    one buffer holding ``reserve`` zero bytes (room for a head its store writes) and then
    their bytes one after the other (the tag is in the bytes)."""

    versions: list[int]
    lengths: list[int]
    data: bytearray

    @property
    def nbytes(self) -> int:
        """The events' bytes, without the reserved room."""
        return sum(self.lengths)

    def datas(self) -> list[bytes]:
        """Each event's bytes, on its own."""
        ends = list(accumulate(self.lengths, initial=len(self.data) - self.nbytes))
        return [bytes(self.data[start:end]) for start, end in pairwise(ends)]


class EventCodec:
    """Encodes events of a tagged union and decodes them, upcasting older versions.

    Built once and reused: the msgspec encoder and decoders are created in ``__init__``.
    ``union`` and ``types`` default to the package's catalogue; an application with events
    of its own passes its own union, types and upcasters.
    """

    __slots__ = (
        "_current",
        "_decoder",
        "_encoder",
        "_raw_decoder",
        "_union",
        "_upcasters",
        "_versions",
    )

    def __init__(
        self,
        union: Any = Event,
        types: Iterable[type[EventBase]] = EVENT_TYPES,
        upcasters: UpcasterRegistry = UPCASTERS,
    ) -> None:
        self._union = union
        types = tuple(types)
        self._current = {event_tag(t): t.VERSION for t in types}
        self._versions: dict[type[EventBase], int] = {t: t.VERSION for t in types}
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

    def encode_batch(self, events: Sequence[EventBase], reserve: int = 0) -> EncodedBatch:
        """Encode ``events`` for storage, the hot path of an append: into one buffer after
        ``reserve`` bytes, so that no event's bytes are a separate object to allocate and
        copy again. Raises ``EventEncodeError`` like ``encode``."""
        versions_of, encode_into = self._versions, self._encoder.encode_into
        data = bytearray(reserve)
        versions: list[int] = []
        lengths: list[int] = []
        start = reserve
        for event in events:
            version = versions_of.get(type(event))
            if version is None:
                raise EventEncodeError(repr(type(event)), "not an event type of this codec")
            try:
                encode_into(event, data, -1)
            except (UnicodeEncodeError, TypeError, OverflowError) as exc:
                raise EventEncodeError(struct_tag(event), str(exc)) from exc
            end = len(data)
            versions.append(version)
            lengths.append(end - start)
            start = end
        return EncodedBatch(versions, lengths, data)

    def typed_copies(self, events: Sequence[object]) -> list[Event]:
        """``events`` checked against their schemas, strictly, and returned as the copies
        decoded back from their encodings: what a read of them will give.

        Structs check no types when they are built, so this is where ``bytes`` given for a
        ``str``, ``None`` for a finish reason, ``"admin"`` for a role or ``"yesterday"`` for
        ``time_ms`` are caught, before anything is written. Raises ``InvalidEvent`` naming
        the first bad event's index in ``events`` and its field (``part.text``); a ``dict``
        given for a struct, and an object that is not an event of this codec, are refused
        the same way (see ``events._strict``). A well-typed batch (the common case) is
        encoded, decoded and encoded again in C (``map``); only a batch whose copies do not
        encode to the same bytes is looked at event by event.
        """
        versions, encode = self._versions, self._encoder.encode
        if versions.keys() >= set(map(type, events)):
            try:
                datas = list(map(encode, events))
                copies: list[Event] = list(map(self._decoder.decode, datas))
                # A dict given for a struct decodes too; its copy then encodes differently.
                if list(map(encode, copies)) == datas:
                    return copies
            except (msgspec.ValidationError, *ENCODE_ERRORS):
                pass  # find which event, and which of its fields, below
        copies = []
        for index, event in enumerate(events):
            if type(event) not in versions:
                name = type(event).__name__
                raise InvalidEvent(index, name, "not an event type of this codec")
            tag = struct_tag(event)  # type: ignore[arg-type]
            try:
                data = self._encoder.encode(event)
            except ENCODE_ERRORS as exc:
                wrong = unencodable(event, exc)
                raise InvalidEvent(index, tag, wrong.reason, field=wrong.field) from None
            try:
                copy = self._decoder.decode(data)
            except msgspec.ValidationError as exc:
                wrong = wrong_type(exc)
                raise InvalidEvent(index, tag, wrong.reason, field=wrong.field) from None
            if encode(copy) != data and (found := mismatch(event, copy)) is not None:
                raise InvalidEvent(index, tag, found.reason, field=found.field)
            copies.append(copy)
        return copies

    def decode_stream(
        self, stream: str, rows: Iterable[tuple[int, int, int, bytes]]
    ) -> list[RecordedEvent]:
        """Decode one stream's stored ``(position, seq, version, bytes)`` rows: the hot path
        of a read. Raises ``EventDecodeError`` naming the stream and position."""
        decode, versions = self._decoder.decode, self._versions
        out: list[RecordedEvent] = []
        append = out.append
        for position, seq, version, data in rows:
            try:
                event = decode(data)
            except (msgspec.DecodeError, msgspec.ValidationError):
                event = None
            if event is None or versions.get(type(event)) != version:
                event = self._decode_stored(version, data, stream, position)
            append(RecordedEvent(stream, seq, position, event))
        return out

    def decode_rows(self, rows: Iterable[tuple[int, str, int, int, bytes]]) -> list[RecordedEvent]:
        """Decode stored ``(position, stream, seq, version, bytes)`` rows of any streams."""
        decode, versions = self._decoder.decode, self._versions
        out: list[RecordedEvent] = []
        append = out.append
        for position, stream, seq, version, data in rows:
            try:
                event = decode(data)
            except (msgspec.DecodeError, msgspec.ValidationError):
                event = None
            if event is None or versions.get(type(event)) != version:
                event = self._decode_stored(version, data, stream, position)
            append(RecordedEvent(stream, seq, position, event))
        return out

    def _decode_stored(self, version: int, data: bytes, stream: str, position: int) -> Event:
        """The slow path of a read: an older version (upcast), or bytes the typed decoder
        refused. The event's tag is read from the bytes themselves."""
        try:
            raw = self._raw_decoder.decode(data)
        except msgspec.DecodeError as exc:
            raise EventDecodeError(stream, position, str(exc)) from exc
        tag = raw.get("type")
        if not isinstance(tag, str):
            raise EventDecodeError(stream, position, "the stored event names no type")
        return self.decode(tag, version, data, stream=stream, position=position)

    def tag_of(self, event: EventBase) -> str:
        """The stored tag of ``event``."""
        return struct_tag(event)


DEFAULT_CODEC = EventCodec()
