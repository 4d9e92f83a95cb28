"""Retention: how many of the facts the agent uses again were in what it was sent.

Defined on the recorded trajectory alone, without the summarizers' code. A *fact* is a
path, a file name, an identifier (snake_case, camelCase, dotted), a number of three or more
digits or a version, or an error name (``TypeError``), matched on token boundaries
(``facts_in``). At each model call of a replay, the facts in the agent's own answer (its text
and its tool inputs, as recorded) that appeared at an earlier call (in a user message, an
answer, a tool input or a tool output; not in the user message that opens this call) are
*needed*: the agent used again something it had been shown. A needed fact is *retained* when
it is in the request the strategy sent for that call (its messages: summaries, kept turns,
tool results as sent). ``retention`` is retained over needed, summed over the calls.

``older`` counts only the needed facts whose latest mention lies more than ``RECENT_CALLS``
calls back, and how many of them the request held. It alone would assume that every
strategy keeps the newest calls whole, and truncating ones do not: ``truncate-500`` cuts
every tool result to its first 500 characters, the one the agent is reading right now
included, and ``age-truncate-500-keep-3`` keeps only the newest three. When the agent uses a
fact from the previous call's output beyond its 500th character, truncate-500's request did
not hold it; ``older`` never sees that loss, and scores such strategies only on older facts,
which they keep because they never summarise. So ``retention`` counts every reuse, and
``older`` is what tells summaries apart: whatever a compaction keeps of the conversation
before its tail. A strategy that sends everything retains every fact the view does not cut
(long tool outputs are cut at the view's limits).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final

import msgspec

from contextledger.events._parts import TextPart, ToolPart
from contextledger.simulation._replay import RecordedCall, RecordedTurn
from contextledger.vocabulary._messages import (
    ModelMessage,
    ModelReasoning,
    ModelText,
    ModelToolCall,
    ModelToolResult,
)

#: A fact, on token boundaries: a path (with a slash), a dotted name (a file name with its
#: extension, ``os.path.join``), a version or a number of three or more digits, an
#: identifier with an underscore or a lower-to-upper case change (``snake_case``,
#: ``camelCase``, ``TypeError``); never the start of a longer one (``1.2.3-rc1`` holds no
#: fact, not ``1.2``). Shorter numbers and plain words are too common to say that a particular
#: earlier fact was used.
FACT: Final = re.compile(
    r"""(?<![\w./-])(?:
        (?:[\w.-]*/)+[\w.-]+
      | [A-Za-z_][\w-]*(?:\.[A-Za-z_]\w*)+
      | \d+(?:\.\d+)+ | \d{3,}
      | [A-Za-z_]\w*(?:_|[a-z][A-Z])\w*
    )(?![\w/-]|\.\w)""",
    re.VERBOSE,
)
#: How far back (in calls) a fact's latest mention must lie for its use to count as
#: ``older``: the newest few calls are in any kept tail (2,000 tokens hold a few steps), so a
#: fact used again within them says nothing about what a compaction kept of the conversation
#: before it.
RECENT_CALLS: Final = 5
#: Facts shorter than this (after a trailing full stop is dropped) are left out.
MIN_FACT_CHARS: Final = 3


def facts_in(text: str) -> set[str]:
    """The facts in ``text`` (see ``FACT``), a trailing full stop dropped."""
    found = (m.group().rstrip(".") for m in FACT.finditer(text))
    return {f for f in found if len(f) >= MIN_FACT_CHARS}


def _strings(value: Any) -> Iterator[str]:
    """Every string in a tool input (JSON values, nested)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


class FactMemo:
    """``facts_in`` of each text, found once and kept: a replay's requests repeat the texts
    of the ones before, and replays of one trace under several strategies repeat each
    other's, so each text is read once. It holds every text it was given: keep one per
    trace. A session names the same few thousand facts over and over, so each text keeps
    its facts as a tuple of one shared copy of each."""

    __slots__ = ("_copies", "_known")

    def __init__(self) -> None:
        self._known: dict[str, tuple[str, ...]] = {}
        self._copies: dict[str, str] = {}

    def __call__(self, texts: Iterable[str]) -> set[str]:
        """The facts in ``texts``, together."""
        known, copies = self._known, self._copies
        out: set[str] = set()
        for text in texts:
            found = known.get(text)
            if found is None:
                found = known[text] = tuple(copies.setdefault(f, f) for f in facts_in(text))
            out.update(found)
        return out


