"""Building a session's next request from its history.

``RequestBuilder.build`` is deterministic in the history and the inputs: it computes the
system blocks (the host's identity, prompt, environment and skills, with the memory and the
instruction files captured in the log), decides the prefix (pin, keep or rotate), takes the
model view, places the cache marks and encodes the request. It keeps a live view and the
wire format's message fragments between calls, so a step costs about the bytes that changed,
not the length of the session. It never writes: the events it implies (the prefix pinned or
rotated, outputs cleared by the payload guard, the request sent) are returned for the caller
to append, which ``prepare_request`` does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import msgspec

from contextledger.config import Config
from contextledger.events._catalogue import (
    MAIN_AGENT,
    PrefixProfile,
    RequestSent,
    ToolOutputCleared,
)
from contextledger.events._parts import ModelRef, PromptMeasure, ToolChoice, ToolSchema
from contextledger.history._live_view import LiveView
from contextledger.history._projection import History, PinnedPrefix
from contextledger.history._truncate import PAGING_TOOL, shows_truncation
from contextledger.history._view import ViewOptions, is_real_user
from contextledger.policy._cache import place_marks, watermark_mark, writes_at_the_end
from contextledger.policy._decisions import forced_prune, last_reported_prompt, output_cap
from contextledger.policy._overflow import preflight_tokens
from contextledger.policy._tokens import (
    EMPTY,
    Calibration,
    TokenCounter,
    calibration_from_usage,
    count_request,
    counter_for,
    measure_messages,
    measure_request,
)
from contextledger.policy._transform import (
    Transform,
    TransformContext,
    apply_transform,
    view_transform,
)
from contextledger.providers._base import EncodedRequest, WireFormat
from contextledger.request._context import max_steps_message
from contextledger.request._instructions import InstructionFile, render_system_instructions
from contextledger.request._prefix import PrefixDecision, decide_prefix
from contextledger.request._system import SystemSegments, system_blocks
from contextledger.vocabulary._defaults import CHARS_PER_TOKEN
from contextledger.vocabulary._messages import ModelMessage, ModelToolResult
from contextledger.vocabulary._models import Model
from contextledger.vocabulary._requests import CacheMark, Request

_DEFAULT_CONFIG = Config()


class RequestInputs(msgspec.Struct, frozen=True, kw_only=True):
    """What the host knows about the next call beyond the log.

    ``segments`` gives the identity, prompt, static environment and skills; its memory and
    instructions are ignored (they come from the log). ``tools`` are the tools available
    now, in any order (the pinned order wins). ``hints`` are explicit cache marks; they win
    over automatic ones. ``last_step`` closes the turn: a final user message asks for a
    text-only answer and tool choice becomes ``"none"`` (the tool table stays, so the prefix
    does too).
    """

    model: ModelRef
    segments: SystemSegments
    agent: str = "build"
    system_mode: str = "default"
    tools: tuple[ToolSchema, ...] = ()
    permissions: dict[str, Any] = {}
    hints: tuple[CacheMark, ...] = ()
    max_output_tokens: int | None = None
    tool_choice: ToolChoice | None = None
    last_step: bool = False
    options: dict[str, Any] = {}


class BuiltRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A built request, its bytes and what it implies for the log.

    ``over_limit``: the body is larger than ``request.payload_limit_bytes``;
    ``stripped_media``: historical media were replaced by placeholders to get under it.
    ``estimated_tokens``: the prompt's tokens by the configured counter (``tokens.counter``;
    for ``"estimate"``, the body's bytes at four characters per token); ``measure``: the
    prompt's ``PromptMeasure``, which the usage report of its answer carries.
    """

    request: Request
    encoded: EncodedRequest
    prefix: PrefixDecision
    over_limit: bool
    estimated_tokens: int
    measure: PromptMeasure
    stripped_media: bool = False

    def sent_event(
        self, session_id: str, *, time_ms: int = 0, agent_id: str = MAIN_AGENT
    ) -> RequestSent:
        """The ``RequestSent`` event of this request: SHA-256 of the body and of its bytes
        before the last message (what the next step must repeat), size, marked messages, its
        tool choice."""
        body = self.encoded.body
        messages = self.request.messages
        return RequestSent(
            session_id=session_id,
            agent_id=agent_id,
            time_ms=time_ms,
            provider_id=self.request.model.provider_id,
            model_id=self.request.model.model_id,
            prefix_hash=hashlib.sha256(self.encoded.prefix_before_last_message()).hexdigest(),
            body_hash=hashlib.sha256(body).hexdigest(),
            body_bytes=len(body),
            estimated_tokens=self.estimated_tokens,
            breakpoints=tuple(m.index for m in self.request.marks if m.target == "message"),
            last_message_id=messages[-1].source_id if messages else None,
            measure=self.measure,
            tool_choice=self.request.tool_choice,
        )


