"""Replaying a recorded session as an agent would have run it.

``recorded_turns`` reads the user turns, their synthetic user messages (what the client sent
on its own: a hook's output, a changed file's snippet) and model calls out of a session's
events (pure). ``TurnReplay`` drives a session with them: per user turn ``add_user``; per
synthetic message ``add_user(..., synthetic=True)`` where it was recorded, so it stays in its
turn; per model call ``build_request`` first (a session compacts there when it decides to),
then the recorded text, reasoning and tool calls, their results, and ``finish`` (the
after-turn prune runs there). The session is a runtime's ``SessionHandle`` or the
simulation's ``LocalSession``: both record, decide and build through the same functions, so
both replays of a trace append the same events and send the same requests.

Each built request is simulated against the prompt cache (``cachesim.sim_request``) at the time
the call was recorded, so the cache's TTL plays out as it did. The usage passed to ``finish`` is
not the recorded one: the recorded usage measured the original run's prompt, which had a
different context (a bigger window, its own compactions), and the overflow check and the
cost-mode prune read the last usage. The replay passes instead the simulated prompt of the
request it just built as ``input`` (with the recorded ``output``), so the policy sees what a
provider would have reported for the requests actually sent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Final

from contextledger.actors._api import SessionApi
from contextledger.cachesim import BlockMemo, SimRequest, sim_request
from contextledger.compaction._compactor import CompactionExhausted
from contextledger.events._catalogue import MAIN_AGENT, Event, RecordedEvent
from contextledger.events._parts import (
    FilePart,
    MessageError,
    ReasoningPart,
    TextPart,
    ToolCompleted,
    ToolErrored,
    ToolPart,
    Usage,
)
from contextledger.history._projection import History, Message
from contextledger.history._view import compaction_part
from contextledger.policy._prune import Plan, PrunePlan, StripPlan, TrimPlan
from contextledger.providers._errors import ProviderError
from contextledger.request._builder import BuiltRequest, RequestInputs
from contextledger.vocabulary._requests import Request


@dataclass(frozen=True)
class RecordedCall:
    """One recorded model call: its message's id in the recording, when, its text,
    reasoning and tool parts in order, how it finished and the output tokens it reported."""

    message_id: str
    time_ms: int
    parts: tuple[TextPart | ReasoningPart | ToolPart, ...]
    finish: str
    error: MessageError | None
    output_tokens: int


@dataclass(frozen=True)
class RecordedNote:
    """A synthetic user message of a turn (sent by the client on its own, not typed): when,
    its text and files, and how many of the turn's calls came before it (``None``: it came
    before the turn's own message, as the notes that open a session do)."""

    time_ms: int
    text: str
    files: tuple[tuple[str, str, str | None], ...]
    after: int | None


@dataclass(frozen=True)
class RecordedTurn:
    """One user turn: the user's text and files (``(mime, url, filename)``), the calls that
    answered it and the synthetic user messages recorded in it (``notes``, in order)."""

    time_ms: int
    text: str
    files: tuple[tuple[str, str, str | None], ...]
    calls: list[RecordedCall] = field(default_factory=list)
    notes: list[RecordedNote] = field(default_factory=list)

    def opening(self) -> Iterator[RecordedNote]:
        """The notes recorded before the turn's own message."""
        return (note for note in self.notes if note.after is None)

    def steps(self) -> Iterator[RecordedCall | RecordedNote]:
        """The calls and the notes after the turn's own message, in recorded order."""
        notes = [(note.after, note) for note in self.notes if note.after is not None]
        told = 0
        for number, call in enumerate(self.calls):
            while told < len(notes) and notes[told][0] <= number:
                yield notes[told][1]
                told += 1
            yield call
        yield from (note for _, note in notes[told:])


def _content(message: Message) -> tuple[str, tuple[tuple[str, str, str | None], ...]]:
    text = "\n\n".join(p.text for p in message.parts if isinstance(p, TextPart) and p.text)
    files = tuple((p.mime, p.url, p.filename) for p in message.parts if isinstance(p, FilePart))
    return text, files


def _call(message: Message) -> RecordedCall:
    parts = tuple(
        p
        for p in message.parts
        if isinstance(p, ToolPart | ReasoningPart) or (isinstance(p, TextPart) and p.text)
    )
    return RecordedCall(
        message_id=message.id,
        time_ms=message.created_ms,
        parts=parts,
        finish=message.finish or "stop",
        error=message.error,
        output_tokens=message.usage.output if message.usage is not None else 0,
    )


