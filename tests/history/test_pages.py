"""Tables of ids in pages: a snapshot writes the pages that changed, a restored table reads a
page when it needs one of its rows, and a page stored later with more rows serves the rows
the table had."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextledger.history import _pages
from contextledger.history._pages import PageProblem, PageTable, decode_page

ROWS = 3


def _table(count: int) -> PageTable:
    table = PageTable("p", 2)
    for i in range(count):
        table.append((f"prt_{i:04d}", f"msg_{i // 2:04d}"))
    return table


def _restored(stored: dict[str, bytes], count: int, reads: list[str]) -> PageTable:
    def read(table: PageTable, number: int, rows: int) -> list[list[str]]:
        key = table.page_key(number)
        reads.append(key)
        return decode_page(stored.get(key), key, table.width, rows)

    return PageTable("p", 2, count, read)


@given(before=st.integers(0, 12), after=st.integers(0, 12))
def test_pages_since_a_count_are_those_its_rows_changed(before: int, after: int) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_pages, "PAGE_ROWS", ROWS)
        table = _table(before + after)
        whole = table.pages_since(0)
        changed = table.pages_since(before)

        assert len(whole) == -(-(before + after) // ROWS)
        earlier = _table(before).pages_since(0)
        assert changed == {k: v for k, v in whole.items() if earlier.get(k) != v}


@given(count=st.integers(1, 12), later=st.integers(0, 5), data=st.data())
def test_a_restored_table_reads_only_the_pages_of_the_rows_asked_for(
    count: int, later: int, data: st.DataObject
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_pages, "PAGE_ROWS", ROWS)
        # Stored by a later snapshot with more rows: the table serves its own ``count``.
        stored = _table(count + later).pages_since(0)
        reads: list[str] = []
        table = _restored(stored, count, reads)
        i = data.draw(st.integers(0, count - 1))

        assert table.row(i) == (f"prt_{i:04d}", f"msg_{i // 2:04d}")
        assert reads == [table.page_key(i // ROWS)]
        assert table.find(f"prt_{i:04d}") == i
        assert table.find(f"prt_{count:04d}") is None
        assert table.last_key() == f"prt_{count - 1:04d}"
        table.append(("prt_9999", "msg_9999"))
        assert table.column(0) == [f"prt_{j:04d}" for j in range(count)] + ["prt_9999"]
        # What a snapshot writes of it: its pages from the one the new row went to, as a
        # table that was never restored holds them.
        whole = _table(count)
        whole.append(("prt_9999", "msg_9999"))
        first = table.page_key(count // ROWS)
        assert table.pages_since(count) == {
            k: v for k, v in whole.pages_since(0).items() if k >= first
        }


def test_a_missing_or_short_page_is_a_page_problem() -> None:
    table = _restored({}, 2, [])
    with pytest.raises(PageProblem, match="missing"):
        table.key(0)
    short = _table(1).pages_since(0)
    with pytest.raises(PageProblem, match="does not hold 2 rows"):
        _restored(short, 2, []).key(0)
    with pytest.raises(PageProblem, match="does not decode"):
        decode_page(b"\xc1", "~p/00000000", 2, 1)


@given(st.integers(0, 300), st.integers(0, 320))
def test_a_column_from_a_row_on_is_the_tail_of_the_whole_column(rows: int, start: int) -> None:
    table = PageTable("t", 2)
    for n in range(rows):
        table.append((f"{n:05d}", f"v{n}"))
    assert table.column(1, start) == table.column(1)[start:]
