"""Running a compaction: the thin shell around the planner and a summarizer.

``compact`` asks for a compaction (``CompactionRequested``) unless one is open, plans it
(``policy._compaction.plan_compaction``), opens the summary message, has the summarizer write
the summary (in chunks, a few at a time, when the head is too large for one call), and then
either completes it in one batch (the summary text, its finish, ``CompactionCompleted``, and
the placeholders for oversized results that arrived meanwhile) or rolls it back
(``CompactionRolledBack``: the summary overflowed, was empty or repeated itself, the
summarizer failed, or the turn has used its attempts). A completed compaction is followed by
the post-compaction prune and, for an automatic one, the replayed request or the continue
message. Whatever interrupts it (a cancellation included) rolls it back, so a compaction is
never half visible: the view is exactly what it was before, or the compacted one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Container, Iterator, Sequence
from typing import Any, Final, Literal

import msgspec
import structlog
import trio

from contextledger.compaction._summarizers import Summarizer, SummaryInput, summary_request
from contextledger.config import Config
from contextledger.events._catalogue import (
    MAIN_AGENT,
    AssistantFinished,
    CompactionCompleted,
    CompactionRequested,
    CompactionRolledBack,
    Event,
    MessageAdded,
    PartAdded,
    RecordedEvent,
    RequestSent,
    RollbackReason,
    ToolOutputCleared,
)
from contextledger.events._parts import CompactionTrigger, ModelRef, PromptMeasure, TextPart
from contextledger.history._projection import History, PinnedPrefix
from contextledger.history._view import ViewOptions, is_real_user, model_view
from contextledger.ledger import EventLog, NewIds
from contextledger.logging import mask_secrets
from contextledger.policy._cache import place_marks
from contextledger.policy._compaction import (
    CHUNK_OUTPUT_TOKENS,
    EXHAUSTED_DETAIL,
    CompactionPlan,
    arrived_since,
    arrived_tail,
    plan_compaction,
    rollback_reason,
    text_tokens,
)
from contextledger.policy._decisions import (
    CompactionReason,
    after_compaction,
    forced_prune,
    last_reported_prompt,
    output_cap,
)
from contextledger.policy._overflow import measure_preflight, usable
from contextledger.policy._templates import TEMPLATES, summary_prompt
from contextledger.policy._tokens import measure_messages, measure_request
from contextledger.policy._transcript import (
    conversation_request,
    render_manifest,
    serialize_head,
    wrap_summary,
)
from contextledger.policy._transform import (
    Transform,
    TransformContext,
    apply_transform,
    view_transform,
)
from contextledger.providers._errors import ContextOverflowError, ProviderError
from contextledger.vocabulary._messages import ModelMessage
from contextledger.vocabulary._models import Model
from contextledger.vocabulary._requests import CacheMark, Request

_log = structlog.get_logger(__name__)

#: The agent name of summary messages (opencode's hidden ``compaction`` agent).
COMPACTION_AGENT: Final = "compaction"

Outcome = Literal["completed", "rolled_back"]
Clock = Callable[[], int]


class CompactionExhausted(RuntimeError):
    """The turn is still over the window after ``compaction.max_attempts`` compactions."""


class CompactionResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a compaction did. ``reason`` says why it was rolled back; ``cleared`` counts the
    outputs the post-compaction prune and the arrived-tail rule replaced by placeholders;
    ``resumed_with`` is the id of the replayed or continue message, if one was added."""

    request_message_id: str
    outcome: Outcome
    summary_message_id: str | None = None
    tail_start_id: str | None = None
    reason: RollbackReason | None = None
    detail: str = ""
    cleared: int = 0
    resumed_with: str | None = None


async def request_compaction(
    log: EventLog,
    *,
    trigger: CompactionTrigger = "auto",
    agent_id: str = MAIN_AGENT,
    clock: Clock,
) -> str:
    """Append a compaction request (``auto`` unless manual, ``overflow`` for an overflow);
    return its message id."""

    def requested(ids: NewIds) -> list[Event]:
        now = clock()
        return [
            CompactionRequested(
                session_id=log.session_id,
                agent_id=agent_id,
                time_ms=now,
                message_id=ids.message(now),
                part_id=ids.part(now),
                auto=trigger != "manual",
                overflow=trigger == "overflow",
                trigger=trigger,
            )
        ]

    return _added_message(await log.append_new(requested))