def recorded_turns(events: Sequence[Event]) -> list[RecordedTurn]:
    """The main agent's user turns and model calls in ``events`` (a valid session). A
    synthetic user message is a note of the turn it arrived in (of the first turn when it came
    before it), and a user message with neither text nor files continues the turn before it;
    compaction requests and summaries are left out, and so are calls before the first user
    message."""
    if not events:
        return []
    session_id = events[0].session_id
    history = History.rebuild(
        session_id, (RecordedEvent(session_id, i, i, e) for i, e in enumerate(events, 1))
    )
    turns: list[RecordedTurn] = []
    opening: list[RecordedNote] = []  # the notes before the first turn
    for message in history.messages:
        if message.agent_id != MAIN_AGENT:
            continue
        if message.role == "user" and compaction_part(message) is None:
            text, files = _content(message)
            if not text and not files:
                continue
            if message.synthetic:
                after = len(turns[-1].calls) if turns else None
                note = RecordedNote(message.created_ms, text, files, after)
                (turns[-1].notes if turns else opening).append(note)
            else:
                turns.append(RecordedTurn(message.created_ms, text, files, notes=opening))
                opening = []
        elif message.role == "assistant" and not message.summary and turns:
            turns[-1].calls.append(_call(message))
    return turns


class ReplayClock:
    """A session's clock during a replay: the recorded time, moved on by a millisecond at each
    read so that ids and times stay increasing."""

    def __init__(self, start_ms: int) -> None:
        self.now = start_ms

    def at(self, time_ms: int) -> None:
        """Move to ``time_ms`` unless the clock is past it already."""
        self.now = max(self.now, time_ms)

    def __call__(self) -> int:
        self.now += 1
        return self.now


@dataclass(frozen=True)
class ReplayedCall:
    """One model call of a replay: its index among the calls and its turn's (from 0), what
    the session did right before it (``compactions``: each outcome, ``"compacted"`` or
    ``"compaction rolled back"``; ``pruned``: the after-turn prune since the call before), the
    projection it was built from (read it, do not change it), the request and that request
    as the cache simulator sees it (with the recorded output tokens), and how many times the
    provider refused it as over the window before (each answered by an overflow
    compaction)."""

    call: int
    turn: int
    compactions: tuple[str, ...]
    pruned: tuple[Plan, ...]
    history: History
    built: BuiltRequest
    sim: SimRequest
    refused: int = 0

    @property
    def actions(self) -> str:
        """What the session did before this call, in ``describe_actions`` wording."""
        return describe_actions(self.compactions, self.pruned)


def describe_actions(compactions: Sequence[str], plans: Sequence[Plan]) -> str:
    """One line for tables: the compactions' outcomes (``"compacted"``, ``"compaction rolled
    back"``), then the prunes (``"cleared 3 outputs (12,400 tokens)"``, ``"trimmed 2
    outputs"``, ``"stripped 1 parts"``); ``""`` when nothing was done."""
    said = list(compactions)
    cleared = [p for p in plans if isinstance(p, PrunePlan)]
    if cleared:
        outputs = sum(len(p.part_ids) for p in cleared)
        tokens = sum(p.tokens for p in cleared)
        said.append(f"cleared {outputs} outputs ({tokens:,} tokens)")
    trimmed = sum(1 for p in plans if isinstance(p, TrimPlan))
    if trimmed:
        said.append(f"trimmed {trimmed} outputs")
    stripped = sum(len(p.part_ids) for p in plans if isinstance(p, StripPlan))
    if stripped:
        said.append(f"stripped {stripped} parts")
    return "; ".join(said)


class _Outcomes:
    """The compactions of a session that completed or were rolled back since the last
    ``take``. An outcome is final, and compactions are kept in the order they were
    requested, so each look reads only those after the oldest still open."""

    def __init__(self) -> None:
        self._settled = 0  # the leading compactions, all of them settled and reported
        self._reported: set[str] = set()  # settled ones after those

    def take(self, history: History) -> tuple[str, ...]:
        """Each new outcome in request order: ``"compacted"`` or ``"compaction rolled
        back"``."""
        said = []
        leading = True
        for key, compaction in islice(history.state.compactions.items(), self._settled, None):
            if compaction.status == "requested":
                leading = False
                continue
            if key not in self._reported:
                completed = compaction.status == "completed"
                said.append("compacted" if completed else "compaction rolled back")
            if leading:
                self._settled += 1
                self._reported.discard(key)
            else:
                self._reported.add(key)
        return tuple(said)


#: How many times one call is sent again after the provider refused it as over the window
#: (each refusal is answered with an overflow compaction): Kilo's ``MAX_COMPACTION_ATTEMPTS``.
#: A session's own guard (``compaction.max_attempts``) usually gives up first.
OVERFLOW_RETRIES: Final = 3
#: What the simulated provider answers a request over the window with.
OVERFLOW_ERROR: Final = MessageError(
    name="ContextOverflowError", message="prompt is too long: the request exceeds the window"
)


class ReplayFailed(RuntimeError):
    """The session could not send call ``call`` (from 0): its request stayed over the window
    after every overflow compaction it could make; the provider refused it ``refused``
    times."""

    def __init__(self, call: int, detail: str, *, refused: int) -> None:
        super().__init__(f"call {call + 1}: {detail}")
        self.call = call
        self.refused = refused


