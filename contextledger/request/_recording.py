"""Recording what an agent did: the commands, the ``Recorder`` that turns them into events.

A recording command says what the user or the model did (``AddUser``, ``StartAssistant``,
``StartStep``, ``AddText``, ``CallTool``, ``ToolResult``, ``Finish``, or a whole model step,
``AssistantStep``); ``Recorder.record`` type-checks it (``InvalidCommand``, nothing
written), appends its events to one session's log as one batch, with ids issued from the
clock in increasing order, and answers with what the command's docstring names. Error
texts (a tool's error, an assistant message's error) are stored with their secrets masked.
The runtime's ``Session`` actor records through it, and so does the simulation's
``LocalSession``, so both record a turn identically.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import msgspec

from contextledger.events._catalogue import (
    MAIN_AGENT,
    AssistantFinished,
    Event,
    MessageAdded,
    PartAdded,
    PrefixAdvanced,
    ToolStateChanged,
    UsageReported,
)
from contextledger.events._errors import LedgerError
from contextledger.events._parts import (
    MessageError,
    ModelRef,
    Part,
    ReasoningPart,
    StepFinishPart,
    StepStartPart,
    TextPart,
    ToolCompleted,
    ToolErrored,
    ToolPart,
    ToolPending,
    Usage,
)
from contextledger.events._strict import WrongType, strict_copy
from contextledger.history._projection import History
from contextledger.ledger import EventLog, NewIds
from contextledger.logging import mask_secrets
from contextledger.request._context import EditorState
from contextledger.request._instructions import InstructionFile
from contextledger.request._turn import rule_events, user_message_events

Clock = Callable[[], int]
C = TypeVar("C", bound=msgspec.Struct)


class InvalidCommand(LedgerError):
    """A command whose arguments do not match their types (bytes given as text, None as a
    finish reason, a number as an agent id); nothing was written. ``command`` names the
    command, ``field`` the argument (a dotted path into it: ``usage.input``)."""

    def __init__(self, command: str, field: str, reason: str) -> None:
        super().__init__(f"invalid {command}: {field + ': ' if field else ''}{reason}")
        self.command = command
        self.field = field
        self.reason = reason


class Command(msgspec.Struct, frozen=True, kw_only=True):
    """A command about one agent's slice of a session."""

    agent_id: str = MAIN_AGENT


def checked(command: C) -> C:
    """``command`` with every argument checked against its declared type, strictly
    (``events._strict``); raises ``InvalidCommand`` naming the first that does not match."""
    try:
        return strict_copy(command)
    except WrongType as exc:
        raise InvalidCommand(type(command).__name__, exc.field, exc.reason) from None


def as_tuple(values: Sequence[Any]) -> Any:
    """``values`` as a tuple for a command's field, or as given when it is not a sequence at
    all, so that the command's type check (``checked``) names the argument instead of
    ``tuple()`` failing with a ``TypeError`` first."""
    return tuple(values) if isinstance(values, Sequence) else values


class AddUser(Command, frozen=True):
    """A user message typed now (wrapped when it interrupts a running turn, with its mode
    reminders and its captured environment), or with ``synthetic`` one the client sent on
    its own (a hook's output, a changed file), recorded as it was sent and starting no turn.
    ``files`` are ``(mime, url, filename)``. Reply: the message id."""

    text: str
    agent: str = "build"
    model: ModelRef | None = None
    files: tuple[tuple[str, str, str | None], ...] = ()
    editor: EditorState | None = None
    plan_path: str | None = None
    plan_exists: bool = False
    synthetic: bool = False


class StartAssistant(Command, frozen=True):
    """An assistant message answering ``parent_id``, with its first step started.
    Reply: the message id."""

    parent_id: str
    agent: str = "build"
    model: ModelRef | None = None


class StartStep(Command, frozen=True):
    """A new model step of an assistant message. Reply: the step-start part's id."""

    message_id: str


class AddText(Command, frozen=True):
    """Text (or, with ``reasoning``, reasoning with its provider ``metadata``) the model
    wrote. Reply: the part id."""

    message_id: str
    text: str
    reasoning: bool = False
    metadata: dict[str, Any] = {}


class CallTool(Command, frozen=True):
    """A tool call the model made. Reply: the tool part's id."""

    message_id: str
    tool: str
    input: dict[str, Any] = {}
    call_id: str | None = None


