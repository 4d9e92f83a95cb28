from __future__ import annotations

import random
import re

import msgspec
import pytest

from contextledger.cachesim import lower_bound, read_growth_errors, simulate
from contextledger.cachesim._blocks import BlockPart, Ttl
from contextledger.prices._tables import FAMILIES, load_prices, price_for
from tests.cachesim.conftest import blocks, names, req

SONNET = price_for("claude-sonnet-4")


def test_lower_bound_of_a_growing_conversation_by_hand() -> None:
    r1 = req(blocks(names(10), 200, {9: "5m"}), at=0)
    r2 = req(blocks(names(12), 200, {11: "5m"}), at=60)
    bound = lower_bound([r1, r2], SONNET)
    assert bound == pytest.approx((2000 * 3.0 + 2000 * 0.75 + 2000 * 0.3 + 400 * 3.0) / 1e6)
    assert bound <= simulate([r1, r2], SONNET).total.cost


def test_lower_bound_reads_repeats_the_simulation_misses() -> None:
    r = blocks(names(10), 200)
    result = simulate([req(r, 0), req(r, 1000)], SONNET)
    assert result.total.cache_read == 0
    assert result.lower_bound == pytest.approx((2000 * 3.0 + 2000 * 0.75 + 2000 * 0.3) / 1e6)


@pytest.mark.parametrize(
    "model", ["claude-sonnet-4", "claude-opus-4-5", "gpt-4o", "gemini-2.5-flash", "deepseek-chat"]
)
def test_lower_bound_is_never_above_the_simulated_cost(model: str) -> None:
    price = price_for(model)
    base = names(40)
    session = [
        req(blocks(base[:10], 300, {9: "1h"}), at=0, output=50),
        req(blocks(base[:14], 300, {13: "5m"}), at=30, output=50),
        req(blocks([*base[:3], "x", *base[4:20]], 300, {19: "5m"}), at=400, output=10),
        req(blocks(base[:40], 300, {0: "5m", 39: "5m"}), at=500),
        req(blocks(base[:40], 300, {i: "5m" for i in range(0, 40, 5)}), at=520),
        req(blocks(base[:2], 300), at=530),
    ]
    result = simulate(session, price)
    assert result.lower_bound <= result.total.cost + 1e-12
    assert result.lower_bound == pytest.approx(lower_bound(session, price))


def test_every_price_entry_has_a_date_and_a_source() -> None:
    for family in FAMILIES:
        entries = load_prices(family)
        assert entries
        for entry in entries:
            assert entry.family == family
            assert re.fullmatch(r"\d{4}(-\d{2}){0,2}", entry.date), entry
            assert entry.source
            assert entry.cache_read < entry.input


def test_anthropic_write_prices_are_1_25x_and_2x_input() -> None:
    for entry in load_prices("anthropic"):
        assert entry.cache_write == pytest.approx(1.25 * entry.input)
        assert entry.cache_write_1h == pytest.approx(2 * entry.input)


def test_unknown_model_raises_key_error() -> None:
    with pytest.raises(KeyError):
        price_for("mystery-model")


def test_read_growth_errors_median_and_p90_by_hand() -> None:
    result = read_growth_errors([0, 1000, 2500, 2500], [0, 1200, 2500, 3000])
    assert result.errors == (0, -200, 200, -500)
    assert result.median == 200
    assert result.p90 == 500


def test_read_growth_errors_rejects_mismatched_lengths() -> None:
    with pytest.raises(ValueError):
        read_growth_errors([1], [1, 2])


def test_lower_bound_is_never_above_the_simulated_cost_on_random_sessions() -> None:
    # Some blocks are thinking or user input, and some sessions go to a model that drops
    # the thinking of earlier turns.
    rng = random.Random(7)
    sizes = {f"b{i}": rng.randint(1, 900) for i in range(60)}
    kinds: list[BlockPart | None] = [None, None, "thinking", "user_input"]
    parts = {f"b{i}": rng.choice(kinds) for i in range(60)}
    for _ in range(300):
        price = rng.choice(load_prices(rng.choice(FAMILIES)))
        model = rng.choice(["", "claude-sonnet-4-5", "claude-opus-4-5"])
        session, at = [], 0.0
        for _ in range(rng.randint(1, 8)):
            keys = [f"b{i}" for i in range(rng.randint(1, 60))]
            if rng.random() < 0.3:
                edited = rng.randrange(len(keys))
                keys[edited] = f"b{rng.randrange(60)}"
            marked = rng.sample(range(len(keys)), min(len(keys), rng.randint(0, 6)))
            marks: dict[int, Ttl] = {i: rng.choice(["5m", "1h"]) for i in marked}
            at += rng.choice([1, 100, 299, 301, 4000])
            bs = tuple(
                msgspec.structs.replace(b, part=parts[b.key])
                for b in blocks(keys, [sizes[k] for k in keys], marks)
            )
            call = req(bs, at, output=rng.randint(0, 100))
            session.append(msgspec.structs.replace(call, model=model))
        result = simulate(session, price)
        assert result.lower_bound <= result.total.cost + 1e-12
