"""The contract every wire format implements, and the incremental encoding they share.

A wire format turns a ``Request`` into the provider's JSON body. The body is laid out as
``opening`` (fields that stay the same for the whole session: model, system, tools), then the
message array, then ``closing`` (fields that may change per step: output cap, tool choice,
stream flag). Each view message is encoded to its wire items once per message version and
the body is the join of those fragments, so a request costs about the bytes it copies, and
the bytes of request N up to its last message are, by construction, the bytes of request
N+1 over the same span wherever no event changed an earlier message.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

import msgspec

from contextledger.events.parts import Usage
from contextledger.history.messages import ModelMessage
from contextledger.providers.errors import ProviderError, provider_error
from contextledger.request.types import CacheMark, Request

_encode = msgspec.json.Encoder().encode


def dumps(value: Any) -> bytes:
    """Compact JSON bytes, keys in insertion order."""
    return _encode(value)


class EncodedRequest(msgspec.Struct, frozen=True, gc=False):
    """A request's wire body. ``message_offsets[i]`` is the byte offset where the wire items
    of view message ``i`` start (the offset of the next item when it encodes to none);
    ``messages_end`` is the offset of the byte closing the message array."""

    body: bytes
    message_offsets: tuple[int, ...]
    messages_end: int

    def prefix_before_last_message(self) -> bytes:
        """The body up to where the last view message starts: what the next step of the same
        turn must repeat byte for byte."""
        if not self.message_offsets:
            return self.body[: self.messages_end]
        return self.body[: self.message_offsets[-1]]


class _Fragments:
    """Wire items per view message, memoised on the message object and its mark.

    Views reuse a message object for as long as its history message keeps its version, so
    the object identity is the version key. Entries hold the object, so an id cannot be
    reused while its entry lives; entries unused by the latest request are dropped once
    they outnumber the used ones.
    """

    __slots__ = ("_entries", "_used")

    def __init__(self) -> None:
        self._entries: dict[tuple[int, CacheMark | None], tuple[ModelMessage, bytes]] = {}
        self._used = 0

    def get(self, wire: WireFormat, message: ModelMessage, mark: CacheMark | None) -> bytes:
        key = (id(message), mark)
        entry = self._entries.get(key)
        if entry is not None and entry[0] is message:
            return entry[1]
        fragment = wire.encode_message(message, mark)
        self._entries[key] = (message, fragment)
        return fragment

    def trim(self, keep: int) -> None:
        if len(self._entries) > 2 * keep + 64:
            self._entries = dict(list(self._entries.items())[-keep:])


class WireFormat(ABC):
    """One provider API's request and response shapes. Instances memoise message fragments;
    use one per session (or per request builder). ``encode`` is deterministic: the same
    request gives the same bytes whether fragments came from the memo or not."""

    #: The name used in config, in ``RequestSent`` and in errors.
    name: ClassVar[str]

    def __init__(self) -> None:
        self._fragments = _Fragments()

    # --- request ------------------------------------------------------------------------------

    def encode(self, request: Request) -> EncodedRequest:
        """The wire body of ``request``."""
        marks = request.message_marks()
        opening = self.opening(request)
        items = self.leading_items(request)
        parts = [opening, b"["]
        size = len(opening) + 1
        first = True
        for item in items:
            if not first:
                parts.append(b",")
                size += 1
            parts.append(item)
            size += len(item)
            first = False
        offsets: list[int] = []
        get = self._fragments.get
        for index, message in enumerate(request.messages):
            fragment = get(self, message, marks.get(index))
            if fragment and not first:
                parts.append(b",")
                size += 1
            offsets.append(size)
            if fragment:
                parts.append(fragment)
                size += len(fragment)
                first = False
        parts.append(b"]")
        parts.append(self.closing(request))
        self._fragments.trim(len(request.messages))
        return EncodedRequest(b"".join(parts), tuple(offsets), size)

    @abstractmethod
    def opening(self, request: Request) -> bytes:
        """The body up to the message array: ``{"model":...,"messages":`` and the like."""

    def leading_items(self, request: Request) -> list[bytes]:
        """Items placed in the message array before the view (system messages, for APIs
        that carry the system prompt there)."""
        return []

    @abstractmethod
    def encode_message(self, message: ModelMessage, mark: CacheMark | None) -> bytes:
        """The wire items of one view message, comma-joined, or ``b""`` for none."""

    @abstractmethod
    def closing(self, request: Request) -> bytes:
        """The body after the message array, ending with ``}``."""

    @abstractmethod
    def path(self, request: Request) -> str:
        """The URL path, relative to the provider's base URL, the body is posted to."""

    def headers(self, api_key: str | None) -> dict[str, str]:
        """The HTTP headers of a call (authentication included)."""
        return {"content-type": "application/json"}

    # --- response -----------------------------------------------------------------------------

    @abstractmethod
    def decode_usage(self, response: Mapping[str, Any]) -> Usage:
        """The usage of a (non-streamed) response body, cache reads and writes split out."""

    @abstractmethod
    def error_details(self, response: Any) -> tuple[str, str | None]:
        """The message and the code of an error body (parsed JSON, or text when not JSON)."""

    def error(self, status: int, body: bytes) -> ProviderError:
        """The typed exception for an error answer of this provider."""
        try:
            parsed: Any = msgspec.json.decode(body) if body else None
        except msgspec.DecodeError:
            parsed = body.decode("utf-8", "replace")
        if parsed is None:
            message, code = f"{status} status code (no body)", None
        else:
            message, code = self.error_details(parsed)
        return provider_error(self.name, message, status=status, code=code)


def data_url(url: str) -> tuple[str, str] | None:
    """``(media_type, base64 data)`` of a ``data:`` URL, or None for any other URL."""
    if not url.startswith("data:"):
        return None
    header, _, data = url[5:].partition(",")
    media_type = header.split(";", 1)[0]
    return media_type, data


def error_fields(response: Any, *paths: tuple[str, ...]) -> tuple[str, str | None]:
    """``(message, code)`` from the first ``error``-like object found along ``paths``;
    a text body is the message itself."""
    if isinstance(response, str):
        return response, None
    for path in paths:
        node: Any = response
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        if isinstance(node, Mapping):
            message = node.get("message")
            code = node.get("code") or node.get("type") or node.get("status")
            return (
                str(message) if message is not None else msgspec.json.encode(node).decode(),
                str(code) if code is not None else None,
            )
        if isinstance(node, str):
            return node, None
    return msgspec.json.encode(response).decode(), None
