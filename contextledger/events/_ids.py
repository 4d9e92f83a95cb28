"""Monotonic, sortable identifiers for messages and parts.

An id is ``<prefix>_<12 hex digits of unix milliseconds><6 hex digits of counter>``. Within
one session ids only ever grow, so string order is creation order and "latest" is always the
greatest id (never "the last element of a list", which a reordered view breaks). The counter
resets whenever the clock moves forward; if the clock goes backwards, the last timestamp is
kept and the counter keeps counting, so the order survives clock skew.
"""

from __future__ import annotations

import re
from typing import Final, Literal

IdKind = Literal["msg", "prt", "ses"]

#: 12 hex digits of milliseconds last until the year 10889.
_TIME_DIGITS: Final = 12
#: 6 hex digits: 16.7 million ids per millisecond before the timestamp is borrowed forward.
_COUNTER_DIGITS: Final = 6
_COUNTER_LIMIT: Final = 16**_COUNTER_DIGITS
_ID: Final = re.compile(rf"([a-z]+)_([0-9a-f]{{{_TIME_DIGITS}}})([0-9a-f]{{{_COUNTER_DIGITS}}})")


def format_id(kind: IdKind, time_ms: int, counter: int) -> str:
    """Return the id for ``time_ms`` and ``counter``; ids of one kind sort as (time, counter)."""
    return f"{kind}_{time_ms:0{_TIME_DIGITS}x}{counter:0{_COUNTER_DIGITS}x}"


def is_id(value: str) -> bool:
    """Whether ``value`` has the shape of an id this module makes."""
    return _ID.fullmatch(value) is not None


def parse_id(value: str) -> tuple[str, int, int]:
    """Split an id into (kind, time_ms, counter); raise ``ValueError`` on a malformed id
    (anything but lowercase letters, ``_`` and 18 lowercase hex digits)."""
    match = _ID.fullmatch(value)
    if match is None:
        raise ValueError(f"malformed id {value!r}")
    return match[1], int(match[2], 16), int(match[3], 16)


class IdGenerator:
    """Produces strictly increasing ids of one kind from caller-supplied clock readings.

    The generator holds no clock: pass the current time in, so tests and replays are exact.
    It can resume after a restart from the greatest id already issued (``last``).
    """

    __slots__ = ("_counter", "_kind", "_time_ms")

    def __init__(self, kind: IdKind, last: str | None = None) -> None:
        self._kind: IdKind = kind
        self._time_ms = -1
        self._counter = 0
        if last is not None:
            _, self._time_ms, self._counter = parse_id(last)

    def next(self, now_ms: int) -> str:
        """Return an id greater than every id this generator issued before."""
        if now_ms > self._time_ms:
            self._time_ms, self._counter = now_ms, 0
        else:
            self._counter += 1
            if self._counter >= _COUNTER_LIMIT:
                self._time_ms, self._counter = self._time_ms + 1, 0
        return format_id(self._kind, self._time_ms, self._counter)