def system_for(history: History, segments: SystemSegments) -> tuple[str, ...]:
    """The system blocks: the host's segments with the memory and the system instruction
    files captured in the log."""
    files = [
        InstructionFile(path=e.path, text=e.text, source=e.source)
        for e in history.state.instructions
        if e.source != "directory"
    ]
    return system_blocks(
        msgspec.structs.replace(
            segments,
            memory=history.state.memory or "",
            instructions=render_system_instructions(files),
        )
    )


class _RunningTotals:
    """What a builder's successive views hold, each message looked at once: the measure of
    their messages and how many tool outputs they show truncated. A view's messages that are
    the very objects of the previous one's (a live view keeps unchanged conversions) reuse
    its running totals, so a step costs about what changed."""

    __slots__ = ("_messages", "_totals")

    def __init__(self) -> None:
        self._messages: list[ModelMessage] = []
        self._totals: list[tuple[PromptMeasure, int]] = [(EMPTY, 0)]

    def update(self, messages: Sequence[ModelMessage]) -> None:
        """Total ``messages`` (a view, in order)."""
        same = 0
        for old, new in zip(self._messages, messages, strict=False):
            if old is not new:
                break
            same += 1
        del self._messages[same:]
        del self._totals[same + 1 :]
        for message in messages[same:]:
            measure, truncated = self._totals[-1]
            truncated += sum(
                isinstance(c, ModelToolResult) and shows_truncation(c.output)
                for c in message.content
            )
            self._messages.append(message)
            self._totals.append((measure + measure_messages((message,)), truncated))

    @property
    def measure(self) -> PromptMeasure:
        """``measure_messages`` of the last view."""
        return self._totals[-1][0]

    @property
    def truncated(self) -> int:
        """How many tool outputs the last view shows truncated."""
        return self._totals[-1][1]


