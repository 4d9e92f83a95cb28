"""Tool-output truncation: the capped view, the compaction cap, and paging back the full log."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextledger.events import LedgerError, RecordedEvent
from contextledger.events._parts import ToolCompleted, ToolPart
from contextledger.history import History
from contextledger.history._truncate import (
    PAGE_LINES,
    PAGING_TOOL,
    Direction,
    ToolOutputUnavailable,
    count_lines,
    page_for_call,
    read_tool_output,
    shows_truncation,
    split_lines,
    truncate_for_view,
    truncate_tool_output,
)
from contextledger.testing._builder import SessionBuilder
from contextledger.vocabulary._defaults import TOOL_OUTPUT_MAX_BYTES as MAX_BYTES
from contextledger.vocabulary._defaults import TOOL_OUTPUT_MAX_LINES as MAX_LINES

PART = "prt_0001"
PROPERTY = settings(max_examples=300, deadline=None)


def _numbered(n: int, *, newline_at_end: bool = True) -> str:
    """``n`` lines ``line 0`` ... ``line n-1``."""
    text = "".join(f"line {i}\n" for i in range(n))
    return text if newline_at_end else text.removesuffix("\n")


def _history(b: SessionBuilder) -> History:
    return History.rebuild(
        b.session_id, (RecordedEvent(b.session_id, i, i, e) for i, e in enumerate(b.events, 1))
    )


def _session_with_output(output: str) -> tuple[SessionBuilder, str]:
    b = SessionBuilder()
    reply = b.assistant(b.user("run it"))
    call = b.tool_call(reply, "bash", {"command": "make"})
    b.tool_result(call, output)
    return b, call


# --- truncate_for_view: what passes unchanged -----------------------------------------------


def test_an_output_within_both_limits_is_the_same_object() -> None:
    output = _numbered(10)
    view = truncate_for_view(output, part_id=PART)
    assert view.text is output
    assert not view.truncated
    assert view.truncated_by is None and view.next_offset is None
    assert (view.shown_from_line, view.shown_to_line, view.total_lines) == (0, 10, 10)


def test_exactly_2000_lines_are_not_truncated() -> None:
    output = _numbered(MAX_LINES, newline_at_end=False)
    assert truncate_for_view(output, part_id=PART).text is output


def test_a_final_newline_does_not_count_as_an_extra_line() -> None:
    # opencode counts split("\n") pieces, so this output would be 2,001 "lines" there.
    output = _numbered(MAX_LINES)
    view = truncate_for_view(output, part_id=PART)
    assert view.text is output
    assert view.total_lines == MAX_LINES


def test_exactly_51200_bytes_are_not_truncated() -> None:
    output = "x" * (MAX_BYTES - 1) + "\n"
    view = truncate_for_view(output, part_id=PART)
    assert view.text is output
    assert view.total_bytes == MAX_BYTES


def test_an_empty_output_has_no_lines_and_is_unchanged() -> None:
    view = truncate_for_view("", part_id=PART)
    assert view.text == "" and not view.truncated
    assert view.total_lines == 0 and view.total_bytes == 0


# --- truncate_for_view: the line limit ------------------------------------------------------


def test_2001_lines_keep_the_first_2000_from_the_head() -> None:
    output = _numbered(MAX_LINES + 1)
    view = truncate_for_view(output, part_id=PART)
    assert view.truncated and view.truncated_by == "lines"
    assert view.text.startswith("line 0\n")
    assert "line 1999\n\n...1 lines truncated...\n\n" in view.text
    assert "line 2000" not in view.text
    assert (view.shown_from_line, view.shown_to_line) == (0, MAX_LINES)
    assert view.omitted_lines == 1
    assert view.omitted_bytes == len("line 2000\n")


def test_the_tail_direction_keeps_the_last_lines_after_the_marker() -> None:
    output = _numbered(MAX_LINES + 5)
    view = truncate_for_view(output, direction="tail", part_id=PART)
    assert view.text.startswith("...5 lines truncated...\n\nThe tool call succeeded")
    assert view.text.endswith("\n\n" + "".join(f"line {i}\n" for i in range(5, MAX_LINES + 5)))
    assert "line 4\n" not in view.text
    assert (view.shown_from_line, view.shown_to_line) == (5, MAX_LINES + 5)


def test_custom_line_limits_apply() -> None:
    view = truncate_for_view(_numbered(10), max_lines=3, part_id=PART)
    assert view.text.startswith("line 0\nline 1\nline 2\n\n...7 lines truncated...")


# --- truncate_for_view: the byte limit ------------------------------------------------------


def test_the_byte_limit_stops_at_a_whole_line_and_reports_bytes() -> None:
    line_a, line_b = "a" * 1999 + "\n", "b" * 1999 + "\n"  # 2,000 bytes each
    output = line_a * 25 + line_b * 10
    view = truncate_for_view(output, part_id=PART)
    assert view.truncated_by == "bytes"
    assert view.text.startswith(line_a * 24 + "a" * 1999 + "\n\n...20000 bytes truncated...")
    assert "b" not in view.text.split("\n\n")[0]
    assert (view.omitted_bytes, view.omitted_lines, view.next_offset) == (20_000, 10, 25)


def test_bytes_count_each_line_separator() -> None:
    # Two 10-byte lines ("123456789\n") fill 20 bytes exactly; the third does not fit.
    output = "123456789\n" * 3
    view = truncate_for_view(output, max_bytes=20, part_id=PART)
    assert view.shown_to_line == 2
    assert view.omitted_bytes == 10


def test_bytes_are_utf8_bytes_not_characters() -> None:
    output = "é" * 10 + "\n" + "é" * 10  # 21 + 20 bytes, 21 characters
    view = truncate_for_view(output, max_bytes=30, part_id=PART)
    assert view.total_bytes == 41
    assert view.truncated_by == "bytes"
    assert view.shown_to_line == 1


def test_the_tail_direction_under_the_byte_limit_keeps_whole_last_lines() -> None:
    line_a, line_b = "a" * 1999 + "\n", "b" * 1999 + "\n"
    output = line_a * 20 + line_b * 20 + "c" * 1999
    view = truncate_for_view(output, direction="tail", part_id=PART)
    assert view.truncated_by == "bytes"
    assert view.text.endswith("\n\n" + line_a * 4 + line_b * 20 + "c" * 1999)
    assert view.shown_from_line == 16


def test_the_line_limit_is_reported_when_it_is_hit_first() -> None:
    # The 60,000-character line counts as 30 lines of WRAP_CHARS.
    output = "x" * 100 + "\n" + "y" * 60_000
    view = truncate_for_view(output, max_lines=1, part_id=PART)
    assert view.truncated_by == "lines"
    assert "...30 lines truncated..." in view.text


# --- truncate_for_view: one line longer than the byte limit ---------------------------------


def test_one_huge_line_is_shown_as_whole_wrapped_pieces_from_the_head() -> None:
    output = "z" * 100_000  # 50 pieces of WRAP_CHARS; 25 fit in MAX_BYTES
    view = truncate_for_view(output, part_id=PART)
    assert view.text.startswith("z" * 50_000 + "\n\n...50000 bytes truncated...")
    assert view.omitted_bytes == 50_000
    assert (view.shown_from_line, view.shown_to_line, view.next_offset) == (0, 25, 25)


def test_one_huge_line_is_shown_as_whole_wrapped_pieces_from_the_tail() -> None:
    output = "z" * 99_999 + "!"
    view = truncate_for_view(output, direction="tail", part_id=PART)
    assert view.text.endswith("\n\n" + "z" * 49_999 + "!")
    assert view.omitted_bytes == 50_000


@pytest.mark.parametrize("direction", ["head", "tail"])
@pytest.mark.parametrize("char", ["é", "€", "😀"])
def test_a_cut_never_splits_a_multibyte_character(direction: Direction, char: str) -> None:
    output = char * 1000
    view = truncate_for_view(output, max_bytes=1001, direction=direction, part_id=PART)
    preview = view.text.split("\n\n")[0 if direction == "head" else -1]
    assert set(preview) == {char}
    assert len(preview.encode()) == 1001 - 1001 % len(char.encode())


@pytest.mark.parametrize("direction", ["head", "tail"])
def test_a_cut_never_splits_a_surrogate_pair(direction: Direction) -> None:
    # A pair held as two code points (e.g. decoded with surrogatepass): 3 bytes each half.
    output = "\ud83d\ude00" * 10
    view = truncate_for_view(output, max_bytes=9, direction=direction, part_id=PART)
    preview = view.text.split("\n\n")[0 if direction == "head" else -1]
    assert preview == "\ud83d\ude00"


# --- truncate_for_view: the hint ------------------------------------------------------------


def test_the_head_hint_names_the_part_and_the_next_line_to_read() -> None:
    view = truncate_for_view(_numbered(5000), part_id="prt_abc")
    assert view.text.endswith(
        "The tool call succeeded but the output was truncated. The full output (5000 lines) "
        'is kept; read more with read_tool_output(part_id="prt_abc", offset=2000, limit=2000)'
        " (offset is a 0-based line number), or rerun the command narrowed (e.g. with grep) to "
        "view specific sections."
    )
    assert view.next_offset == 2000


def test_the_head_hint_asks_only_for_the_lines_left() -> None:
    view = truncate_for_view(_numbered(2500), part_id=PART)
    assert "offset=2000, limit=500)" in view.text


def test_the_tail_hint_points_at_the_lines_just_before_the_tail() -> None:
    view = truncate_for_view(_numbered(5000), direction="tail", part_id=PART)
    assert f'read_tool_output(part_id="{PART}", offset=1000, limit=2000)' in view.text
    assert view.next_offset == 1000


def test_an_agent_that_can_delegate_is_told_to_hand_the_reading_to_an_explore_agent() -> None:
    view = truncate_for_view(_numbered(5000), part_id=PART, tool_can_delegate=True)
    assert "use the Task tool to have an explore agent" in view.text
    assert f'read_tool_output(part_id="{PART}", offset=2000, limit=2000)' in view.text
    assert "Do NOT page through the full output yourself" in view.text


@pytest.mark.parametrize(("max_lines", "max_bytes"), [(0, 10), (10, 0), (10, -5)])
def test_limits_below_one_are_rejected(max_lines: int, max_bytes: int) -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        truncate_for_view("x", max_lines=max_lines, max_bytes=max_bytes, part_id=PART)


# --- truncate_for_view: properties ----------------------------------------------------------

texts = st.text(alphabet=st.sampled_from("ab é😀\n"), max_size=200)


@PROPERTY
@given(texts, st.integers(1, 20), st.integers(1, 80), st.sampled_from(["head", "tail"]))
def test_the_view_accounts_for_every_line_and_byte(
    output: str, max_lines: int, max_bytes: int, direction: Direction
) -> None:
    view = truncate_for_view(
        output, max_lines=max_lines, max_bytes=max_bytes, direction=direction, part_id=PART
    )
    lines = split_lines(output)
    shown = "".join(lines[view.shown_from_line : view.shown_to_line])
    assert view.total_lines == len(lines) == count_lines(output)
    assert view.omitted_lines == view.total_lines - (view.shown_to_line - view.shown_from_line)
    assert len(shown.encode()) <= max_bytes or not view.truncated
    assert view.shown_to_line - view.shown_from_line <= max_lines or not view.truncated
    if view.truncated:
        assert shown.removesuffix("\n") in view.text
        view.text.encode()  # no lone surrogate was made
    else:
        assert view.text is output


@PROPERTY
@given(texts, st.integers(1, 20), st.integers(1, 80))
def test_the_head_view_and_the_pages_after_it_give_back_the_output(
    output: str, max_lines: int, max_bytes: int
) -> None:
    b, call = _session_with_output(output)
    history = _history(b)
    view = truncate_for_view(output, max_lines=max_lines, max_bytes=max_bytes, part_id=call)
    offset = view.next_offset
    if offset is None:
        return
    rest = ""
    next_offset: int | None = offset
    while next_offset is not None:
        page = read_tool_output(history, call, next_offset, max_lines)
        rest += page.text
        next_offset = page.next_offset
    assert "".join(split_lines(output)[:offset]) + rest == output


# --- truncate_tool_output -------------------------------------------------------------------


def test_the_reference_case_cuts_at_the_limit_and_counts_what_was_omitted() -> None:
    assert (
        truncate_tool_output("abcdefghij", 4)
        == "abcd\n[Tool output truncated for compaction: omitted 6 chars]"
    )


@pytest.mark.parametrize("limit", [None, 0, 10, 11])
def test_no_limit_or_a_short_enough_output_is_returned_as_is(limit: int | None) -> None:
    output = "abcdefghij"
    assert truncate_tool_output(output, limit) is output


def test_an_astral_character_counts_as_one_character_and_is_never_split() -> None:
    assert (
        truncate_tool_output("😀😀😀", 2)
        == "😀😀\n[Tool output truncated for compaction: omitted 1 chars]"
    )


def test_a_surrogate_pair_held_as_two_code_points_is_not_split() -> None:
    assert (
        truncate_tool_output("ab\ud83d\ude00cd", 3)
        == "ab\n[Tool output truncated for compaction: omitted 4 chars]"
    )


def test_a_lone_high_surrogate_is_not_left_dangling_at_the_cut() -> None:
    assert (
        truncate_tool_output("ab\ud800cd", 3)
        == "ab\n[Tool output truncated for compaction: omitted 3 chars]"
    )


def test_a_lone_low_surrogate_before_the_cut_is_kept() -> None:
    # Only a high surrogate can start a pair the cut would split; opencode's rule.
    assert truncate_tool_output("ab\udc00cd", 3).startswith("ab\udc00\n[")


def test_a_negative_compaction_limit_is_rejected() -> None:
    with pytest.raises(ValueError, match="limit must be None or >= 0"):
        truncate_tool_output("abc", -1)


# --- read_tool_output -----------------------------------------------------------------------


def test_a_tool_part_is_paged_by_line() -> None:
    b, call = _session_with_output(_numbered(5))
    part = _history(b).part(call)
    assert isinstance(part, ToolPart)
    page = read_tool_output(part, 1, 2)
    assert page.text == "line 1\nline 2\n"
    assert (page.offset, page.limit, page.total_lines, page.next_offset) == (1, 2, 5, 3)
    assert page.part_id == call


def test_the_last_page_has_no_next_offset() -> None:
    b, call = _session_with_output(_numbered(5, newline_at_end=False))
    page = read_tool_output(_history(b), call, 3, 10)
    assert page.text == "line 3\nline 4"
    assert page.next_offset is None


def test_an_offset_at_the_end_gives_the_empty_last_page() -> None:
    b, call = _session_with_output(_numbered(5))
    page = read_tool_output(_history(b), call, 5)
    assert page.text == "" and page.next_offset is None


def test_an_offset_past_the_end_is_rejected() -> None:
    b, call = _session_with_output(_numbered(5))
    with pytest.raises(ValueError, match=r"offset 6 is past the end of the output \(5 lines\)"):
        read_tool_output(_history(b), call, 6)


@pytest.mark.parametrize(
    ("offset", "limit", "message"),
    [(-1, 10, "offset must be >= 0"), (0, -1, "limit must be >= 1"), (0, 0, "limit must be >= 1")],
)
def test_a_negative_offset_or_a_limit_below_one_is_rejected(
    offset: int, limit: int, message: str
) -> None:
    b, call = _session_with_output(_numbered(5))
    with pytest.raises(ValueError, match=message):
        read_tool_output(_history(b), call, offset, limit)


@PROPERTY
@given(st.text(max_size=300), st.integers(1, 50))
def test_paging_through_a_whole_output_gives_it_back_exactly(output: str, page_lines: int) -> None:
    b, call = _session_with_output(output)
    history = _history(b)
    pages = []
    offset: int | None = 0
    while offset is not None:
        page = read_tool_output(history, call, offset=offset, limit=page_lines)
        pages.append(page.text)
        offset = page.next_offset
    assert "".join(pages) == output
    assert len(pages) == max(1, -(-count_lines(output) // page_lines))


def test_a_pruned_output_is_still_read_in_full() -> None:
    output = _numbered(3000)
    b, call = _session_with_output(output)
    b.prune([call])
    history = _history(b)
    state = _tool_state(history, call)
    assert state.compacted_ms is not None
    page = read_tool_output(history, call, 0, 5000)
    assert page.text == output


def test_a_soft_trimmed_output_is_still_read_in_full() -> None:
    output = _numbered(3000)
    b, call = _session_with_output(output)
    b.trim(call, head_chars=10, tail_chars=10)
    history = _history(b)
    assert _tool_state(history, call).trimmed == (10, 10)
    assert read_tool_output(history, call, 2999, 1).text == "line 2999\n"


def test_an_errored_call_pages_its_partial_output() -> None:
    b = SessionBuilder()
    call = b.tool_call(b.assistant(b.user("go")), "bash")
    b.tool_error(call, "interrupted", partial_output="half\nway")
    assert read_tool_output(_history(b), call).text == "half\nway"


def test_an_errored_call_without_output_is_unavailable() -> None:
    b = SessionBuilder()
    call = b.tool_call(b.assistant(b.user("go")), "bash")
    b.tool_error(call, "command not found")
    with pytest.raises(ToolOutputUnavailable, match="failed without output"):
        read_tool_output(_history(b), call)


@pytest.mark.parametrize("running", [False, True])
def test_a_call_still_pending_or_running_is_unavailable(running: bool) -> None:
    b = SessionBuilder()
    call = b.tool_call(b.assistant(b.user("go")), "bash")
    if running:
        b.tool_running(call)
    status = "running" if running else "pending"
    with pytest.raises(ToolOutputUnavailable, match=f"the call is {status}"):
        read_tool_output(_history(b), call)


def test_an_unknown_part_is_unavailable() -> None:
    b, _ = _session_with_output("x")
    with pytest.raises(ToolOutputUnavailable, match="no such part") as raised:
        read_tool_output(_history(b), "prt_missing")
    assert raised.value.part_id == "prt_missing"


def test_a_part_that_is_not_a_tool_call_is_unavailable() -> None:
    b = SessionBuilder()
    text = b.text(b.user(), "hello")
    with pytest.raises(ToolOutputUnavailable, match="a text part, not a tool call"):
        read_tool_output(_history(b), text)


def test_tool_output_unavailable_is_a_ledger_error() -> None:
    assert issubclass(ToolOutputUnavailable, LedgerError)


def _tool_state(history: History, part_id: str) -> ToolCompleted:
    part = history.part(part_id)
    assert isinstance(part, ToolPart) and isinstance(part.state, ToolCompleted)
    return part.state


def test_a_single_huge_line_can_be_paged_back_from_the_hint() -> None:
    # Minified JSON: one 2 MB line. The view shows ~50 KiB and the hint's offset leads on.
    b = SessionBuilder()
    reply = b.assistant(b.user("go"))
    call = b.tool_call(reply, "fetch")
    blob = '{"k": "' + "v" * 2_000_000 + '"}'
    b.tool_result(call, blob)
    part = History.rebuild(
        b.session_id, [RecordedEvent(b.session_id, i, i, e) for i, e in enumerate(b.events, 1)]
    ).part(call)
    assert isinstance(part, ToolPart)
    shown = truncate_for_view(blob, part_id=call)
    assert shown.truncated and len(shown.text.encode()) < MAX_BYTES + 1000
    assert shown.next_offset is not None and shown.next_offset > 0
    pages, offset = [], 0
    while True:
        page = read_tool_output(part, offset, 200)
        assert len(page.text) <= 200 * 2000
        pages.append(page.text)
        if page.next_offset is None:
            break
        offset = page.next_offset
    assert "".join(pages) == blob
    assert count_lines(blob) == len(split_lines(blob)) == -(-len(blob) // 2000)


# --- the paging tool ------------------------------------------------------------------------


def test_the_paging_tool_takes_what_the_hint_names() -> None:
    schema = PAGING_TOOL.input_schema
    assert PAGING_TOOL.name == "read_tool_output"
    assert set(schema["properties"]) == {"part_id", "offset", "limit"}
    assert schema["required"] == ["part_id"]
    assert schema["properties"]["limit"]["maximum"] == PAGE_LINES


def test_a_call_gets_its_page_with_where_it_stands() -> None:
    b, call = _session_with_output("a\nb\nc\n")
    page = page_for_call(_history(b), {"part_id": call, "offset": 1, "limit": 1})
    assert page.answer() == (
        f'b\n\n[lines 1-1 of 3; read more with read_tool_output(part_id="{call}", offset=2, '
        "limit=1)]"
    )
    last = page_for_call(_history(b), {"part_id": call, "offset": 2})
    assert last.answer() == "c\n\n[lines 2-2 of 3; the end of the output]"
    empty = page_for_call(_history(b), {"part_id": call, "offset": 3})
    assert empty.answer() == "\n\n[no lines from 3: the output has 3; the end of the output]"


def test_a_call_reads_at_most_one_page() -> None:
    output = "x\n" * (PAGE_LINES + 5)
    b, call = _session_with_output(output)
    page = page_for_call(_history(b), {"part_id": call, "limit": PAGE_LINES * 2})
    assert page.limit == PAGE_LINES and page.next_offset == PAGE_LINES


@pytest.mark.parametrize(
    "tool_input",
    [{}, {"part_id": 1}, {"part_id": "p", "offset": "0"}, {"part_id": "p", "extra": 1}],
)
def test_a_call_whose_input_does_not_match_the_schema_is_refused(tool_input: dict) -> None:
    b, _ = _session_with_output("x")
    with pytest.raises(ValueError, match="read_tool_output: "):
        page_for_call(_history(b), tool_input)


def test_a_truncated_view_of_an_output_shows_it() -> None:
    long = "line\n" * (MAX_LINES + 1)
    assert shows_truncation(truncate_for_view(long, part_id="prt_1").text)
    assert not shows_truncation(truncate_for_view("short", part_id="prt_1").text)
