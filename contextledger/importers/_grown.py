"""A transcript imported again: the session in the store is compared, event by event, with
what the transcript gives now. When the stored events are the start of it (the transcript grew,
or an import was cut short) only the rest is appended; anything else is refused, naming the
first difference."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import zip_longest
from typing import Any, Final

import msgspec

from contextledger.events._catalogue import Event, SessionStarted
from contextledger.events._errors import LedgerError
from contextledger.events._parts import struct_tag

#: The key of ``SessionStarted.config`` holding the SHA-256 of the transcript a session was
#: imported from (only a file's first session carries it).
SOURCE_HASH: Final = "source_sha256"
#: The key of ``SessionStarted.config`` holding how many events the session had when its import
#: began: a session with fewer in the store was cut short, and is completed on the next run.
SOURCE_EVENTS: Final = "source_events"
#: How much of a differing value an error shows.
_SHOWN: Final = 60
#: A field an event leaves out because it holds its default (events omit defaults).
_DEFAULT: Final = object()


class Difference(msgspec.Struct, frozen=True, kw_only=True):
    """Where a stored session and a transcript's events first differ: the ``seq``, the
    ``field`` (a dotted path inside the event; ``""`` when the events differ in type or one
    side has none) and each side's value, shortened."""

    seq: int
    field: str
    stored: str
    imported: str


class StoredSessionDiffers(LedgerError):
    """A transcript imported before no longer starts with what its session in the store holds
    (it was edited, not grown): nothing was written. ``difference`` says where."""

    def __init__(self, source: str, session_id: str, difference: Difference) -> None:
        d = difference
        where = f"seq {d.seq}" + (f" field {d.field!r}" if d.field else "")
        super().__init__(
            f"cannot import {source}: session {session_id!r} is in the store and differs from "
            f"the transcript at {where} (stored {d.stored}, transcript {d.imported}); only a "
            "transcript that grew since its import is appended to"
        )
        self.source = source
        self.session_id = session_id
        self.difference = difference


def first_difference(
    stored: Iterable[Event], imported: Iterable[Event], *, first_seq: int = 1
) -> Difference | None:
    """The first place where ``stored`` (a session's events from ``first_seq`` on) differs
    from ``imported`` (the transcript's events from the same seq), or ``None`` when the stored
    events are the start of the imported ones (equal included). Events are compared by their
    content (tuples equal lists); a ``SessionStarted`` is compared without the import's own
    config keys (``SOURCE_HASH``, ``SOURCE_EVENTS``). More stored events than imported ones
    is a difference at the first stored event the transcript lacks."""
    pairs = zip_longest(stored, imported)
    for seq, (old, new) in enumerate(pairs, first_seq):
        if old is None:
            return None
        if new is None:
            return Difference(seq=seq, field="", stored=struct_tag(old), imported="no event")
        a, b = _content(old), _content(new)
        if a != b:
            field, x, y = _first_field(a, b, "")
            return Difference(seq=seq, field=field, stored=_short(x), imported=_short(y))
    return None


def _content(event: Any) -> Any:
    data = msgspec.to_builtins(event)
    data["type"] = struct_tag(event)
    if isinstance(event, SessionStarted):
        config = data.get("config", {})
        data["config"] = {k: v for k, v in config.items() if k not in (SOURCE_HASH, SOURCE_EVENTS)}
    return data


def _first_field(a: Any, b: Any, path: str) -> tuple[str, Any, Any]:
    """The dotted path of the first value that differs between ``a`` and ``b``, and both."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.get("type") != b.get("type"):
            return path, a.get("type"), b.get("type")
        for key in [*a, *(k for k in b if k not in a)]:
            x, y = a.get(key, _DEFAULT), b.get(key, _DEFAULT)
            if x != y:
                return _first_field(x, y, f"{path}.{key}" if path else key)
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return _first_field(x, y, f"{path}[{i}]")
    return path, a, b


def _short(value: Any) -> str:
    text = "the default" if value is _DEFAULT else repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"