class RequestBuilder:
    """Builds one session's (or one agent slice's) requests for one wire format."""

    __slots__ = (
        "_agent_id",
        "_calibrations",
        "_config",
        "_model",
        "_totals",
        "_transform",
        "_usable_tokens",
        "_views",
        "_wire",
    )

    def __init__(
        self,
        wire: WireFormat,
        config: Config = _DEFAULT_CONFIG,
        *,
        agent_id: str = MAIN_AGENT,
        transform: Transform | None = None,
        usable_tokens: int = 0,
        model: Model | None = None,
    ) -> None:
        """Requests of ``agent_id``'s slice (the main agent's by default: its own messages
        only, as ``ViewOptions.from_config`` and the runtime send them), whose events are
        that agent's. ``transform`` (else the one ``config.view.transform`` names) is
        applied to every view before encoding, told ``usable_tokens`` (0: unknown) in its
        context. With ``model`` (its limits), every request asks for
        ``policy._decisions.output_cap`` output tokens; without, for what its inputs ask."""
        self._model = model
        self._wire = wire
        self._config = config
        self._agent_id = agent_id
        self._views: dict[tuple[ModelRef, bool], LiveView] = {}
        self._transform = view_transform(transform, config.view.transform)
        self._usable_tokens = usable_tokens
        self._totals = _RunningTotals()
        #: Per model: how many of the history's usage reports were learnt, and what they taught.
        self._calibrations: dict[ModelRef, tuple[int, Calibration]] = {}

    @property
    def wire(self) -> WireFormat:
        """The wire format requests are encoded in."""
        return self._wire

    @property
    def agent_id(self) -> str:
        """The agent whose slice this builder sends (and whose events its requests imply)."""
        return self._agent_id

    def view_options(self, model: ModelRef, *, strip_media: bool = False) -> ViewOptions:
        """The view options of a request for ``model``; ``strip_media`` replaces media older
        than the latest user message a person wrote with placeholders (the payload guard's
        second step)."""
        options = ViewOptions.from_config(self._config, model, agent_id=self._agent_id)
        if not strip_media:
            return options
        return msgspec.structs.replace(options, historical_media="latest-user")

    def build(
        self, history: History, inputs: RequestInputs, *, strip_media: bool = False
    ) -> BuiltRequest:
        """The next request of ``history``."""
        key = (inputs.model, strip_media)
        view = self._views.get(key)
        if view is None:
            view = self._views[key] = LiveView(
                self.view_options(inputs.model, strip_media=strip_media)
            )
        messages = tuple(view.update(history))
        if self._transform is not None:
            context = TransformContext(
                usable_tokens=self._usable_tokens,
                turn=sum(1 for m in history.messages if is_real_user(m)),
            )
            messages = tuple(apply_transform(self._transform, messages, context))
        candidate = PrefixProfile(
            provider_id=inputs.model.provider_id,
            model_id=inputs.model.model_id,
            agent=inputs.agent,
            system_mode=inputs.system_mode,
            system=system_for(history, inputs.segments),
            tools=(),
            permissions=inputs.permissions,
        )
        tool_choice = inputs.tool_choice
        if inputs.last_step:
            source = messages[-1].source_id if messages else history.session_id
            messages = (*messages, max_steps_message(source))
            tool_choice = "none"
        self._totals.update(messages)
        pinned = history.pinned_prefix(self.agent_id)
        prefix = decide_prefix(pinned, candidate, self._tools(pinned, inputs))
        marks = self._marks(history, prefix, messages, inputs.hints)
        request = Request(
            model=inputs.model,
            session_id=history.session_id,
            system=prefix.system,
            tools=prefix.tools,
            messages=messages,
            marks=marks,
            max_output_tokens=inputs.max_output_tokens,
            tool_choice=tool_choice,
            options=inputs.options,
        )
        encoded = self._wire.encode(request)
        measure = self._totals.measure + measure_request(
            msgspec.structs.replace(request, messages=())
        )
        counter = self._counter(history, inputs.model)
        counted = None if counter is None else count_request(counter, request, measure)
        if self._model is not None:
            # The configured counter's count; for the plain estimate, the messages' bytes
            # inflated as preflight inflates its estimate (characters / 4 under-counts code
            # and JSON).
            cap = output_cap(
                self._model,
                self._config,
                requested=inputs.max_output_tokens,
                prompt_tokens=(
                    counted
                    if counted is not None
                    else preflight_tokens(encoded.messages_end, self._config)
                ),
                reported=last_reported_prompt(history, self.agent_id),
            )
            if cap != request.max_output_tokens:
                request = msgspec.structs.replace(request, max_output_tokens=cap)
                encoded = self._wire.reclose(encoded, request)
        over = len(encoded.body) > self._config.request.payload_limit_bytes
        return BuiltRequest(
            request=request,
            encoded=encoded,
            prefix=prefix,
            over_limit=over,
            estimated_tokens=(
                round(len(encoded.body) / CHARS_PER_TOKEN) if counted is None else counted
            ),
            measure=measure,
            stripped_media=strip_media,
        )

    def _tools(self, pinned: PinnedPrefix | None, inputs: RequestInputs) -> tuple[ToolSchema, ...]:
        """The tools present: the host's, and the paging tool when ``tool_output.paging_tool``
        says so: always, or once the view shows a truncated output (and from then on, while
        ``pinned``, the agent's pinned prefix, holds it); never in place of a host's tool of
        that name."""
        tools = inputs.tools
        when = self._config.tool_output.paging_tool
        if when == "never" or any(t.name == PAGING_TOOL.name for t in tools):
            return tools
        if (
            when == "always"
            or self._totals.truncated
            or (pinned is not None and PAGING_TOOL.name in pinned.profile.tools)
        ):
            return (*tools, PAGING_TOOL)
        return tools

    def _counter(self, history: History, model: ModelRef) -> TokenCounter | None:
        """The counter ``tokens.counter`` names, the calibrated one having learnt the
        history's usage reports for ``model`` (only the new ones since the last request);
        None for the plain estimate."""
        name = self._config.tokens.counter
        if name == "estimate":
            return None
        calibration = None
        if name == "calibrated":
            reports = history.state.usage_reports
            learnt, calibration = self._calibrations.get(model, (0, Calibration()))
            if learnt > len(reports):  # another history: learn it from the start
                learnt, calibration = 0, Calibration()
            calibration = calibration_from_usage(reports[learnt:], model, calibration)
            self._calibrations[model] = (len(reports), calibration)
        return counter_for(self._config.tokens, calibration)

    def _marks(
        self,
        history: History,
        prefix: PrefixDecision,
        messages: tuple[ModelMessage, ...],
        hints: tuple[CacheMark, ...],
    ) -> tuple[CacheMark, ...]:
        """The request's cache marks (``place_marks``), plus a mark where the last successful
        step's prompt ends when no other would read it (``watermark_mark``)."""
        wire = self._wire
        if not wire.max_marks:
            return ()
        policy = self._config.request.cache_policy()
        markable = "message" in wire.markable

        def place(extra: tuple[CacheMark, ...] = ()) -> tuple[CacheMark, ...]:
            return place_marks(
                policy,
                tools=len(prefix.tools) if "tool" in wire.markable else 0,
                system_blocks=len(prefix.system) if "system" in wire.markable else 0,
                messages=messages if markable else (),
                hints=[h for h in (*hints, *extra) if h.target in wire.markable],
                limit=wire.max_marks,
            )

        marks = place()
        pinned = history.pinned_prefix(self.agent_id)
        if not markable or pinned is None or not writes_at_the_end(policy):
            return marks
        watermark = watermark_mark(messages, pinned.advanced_to, marks, policy.ttl)
        return marks if watermark is None else place((watermark,))

    def payload_prune(self, history: History, *, time_ms: int = 0) -> ToolOutputCleared | None:
        """The payload guard's first step: the slice's old tool outputs to clear
        (``forced_prune``, reason ``payload-limit``), or None when opencode's rule finds
        nothing worth clearing."""
        plan = forced_prune(history, self._config, agent_id=self._agent_id, reason="payload-limit")
        if plan is None:
            return None
        return ToolOutputCleared(
            session_id=history.session_id,
            agent_id=self._agent_id,
            time_ms=time_ms,
            part_ids=plan.part_ids,
            reason=plan.reason,
        )
