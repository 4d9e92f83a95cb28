"""The synthetic session generator: deterministic, valid, and sized like the traces."""

from __future__ import annotations

import random
import statistics

import pytest

from contextledger.events import (
    DEFAULT_CODEC,
    AssistantFinished,
    Event,
    MessageAdded,
    PartAdded,
    SessionStarted,
    TextPart,
    ToolCompleted,
    ToolErrored,
    ToolPart,
    ToolStateChanged,
    parse_id,
)
from contextledger.history import SessionIndex, validate_events
from contextledger.ledger import SessionLog
from contextledger.simulation._synthetic import (
    ASSISTANT_TEXT_CHARS,
    QUANTILES,
    TOOLS,
    USER_TEXT_CHARS,
    draw_size,
    iter_synthetic_session,
    synthetic_session,
)
from contextledger.store import MemoryStore

P25, P75 = QUANTILES.index(0.25), QUANTILES.index(0.75)


@pytest.fixture(scope="module")
def long_session() -> list[Event]:
    return list(synthetic_session("long", seed=11, turns=80))


def test_same_seed_same_events() -> None:
    a = synthetic_session("s", seed=3, turns=6)
    b = synthetic_session("s", seed=3, turns=6)
    assert a == b
    assert [DEFAULT_CODEC.encode(e) for e in a] == [DEFAULT_CODEC.encode(e) for e in b]
    assert synthetic_session("s", seed=4, turns=6) != a


def test_iterator_matches_list() -> None:
    assert list(iter_synthetic_session("s", seed=5, turns=4)) == synthetic_session(
        "s", seed=5, turns=4
    )


@pytest.mark.parametrize("seed", range(8))
def test_validates(seed: int) -> None:
    events = synthetic_session(f"s{seed}", seed=seed, turns=5)
    validate_events(SessionIndex(f"s{seed}"), events)
    assert isinstance(events[0], SessionStarted)
    assert sum(isinstance(e, MessageAdded) and e.role == "user" for e in events) == 5


def test_start_time_and_ids_increase() -> None:
    events = synthetic_session("s", seed=1, turns=3, start_ms=1_000_000)
    assert events[0].time_ms == 1_000_000
    times = [e.time_ms for e in events]
    assert times == sorted(times)
    msg_ids = [e.message_id for e in events if isinstance(e, MessageAdded)]
    part_ids = [e.part.id for e in events if isinstance(e, PartAdded)]
    assert msg_ids == sorted(set(msg_ids)) and part_ids == sorted(set(part_ids))
    assert parse_id(msg_ids[0])[1] > 1_000_000


async def test_session_log_accepts_it() -> None:
    events = synthetic_session("logged", seed=2, turns=4)
    log = await SessionLog.open(MemoryStore(), "logged")
    for i in range(0, len(events), 37):
        await log.append(events[i : i + 37])
    assert log.history.seq == len(events)
    finished = [m for m in log.history.messages if m.role == "assistant"]
    assert finished and all(m.finish in ("stop", "tool-calls") for m in finished)


def test_shape(long_session: list[Event]) -> None:
    events = long_session
    texts: dict[str, list[int]] = {"user": [], "assistant": []}
    roles = {e.message_id: e.role for e in events if isinstance(e, MessageAdded)}
    for e in events:
        if isinstance(e, PartAdded) and isinstance(e.part, TextPart):
            texts[roles[e.part.message_id]].append(len(e.part.text))
    tools = [
        e.part.tool for e in events if isinstance(e, PartAdded) and isinstance(e.part, ToolPart)
    ]
    states = [e.state for e in events if isinstance(e, ToolStateChanged)]
    all_outputs = [len(s.output) for s in states if isinstance(s, ToolCompleted)]
    errors = sum(isinstance(s, ToolErrored) for s in states)

    def in_range(sizes: list[int], table: tuple[int, ...]) -> bool:
        return table[P25] <= statistics.median(sizes) <= table[P75]

    assert in_range(texts["user"], USER_TEXT_CHARS)
    assert in_range(texts["assistant"], ASSISTANT_TEXT_CHARS)
    # Over all tools the traces' output median is 429 chars (p25 123, p75 1,897).
    assert 123 <= statistics.median(all_outputs) <= 1897
    assert max(all_outputs) <= max(shape.output[-1] for shape in TOOLS.values())
    # The most used tools come first, as in the traces.
    assert {"Bash", "Read", "Edit", "Grep"} <= set(tools)
    assert tools.count("Bash") > tools.count("Write")
    assert 0 < errors < 0.1 * len(tools)
    assert sum(isinstance(e, AssistantFinished) for e in events) > 400


def test_draw_size_follows_table() -> None:
    rng = random.Random(0)
    table = TOOLS["Read"].output
    sizes = sorted(draw_size(rng, table) for _ in range(4001))
    assert table[0] <= sizes[0] and sizes[-1] <= table[-1]
    assert abs(sizes[2000] - table[3]) < 0.15 * table[3]