def over_window(sim: SimRequest, request: Request, context: int) -> bool:
    """The provider's rule: a request is refused when its prompt (``sim.prompt_tokens``, as
    the provider counts it) and the output it asks for do not fit in ``context`` tokens
    (0: unknown, never refused)."""
    return context > 0 and sim.prompt_tokens + (request.max_output_tokens or 0) > context


class TurnReplay:
    """Drives ``session`` through ``turns`` (see the module docstring); ``calls`` yields each
    model call as it is sent. A request over ``context`` tokens (``over_window``) is refused
    as a provider would refuse it: the session records the overflow error (``record_error``,
    which compacts) and builds the call again, up to ``OVERFLOW_RETRIES`` times; a call that
    cannot be sent raises ``ReplayFailed``. ``refused`` counts the requests refused so far;
    ``trailing_pruned`` is the after-turn prune that followed the last call."""

    def __init__(
        self,
        session: SessionApi,
        turns: Sequence[RecordedTurn],
        inputs: RequestInputs,
        clock: ReplayClock,
        *,
        context: int = 0,
    ) -> None:
        self.session = session
        self.turns = turns
        self.inputs = inputs
        self.clock = clock
        self.context = context
        self.refused = 0
        self.trailing_pruned: tuple[Plan, ...] = ()
        self._blocks = BlockMemo()

    async def calls(self) -> AsyncIterator[ReplayedCall]:
        """Replay the turns, yielding each call once its request is built and accepted."""
        session, clock = self.session, self.clock
        pruned: tuple[Plan, ...] = ()
        number = 0
        outcomes = _Outcomes()
        for index, turn in enumerate(self.turns):
            for note in turn.opening():
                await self._note(note)
            clock.at(turn.time_ms)
            user_id = await session.add_user(turn.text, files=turn.files)
            for call in turn.steps():
                if isinstance(call, RecordedNote):
                    await self._note(call)
                    continue
                clock.at(call.time_ms)
                outcomes.take(await session.history())  # only those of this call are told
                built, sim, refused = await self._send(number, user_id, call)
                history = await session.history()
                compacted = outcomes.take(history)
                yield ReplayedCall(
                    number, index, compacted, pruned, history, built, sim, refused=refused
                )
                number += 1
                pruned = tuple(await _record_call(session, user_id, call, sim.prompt_tokens, clock))
        self.trailing_pruned = pruned

    async def _note(self, note: RecordedNote) -> None:
        """Record ``note`` as the synthetic user message it was."""
        self.clock.at(note.time_ms)
        await self.session.add_user(note.text, files=note.files, synthetic=True)

    async def _send(
        self, number: int, user_id: str, call: RecordedCall
    ) -> tuple[BuiltRequest, SimRequest, int]:
        """Build call ``number`` until the provider accepts it; the request, as simulated,
        and how many times it was refused."""
        session = self.session
        for refused in range(OVERFLOW_RETRIES + 1):
            built = await session.build_request(self.inputs)
            sim = sim_request(
                built.request, call.time_ms / 1000, call.output_tokens, memo=self._blocks
            )
            if not over_window(sim, built.request, self.context):
                return built, sim, refused
            self.refused += 1
            if refused == OVERFLOW_RETRIES:
                break
            message_id = await session.start_assistant(user_id)
            error = ProviderError("simulated", OVERFLOW_ERROR, status=400)
            try:
                result = await session.record_error(message_id, error)
            except CompactionExhausted as exc:
                raise ReplayFailed(number, str(exc), refused=refused + 1) from exc
            if result is None or result.outcome != "completed":
                detail = result.detail if result is not None else ""
                raise ReplayFailed(
                    number, f"over the window; the compaction failed: {detail}", refused=refused + 1
                )
        raise ReplayFailed(
            number,
            f"still over the window after {OVERFLOW_RETRIES} compactions",
            refused=OVERFLOW_RETRIES + 1,
        )


async def _record_call(
    session: SessionApi, user_id: str, call: RecordedCall, prompt_tokens: int, clock: ReplayClock
) -> list[Plan]:
    """Record ``call`` answering ``user_id``; return the after-turn prune's plans."""
    message_id = await session.start_assistant(user_id)
    called: list[tuple[str, ToolPart]] = []
    for part in call.parts:
        if isinstance(part, ToolPart):
            tool_input: dict[str, Any] = dict(part.state.input)
            part_id = await session.call_tool(
                message_id, part.tool, tool_input, call_id=part.call_id
            )
            called.append((part_id, part))
        else:
            await session.add_text(
                message_id,
                part.text,
                reasoning=isinstance(part, ReasoningPart),
                metadata=dict(part.metadata),
            )
    for part_id, part in called:
        state = part.state
        if isinstance(state, ToolCompleted | ToolErrored):
            clock.at(state.ended_ms)
        if isinstance(state, ToolCompleted):
            await session.record_tool_result(part_id, state.output)
        elif isinstance(state, ToolErrored):
            await session.record_tool_result(part_id, state.error, error=True)
    usage = Usage(input=prompt_tokens, output=call.output_tokens)
    return await session.finish(message_id, finish=call.finish, usage=usage, error=call.error)
