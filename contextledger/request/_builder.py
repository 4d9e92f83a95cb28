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
import math
from typing import Any

import msgspec

from contextledger.config import Config
from contextledger.events._catalogue import (
    MAIN_AGENT,
    PrefixProfile,
    RequestSent,
    ToolOutputCleared,
)
from contextledger.events._parts import ModelRef, ToolSchema
from contextledger.history._live_view import LiveView
from contextledger.history._projection import History
from contextledger.history._view import ViewOptions, view_messages
from contextledger.policy._cache import place_marks
from contextledger.policy._compaction import is_real_user
from contextledger.policy._decisions import output_cap
from contextledger.policy._prune import plan_prune
from contextledger.policy._transform import (
    Transform,
    TransformContext,
    apply_transform,
    load_transform,
)
from contextledger.providers._base import EncodedRequest, WireFormat
from contextledger.request._context import max_steps_message
from contextledger.request._instructions import InstructionFile, render_system_instructions
from contextledger.request._prefix import PrefixDecision, decide_prefix
from contextledger.request._system import SystemSegments, system_blocks
from contextledger.vocabulary._defaults import CHARS_PER_TOKEN
from contextledger.vocabulary._models import Model
from contextledger.vocabulary._requests import CacheMark, Request, ToolChoice

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
    """

    request: Request
    encoded: EncodedRequest
    prefix: PrefixDecision
    over_limit: bool
    stripped_media: bool = False

    @property
    def estimated_tokens(self) -> int:
        """The body's size in tokens at the plain four characters per token."""
        return round(len(self.encoded.body) / CHARS_PER_TOKEN)

    def sent_event(
        self, session_id: str, *, time_ms: int = 0, agent_id: str = MAIN_AGENT
    ) -> RequestSent:
        """The ``RequestSent`` event of this request: SHA-256 of the body and of its bytes
        before the last message (what the next step must repeat), size, marked messages."""
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


class RequestBuilder:
    """Builds one session's (or one agent slice's) requests for one wire format."""

    __slots__ = (
        "_agent_id",
        "_config",
        "_model",
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
        agent_id: str | None = None,
        transform: Transform | None = None,
        usable_tokens: int = 0,
        model: Model | None = None,
    ) -> None:
        """``transform`` (else the one ``config.view.transform`` names) is applied to every
        view before encoding, told ``usable_tokens`` (0: unknown) in its context. With
        ``model`` (its limits), every request asks for ``policy.decisions.output_cap``
        output tokens; without, for what its inputs ask."""
        self._model = model
        self._wire = wire
        self._config = config
        self._agent_id = agent_id
        self._views: dict[tuple[ModelRef, bool], LiveView] = {}
        named = config.view.transform
        self._transform = transform or (load_transform(named) if named else None)
        self._usable_tokens = usable_tokens

    @property
    def wire(self) -> WireFormat:
        """The wire format requests are encoded in."""
        return self._wire

    @property
    def agent_id(self) -> str:
        """The agent whose slice this builder sends (and whose events its requests imply)."""
        return self._agent_id or MAIN_AGENT

    def view_options(self, model: ModelRef, *, strip_media: bool = False) -> ViewOptions:
        """The view options of a request for ``model``; ``strip_media`` replaces media older
        than the latest user message with placeholders (the payload guard's second step)."""
        options = ViewOptions.from_config(self._config, model)
        return msgspec.structs.replace(
            options,
            agent_id=self._agent_id,
            historical_media="latest-user" if strip_media else options.historical_media,
        )

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
        prefix = decide_prefix(history.pinned_prefix(self.agent_id), candidate, inputs.tools)
        tool_choice = inputs.tool_choice
        if inputs.last_step:
            source = messages[-1].source_id if messages else history.session_id
            messages = (*messages, max_steps_message(source))
            tool_choice = "none"
        wire = self._wire
        marks = (
            place_marks(
                self._config.request.cache_policy(),
                tools=len(prefix.tools) if "tool" in wire.markable else 0,
                system_blocks=len(prefix.system) if "system" in wire.markable else 0,
                messages=messages if "message" in wire.markable else (),
                hints=[h for h in inputs.hints if h.target in wire.markable],
                limit=wire.max_marks,
            )
            if wire.max_marks
            else ()
        )
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
        if self._model is not None:
            # The messages' bytes at the configured characters per token, inflated as
            # preflight inflates its estimate (characters / 4 under-counts code and JSON).
            tokens = self._config.tokens
            prompt = math.ceil(
                encoded.messages_end / tokens.chars_per_token * tokens.preflight_factor
            )
            cap = output_cap(
                self._model,
                self._config,
                requested=inputs.max_output_tokens,
                prompt_tokens=prompt,
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
            stripped_media=strip_media,
        )

    def payload_prune(
        self, history: History, model: ModelRef, *, time_ms: int = 0
    ) -> ToolOutputCleared | None:
        """The payload guard's first step: old tool outputs to clear (reason
        ``payload-limit``), or None when opencode's rule finds nothing worth clearing."""
        prune = self._config.prune
        plan = plan_prune(
            view_messages(history, self.view_options(model)),
            reason="payload-limit",
            protect_tokens=prune.protect_tokens,
            minimum_tokens=prune.minimum_tokens,
            protected_tools=prune.protected_tools,
        )
        if plan is None:
            return None
        return ToolOutputCleared(
            session_id=history.session_id,
            agent_id=self._agent_id or MAIN_AGENT,
            time_ms=time_ms,
            part_ids=plan.part_ids,
            reason=plan.reason,
        )