class ToolResult(Command, frozen=True):
    """The result of a tool call: its output, or with ``error`` its error text.
    Reply: the session's new seq."""

    part_id: str
    output: str
    error: bool = False


class ReadResult(Command, frozen=True):
    """The result of a tool call that read a file: its output with the rule files of the
    file's directories (``rules``, as ``directory_rules`` read them) that this assistant
    message has not loaded and the system prompt does not hold, appended as reminders and
    captured (``InstructionLoaded``). Reply: the output recorded."""

    part_id: str
    output: str
    rules: tuple[InstructionFile, ...] = ()


class Finish(Command, frozen=True):
    """An assistant message ended: its finish reason, usage and error, if any.
    Reply: the session's new seq."""

    message_id: str
    finish: str = "stop"
    usage: Usage | None = None
    error: MessageError | None = None


class AssistantStep(Command, frozen=True):
    """A whole model step (``SessionApi.record_assistant``): an assistant message answering
    ``parent_id`` with its text, its tool calls with their outputs (``(tool, input,
    output)``, under ``call_ids`` when given: one per call) and its end, ``tool-calls`` when
    it called any. Written as one batch, so a step refused anywhere writes nothing.
    Reply: the message id."""

    parent_id: str
    text: str = ""
    tool_calls: tuple[tuple[str, dict[str, Any], str], ...] = ()
    call_ids: tuple[str, ...] = ()
    usage: Usage | None = None
    agent: str = "build"


RecordingCommand = (
    AddUser
    | StartAssistant
    | StartStep
    | AddText
    | CallTool
    | ToolResult
    | ReadResult
    | Finish
    | AssistantStep
)


