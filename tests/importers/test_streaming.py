"""Imports stream: inside ``streaming`` an importer hands its events to the sink a batch at a
time, the same events it returns without one, and memory does not grow with the file."""

from __future__ import annotations

import json
import random
import tracemalloc
from collections import defaultdict
from pathlib import Path
from typing import Any

import msgspec
import pytest

from contextledger.bench._import import generated_chat
from contextledger.events._catalogue import Event
from contextledger.importers import TraceImportError, import_with_report, transcripts_under
from contextledger.importers._sink import STREAM_BATCH, Tally, streaming

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"
#: How large a generated transcript is: an import that keeps its events peaks at 50 MB (Claude
#: Code) and 80 MB (OpenAI chat).
GENERATED_BYTES = 20 * 1024 * 1024
#: The peak an import of it may reach: half the file. What grows with the file is what the
#: format needs per conversation: each record's uuid (Claude Code), each call's id and usage.
PEAK_BOUND = GENERATED_BYTES // 2
_WORDS = ("alpha", "beta", "gamma", "delta", "epsilon")


class _Recording(Tally):
    """A tally that also keeps what each buffer handed over, and the largest hand-over."""

    def __init__(self) -> None:
        super().__init__()
        self.kept: defaultdict[int, list[Event]] = defaultdict(list)
        self.largest = 0

    def take(self, ordinal: int, events: list[Event]) -> None:
        super().take(ordinal, events)
        self.kept[ordinal].extend(events)
        self.largest = max(self.largest, len(events))


def _transcripts() -> list[Path]:
    if not TRACES.is_dir():
        pytest.skip(f"shared/traces not present: {TRACES} does not exist")
    return transcripts_under(TRACES)


def _builtins(events: list[Event], session_id: str) -> list[Any]:
    return [msgspec.to_builtins(msgspec.structs.replace(e, session_id=session_id)) for e in events]


def test_every_shared_transcript_streams_the_events_it_imports() -> None:
    for path in _transcripts():
        for lenient in (False, True):
            try:
                whole = import_with_report(path, lenient=lenient)
            except TraceImportError:  # one shared transcript is no valid conversation
                assert not lenient
                continue
            sink = _Recording()
            with streaming(sink):
                streamed = import_with_report(path, lenient=lenient)
            assert streamed.report == whole.report, path
            by_id = {sid: ordinal for ordinal, sid in sink.session_ids.items()}
            pairs = zip(
                [s for top in whole.sessions for s in top.sessions()],
                [s for top in streamed.sessions for s in top.sessions()],
                strict=True,
            )
            for kept, parted in pairs:
                sid = kept.session_id
                assert parted.session_id == sid and parted.streamed is not None, path
                events = [parted.events[0], *sink.kept[by_id[sid]], *parted.events[1:]]
                assert _builtins(events, sid) == _builtins(kept.events, sid), (path, sid)
            # A lenient import holds the events of a record (a message) until it is built whole.
            assert sink.largest <= (2 * STREAM_BATCH if lenient else STREAM_BATCH), path


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _openai_chat(path: Path) -> int:
    """A generated chat log of ``GENERATED_BYTES`` (one JSON document on one line); returns
    its number of messages."""
    turns = generated_chat(path, GENERATED_BYTES)
    return 3 * turns  # a tool result is no message of its own, the system prompt is config


def _claude_code(path: Path) -> int:
    """A generated Claude Code transcript of ``GENERATED_BYTES``; returns its number of
    messages."""
    rng = random.Random(2)
    size, turn, parent = 0, 0, None
    with path.open("w") as out:
        while size < GENERATED_BYTES:
            text = _text(rng, 300)
            base = {
                "sessionId": "s1",
                "timestamp": f"2025-01-01T{turn // 3600 % 24:02d}:{turn // 60 % 60:02d}:"
                f"{turn % 60:02d}Z",
            }
            usage = {"input_tokens": 10, "output_tokens": 5}
            use = {
                "type": "tool_use",
                "id": f"t{turn}",
                "name": "Bash",
                "input": {"command": text[:200]},
            }
            result = {"type": "tool_result", "tool_use_id": f"t{turn}", "content": text}
            records = [
                {
                    "type": "user",
                    "uuid": f"u{turn}",
                    "parentUuid": parent,
                    "message": {"role": "user", "content": f"q{turn} {text}"},
                },
                {
                    "type": "assistant",
                    "uuid": f"a{turn}",
                    "message": {
                        "role": "assistant",
                        "id": f"m{turn}",
                        "content": [use],
                        "usage": usage,
                    },
                },
                {
                    "type": "user",
                    "uuid": f"r{turn}",
                    "message": {"role": "user", "content": [result]},
                },
                {
                    "type": "assistant",
                    "uuid": f"b{turn}",
                    "message": {
                        "role": "assistant",
                        "id": f"n{turn}",
                        "content": [{"type": "text", "text": text[:500]}],
                        "usage": usage,
                    },
                },
            ]
            for record in records:
                line = json.dumps({**base, **record}) + "\n"
                out.write(line)
                size += len(line)
            parent = f"b{turn}"
            turn += 1
    return 3 * turn  # a tool result is no message of its own


@pytest.mark.parametrize(
    ("generate", "lenient"), [(_openai_chat, False), (_openai_chat, True), (_claude_code, True)]
)
def test_a_long_transcript_is_imported_in_memory_far_below_its_events(
    generate: Any, lenient: bool, tmp_path: Path
) -> None:
    path = tmp_path / ("long.jsonl" if generate is _claude_code else "long.json")
    messages = generate(path)
    tracemalloc.start()
    try:
        with streaming(Tally()):
            result = import_with_report(path, lenient=lenient)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    written = result.report.written
    assert written["user messages"] + written["assistant messages"] == messages
    assert peak < PEAK_BOUND, f"{peak / 2**20:.1f} MB for {path.stat().st_size / 2**20:.1f} MB"