def _added_message(recorded: list[RecordedEvent]) -> str:
    """The id of the message the first of ``recorded`` adds."""
    event = recorded[0].event
    if not isinstance(event, MessageAdded | CompactionRequested):
        raise TypeError(f"{type(event).__name__} adds no message")
    return event.message_id


def open_request(history: History, agent_id: str = MAIN_AGENT) -> str | None:
    """The id of ``agent_id``'s open (requested, not yet completed or rolled back)
    compaction, if any."""
    for compaction in reversed(history.state.compactions.values()):
        if compaction.status != "requested":
            continue
        if history.message(compaction.request_message_id).agent_id == agent_id:
            return compaction.request_message_id
    return None


async def compact(
    log: EventLog,
    summarizer: Summarizer,
    *,
    model: Model,
    config: Config,
    clock: Clock,
    trigger: CompactionTrigger = "auto",
    agent_id: str = MAIN_AGENT,
    transform: Transform | None = None,
) -> CompactionResult:
    """Compact ``agent_id``'s slice of the session: the open request, or a new one.
    ``transform`` is the view transform the session's requests go through, when it is not
    the one ``config.view.transform`` names (as ``RequestBuilder`` takes it).

    Cancelled (or failing) at any point, it leaves the compaction completed or rolled back:
    a new request is appended shielded from cancellation, and from then on whatever
    interrupts the run rolls it back (shielded too) unless it has completed."""
    run = _Run(
        log,
        summarizer,
        model=model,
        config=config,
        clock=clock,
        agent_id=agent_id,
        transform=view_transform(transform, config.view.transform),
    )
    return await run.run(trigger)


