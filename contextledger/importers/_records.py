"""Reading input records: JSON documents and lines, loosely written values, times. Every
failure is a ``TraceImportError`` naming the file, the line and the field."""

from __future__ import annotations

import ast
import json
import mmap
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final, SupportsIndex, overload

import msgspec

from contextledger.events._catalogue import LeftOut
from contextledger.importers._errors import TraceImportError

#: The kind of a record a lenient import left out for being malformed.
MALFORMED_RECORD: Final = "malformed_record"
_DOCUMENT: Final = msgspec.json.Decoder()
_RAW_LIST: Final = msgspec.json.Decoder(list[msgspec.Raw])
_RAW_TOP: Final = msgspec.json.Decoder(dict[str, msgspec.Raw] | list[msgspec.Raw])
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND: Final = timedelta(milliseconds=1)


def not_json(error: json.JSONDecodeError) -> str:
    """The reason a document is not JSON: where the parser stopped (the character position,
    its line and column) and why."""
    return (
        f"not JSON at position {error.pos} (line {error.lineno}, column {error.colno}): {error.msg}"
    )


def malformed_record(
    error: TraceImportError, *, line: int | None = None, field: str | None = None
) -> LeftOut:
    """The left-out entry of a record a lenient import skipped for ``error``, at the error's
    line and field unless given (a folder's file: its position and name)."""
    return LeftOut(
        line=error.line if line is None else line,
        kind=MALFORMED_RECORD,
        reason=error.reason,
        field=error.field if field is None else field,
    )


def decode_json(data: bytes | msgspec.Raw | mmap.mmap) -> Any:
    """``data`` decoded as one JSON document (bytes that are not UTF-8 become U+FFFD), or
    ``json.JSONDecodeError`` saying where it stops. msgspec decodes it from the bytes (no text
    copy, about 1.7 bytes of objects per byte, where the json module peaks at 6); the json
    module only what msgspec refuses (JSON lines, a broken document, bytes that are not UTF-8,
    ``NaN``)."""
    try:
        return _DOCUMENT.decode(data)
    except msgspec.DecodeError:
        return json.loads(bytes(data).decode("utf-8", "replace"))


class LazyItems(list[Any]):
    """A list of a JSON document whose items stay undecoded (``msgspec.Raw`` views of the
    buffer the document was decoded from) until they are read: iterating, indexing or slicing
    decodes them one at a time (``decode_json``), so the list holds no decoded item of its
    own. Only iteration, ``len``, indexing and slicing read items."""

    def __iter__(self) -> Iterator[Any]:
        for raw in super().__iter__():
            yield decode_json(raw)

    @overload
    def __getitem__(self, index: SupportsIndex) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: SupportsIndex | slice) -> Any:
        if isinstance(index, slice):
            return [decode_json(raw) for raw in super().__getitem__(index)]
        return decode_json(super().__getitem__(index))


def lazy_document(buffer: bytes | mmap.mmap) -> Any:
    """The JSON document in ``buffer`` (bytes, or a memory map of a file) with each list at its
    top (the document itself when it is one) a ``LazyItems``: a document's messages are then
    decoded one at a time as an importer reads them, and the buffer is never copied.
    ``json.JSONDecodeError`` when it is not one JSON document (see ``decode_json``)."""
    try:
        top = _RAW_TOP.decode(buffer)
    except (msgspec.DecodeError, msgspec.ValidationError):  # not JSON, or a number, ...
        return decode_json(bytes(buffer))
    if isinstance(top, list):
        return LazyItems(top)
    return {key: _lazy_value(raw) for key, raw in top.items()}


def _lazy_value(raw: msgspec.Raw) -> Any:
    if bytes(memoryview(raw)[:1]) == b"[":
        return LazyItems(_RAW_LIST.decode(raw))
    return decode_json(raw)


def parse_document(data: bytes, source: str) -> Any:
    """``data`` decoded as one JSON document (``decode_json``); ``TraceImportError`` at the
    line the parser stopped at when it is not JSON."""
    try:
        return decode_json(data)
    except json.JSONDecodeError as e:
        raise TraceImportError(source, e.lineno, "", not_json(e)) from None


def load_json(path: str | Path) -> Any:
    """The JSON document at ``path`` (see ``parse_document``)."""
    path = Path(path)
    return parse_document(path.read_bytes(), str(path))


def json_lines(
    lines: Iterable[bytes | str], source: str, malformed: list[LeftOut] | None = None
) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of each non-blank line (``decode_json`` for bytes); a line
    that is not JSON raises ``TraceImportError`` naming it, or, given a ``malformed`` list, is
    added to it."""
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            value = decode_json(raw) if isinstance(raw, bytes) else json.loads(raw)
        except json.JSONDecodeError as e:
            if isinstance(raw, bytes) and not raw.decode("utf-8", "replace").strip():
                continue  # blank but for Unicode spaces
            error = TraceImportError(source, number, "", not_json(e))
            if malformed is None:
                raise error from None
            malformed.append(malformed_record(error))
            continue
        yield number, value


def loose_literal(value: Any) -> Any:
    """``value``, or, for a string, the JSON or Python literal it spells (several formats write
    lists and dicts with ``str()``); unparseable strings are returned unchanged."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        pass
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return value


def require_str(obj: dict[str, Any], key: str, source: str, line: int, at: str) -> str:
    """``obj[key]`` as a string, or ``TraceImportError`` naming ``at.key``."""
    value = obj.get(key)
    if not isinstance(value, str):
        raise TraceImportError(
            source, line, f"{at}.{key}" if at else key, "missing or not a string"
        )
    return value


def require_object(value: Any, source: str, line: int, at: str) -> dict[str, Any]:
    """``value`` when it is a JSON object, else ``TraceImportError`` naming ``at``."""
    if not isinstance(value, dict):
        raise TraceImportError(source, line, at, "must be a JSON object")
    return value


def require_list(value: Any, source: str, line: int, at: str) -> list[Any]:
    """``value`` when it is a JSON list, else ``TraceImportError`` naming ``at``."""
    if not isinstance(value, list):
        raise TraceImportError(source, line, at, "missing or not a list")
    return value


def mapping(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (for optional objects)."""
    return value if isinstance(value, dict) else {}


def text_or_none(value: Any) -> str | None:
    """``value`` when it is a non-empty string."""
    return value if isinstance(value, str) and value else None


def count(value: Any) -> int:
    """A token count: an int (not a bool), else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def iso_ms(value: Any) -> int | None:
    """Milliseconds since the epoch of an ISO-8601 time (UTC when it names no zone); ``None``
    when ``value`` is not one."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _MILLISECOND


def require_time(value: Any, source: str, line: int, at: str) -> int:
    """``iso_ms(value)``, or ``TraceImportError`` naming ``at``."""
    time_ms = iso_ms(value)
    if time_ms is None:
        raise TraceImportError(source, line, at, f"not an ISO-8601 time: {value!r}")
    return time_ms
