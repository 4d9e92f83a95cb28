"""The contract every wire format implements, and the incremental encoding they share.

A wire format turns a ``Request`` into the provider's JSON body. The body is laid out as
``opening`` (fields that stay the same for the whole session: model, system, tools), then the
message array, then ``closing`` (fields that may change per step: output cap, tool choice,
stream flag). Each view message is encoded to its wire items once per message version and
the body is the join of those fragments, so a request costs about the bytes it copies, and
the bytes of request N up to its last message are, by construction, the bytes of request
N+1 over the same span wherever no event changed an earlier message. One loop lays out the
fragments for every format; a format whose API wraps runs of messages in turns (see
``turns``) only names the bytes that open and close a turn.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

import msgspec

from contextledger.events._parts import Usage
from contextledger.providers._errors import ProviderError, provider_error
from contextledger.vocabulary._messages import ModelMessage, ModelRole
from contextledger.vocabulary._requests import CacheMark, MarkTarget, Request


class EncodedRequest(msgspec.Struct, frozen=True, gc=False):
    """A request's wire body. ``message_offsets[i]`` is the byte offset where the wire items
    of view message ``i`` start (at the turn it opens, if it opens one), after any comma
    separating them from earlier items; a message that encodes to no items gets the offset
    right after the items before it. ``messages_end`` is the offset of the byte closing the
    message array."""

    body: bytes
    message_offsets: tuple[int, ...]
    messages_end: int

    def prefix_before_last_message(self) -> bytes:
        """The body up to where the last view message starts (up to ``messages_end`` when
        there are no messages): what the next step of the same turn must repeat byte for
        byte."""
        if not self.message_offsets:
            return self.body[: self.messages_end]
        return self.body[: self.message_offsets[-1]]


_Entries = dict[tuple[int, "CacheMark | None"], tuple[ModelMessage, bytes]]


class _Fragments:
    """Wire items per view message, memoised on the message object and its mark.

    Views reuse a message object for as long as its history message keeps its version, so
    the object identity is the version key. Entries hold the object, so an id cannot be
    reused while its entry lives. Once the entries outnumber twice the latest request's
    messages (plus 64), ``trim`` keeps only the fragments that request used: the memo stays
    about one request's size, at an amortised cost of one lookup per message.
    """

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: _Entries = {}

    def get(self, wire: WireFormat, message: ModelMessage, mark: CacheMark | None) -> bytes:
        key = (id(message), mark)
        entry = self._entries.get(key)
        if entry is not None and entry[0] is message:
            return entry[1]
        fragment = wire.encode_message(message, mark)
        self._entries[key] = (message, fragment)
        return fragment

    def trim(self, request: Request, marks: Mapping[int, CacheMark]) -> None:
        if len(self._entries) <= 2 * len(request.messages) + 64:
            return
        entries = self._entries
        used = ((id(m), marks.get(i)) for i, m in enumerate(request.messages))
        self._entries = {key: entries[key] for key in used if key in entries}


class WireFormat(ABC):
    """One provider API's request and response shapes. Instances memoise message fragments;
    use one per session (or per request builder). ``encode`` is deterministic: the same
    request gives the same bytes whether fragments came from the memo or not."""

    #: The name used in config, in ``RequestSent`` and in errors.
    name: ClassVar[str]
    #: How many cache marks a request may carry (0: the API caches prefixes implicitly and
    #: the format ignores marks), and on what they can be rendered.
    max_marks: ClassVar[int] = 0
    markable: ClassVar[frozenset[MarkTarget]] = frozenset()
    #: For an API that wraps each run of messages in one turn object: the bytes that open a
    #: turn, by view role (consecutive messages whose roles have equal heads share a turn),
    #: and the bytes that close one. None: a fragment's items are items of the array itself.
    turn_heads: ClassVar[Mapping[ModelRole, bytes] | None] = None
    turn_end: ClassVar[bytes] = b""

    def __init__(self) -> None:
        self._fragments = _Fragments()

    # --- request ------------------------------------------------------------------------------

    def encode(self, request: Request) -> EncodedRequest:
        """The wire body of ``request``: the opening, then the leading items and the message
        fragments as one array (fragments wrapped in turns where ``turn_heads`` says so),
        then the closing."""
        marks = request.message_marks()
        opening = self.opening(request)
        parts = [opening, b"["]
        size = len(opening) + 1
        first = True
        for item in self.leading_items(request):
            if not first:
                parts.append(b",")
                size += 1
            parts.append(item)
            size += len(item)
            first = False
        offsets: list[int] = []
        heads, turn_end = self.turn_heads, self.turn_end
        turn: bytes | None = None
        get = self._fragments.get
        for index, message in enumerate(request.messages):
            fragment = get(self, message, marks.get(index))
            if not fragment:
                offsets.append(size)
                continue
            if heads is not None and heads[message.role] != turn:
                # The message opens a turn, after closing the one before it.
                if turn is not None:
                    parts.append(turn_end)
                    size += len(turn_end)
                if not first:
                    parts.append(b",")
                    size += 1
                offsets.append(size)
                turn = heads[message.role]
                parts.append(turn)
                size += len(turn)
            else:
                if not first:
                    parts.append(b",")
                    size += 1
                offsets.append(size)
            parts.append(fragment)
            size += len(fragment)
            first = False
        if turn is not None:
            parts.append(turn_end)
            size += len(turn_end)
        parts.append(b"]")
        parts.append(self.closing(request))
        self._fragments.trim(request, marks)
        return EncodedRequest(b"".join(parts), tuple(offsets), size)

    def reclose(self, encoded: EncodedRequest, request: Request) -> EncodedRequest:
        """``encoded`` with the closing of ``request`` instead of its own: the same messages,
        with what follows them (the output cap, tool choice, options) taken from ``request``.
        The messages are not encoded again."""
        head = encoded.body[: encoded.messages_end + 1]  # up to and with the array's "]"
        return EncodedRequest(
            head + self.closing(request), encoded.message_offsets, encoded.messages_end
        )

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
