"""opencode's usage scenarios (compaction.test.ts getUsage, reference §9.2 #36-47) through
every wire format's decoder: each scenario is written in the fields that API reports."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from contextledger.events._parts import Usage
from contextledger.providers import WIRE_FORMATS, wire_format

#: (uncached input, cache read, cache write, visible output, reasoning)
Counts = tuple[int, int, int, int, int]


def _anthropic(i: int, r: int, w: int, o: int, reasoning: int) -> dict[str, Any]:
    # Anthropic bills thinking as output and does not report it apart.
    usage = {"input_tokens": i, "output_tokens": o + reasoning}
    return {"usage": {**usage, "cache_read_input_tokens": r, "cache_creation_input_tokens": w}}


def _chat(i: int, r: int, w: int, o: int, reasoning: int) -> dict[str, Any]:
    return {
        "usage": {
            "prompt_tokens": i + r + w,
            "prompt_tokens_details": {"cached_tokens": r, "cache_write_tokens": w},
            "completion_tokens": o + reasoning,
            "completion_tokens_details": {"reasoning_tokens": reasoning},
        }
    }


def _responses(i: int, r: int, w: int, o: int, reasoning: int) -> dict[str, Any]:
    return {
        "usage": {
            "input_tokens": i + r + w,
            "input_tokens_details": {"cached_tokens": r, "cache_write_tokens": w},
            "output_tokens": o + reasoning,
            "output_tokens_details": {"reasoning_tokens": reasoning},
        }
    }


def _bedrock(i: int, r: int, w: int, o: int, reasoning: int) -> dict[str, Any]:
    return {
        "usage": {
            "inputTokens": i,
            "outputTokens": o + reasoning,
            "cacheReadInputTokens": r,
            "cacheWriteInputTokens": w,
        }
    }


def _gemini(i: int, r: int, w: int, o: int, reasoning: int) -> dict[str, Any]:
    meta = {"promptTokenCount": i + r, "cachedContentTokenCount": r}
    return {"usageMetadata": {**meta, "candidatesTokenCount": o, "thoughtsTokenCount": reasoning}}


#: Each format's body, and which parts of a scenario it can express: (cache writes,
#: reasoning reported apart from output).
BODIES: dict[str, tuple[Callable[..., dict[str, Any]], bool, bool]] = {
    "anthropic": (_anthropic, True, False),
    "bedrock": (_bedrock, True, False),
    "gemini": (_gemini, False, True),
    "openai-chat": (_chat, True, True),
    "openai-compatible": (_chat, True, True),
    "openrouter": (_chat, True, True),
    "openai-responses": (_responses, True, True),
}


def _decode(name: str, counts: Counts) -> Usage:
    build, writes, split = BODIES[name]
    i, r, w, o, reasoning = counts
    if not writes:
        i, w = i + w, 0
    if not split:
        o, reasoning = o + reasoning, 0
    return wire_format(name).decode_usage(build(i, r, w, o, reasoning))


def test_every_format_has_a_usage_body() -> None:
    assert set(BODIES) == set(WIRE_FORMATS)


@pytest.mark.parametrize("name", sorted(BODIES))
def test_plain_usage_passes_through(name: str) -> None:
    assert _decode(name, (1000, 0, 0, 500, 0)) == Usage(input=1000, output=500)


@pytest.mark.parametrize("name", sorted(BODIES))
def test_a_cache_read_is_moved_out_of_the_input(name: str) -> None:
    usage = _decode(name, (800, 200, 0, 500, 0))
    assert (usage.input, usage.cache_read, usage.prompt) == (800, 200, 1000)


@pytest.mark.parametrize("name", [n for n, (_, writes, _) in sorted(BODIES.items()) if writes])
def test_a_cache_write_is_its_own_count(name: str) -> None:
    usage = _decode(name, (500, 200, 300, 500, 0))
    assert (usage.input, usage.cache_read, usage.cache_write) == (500, 200, 300)
    assert usage.prompt == 1000 and usage.total == 1500


@pytest.mark.parametrize("name", [n for n, (_, _, split) in sorted(BODIES.items()) if split])
def test_reasoning_is_split_out_of_the_output(name: str) -> None:
    usage = _decode(name, (1000, 0, 0, 400, 100))
    assert (usage.output, usage.reasoning, usage.total) == (400, 100, 1500)


@pytest.mark.parametrize("name", sorted(BODIES))
@pytest.mark.parametrize("response", [{}, {"usage": None}, {"usageMetadata": None}, {"usage": {}}])
def test_missing_usage_fields_are_zeros(name: str, response: dict[str, Any]) -> None:
    assert wire_format(name).decode_usage(response) == Usage()