class Recorder:
    """Records one session's commands into its log (see the module docstring)."""

    def __init__(
        self, log: EventLog, clock: Clock, *, default_model: ModelRef | None = None
    ) -> None:
        self.log = log
        self._clock = clock
        self._model = default_model
        self._ids = NewIds(log.history)

    @property
    def session_id(self) -> str:
        """The session recorded."""
        return self.log.session_id

    async def record(self, command: RecordingCommand) -> str | int:
        """Append ``command``'s events; its reply (an id, or the session's new seq).

        The command is type-checked first (``checked``: ``InvalidCommand``), and its events
        again when appended (``InvalidEvent``); either way nothing is written."""
        if isinstance(command, Command):
            command = checked(command)
            self._check_agent(command)
        match command:
            case AddUser():
                return await self._add_user(command)
            case StartAssistant():
                return await self._start_assistant(command)
            case StartStep(message_id=message_id, agent_id=agent_id):
                return await self._part(
                    StepStartPart(id=self._new_part(), message_id=message_id), agent_id
                )
            case AddText():
                return await self._add_text(command)
            case CallTool():
                return await self._call_tool(command)
            case ToolResult():
                return await self._tool_result(command)
            case ReadResult():
                return await self._read_result(command)
            case Finish():
                return await self._write(self._finish_events(command))
            case AssistantStep():
                return await self._assistant_step(command)
        raise TypeError(f"no recording command {type(command).__name__}")

    def _check_agent(self, command: RecordingCommand) -> None:
        """Raise ``InvalidCommand`` when ``command`` adds to, or answers a call of, a message
        of another agent than its ``agent_id`` (its events, usage report and after-turn prune
        would go to the wrong slice), or adds a step, a text or a call to a message that has
        finished (the log takes a late call of a finished step from an importer, never from a
        running agent). Unknown ids are left to validation."""
        history = self.log.history
        message_id: str | None = None
        with contextlib.suppress(KeyError):
            match command:
                case StartStep() | AddText() | CallTool() | Finish():
                    message_id = command.message_id
                case ToolResult() | ReadResult():
                    message_id = history.part(command.part_id).message_id
            if message_id is not None:
                message = history.message(message_id)
                if message.agent_id != command.agent_id:
                    owner = message.agent_id
                    reason = f"{message_id!r} belongs to agent {owner!r}, not {command.agent_id!r}"
                    raise InvalidCommand(type(command).__name__, "agent_id", reason)
                adds = isinstance(command, StartStep | AddText | CallTool)
                if adds and message.finish is not None:
                    reason = f"{message_id!r} has finished ({message.finish})"
                    raise InvalidCommand(type(command).__name__, "message_id", reason)

    async def _write(self, events: Sequence[Event]) -> int:
        """Append ``events``; the new seq."""
        await self.log.append(events)
        return self.log.history.seq

    def _stamp(self, agent_id: str) -> dict[str, Any]:
        return {"session_id": self.session_id, "agent_id": agent_id, "time_ms": self._clock()}

    def _new_message(self) -> str:
        return self._ids.message(self._clock())

    def _new_part(self) -> str:
        return self._ids.part(self._clock())

    def _added(self, part: Part, agent_id: str) -> PartAdded:
        return PartAdded(part=part, **self._stamp(agent_id))

    async def _part(self, part: Part, agent_id: str) -> str:
        await self._write([self._added(part, agent_id)])
        return part.id

    async def _add_user(self, command: AddUser) -> str:
        message_id = self._new_message()
        events = user_message_events(
            self.log.history,
            message_id=message_id,
            new_part_id=self._new_part,
            text=command.text,
            agent=command.agent,
            model=command.model
            or self._model
            or ModelRef(provider_id="unknown", model_id="unknown"),
            agent_id=command.agent_id,
            files=command.files,
            editor=command.editor,
            plan_path=command.plan_path,
            plan_exists=command.plan_exists,
            synthetic=command.synthetic,
            time_ms=self._clock(),
        )
        await self._write(events)
        return message_id

    async def _start_assistant(self, command: StartAssistant) -> str:
        message_id, events = self._start_events(command)
        await self._write(events)
        return message_id

    def _start_events(self, command: StartAssistant) -> tuple[str, list[Event]]:
        message_id = self._new_message()
        stamp = self._stamp(command.agent_id)
        return message_id, [
            MessageAdded(
                message_id=message_id,
                role="assistant",
                parent_id=command.parent_id,
                agent=command.agent,
                model=command.model or self._model,
                **stamp,
            ),
            PartAdded(part=StepStartPart(id=self._new_part(), message_id=message_id), **stamp),
        ]

    async def _add_text(self, command: AddText) -> str:
        return await self._part(self._text_part(command), command.agent_id)

    def _text_part(self, command: AddText) -> Part:
        part_id = self._new_part()
        part: Part
        if command.reasoning:
            part = ReasoningPart(
                id=part_id,
                message_id=command.message_id,
                text=command.text,
                metadata=command.metadata,
            )
        else:
            part = TextPart(
                id=part_id,
                message_id=command.message_id,
                text=command.text,
                metadata=command.metadata,
            )
        return part

    async def _call_tool(self, command: CallTool) -> str:
        return await self._part(self._tool_call_part(command), command.agent_id)

    def _tool_call_part(self, command: CallTool) -> ToolPart:
        part_id = self._new_part()
        return ToolPart(
            id=part_id,
            message_id=command.message_id,
            call_id=command.call_id or f"call_{part_id.removeprefix('prt_')}",
            tool=command.tool,
            state=ToolPending(input=command.input),
        )

    async def _assistant_step(self, step: AssistantStep) -> str:
        """The events of ``start_assistant``, ``add_text``, ``call_tool`` with
        ``record_tool_result`` per call, and ``finish``, appended as one batch."""
        if step.call_ids and len(step.call_ids) != len(step.tool_calls):
            reason = (
                f"expected one id per tool call ({len(step.tool_calls)}), got {len(step.call_ids)}"
            )
            raise InvalidCommand("AssistantStep", "call_ids", reason)
        agent_id = step.agent_id
        start = StartAssistant(parent_id=step.parent_id, agent=step.agent, agent_id=agent_id)
        message_id, events = self._start_events(start)
        if step.text:
            text = AddText(message_id=message_id, text=step.text, agent_id=agent_id)
            events.append(self._added(self._text_part(text), agent_id))
        ids = step.call_ids or (None,) * len(step.tool_calls)
        for (tool, tool_input, output), call_id in zip(step.tool_calls, ids, strict=True):
            call = CallTool(
                message_id=message_id,
                tool=tool,
                input=tool_input,
                call_id=call_id,
                agent_id=agent_id,
            )
            part = self._tool_call_part(call)
            events.append(self._added(part, agent_id))
            events.append(self._result_event(part, output, False, agent_id))
        finish = Finish(
            message_id=message_id,
            finish="tool-calls" if step.tool_calls else "stop",
            usage=step.usage,
            agent_id=agent_id,
        )
        events.extend(self._finish_events(finish, model=start.model or self._model))
        await self._write(events)
        return message_id

    async def _tool_result(self, command: ToolResult) -> int:
        part = self._tool_part(command)
        return await self._write(
            [self._result_event(part, command.output, command.error, command.agent_id)]
        )

    async def _read_result(self, command: ReadResult) -> str:
        part = self._tool_part(command)
        rules, text = rule_events(
            self.log.history,
            command.rules,
            message_id=part.message_id,
            agent_id=command.agent_id,
            time_ms=self._clock(),
        )
        output = command.output
        if text:
            output = f"{output}\n\n{text}" if output else text
        await self._write([*rules, self._result_event(part, output, False, command.agent_id)])
        return output

    def _tool_part(self, command: ToolResult | ReadResult) -> ToolPart:
        """The tool call ``command`` answers; ``InvalidCommand`` when there is none."""
        try:
            part = self.log.history.part(command.part_id)
        except KeyError:
            part = None
        if not isinstance(part, ToolPart):
            reason = f"{command.part_id!r} is no tool call of this session"
            raise InvalidCommand(type(command).__name__, "part_id", reason)
        return part

    def _result_event(
        self, part: ToolPart, output: str, error: bool, agent_id: str
    ) -> ToolStateChanged:
        """The ``ToolStateChanged`` that ends tool call ``part`` with ``output`` (its error
        text, masked, with ``error``)."""
        now = self._clock()
        started = getattr(part.state, "started_ms", None) or now
        state: ToolCompleted | ToolErrored
        if error:
            # A tool's error is mostly an exception's text: masked before it is stored.
            state = ToolErrored(
                input=part.state.input,
                error=mask_secrets(output),
                started_ms=started,
                ended_ms=now,
            )
        else:
            state = ToolCompleted(
                input=part.state.input, output=output, started_ms=started, ended_ms=now
            )
        return ToolStateChanged(
            message_id=part.message_id, part_id=part.id, state=state, **self._stamp(agent_id)
        )

    def _finish_events(self, command: Finish, *, model: ModelRef | None = None) -> list[Event]:
        """The events that end message ``command.message_id``; ``model`` is its model when
        it is not in the log yet."""
        stamp = self._stamp(command.agent_id)
        usage = command.usage
        error = command.error
        if error is not None:
            # A provider's error text may echo a request header: masked before it is stored.
            error = msgspec.structs.replace(error, message=mask_secrets(error.message))
        events: list[Event] = []
        if usage is not None:
            events.append(
                PartAdded(
                    part=StepFinishPart(
                        id=self._new_part(),
                        message_id=command.message_id,
                        reason=command.finish,
                        usage=usage,
                    ),
                    **stamp,
                )
            )
        events.append(
            AssistantFinished(
                message_id=command.message_id,
                finish=command.finish,
                usage=usage or Usage(),
                error=error,
                **stamp,
            )
        )
        events.extend(answer_events(self.log.history, command, stamp, model=model))
        return events