class _Run:
    """One compaction, from plan to completion or rollback."""

    def __init__(
        self,
        log: EventLog,
        summarizer: Summarizer,
        *,
        model: Model,
        config: Config,
        clock: Clock,
        agent_id: str,
        transform: Transform | None,
    ) -> None:
        self.log = log
        self.summarizer = summarizer
        self.model = model
        self.config = config
        self.clock = clock
        self.agent_id = agent_id
        self.transform = transform

    async def run(self, trigger: CompactionTrigger) -> CompactionResult:
        request_id = open_request(self.log.history, self.agent_id)
        summary_id: str | None = None
        try:
            if request_id is None:
                request_id = await self._request(trigger)
            plan = self._plan(request_id)
            if plan.exhausted:
                attempts = self.config.compaction.max_attempts
                return await self._roll_back(
                    request_id, "error", EXHAUSTED_DETAIL.format(attempts=attempts)
                )
            summary_id = await self._open_summary(plan)
            try:
                text = await self._summarize(plan)
            except ContextOverflowError as exc:
                return await self._roll_back(request_id, "overflow", exc.detail, summary_id)
            except ProviderError as exc:
                return await self._roll_back(
                    request_id, "error", exc.detail or str(exc), summary_id
                )
            # The summary's last step and judging it are each up to a millisecond of work.
            await trio.lowlevel.checkpoint()
            reason = rollback_reason(text, overflowed=False)
            if reason is not None:
                return await self._roll_back(request_id, reason, "", summary_id)
            # The summary is written: completing takes a few appends, never cut short.
            with trio.CancelScope(shield=True):
                cleared = await self._finish(plan, summary_id, text)
                cleared += await self._post_prune()
                resumed = await self._resume(plan)
        except BaseException as exc:
            if request_id is not None:
                cancelled = isinstance(exc, trio.Cancelled | KeyboardInterrupt)
                with trio.CancelScope(shield=True):
                    await self._roll_back(
                        request_id,
                        "cancelled" if cancelled else "error",
                        "" if cancelled else repr(exc),
                        summary_id,
                    )
            raise
        _log.info(
            "compaction completed",
            session_id=self.log.session_id,
            agent_id=self.agent_id,
            request=plan.request_message_id,
            head_messages=len(plan.head_ids),
            tail_start_id=plan.tail_start_id,
            cleared=cleared,
        )
        return CompactionResult(
            request_message_id=plan.request_message_id,
            outcome="completed",
            summary_message_id=summary_id,
            tail_start_id=plan.tail_start_id,
            cleared=cleared,
            resumed_with=resumed,
        )

    async def _request(self, trigger: CompactionTrigger) -> str:
        """A new request, appended shielded: once it is sent to the writer, this run is
        there to roll it back."""
        with trio.CancelScope(shield=True):
            request_id = await request_compaction(
                self.log, trigger=trigger, agent_id=self.agent_id, clock=self.clock
            )
        return request_id

    def _plan(self, request_id: str) -> CompactionPlan:
        """The plan of ``request_id``. For a summarizer that reads a window, the window the
        head may fill is what the session's pinned system blocks and tool table (which every
        summary request repeats) leave of it."""
        window = self._window()
        if self.summarizer.max_input_tokens is not None:
            prefix = self.log.history.pinned_prefix(self.agent_id)
            if prefix is not None:
                overhead = measure_preflight(
                    (), self.config, tools=prefix.tool_table, system=prefix.profile.system
                )
                window = max(0, window - overhead.normalized)
        return plan_compaction(
            self.log.history,
            request_id,
            config=self.config,
            usable_tokens=window,
            agent_id=self.agent_id,
        )

    # --- steps --------------------------------------------------------------------------------

    async def _open_summary(self, plan: CompactionPlan) -> str:
        """The summary message, added before the summary is written, so rounds that arrive
        meanwhile come after it (the view hides both until the compaction completes)."""

        def summary(ids: NewIds) -> list[Event]:
            now = self.clock()
            return [
                MessageAdded(
                    **self._stamp(now),
                    message_id=ids.message(now),
                    role="assistant",
                    parent_id=plan.request_message_id,
                    agent=COMPACTION_AGENT,
                    model=self._model_ref(),
                    summary=True,
                )
            ]

        return _added_message(await self.log.append_new(summary))

    def _stamp(self, now: int) -> dict[str, Any]:
        """The session, agent and time fields of an event written now."""
        return {"session_id": self.log.session_id, "agent_id": self.agent_id, "time_ms": now}

    def _model_ref(self) -> ModelRef:
        return ModelRef(provider_id=self.model.provider_id, model_id=self.model.model_id)

    def _input(
        self, plan: CompactionPlan, transcript: str, prompt: str, whole: bool
    ) -> SummaryInput:
        """A summary request. ``whole``: the view as the session sent it (an earlier
        compaction's prompt and summary included) through the head's last message, or further,
        through the last message of the slice's last successful request (``_sent``) when
        that is later: the verbatim tail it held goes too, as ``kept`` messages, so the
        request's prefix is that request's (through the session's view transform, as it
        went), and so is its tool choice. Its cache breakpoints are the session's pinned
        system and tools' and those the session's policy puts on that request's messages, none
        after them: a model summarizer reads the session's prompt cache for all it held and
        writes no prefix that no later request would read."""
        history = self.log.history
        head = tuple(history.message(i) for i in plan.head_ids) if whole else ()
        prefix = history.pinned_prefix(self.agent_id)
        messages: tuple[ModelMessage, ...] = ()
        sent = kept = 0
        if whole:
            ref = self._model_ref()
            view = model_view(
                history, ViewOptions.from_config(self.config, ref, agent_id=self.agent_id)
            )
            if _through(view, frozenset(plan.head_ids)):
                sent, shown = self._sent(view)
                heads = _through(shown, frozenset(plan.head_ids))
                messages = tuple(shown[: max(heads, sent)])
                kept = len(messages) - heads
        system = prefix.profile.system if prefix else ()
        tools = prefix.tool_table if prefix else ()
        last = history.last_request(self.agent_id)
        return SummaryInput(
            session_id=self.log.session_id,
            head=head,
            transcript=transcript,
            previous_summary=plan.previous_summary,
            template=TEMPLATES[plan.template],
            prompt=prompt,
            model=self._model_ref(),
            system=system,
            tools=tools,
            messages=messages,
            marks=self._marks(len(tools), len(system), messages[:sent]),
            sent=sent,
            kept=kept,
            tool_choice=last.tool_choice if sent and last is not None else None,
        )

    def _marks(
        self, tools: int, system: int, sent: Sequence[ModelMessage]
    ) -> tuple[CacheMark, ...]:
        """The breakpoints of a summary request: those the session's policy puts on its tools,
        system blocks and ``sent`` messages (what its requests sent and cached), none later."""
        policy = self.config.request.cache_policy()
        return place_marks(policy, tools=tools, system_blocks=system, messages=sent)

    def _sent(self, view: Sequence[ModelMessage]) -> tuple[int, Sequence[ModelMessage]]:
        """How many leading messages of ``view`` the slice's last request sent, and ``view``
        with those messages as it sent them: that request succeeded (the pinned prefix
        advanced to its last message), no compaction completed since, and its tool outputs,
        calls and media are what ``view`` holds up to there (no prune changed them since).
        Through a view transform (``transform``), the messages it sent are the transform's
        result for ``view`` up to there, in that request's context, when they hold every
        message they are made from and measure (pieces, system blocks and tool table
        included) exactly as that request did; a transform that saw something else (other
        messages, another window) gives no such result. 0 and ``view`` otherwise: no cached
        prompt of the session's is known to be a prefix of a request opening with ``view``."""
        history = self.log.history
        request = history.last_request(self.agent_id)
        prefix = history.pinned_prefix(self.agent_id)
        if (
            request is None
            or request.measure is None
            or prefix is None
            or prefix.advanced_to != request.last_message_id
            or last_reported_prompt(history, self.agent_id) is None
        ):
            return 0, view
        count = _through(view, {request.last_message_id})
        if self.transform is None:
            same = _held(measure_messages(view[:count], cut=False)) == _held(request.measure)
            return (count, view) if same else (0, view)
        shown = self._transformed(self.transform, view[:count], request, prefix)
        return (0, view) if shown is None else (len(shown), (*shown, *view[count:]))

    def _transformed(
        self,
        transform: Transform,
        view: Sequence[ModelMessage],
        request: RequestSent,
        prefix: PinnedPrefix,
    ) -> list[ModelMessage] | None:
        """``view`` (through ``request``'s last message) as ``transform`` gave it to
        ``request``, when that is what it gives now: told the turn ``request`` was sent
        in, it holds every message of ``view`` and measures (``measure_request``) exactly as
        ``request`` did, with the pinned system blocks and tool table; else None."""
        last = request.last_message_id or ""
        turn = sum(1 for m in self.log.history.messages if m.id <= last and is_real_user(m))
        context = TransformContext(usable_tokens=usable(self.model, self.config), turn=turn)
        shown = apply_transform(transform, view, context)
        measure = measure_request(
            Request(
                model=self._model_ref(),
                session_id=self.log.session_id,
                system=prefix.profile.system,
                tools=prefix.tool_table,
                messages=tuple(shown),
            )
        )
        whole = {m.source_id for m in shown} == {m.source_id for m in view}
        return shown if whole and measure == request.measure else None

    async def _summarize(self, plan: CompactionPlan) -> str:
        """The summary: of one request (``_fitted``) unless the planner cut the head into
        chunks and that request holds no messages (a head as text too large for one call),
        else of the chunks, merged."""
        whole = self._input(plan, plan.transcript, plan.prompt, whole=True)
        task, _ = self._fitted(_previous_above(plan, whole), whole)
        if not plan.chunks or self.summarizer.max_input_tokens is None or task.messages:
            return await self.summarizer.summarize(task)
        prompts = [plan.chunk_request(index) for index in range(len(plan.chunks))]
        partials = await self._partials(plan, prompts)
        return await self._merged(plan, [p for p in partials if p.strip()])

    async def _partials(self, plan: CompactionPlan, prompts: Sequence[str]) -> list[str]:
        """Each of ``prompts`` summarised on its own (``chunk_concurrency`` at a time, in at
        most ``CHUNK_OUTPUT_TOKENS``); the first provider error is raised. The summarizer is
        asked in the chunks' order, whatever order the scheduler runs them in, so a replay's
        summary calls come in the same order every time."""
        partials = [""] * len(prompts)
        failures: list[ProviderError] = []
        limiter = trio.CapacityLimiter(self.config.compaction.chunk_concurrency)
        asked = [trio.Event() for _ in prompts]

        async def one(index: int) -> None:
            if index:
                await asked[index - 1].wait()
            async with limiter:
                asked[index].set()  # the next chunk runs once this one has asked
                if failures:
                    return
                task = self._input(plan, "", prompts[index], whole=False)
                try:
                    partials[index] = await self.summarizer.summarize(
                        msgspec.structs.replace(task, max_output_tokens=CHUNK_OUTPUT_TOKENS)
                    )
                except ProviderError as exc:
                    failures.append(exc)

        async with trio.open_nursery() as nursery:
            for index in range(len(prompts)):
                nursery.start_soon(one, index)
        if failures:
            raise failures[0]
        return partials

    async def _merged(self, plan: CompactionPlan, partials: list[str]) -> str:
        """The partial summaries merged into the summary. While their merge request would
        not fit the window, they are merged in runs first (each run's request fits, two
        partials at least, so every round shortens the list)."""
        while True:
            merge = self._input(plan, "", plan.merge_request(partials), whole=True)
            task, prompt = self._fitted(merge)
            if len(partials) < 2 or self._fits(prompt):
                return await self.summarizer.summarize(task)
            runs: list[list[str]] = []
            for partial in partials:
                if runs and (len(runs[-1]) < 2 or self._fits_merge(plan, [*runs[-1], partial])):
                    runs[-1].append(partial)
                else:
                    runs.append([partial])
            partials = await self._partials(plan, [plan.merge_request(run) for run in runs])

    def _fits_merge(self, plan: CompactionPlan, run: list[str]) -> bool:
        return self._fits(self._tokens(self._input(plan, "", plan.merge_request(run), whole=False)))

    def _window(self) -> int:
        """The tokens one summary request may hold with its answer: the usable window, or
        less when the summarizer says so."""
        window = usable(self.model, self.config)
        if self.summarizer.max_input_tokens:
            window = min(window, self.summarizer.max_input_tokens)
        return window

    def _tokens(self, task: SummaryInput) -> int:
        """The estimated prompt of the request a model summarizer sends for ``task``: its
        messages, system blocks and tool table (``measure_preflight``, normalized). When it
        opens with what the session's last successful request sent, that part is at most the
        prompt the provider counted for that request (``last_reported_prompt``: its view can
        only have lost tokens since), and only the rest is estimated: the least of the two."""
        request = summary_request(task, model=self._model_ref(), max_output_tokens=1)
        measure = measure_preflight(
            request.messages, self.config, tools=request.tools, system=request.system
        )
        reported = last_reported_prompt(self.log.history, self.agent_id)
        if not task.sent or reported is None:
            return measure.normalized
        rest = request.messages[task.sent - len(task.messages) - 1 :]
        return min(measure.normalized, reported + measure_preflight(rest, self.config).normalized)

    def _fits(self, prompt_tokens: int) -> bool:
        """Whether a summary request of ``prompt_tokens`` leaves ``CHUNK_OUTPUT_TOKENS`` of
        the window for its answer."""
        return prompt_tokens + CHUNK_OUTPUT_TOKENS <= self._window()

    def _fitted(
        self, task: SummaryInput, bare: SummaryInput | None = None
    ) -> tuple[SummaryInput, int]:
        """``task`` made to fit a summarizer that reads a window, and its prompt's tokens:
        when the request with its messages would not fit (``_fits``: with
        ``CHUNK_OUTPUT_TOKENS`` for the answer, so the summary gets the room it gets as a
        transcript), fewer of them (``_cut``), or else ``bare`` (by default ``task``) without
        messages, the whole head as its transcript; then the task asks for no more output
        than the window leaves beside its prompt (``policy._decisions.output_cap``). Each
        candidate is measured once."""
        if self.summarizer.max_input_tokens is None:
            prompt = text_tokens(len(conversation_request(task.transcript, task.prompt)))
        else:
            for candidate in self._candidates(task, bare):
                prompt = self._tokens(candidate)
                if self._fits(prompt):
                    break
            task = candidate
        room = output_cap(self.model, self.config, requested=None, prompt_tokens=prompt)
        return msgspec.structs.replace(task, max_output_tokens=room), prompt

    def _candidates(self, task: SummaryInput, bare: SummaryInput | None) -> Iterator[SummaryInput]:
        """What ``_fitted`` tries, in order: ``task``; when it holds messages, fewer of them
        (``_cut``), then ``bare`` (by default ``task``) without messages."""
        yield task
        if task.messages:
            cut = self._cut(task)
            if cut is not None:
                yield cut
            yield msgspec.structs.replace(bare or task, messages=(), sent=0, kept=0)

    def _cut(self, task: SummaryInput) -> SummaryInput | None:
        """``task`` with fewer messages, all sent by the session's last request: when the head
        ends within them, the messages through the head's end (the kept tail left out; the
        breakpoints placed on what is left, where an earlier step's request ended and most
        often still has its prompt cached); when it ends after them, those messages, the
        head's part after them as ``rest`` (a transcript, outputs cut). None when that request
        sent none of them."""
        if not task.sent:
            return None
        if task.kept:
            messages = task.messages[: -task.kept]
            tools, system = len(task.tools), len(task.system)
            marks = self._marks(tools, system, messages)
            return msgspec.structs.replace(
                task, messages=messages, marks=marks, sent=len(messages), kept=0
            )
        later = {m.source_id for m in task.messages[task.sent :]}
        rest = [m for m in task.head if m.id in later]
        text = serialize_head(rest, tool_output_chars=self.config.view.summary_tool_output_chars)
        return msgspec.structs.replace(task, messages=task.messages[: task.sent], rest=text)

    def _stored_text(self, plan: CompactionPlan, summary: str, has_tail: bool) -> str:
        """What the summary message says: the summary; under the continuation template,
        MiMo's ``<conversation-summary>`` block with the file manifest."""
        if plan.template != "continuation":
            return summary
        manifest = render_manifest(plan.file_manifest)
        body = f"{summary.strip()}\n\n{manifest}" if manifest else summary
        return wrap_summary(body, plan.trigger, has_tail)

    async def _finish(self, plan: CompactionPlan, summary_id: str, summary: str) -> int:
        """Complete the compaction in one batch; return how many outputs it cleared."""
        settings = self.config.compaction

        def completed(ids: NewIds) -> list[Event]:
            arrived = arrived_since(self.log.history, plan.request_message_id, self.agent_id)
            tail = arrived_tail(
                [m for m in arrived if m.id != summary_id],
                budget_tokens=settings.arrived_tail_tokens,
                result_max_tokens=settings.arrived_result_tokens,
            )
            now = self.clock()
            events: list[Event] = [
                PartAdded(
                    **self._stamp(now),
                    part=TextPart(
                        id=ids.part(now),
                        message_id=summary_id,
                        text=self._stored_text(plan, summary, bool(tail.kept)),
                    ),
                ),
                AssistantFinished(
                    **self._stamp(now),
                    message_id=summary_id,
                    finish="stop",
                ),
                CompactionCompleted(
                    **self._stamp(now),
                    request_message_id=plan.request_message_id,
                    summary_message_id=summary_id,
                    tail_start_id=plan.tail_start_id,
                    projection=plan.projection(summary),
                ),
            ]
            if tail.cleared:
                events.append(self._cleared(tail.cleared, now))
            return events

        return _cleared_count(await self.log.append_new(completed))

    def _cleared(self, part_ids: tuple[str, ...] | list[str], now: int) -> ToolOutputCleared:
        return ToolOutputCleared(
            **self._stamp(now),
            part_ids=tuple(part_ids),
            reason="post-compaction",
        )

    async def _post_prune(self) -> int:
        """The slice's ``post-compaction`` prune over the new view (``forced_prune``: the
        cache is rebuilt anyway)."""

        def cleared(ids: NewIds) -> list[Event]:
            plan = forced_prune(
                self.log.history, self.config, agent_id=self.agent_id, reason="post-compaction"
            )
            return [] if plan is None else [self._cleared(plan.part_ids, self.clock())]

        return _cleared_count(await self.log.append_new(cleared))

    async def _resume(self, plan: CompactionPlan) -> str | None:
        """After an automatic compaction: the replayed request, or the continue message.
        Both are synthetic user messages, marked so (``compaction_replay``,
        ``compaction_continue``): they start no turn a person began, but the compaction's tail
        goes on from them (``policy._turns.resumes_turn``)."""
        texts = plan.replay_parts or ((plan.continue_text,) if plan.continue_text else ())
        if not texts or not plan.auto:
            return None
        replayed = plan.replay_id is not None

        def resumed(ids: NewIds) -> list[Event]:
            now = self.clock()
            message_id = ids.message(now)
            events: list[Event] = [
                MessageAdded(
                    **self._stamp(now),
                    message_id=message_id,
                    role="user",
                    parent_id=None,
                    agent=self.log.history.message(plan.request_message_id).agent,
                    model=self._model_ref(),
                    synthetic=True,
                )
            ]
            events.extend(
                PartAdded(
                    **self._stamp(now),
                    part=TextPart(
                        id=ids.part(now),
                        message_id=message_id,
                        text=text,
                        synthetic=not replayed,
                        metadata={"compaction_replay" if replayed else "compaction_continue": True},
                    ),
                )
                for text in texts
            )
            return events

        return _added_message(await self.log.append_new(resumed))

    async def _roll_back(
        self,
        request_id: str,
        reason: RollbackReason,
        detail: str,
        summary_id: str | None = None,
    ) -> CompactionResult:
        """Roll the compaction back, unless it is no longer open when the session comes to
        it (a completion queued before a cancellation has landed)."""
        # The detail is often an exception's text (a summarizer's provider error): a key in
        # it must not reach the log, nor the result handed back.
        detail = mask_secrets(detail)

        def rolled_back(ids: NewIds) -> list[Event]:
            compaction = self.log.history.state.compactions.get(request_id)
            if compaction is None or compaction.status != "requested":
                return []
            return [
                CompactionRolledBack(
                    session_id=self.log.session_id,
                    agent_id=self.agent_id,
                    time_ms=self.clock(),
                    request_message_id=request_id,
                    reason=reason,
                    detail=detail,
                )
            ]

        await self.log.append_new(rolled_back)
        _log.warning(
            "compaction rolled back",
            session_id=self.log.session_id,
            agent_id=self.agent_id,
            request=request_id,
            reason=reason,
        )
        return CompactionResult(
            request_message_id=request_id,
            outcome="rolled_back",
            summary_message_id=summary_id,
            reason=reason,
            detail=detail,
        )


