"""The compaction planner: what a compaction summarises, what it keeps word for word, what it
replays, and how it asks for the summary.

Everything here is a pure function of history messages and config. The compactor shell calls
``plan_compaction`` for an open ``CompactionRequested``, asks a summarizer for the text (one
request, or chunks then a merge), checks the answer with ``rollback_reason`` and appends the
summary and ``CompactionCompleted`` (``CompactionPlan.projection``) or
``CompactionRolledBack``.

* **Scope**: the model view's messages before the request (so from the last completed
  compaction on). Earlier compactions' requests and summaries are hidden, and the newest
  summary's text becomes the previous summary the new one updates.
* **Tail** (opencode's ``select``/``splitTurn``): the last ``tail_turns`` turns that fit the
  budget stay verbatim, newest first; the first turn that does not fit keeps the longest
  suffix of its messages that does, and the walk stops there. A tail of everything (or of
  nothing) is no tail. A split falls between stored messages, and a stored assistant message
  holds its tool calls with their results (the view's ``tool`` messages come from it), so a
  tail never separates a call from its result.
* **Replay** (overflow requests): the newest real user message is taken out of the summary
  and sent again afterwards, media as placeholders. A kept tail runs up to the request, so it
  would hold the replayed message a second time: a replay keeps no tail.
* **Guards**: ``max_attempts`` requests per turn; a summary that overflowed, is empty or
  loops is rolled back.
"""

from __future__ import annotations

import itertools
import math
import zlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Final, Literal

import msgspec

from contextledger.config import CompactionConfig, Config
from contextledger.events._catalogue import CompactionProjection, FileRange, RollbackReason
from contextledger.events._errors import LedgerError
from contextledger.events._parts import (
    CompactionPart,
    CompactionTrigger,
    FilePart,
    Part,
    TextPart,
    ToolCompleted,
    ToolPart,
    Usage,
)
from contextledger.history._estimate import estimate_part_tokens
from contextledger.history._projection import History, Message
from contextledger.history._view import (
    CLEARED_OUTPUT,
    ViewOptions,
    compaction_part,
    completed_summary,
    convert_message,
    is_real_user,
    view_messages,
)
from contextledger.policy._overflow import inflated, token_count
from contextledger.policy._prune import output_tokens
from contextledger.policy._templates import TEMPLATES, summary_prompt
from contextledger.policy._transcript import (
    chunk_prompt,
    continue_text,
    conversation_request,
    file_manifest,
    merge_prompt,
    replay_parts,
    serialize_head,
    unwrap_summary,
)
from contextledger.policy._turns import resumes_turn
from contextledger.vocabulary._defaults import (
    CHARS_PER_TOKEN,
    PREFLIGHT_FACTOR,
    SUMMARY_TOOL_OUTPUT_CHARS,
)
from contextledger.vocabulary._options import TemplateName

#: opencode: without ``preserve_recent_tokens`` the tail gets a quarter of the usable window,
#: at least 2,000 and at most 8,000 tokens.
TAIL_SHARE: Final = Fraction(1, 4)
MIN_TAIL_TOKENS: Final = 2_000
MAX_TAIL_TOKENS: Final = 8_000
#: Kilo Code: a chunk gets at least 1,000 tokens ...
MIN_CHUNK_TOKENS: Final = 1_000
#: ... and each chunk's summary at most 2,048.
CHUNK_OUTPUT_TOKENS: Final = 2_048
#: Why a fourth attempt in one turn is refused (the rollback's detail).
EXHAUSTED_DETAIL: Final = (
    "compaction exhausted: the context still exceeds the model's limit after {attempts} "
    "attempts in this turn"
)

#: The repetition test (``is_repetitive``). A line of at least 12 characters that occurs 8
#: times: headings and "(none)" are shorter, real bullets do not recur that often.
LINE_MIN_CHARS: Final = 12
LINE_REPEATS: Final = 8
#: A text ending in 4 or more back-to-back copies of the same run of at most 64 words,
#: together at least 32 words: the signature of a decoding loop that ran to the output limit.
LOOP_MAX_PERIOD: Final = 64
LOOP_MIN_COPIES: Final = 4
LOOP_MIN_WORDS: Final = 32
#: A text of 2,000 bytes or more that zlib shrinks below a tenth: real summaries (distinct
#: bullets, paths, identifiers) keep a third or more; a loop anywhere in a long text does not.
COMPRESS_MIN_BYTES: Final = 2_000
COMPRESS_RATIO: Final = Fraction(1, 10)

