"""Message and part ids: time-prefixed, counter-suffixed, and strictly increasing within a
generator whatever the clock does, so string order is creation order."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextledger.events import IdGenerator, format_id, parse_id

T = 1_700_000_000_000
COUNTER_LIMIT = 16**6


def test_an_id_is_kind_then_twelve_hex_digits_of_time_then_six_of_counter() -> None:
    assert format_id("msg", 0x18BCFE56800, 5) == "msg_018bcfe56800000005"


def test_parse_id_inverts_format_id() -> None:
    assert parse_id(format_id("prt", T, 0xABC)) == ("prt", T, 0xABC)


def test_the_first_id_uses_the_clock_and_counter_zero() -> None:
    assert parse_id(IdGenerator("msg").next(T)) == ("msg", T, 0)


def test_ids_at_an_equal_timestamp_increase_through_the_counter() -> None:
    ids = IdGenerator("msg")

    issued = [ids.next(T) for _ in range(3)]

    assert issued == sorted(issued)
    assert len(set(issued)) == 3
    assert [parse_id(i)[1:] for i in issued] == [(T, 0), (T, 1), (T, 2)]


def test_the_counter_restarts_when_the_clock_moves_forward() -> None:
    ids = IdGenerator("msg")
    ids.next(T)
    ids.next(T)

    assert parse_id(ids.next(T + 1))[1:] == (T + 1, 0)


def test_when_the_clock_goes_backwards_ids_keep_increasing_on_the_last_timestamp() -> None:
    ids = IdGenerator("msg")
    before = ids.next(T)

    after = ids.next(T - 5_000)

    assert after > before
    assert parse_id(after)[1:] == (T, 1)


def test_counter_overflow_borrows_the_next_millisecond() -> None:
    ids = IdGenerator("msg", last=format_id("msg", T, COUNTER_LIMIT - 1))

    after = ids.next(T)

    assert parse_id(after)[1:] == (T + 1, 0)
    assert after > format_id("msg", T, COUNTER_LIMIT - 1)


def test_ids_stay_increasing_after_a_borrowed_millisecond_meets_the_real_one() -> None:
    ids = IdGenerator("msg", last=format_id("msg", T, COUNTER_LIMIT - 1))
    borrowed = ids.next(T)

    assert ids.next(T + 1) > borrowed


@pytest.mark.parametrize("now", [T - 1, T, T + 1], ids=["earlier", "same", "later"])
def test_a_resumed_generator_issues_ids_after_the_last_one(now: int) -> None:
    last = format_id("msg", T, 7)

    assert IdGenerator("msg", last=last).next(now) > last


@given(st.lists(st.integers(min_value=0, max_value=16**12 - 2), min_size=1, max_size=200))
def test_ids_strictly_increase_whatever_the_clock_reads(readings: list[int]) -> None:
    ids = IdGenerator("prt")

    issued = [ids.next(now) for now in readings]

    assert all(a < b for a, b in itertools.pairwise(issued))


@given(
    st.integers(min_value=0, max_value=16**12 - 1),
    st.integers(min_value=0, max_value=COUNTER_LIMIT - 1),
    st.integers(min_value=0, max_value=16**12 - 1),
    st.integers(min_value=0, max_value=COUNTER_LIMIT - 1),
)
def test_string_order_of_ids_is_time_then_counter_order(t1: int, c1: int, t2: int, c2: int) -> None:
    a, b = format_id("msg", t1, c1), format_id("msg", t2, c2)

    assert (a < b) == ((t1, c1) < (t2, c2))


@pytest.mark.parametrize(
    "value",
    [
        "",
        "msg",
        "msg_",
        "msg018bcfe56800000005",
        "msg_018bcfe5680000000",
        "msg_018bcfe5680000000500",
        "msg_018bcfe56800zzzzzz",
        "msg_xyzbcfe56800000005",
    ],
    ids=[
        "empty",
        "kind-only",
        "no-digits",
        "no-separator",
        "too-short",
        "too-long",
        "bad-counter",
        "bad-time",
    ],
)
def test_parse_id_rejects_ids_of_the_wrong_shape(value: str) -> None:
    with pytest.raises(ValueError, match="malformed"):
        parse_id(value)


@pytest.mark.parametrize(
    "value",
    [
        "msg_-00000000001000000",
        "msg_+00000000001000000",
        "msg_ 00000000001000000",
        "msg_0000_0000_01000000",
        "msg_018bcfe56800 00005",
    ],
    ids=["minus", "plus", "space", "underscores", "inner-space"],
)
def test_parse_id_rejects_anything_but_hex_digits_in_the_digits(value: str) -> None:
    # The id format is exactly 18 hex digits: int(..., 16) alone also takes signs,
    # surrounding spaces and underscores, which would let a malformed id through.
    with pytest.raises(ValueError, match="malformed"):
        parse_id(value)


def test_parse_id_rejects_uppercase_hex_digits() -> None:
    # format_id writes lowercase; an uppercase id would not sort in creation order among them
    # ("msg_..B.." < "msg_..a.." as strings, but 0xB > 0xA).
    with pytest.raises(ValueError, match="malformed"):
        parse_id("msg_018BCFE56800000005")