def _previous_above(plan: CompactionPlan, task: SummaryInput) -> SummaryInput:
    """``task`` asking to update the previous summary where its messages hold it (the view's
    summary message comes before the head), instead of sending that summary a second time in
    the prompt."""
    if not task.messages or plan.previous_summary is None:
        return task
    template = TEMPLATES[plan.template]
    prompt = summary_prompt(template, plan.previous_summary, previous_above=True)
    return msgspec.structs.replace(task, prompt=prompt)


def _held(measure: PromptMeasure) -> tuple[int, int, int]:
    """The tool output characters, tool calls and media items of ``measure``: what a prune
    changes in a view, the same in the view and in the request that sent it (whose system
    blocks and tool table count as text and tool input)."""
    return measure.output_chars, measure.tool_calls, measure.media


def _through(view: Sequence[ModelMessage], sources: Container[str | None]) -> int:
    """How many messages of ``view`` lead up to and include the last one built from one of
    ``sources`` (by source id); 0 when none is."""
    return max((i + 1 for i, m in enumerate(view) if m.source_id in sources), default=0)


def _cleared_count(recorded: list[RecordedEvent]) -> int:
    """How many outputs the ``ToolOutputCleared`` among ``recorded`` clear."""
    return sum(len(r.event.part_ids) for r in recorded if isinstance(r.event, ToolOutputCleared))


async def compact_while_due(
    due: Callable[[], Awaitable[CompactionReason | None]],
    run: Callable[[], Awaitable[CompactionResult | None]],
    *,
    max_attempts: int,
) -> None:
    """What a session does before a request: while ``await due()`` gives a reason (at most
    ``max_attempts + 1`` checks), ``run()`` a compaction and let ``after_compaction`` say
    whether to send, check again or raise ``CompactionExhausted``. A ``run`` that waits for
    other compactions checks ``due`` again when its turn comes, before its request is
    written and counted among the turn's attempts: None when it no longer gives a reason
    (nothing written), and the request is sent."""
    for _ in range(max_attempts + 1):
        reason = await due()
        if reason is None:
            return
        result = await run()
        if result is None:
            return
        verdict = after_compaction(reason, result.outcome, result.detail)
        if verdict == "exhausted":
            raise CompactionExhausted(result.detail)
        if verdict == "send":
            return