def _used_facts(call: RecordedCall, facts: FactMemo) -> set[str]:
    """The facts the agent wrote at ``call``: its text and its tool inputs."""
    texts: list[str] = []
    for part in call.parts:
        if isinstance(part, TextPart):
            texts.append(part.text)
        elif isinstance(part, ToolPart):
            texts.extend(_strings(part.state.input))
    return facts(texts)


def _call_output_facts(call: RecordedCall, facts: FactMemo) -> set[str]:
    """The facts the call's tool results brought into the conversation."""
    texts = [
        str(getattr(part.state, "output", "") or getattr(part.state, "error", ""))
        for part in call.parts
        if isinstance(part, ToolPart)
    ]
    return facts(texts)


def _message_texts(message: ModelMessage) -> Iterator[str]:
    for item in message.content:
        if isinstance(item, ModelText | ModelReasoning):
            yield item.text
        elif isinstance(item, ModelToolCall):
            yield from _strings(item.input)
        elif isinstance(item, ModelToolResult):
            yield item.output


class Retention(msgspec.Struct, frozen=True):
    """``needed`` and ``retained`` fact uses over a replay's calls, and the ``older`` ones
    among them (see the module docstring)."""

    needed: int = 0
    retained: int = 0
    needed_older: int = 0
    retained_older: int = 0

    @property
    def share(self) -> float | None:
        """``retained / needed``; None when no fact was needed."""
        return _share(self.retained, self.needed)

    @property
    def share_older(self) -> float | None:
        """``retained_older / needed_older``; None when no older fact was needed."""
        return _share(self.retained_older, self.needed_older)


def _share(retained: int, needed: int) -> float | None:
    return retained / needed if needed else None


class RetentionCounter:
    """Counts retention call by call through a replay of ``turns``: ``observe(n, messages)``
    with each call's number (from 0, in the order of ``turns``) and the messages sent.
    ``facts`` finds the facts of each text (a new one when not given; pass one to counters
    of the same trace to read each text once)."""

    def __init__(self, turns: Sequence[RecordedTurn], facts: FactMemo | None = None) -> None:
        self._facts = facts = facts or FactMemo()
        # Per call, the facts it needs, the older ones first, and how many are older (a
        # tuple each: a replay of 16,000 calls keeps one per call).
        self._needed: list[tuple[tuple[str, ...], int]] = []
        last: dict[str, int] = {}  # a fact: the call at which it was last mentioned
        for turn in turns:
            for call in (*turn.opening(), turn, *turn.steps()):
                number = len(self._needed)
                if not isinstance(call, RecordedCall):  # a user message, typed or synthetic
                    for fact in facts((call.text,)):
                        last[fact] = number
                    continue
                used = _used_facts(call, facts)
                seen = [f for f in used if f in last and last[f] < number]
                older = [f for f in seen if last[f] < number - RECENT_CALLS]
                recent = [f for f in seen if last[f] >= number - RECENT_CALLS]
                self._needed.append((tuple(older + recent), len(older)))
                for fact in used | _call_output_facts(call, facts):
                    last[fact] = number
        self._memo: dict[int, tuple[ModelMessage, set[str]]] = {}
        self._counts = Retention()

    def observe(self, number: int, messages: Sequence[ModelMessage]) -> None:
        """Count call ``number``'s needed facts and those in ``messages``, the request sent."""
        needed, older = self._needed[number]
        if not needed:
            return
        sent: set[str] = set()
        memo: dict[int, tuple[ModelMessage, set[str]]] = {}
        for message in messages:
            known = self._memo.get(id(message))
            if known is None or known[0] is not message:
                known = (message, self._facts(_message_texts(message)))
            memo[id(message)] = known
            sent |= known[1]
        # Only the messages of this request are kept: a live view hands the same objects back
        # while they are unchanged, and the memo stays the size of one request.
        self._memo = memo
        held = [fact in sent for fact in needed]
        counts = self._counts
        self._counts = Retention(
            counts.needed + len(needed),
            counts.retained + sum(held),
            counts.needed_older + older,
            counts.retained_older + sum(held[:older]),
        )

    @property
    def result(self) -> Retention:
        """The counts so far."""
        return self._counts