#: A message's size in tokens.
MessageEstimate = Callable[[Message], int]

_json = msgspec.json.Encoder()


class NotACompactionRequest(LedgerError):
    """The message a plan was asked for is not an open compaction request."""


# --- estimates ------------------------------------------------------------------------------


def text_tokens(chars: int) -> int:
    """opencode's ``Token.estimate``: characters / 4, halves rounded up."""
    return (chars + CHARS_PER_TOKEN // 2) // CHARS_PER_TOKEN


def view_estimate(
    options: ViewOptions, environment: Mapping[str, str] | None = None
) -> MessageEstimate:
    """Tokens of the JSON of a message's model-view conversion under ``options``, with the
    captured environment block of a user message (from ``environment``) included."""

    def estimate(message: Message) -> int:
        block = environment.get(message.id) if environment is not None else None
        return text_tokens(len(_json.encode(convert_message(message, options, block))))

    return estimate


def transcript_estimate(tool_output_chars: int = SUMMARY_TOOL_OUTPUT_CHARS) -> MessageEstimate:
    """Tokens of a message's block of the head transcript (what a chunk request holds)."""
    return lambda message: text_tokens(
        len(serialize_head([message], tool_output_chars=tool_output_chars))
    )


def tail_estimate(config: Config, history: History) -> MessageEstimate:
    """What a kept message will cost in the requests after the compaction: its view as the
    request builder converts it, environment block included. Tool outputs count in full (a
    summary's 2,000-character cut does not apply to the tail), and media counts only when
    the view keeps it (by default media older than a compaction becomes a placeholder)."""
    options = msgspec.structs.replace(
        ViewOptions.from_config(config), strip_media=config.view.historical_media == "compaction"
    )
    each = config.view.environment == "each"
    return view_estimate(options, history.state.environment if each else None)


#: ``select_tail``'s default: the view's default conversion with media as placeholders.
DEFAULT_TAIL_ESTIMATE: Final = view_estimate(ViewOptions(strip_media=True))


# --- turns and the tail ---------------------------------------------------------------------


class Turn(msgspec.Struct, frozen=True):
    """Messages ``start`` (a user message) up to, not including, ``end``."""

    start: int
    end: int


class Selection(msgspec.Struct, frozen=True, kw_only=True):
    """What a compaction summarises (``head``) and keeps verbatim (``tail``), oldest first,
    without earlier compactions' requests and summaries; ``previous_summary`` is the newest
    of those summaries' text."""

    head: tuple[Message, ...]
    tail: tuple[Message, ...] = ()
    tail_tokens: int = 0
    previous_summary: str | None = None

    @property
    def tail_start_id(self) -> str | None:
        """The first kept message (None: nothing is kept)."""
        return self.tail[0].id if self.tail else None


def turns(messages: Sequence[Message]) -> list[Turn]:
    """A turn starts at each user message a person wrote (``is_real_user``: not a synthetic
    one nor a compaction request), or at the compactor's message after an automatic compaction
    (``resumes_turn``: the rest of a turn whose opening was summarised), and runs to the next
    one; messages before the first belong to none."""
    starts = [i for i, m in enumerate(messages) if is_real_user(m) or resumes_turn(m)]
    return [Turn(s, e) for s, e in itertools.pairwise([*starts, len(messages)])]


def summary_text(message: Message) -> str:
    """A summary message's text, without a ``wrap_summary`` wrapper."""
    text = "\n".join(p.text for p in message.parts if isinstance(p, TextPart) and not p.ignored)
    return unwrap_summary(text)


def hide_compactions(messages: Sequence[Message]) -> tuple[list[Message], str | None]:
    """``messages`` without compaction requests and summary messages, and the text of the
    newest completed summary among them (None: there is none)."""
    visible: list[Message] = []
    newest: Message | None = None
    for message in messages:
        if message.summary or compaction_part(message) is not None:
            if completed_summary(message) and (newest is None or message.id > newest.id):
                newest = message
        else:
            visible.append(message)
    return visible, None if newest is None else summary_text(newest)


def tail_budget(usable_tokens: int, config: CompactionConfig) -> int:
    """``preserve_recent_tokens``, or a quarter of the usable window within 2,000-8,000."""
    if config.preserve_recent_tokens is not None:
        return config.preserve_recent_tokens
    share = math.floor(usable_tokens * TAIL_SHARE)
    return min(MAX_TAIL_TOKENS, max(MIN_TAIL_TOKENS, share))


def select_tail(
    messages: Sequence[Message],
    *,
    tail_turns: int,
    budget: int,
    estimate: MessageEstimate = DEFAULT_TAIL_ESTIMATE,
) -> Selection:
    """Split ``messages`` (oldest first) into the head to summarise and the tail to keep,
    once earlier compactions' requests and summaries are left out (``hide_compactions``).

    The last ``tail_turns`` turns are walked newest first: a turn that fits what is left of
    ``budget`` is kept whole; the first that does not keeps the longest suffix that fits
    (if any), and the walk stops. Nothing kept, or everything, means no tail.
    """
    visible, previous = hide_compactions(messages)
    recent = turns(visible)[-tail_turns:] if tail_turns > 0 else []
    sizes = (
        {i: estimate(visible[i]) for i in range(recent[0].start, len(visible))} if recent else {}
    )
    start = _keep_from(recent, sizes, budget)
    if not start:
        return Selection(head=tuple(visible), previous_summary=previous)
    return Selection(
        head=tuple(visible[:start]),
        tail=tuple(visible[start:]),
        tail_tokens=sum(sizes[i] for i in range(start, len(visible))),
        previous_summary=previous,
    )


def _keep_from(recent: Sequence[Turn], sizes: Mapping[int, int], budget: int) -> int | None:
    total = 0
    keep: int | None = None
    for turn in reversed(recent):
        size = sum(sizes[i] for i in range(turn.start, turn.end))
        if total + size <= budget:
            total += size
            keep = turn.start
            continue
        split = _split(turn, sizes, budget - total)
        return keep if split is None else split
    return keep


def _split(turn: Turn, sizes: Mapping[int, int], remaining: int) -> int | None:
    """The start of the longest suffix of ``turn`` after its user message within
    ``remaining``."""
    if remaining <= 0 or turn.end - turn.start <= 1:
        return None
    suffix = sum(sizes[i] for i in range(turn.start + 1, turn.end))
    for start in range(turn.start + 1, turn.end):
        if suffix <= remaining:
            return start
        suffix -= sizes[start]
    return None


# --- replay ---------------------------------------------------------------------------------


def replay_target(messages: Sequence[Message], request_id: str) -> Message | None:
    """The newest real user message before ``request_id``, to send again after an overflow
    compaction; None when no other real user message precedes it (then everything is
    summarised)."""
    real = [m for m in messages if m.id < request_id and is_real_user(m)]
    return max(real, key=lambda m: m.id) if len(real) > 1 else None


# --- chunks ---------------------------------------------------------------------------------


def chunk_budget(usable_tokens: int, ratio: float) -> int:
    """Kilo Code: a chunk's share of the usable window, at least 1,000 tokens."""
    return max(MIN_CHUNK_TOKENS, math.floor(usable_tokens * Fraction(repr(ratio))))


def split_chunks(
    messages: Sequence[Message], budget: int, estimate: MessageEstimate
) -> list[list[Message]]:
    """Greedy chunks of ``messages`` within ``budget``; a message that alone exceeds it is a
    chunk of its own."""
    chunks: list[list[Message]] = []
    size = 0
    for message in messages:
        tokens = estimate(message)
        if chunks and size + tokens <= budget:
            chunks[-1].append(message)
            size += tokens
        else:
            chunks.append([message])
            size = tokens
    return chunks


def needs_chunks(
    head_tokens: int, usable_tokens: int, output_tokens: int, factor: float = PREFLIGHT_FACTOR
) -> bool:
    """Kilo Code: the single request cannot fit, its head inflated as preflight inflates an
    estimate (``policy._overflow.inflated``: ``ceil(head × 1.3)``) plus ``output`` over
    ``usable``."""
    return inflated(head_tokens, factor) + output_tokens > usable_tokens


# --- guards ---------------------------------------------------------------------------------


def attempts_this_turn(
    messages: Sequence[Message],
    per: Literal["turn", "step"] = "turn",
    still_full: Callable[[Usage], bool] = lambda usage: False,
) -> int:
    """Compaction requests (rolled back ones included) since the last real user message of
    ``messages`` (history messages in id order), or with ``per="step"`` since the last
    assistant step that finished without an error and with a usage ``still_full`` does not
    flag, whichever is later: a step that still overflows does not end an overflow loop."""
    count = 0
    for message in reversed(messages):
        if is_real_user(message):
            break
        if per == "step" and _succeeded(message, still_full):
            break
        if compaction_part(message) is not None:
            count += 1
    return count


def _succeeded(message: Message, still_full: Callable[[Usage], bool]) -> bool:
    return (
        message.role == "assistant"
        and not message.summary
        and message.finish is not None
        and message.error is None
        and not (message.usage is not None and still_full(message.usage))
    )


def rollback_reason(summary_text: str, *, overflowed: bool) -> RollbackReason | None:
    """Why a summary must be rolled back (None: keep it): its request overflowed, it has no
    text, or it repeats itself (``is_repetitive``)."""
    if overflowed:
        return "overflow"
    if not summary_text.strip():
        return "empty"
    return "repetitive" if is_repetitive(summary_text) else None


def is_repetitive(text: str) -> bool:
    """A degenerate answer: one line of 12+ characters 8 or more times; or an ending of 4+
    back-to-back copies of the same run of words (32+ words in all); or 2,000+ bytes that
    compress below a tenth of their size."""
    return _repeated_line(text) or _looping_end(text.split()) or _compresses_away(text)


def _repeated_line(text: str) -> bool:
    lines = Counter(s for line in text.splitlines() if len(s := line.strip()) >= LINE_MIN_CHARS)
    return any(count >= LINE_REPEATS for count in lines.values())


def _looping_end(words: Sequence[str]) -> bool:
    n = len(words)
    for period in range(1, min(LOOP_MAX_PERIOD, n // LOOP_MIN_COPIES) + 1):
        i = n - 1
        while i >= period and words[i] == words[i - period]:
            i -= 1
        span = n - 1 - i + period
        if span >= max(period * LOOP_MIN_COPIES, LOOP_MIN_WORDS):
            return True
    return False


def _compresses_away(text: str) -> bool:
    data = text.encode()
    return (
        len(data) >= COMPRESS_MIN_BYTES and len(zlib.compress(data, 9)) < len(data) * COMPRESS_RATIO
    )


# --- rounds that arrived while the summary was written (MiMo Code) --------------------------


class ArrivedTail(msgspec.Struct, frozen=True, kw_only=True):
    """Messages that arrived after a request: ``kept`` verbatim (the newest rounds within the
    budget), ``over_budget`` (older rounds), and ``cleared``: tool parts whose output the
    view should replace with a placeholder (a ``ToolOutputCleared``): results over the
    per-result limit in kept rounds, and every output of the rounds over budget (the log
    cannot drop them from the view, so this is what shrinks them)."""

    kept: tuple[str, ...] = ()
    over_budget: tuple[str, ...] = ()
    cleared: tuple[str, ...] = ()


def arrived_since(history: History, request_id: str, agent_id: str | None = None) -> list[Message]:
    """The messages (of ``agent_id``'s slice, or all) added after ``request_id`` and not
    withdrawn by a rollback."""
    return [
        m
        for m in history.messages
        if m.id > request_id and not m.excluded and agent_id in (None, m.agent_id)
    ]


def arrived_tail(
    messages: Sequence[Message],
    *,
    budget_tokens: int,
    result_max_tokens: int,
    part_tokens: Callable[[Part], int] = estimate_part_tokens,
) -> ArrivedTail:
    """Which rounds (a user message and what follows it) of ``messages`` stay verbatim:
    newest first while they fit ``budget_tokens``, counting each tool result over
    ``result_max_tokens`` as the placeholder that replaces it."""
    visible, _ = hide_compactions(messages)
    placeholder = output_tokens(CLEARED_OUTPUT)
    kept: list[str] = []
    over: list[str] = []
    cleared: list[str] = []
    total = 0
    for group in reversed(rounds(visible)):
        outputs = _live_outputs(group)
        big = {part_id: tokens for part_id, tokens in outputs.items() if tokens > result_max_tokens}
        size = sum(part_tokens(p) for m in group for p in m.parts)
        size -= sum(tokens - placeholder for tokens in big.values())
        ids = [m.id for m in group]
        if not over and total + size <= budget_tokens:
            total += size
            kept[:0] = ids
            cleared += big
        else:
            over[:0] = ids
            cleared += outputs
    return ArrivedTail(kept=tuple(kept), over_budget=tuple(over), cleared=tuple(sorted(cleared)))


def rounds(messages: Sequence[Message]) -> list[Sequence[Message]]:
    """``messages`` grouped by turn; messages before the first turn are a round of their
    own."""
    found = turns(messages)
    first = found[0].start if found else len(messages)
    leading = [messages[:first]] if first else []
    return leading + [messages[t.start : t.end] for t in found]


def _live_outputs(messages: Sequence[Message]) -> dict[str, int]:
    """The tokens of each completed tool output still shown, by part id."""
    return {
        p.id: output_tokens(p.state.output)
        for m in messages
        for p in m.parts
        if isinstance(p, ToolPart)
        and isinstance(p.state, ToolCompleted)
        and p.state.compacted_ms is None
    }


# --- the plan -------------------------------------------------------------------------------


class CompactionPlan(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the shell needs to summarise a compaction request and record the result.

    ``head_ids`` are summarised (``transcript`` renders them; ``request_text`` is the single
    request, or ``chunks`` are set when it would not fit); ``tail_start_id`` is where the
    verbatim tail starts. After the summary: ``replay_parts`` are sent again as a user message
    (``replay_id``: the one they come from) or, with no replay, ``continue_text`` when set.
    ``attempt`` counts this turn's requests; past ``max_attempts`` (``exhausted``) the shell
    rolls back with ``EXHAUSTED_DETAIL`` instead of summarising.
    """

    request_message_id: str
    trigger: CompactionTrigger
    auto: bool
    overflow: bool
    attempt: int
    exhausted: bool
    head_ids: tuple[str, ...]
    tail_start_id: str | None
    tail_tokens: int
    previous_summary: str | None
    replay_id: str | None
    replay_parts: tuple[str, ...]
    continue_text: str | None
    transcript: str
    prompt: str
    head_tokens: int
    chunks: tuple[str, ...]
    file_manifest: tuple[FileRange, ...]
    template: TemplateName

    @property
    def head_first_id(self) -> str | None:
        """The oldest summarised message."""
        return self.head_ids[0] if self.head_ids else None

    @property
    def head_last_id(self) -> str | None:
        """The newest summarised message."""
        return self.head_ids[-1] if self.head_ids else None

    @property
    def request_text(self) -> str:
        """The single summary request: the transcript, then the prompt."""
        return conversation_request(self.transcript, self.prompt)

    def chunk_request(self, index: int) -> str:
        """The request summarising chunk ``index`` (from 0) of ``chunks``."""
        return conversation_request(self.chunks[index], chunk_prompt(index + 1, len(self.chunks)))

    def merge_request(self, partials: Sequence[str]) -> str:
        """The request merging the chunks' summaries into the summary."""
        return merge_prompt(partials, TEMPLATES[self.template], self.previous_summary)

    def projection(self, summary: str) -> CompactionProjection:
        """The projection a ``CompactionCompleted`` records for ``summary``."""
        return CompactionProjection(
            summary=summary,
            head_first_id=self.head_first_id,
            head_last_id=self.head_last_id,
            file_manifest=self.file_manifest,
            template=self.template,
        )


def plan_compaction(
    history: History,
    request_message_id: str,
    *,
    config: Config,
    usable_tokens: int,
    output_tokens: int = CHUNK_OUTPUT_TOKENS,
    agent_id: str | None = None,
    estimate: MessageEstimate | None = None,
) -> CompactionPlan:
    """Plan the open compaction ``request_message_id`` of ``history``.

    ``usable_tokens`` is the usable window of the summarizing model (it sizes the tail, the
    chunks and the single-request check, with ``output_tokens`` for the answer);
    ``agent_id`` the view's slice (None: the whole session, the request builder's default);
    ``estimate`` sizes kept messages (default ``tail_estimate``).
    """
    request, part = _open_request(history, request_message_id)
    settings = config.compaction
    options = msgspec.structs.replace(ViewOptions.from_config(config), agent_id=agent_id)
    before = [m for m in view_messages(history, options) if m.id < request.id]
    replay = replay_target(before, request.id) if part.overflow else None
    selection = select_tail(
        before,
        tail_turns=0 if replay else settings.tail_turns,
        budget=tail_budget(usable_tokens, settings),
        estimate=estimate or tail_estimate(config, history),
    )
    head = [m for m in selection.head if m is not replay]
    chars = config.view.summary_tool_output_chars
    transcript = serialize_head(head, tool_output_chars=chars)
    prompt = summary_prompt(TEMPLATES[settings.template], selection.previous_summary)
    head_tokens = text_tokens(len(conversation_request(transcript, prompt)))
    single = not needs_chunks(
        head_tokens, usable_tokens, output_tokens, config.tokens.preflight_factor
    )
    chunks = (
        []
        if single
        else split_chunks(
            head, chunk_budget(usable_tokens, settings.chunk_ratio), transcript_estimate(chars)
        )
    )
    attempt = attempts_this_turn(
        [m for m in history.messages if m.id <= request.id and agent_id in (None, m.agent_id)],
        settings.attempts_per,
        lambda usage: token_count(usage, config) >= usable_tokens,
    )
    resume = part.auto and replay is None and settings.autocontinue
    return CompactionPlan(
        request_message_id=request.id,
        trigger=part.trigger,
        auto=part.auto,
        overflow=part.overflow,
        attempt=attempt,
        exhausted=attempt > settings.max_attempts,
        head_ids=tuple(m.id for m in head),
        tail_start_id=selection.tail_start_id,
        tail_tokens=selection.tail_tokens,
        previous_summary=selection.previous_summary,
        replay_id=None if replay is None else replay.id,
        replay_parts=() if replay is None else replay_parts(replay),
        continue_text=(
            continue_text(
                part.overflow,
                media=any(isinstance(p, FilePart) for m in head for p in m.parts),
            )
            if resume
            else None
        ),
        transcript=transcript,
        prompt=prompt,
        head_tokens=head_tokens,
        chunks=tuple(serialize_head(chunk, tool_output_chars=chars) for chunk in chunks),
        file_manifest=file_manifest(
            head, settings.manifest_files, _previous_manifest(history, request.id)
        ),
        template=settings.template,
    )


def _open_request(history: History, message_id: str) -> tuple[Message, CompactionPart]:
    compaction = history.state.compactions.get(message_id)
    if compaction is None:
        raise NotACompactionRequest(f"message {message_id!r} is not a compaction request")
    if compaction.status != "requested":
        raise NotACompactionRequest(f"compaction {message_id!r} is {compaction.status} already")
    request = history.message(message_id)
    part = compaction_part(request)
    assert part is not None
    return request, part


def _previous_manifest(history: History, request_id: str) -> tuple[FileRange, ...]:
    """The file manifest of the newest compaction completed before ``request_id``."""
    done = [
        c.projection
        for key, c in sorted(history.state.compactions.items())
        if key < request_id and c.status == "completed" and c.projection is not None
    ]
    return done[-1].file_manifest if done else ()