def answer_events(
    history: History, finish: Finish, stamp: dict[str, Any], *, model: ModelRef | None = None
) -> list[Event]:
    """What a finished model call implies beside its ``AssistantFinished``, for the agent's
    latest request (``RequestSent``; other agents' requests sent meanwhile do not count):
    ``UsageReported`` when the provider reported usage (with the request's estimate, measure
    and model, so a calibrated counter learns from it), and ``PrefixAdvanced`` when the call
    succeeded with the pinned prefix and carried the session further than the prefix had
    advanced. When no request of the agent is known, the report names the finished message's
    model: ``model``, or the one the log holds."""
    events: list[Event] = []
    sent = history.last_request(finish.agent_id)
    usage = finish.usage
    if usage is not None and usage.total > 0:
        if model is None:
            with contextlib.suppress(KeyError):  # an unknown message: validation refuses it
                model = history.message(finish.message_id).model
        events.append(
            UsageReported(
                message_id=finish.message_id,
                usage=usage,
                estimated_tokens=sent.estimated_tokens if sent is not None else 0,
                measure=sent.measure if sent is not None else None,
                model=(
                    ModelRef(provider_id=sent.provider_id, model_id=sent.model_id)
                    if sent is not None
                    else model
                ),
                **stamp,
            )
        )
    prefix = history.pinned_prefix(finish.agent_id)
    if (
        finish.error is None
        and finish.finish != "error"
        and sent is not None
        and sent.last_message_id is not None
        and prefix is not None
        and prefix.advanced_to != sent.last_message_id
    ):
        events.append(PrefixAdvanced(key=prefix.key, message_id=sent.last_message_id, **stamp))
    return events
