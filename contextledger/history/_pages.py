"""What lets a restored projection read its snapshot as it goes: tables of ids in pages, and
dicts that load what they miss.

A session's ids only grow (validation refuses a message or part id that does not follow the
last one), so its messages, parts and tool calls in id order are append-only tables. Stored
in pages of ``PAGE_ROWS`` rows, a table's full pages never change again: a snapshot writes
only its last page and the new ones, and a projection restored from a snapshot reads a page
only when it needs one of its rows.

Tool call ids follow no order, and validation asks whether a new one is used already. So
each call's fingerprint (``call_fingerprint``) is also added to one of ``CALL_BUCKETS``
append-only tables, by fingerprint: a fingerprint missing from its table's pages answers
"not used" from an eighth of the fingerprints, without reading the ids of every call.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from itertools import chain, islice
from typing import Final, Protocol, TypeVar

import msgspec

from contextledger.events._catalogue import RecordedEvent

#: Rows per page: 2,048 ids of about 22 characters are about 50 KB, read and decoded in
#: about 0.1 ms, and a session of 500,000 events has about 110 pages of parts.
PAGE_ROWS: Final = 2048

#: Tables of tool call fingerprints: a lookup reads one (a page per 16,384 calls), and a
#: snapshot writes at most the last page of each (up to 18 kB; 8 x 18 kB beside a snapshot's
#: 0.6 MB).
CALL_BUCKETS: Final = 8

K = TypeVar("K")
V = TypeVar("V")

_page_decoder = msgspec.msgpack.Decoder(list[list[str]])
_encoder = msgspec.msgpack.Encoder()


class SnapshotSource(Protocol):
    """Where a restored projection reads what its snapshot's head leaves out (``SQLiteStore``
    and ``MemoryStore`` give one through ``snapshot_source``)."""

    def chunk(self, key: str) -> bytes | None:
        """The stored chunk ``key`` of the session's snapshot as it is now (None when there is
        none); raises a ``LedgerError`` when it does not match its checksum."""
        ...

    def events(self, reason: str) -> Sequence[RecordedEvent]:
        """Every event of the session, for a projection whose snapshot turned out to be
        unusable for ``reason`` and that rebuilds itself from them instead."""
        ...


#: Reads a page of a restored table: ``read(table, number, rows)``.
PageReader = Callable[["PageTable", int, int], list[list[str]]]


class PageProblem(ValueError):
    """A stored page or chunk that does not fit the projection reading it."""


class PageTable:
    """Rows of ``width`` ids each, in the order they were added, stored in pages.

    The first ``count`` rows of a restored table are read a page at a time when needed
    (``read``, given the table, the page's number and how many of its rows it has); rows
    added later are held here. The
    first column is the key: rows are added in key order, so ``find`` is a binary search
    (a table of call fingerprints is not in key order: it is only read by ``column``).
    """

    __slots__ = ("_count", "_pages", "_read", "name", "width")

    def __init__(
        self,
        name: str,
        width: int,
        count: int = 0,
        read: PageReader | None = None,
    ) -> None:
        self.name = name
        self.width = width
        self._count = count
        self._read = read
        self._pages: dict[int, list[list[str]]] = {}

    def __len__(self) -> int:
        return self._count

    def row(self, i: int) -> tuple[str, ...]:
        """Row ``i`` (0 <= i < len)."""
        page = self._page(i // PAGE_ROWS)
        j = i % PAGE_ROWS
        return tuple(column[j] for column in page)

    def key(self, i: int) -> str:
        """The key of row ``i``."""
        return self._page(i // PAGE_ROWS)[0][i % PAGE_ROWS]

    def last_key(self) -> str:
        """The greatest key ("" when empty)."""
        return self.key(self._count - 1) if self._count else ""

    def append(self, row: Sequence[str]) -> None:
        """Add ``row``, whose key follows every key held."""
        number, j = divmod(self._count, PAGE_ROWS)
        page = self._pages.get(number) if j == 0 else self._page(number)
        if page is None:
            page = self._pages[number] = [[] for _ in range(self.width)]
        for column, value in zip(page, row, strict=True):
            column.append(value)
        self._count += 1

    def find(self, key: str) -> int | None:
        """The row whose key is ``key``, or None."""
        lo, hi = 0, self._count
        while lo < hi:
            mid = (lo + hi) // 2
            if self.key(mid) < key:
                lo = mid + 1
            else:
                hi = mid
        return lo if lo < self._count and self.key(lo) == key else None

    def column(self, c: int, start: int = 0) -> list[str]:
        """Column ``c`` of the rows from ``start`` on (reads the pages that hold them)."""
        first = start // PAGE_ROWS
        pages = range(first, (self._count + PAGE_ROWS - 1) // PAGE_ROWS)
        rows = chain.from_iterable(self._page(n)[c] for n in pages)
        return list(islice(rows, start - first * PAGE_ROWS, None))

    def pages_since(self, count: int) -> dict[str, bytes]:
        """The encoded pages that changed since the table had ``count`` rows (every page
        when 0), by key."""
        if count >= self._count:
            return {}
        last = (self._count - 1) // PAGE_ROWS
        return {
            self.page_key(n): _encoder.encode(self._page(n))
            for n in range(count // PAGE_ROWS, last + 1)
        }

    def page_key(self, number: int) -> str:
        """The chunk key of page ``number``: after every message id (``~`` follows the
        letters), in page order."""
        return f"~{self.name}/{number:08d}"

    def _page(self, number: int) -> list[list[str]]:
        page = self._pages.get(number)
        if page is None:
            if self._read is None:
                raise PageProblem(f"page {self.page_key(number)!r} is missing")
            rows = min(PAGE_ROWS, self._count - number * PAGE_ROWS)
            page = self._pages[number] = self._read(self, number, rows)
        return page


def decode_page(data: bytes | None, key: str, width: int, rows: int) -> list[list[str]]:
    """The first ``rows`` rows of the stored page ``data`` (a page may hold rows added after
    the snapshot a table was restored from); raises ``PageProblem`` when it is missing, does
    not decode or holds fewer rows or other columns."""
    if data is None:
        raise PageProblem(f"page {key!r} is missing")
    try:
        page = _page_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise PageProblem(f"page {key!r} does not decode: {exc}") from None
    if len(page) != width or any(len(column) < rows for column in page):
        raise PageProblem(f"page {key!r} does not hold {rows} rows of {width}")
    return [column if len(column) == rows else column[:rows] for column in page]


def call_fingerprint(call_id: str) -> tuple[int, str]:
    """The bucket and the fingerprint of tool call ``call_id``: a CRC-32 of it, in hex. Two
    calls with one fingerprint are told apart by their ids (see ``History``)."""
    crc = zlib.crc32(call_id.encode(errors="surrogatepass"))
    return crc % CALL_BUCKETS, f"{crc:08x}"


class LoadingDict(dict[K, V]):
    """A dict that looks a key it does not hold up through ``load`` (which raises
    ``KeyError`` when there is no such key) and keeps what it finds. Iterating it, or asking
    its length, sees only what it holds."""

    __slots__ = ("_load",)

    def __init__(self, load: Callable[[K], V]) -> None:
        super().__init__()
        self._load = load

    def __missing__(self, key: K) -> V:
        value = self._load(key)
        self[key] = value
        return value

    def __contains__(self, key: object) -> bool:
        if dict.__contains__(self, key):
            return True
        try:
            self[key]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def get(self, key: K, default: V | None = None) -> V | None:  # type: ignore[override]
        try:
            return self[key]
        except KeyError:
            return default
