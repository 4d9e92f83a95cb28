"""``SessionApi``: what every session offers an agent, whichever shell runs it.

The recording half (what the user and the model did) is implemented here once, on top of two
hooks: where a recording command goes (``_record``) and what runs when a turn ends
(``_turn_ended``: the after-turn prune). ``build_request``, ``compact`` and ``history`` are
the shell's own. The runtime's ``SessionHandle`` (commands through the ``Session`` actor) and
the simulation's ``LocalSession`` (in-process) are the two shells.
"""

from __future__ import annotations

import functools
import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import trio

from contextledger.compaction._compactor import CompactionExhausted, CompactionResult
from contextledger.events._catalogue import MAIN_AGENT
from contextledger.events._parts import CompactionTrigger, MessageError, ToolPart, Usage
from contextledger.history._projection import History
from contextledger.history._truncate import (
    PAGE_LINES,
    PAGING_TOOL_NAME,
    OutputPage,
    ToolOutputUnavailable,
    page_for_call,
    read_tool_output,
)
from contextledger.policy._decisions import after_compaction
from contextledger.policy._prune import Plan
from contextledger.providers._errors import ProviderError
from contextledger.request._builder import BuiltRequest, RequestInputs
from contextledger.request._context import EditorState
from contextledger.request._instructions import InstructionFile, directory_rules
from contextledger.request._recording import (
    AddText,
    AddUser,
    AssistantStep,
    CallTool,
    Finish,
    InvalidCommand,
    ReadResult,
    RecordingCommand,
    StartAssistant,
    StartStep,
    ToolResult,
    as_tuple,
    checked,
)
from contextledger.request._turn import rule_claims


class ReadToolOutput(msgspec.Struct, frozen=True, kw_only=True):
    """The arguments of ``SessionApi.read_tool_output``, type-checked before reading."""

    part_id: str
    offset: int
    limit: int


class SessionApi(ABC):
    """What every session offers (see the module docstring)."""

    @abstractmethod
    async def _record(self, command: RecordingCommand) -> Any:
        """Record ``command``; its reply."""

    @abstractmethod
    async def _turn_ended(self, agent_id: str) -> list[Plan]:
        """Run the after-turn prune of ``agent_id``'s slice; the plans carried out."""

    @abstractmethod
    async def build_request(
        self,
        inputs: RequestInputs,
        *,
        memory: str | None = None,
        instructions: Sequence[InstructionFile] = (),
        agent_id: str = MAIN_AGENT,
    ) -> BuiltRequest:
        """The next request, after whatever compaction the session decides on first."""

    @abstractmethod
    async def history(self) -> History:
        """The projection, once every command sent before is applied (read it only)."""

    @abstractmethod
    async def compact(
        self, *, trigger: CompactionTrigger = "manual", agent_id: str = MAIN_AGENT
    ) -> CompactionResult:
        """Compact the agent's slice now."""

    async def record_error(
        self, message_id: str, error: ProviderError, *, agent_id: str = MAIN_AGENT
    ) -> CompactionResult | None:
        """A model call failed: the assistant message ends with the error. A context
        overflow is answered with a compaction that replays the request; when that
        compaction is refused because the turn has used its attempts
        (``compaction.max_attempts``), ``CompactionExhausted`` is raised, so the same
        over-window request is not sent again. Raises ``InvalidCommand`` (nothing written)
        when ``error`` is not a ``ProviderError``."""
        if not isinstance(error, ProviderError):
            reason = f"expected a ProviderError, got {type(error).__name__}"
            raise InvalidCommand("record_error", "error", reason)
        await self._record(
            Finish(message_id=message_id, finish="error", error=error.error, agent_id=agent_id)
        )
        if error.error.name != "ContextOverflowError":
            return None
        result = await self.compact(trigger="overflow", agent_id=agent_id)
        if after_compaction("overflow", result.outcome, result.detail) == "exhausted":
            raise CompactionExhausted(result.detail)
        return result

    async def add_user(
        self,
        text: str,
        *,
        agent: str = "build",
        agent_id: str = MAIN_AGENT,
        files: Sequence[tuple[str, str, str | None]] = (),
        editor: EditorState | None = None,
        plan_path: str | None = None,
        plan_exists: bool = False,
        synthetic: bool = False,
    ) -> str:
        """Record a user message; return its id. With ``synthetic``, a message the client
        sent on its own rather than one the user typed (a hook's output, a changed file's
        snippet): recorded as it was sent, it belongs to the running turn."""
        command = AddUser(
            text=text,
            agent=agent,
            agent_id=agent_id,
            files=as_tuple(files),
            editor=editor,
            plan_path=plan_path,
            plan_exists=plan_exists,
            synthetic=synthetic,
        )
        message_id: str = await self._record(command)
        return message_id

    async def start_assistant(
        self, parent_id: str, *, agent: str = "build", agent_id: str = MAIN_AGENT
    ) -> str:
        """Open an assistant message answering ``parent_id`` (streamed recording)."""
        message_id: str = await self._record(
            StartAssistant(parent_id=parent_id, agent=agent, agent_id=agent_id)
        )
        return message_id

    async def start_step(self, message_id: str, *, agent_id: str = MAIN_AGENT) -> str:
        """A further model step of an assistant message."""
        part_id: str = await self._record(StartStep(message_id=message_id, agent_id=agent_id))
        return part_id

    async def add_text(
        self,
        message_id: str,
        text: str,
        *,
        reasoning: bool = False,
        metadata: dict[str, Any] | None = None,
        agent_id: str = MAIN_AGENT,
    ) -> str:
        """Text or reasoning the model wrote."""
        command = AddText(
            message_id=message_id,
            text=text,
            reasoning=reasoning,
            metadata={} if metadata is None else metadata,
            agent_id=agent_id,
        )
        part_id: str = await self._record(command)
        return part_id

    async def call_tool(
        self,
        message_id: str,
        tool: str,
        tool_input: dict[str, Any] | None = None,
        *,
        call_id: str | None = None,
        agent_id: str = MAIN_AGENT,
    ) -> str:
        """A tool call the model made; return its part id."""
        command = CallTool(
            message_id=message_id,
            tool=tool,
            input={} if tool_input is None else tool_input,
            call_id=call_id,
            agent_id=agent_id,
        )
        part_id: str = await self._record(command)
        return part_id

    async def record_tool_result(
        self, part_id: str, output: str, *, error: bool = False, agent_id: str = MAIN_AGENT
    ) -> None:
        """The result (or, with ``error``, the error) of a tool call."""
        await self._record(
            ToolResult(part_id=part_id, output=output, error=error, agent_id=agent_id)
        )

    async def finish(
        self,
        message_id: str,
        *,
        finish: str = "stop",
        usage: Usage | None = None,
        error: MessageError | None = None,
        agent_id: str = MAIN_AGENT,
    ) -> list[Plan]:
        """End an assistant message. Unless it failed, the after-step prune runs (every mode
        prunes when the turn is over, ``batch`` also between the steps of a tool loop:
        ``policy._decisions.prune_plans``); return what it did."""
        await self._record(
            Finish(
                message_id=message_id, finish=finish, usage=usage, error=error, agent_id=agent_id
            )
        )
        if error is not None:
            return []
        return await self._turn_ended(agent_id)

    async def record_assistant(
        self,
        parent_id: str,
        *,
        text: str = "",
        tool_calls: Sequence[tuple[str, dict[str, Any], str]] = (),
        call_ids: Sequence[str] = (),
        usage: Usage | None = None,
        agent: str = "build",
        agent_id: str = MAIN_AGENT,
    ) -> str:
        """A whole assistant step: its text, its tool calls with their outputs
        (``(tool, input, output)``), finished as ``tool-calls`` when it called any, written
        as one batch (``AssistantStep``), then the after-step prune as ``finish`` runs it.
        ``call_ids`` are the provider's ids of the calls, one per call in order (none: ids
        are made up). Raises ``InvalidCommand`` for a wrongly typed argument or another
        number of ``call_ids``, ``InvalidEvent`` for a step the log refuses (an unknown
        parent, a call id used already); either way nothing is written."""
        step = AssistantStep(
            parent_id=parent_id,
            text=text,
            tool_calls=as_tuple(tool_calls),
            call_ids=as_tuple(call_ids),
            usage=usage,
            agent=agent,
            agent_id=agent_id,
        )
        message_id: str = await self._record(step)
        await self._turn_ended(agent_id)
        return message_id

    # --- the paging tool ----------------------------------------------------------------------

    async def read_tool_output(
        self, part_id: str, *, offset: int = 0, limit: int = PAGE_LINES
    ) -> OutputPage:
        """Lines ``offset`` to ``offset + limit`` of the full output of tool call ``part_id``,
        from the log, whatever the view shows of it. Raises ``ToolOutputUnavailable`` when
        the call has no output, ``ValueError`` for a negative offset, a limit below 1 or an
        offset past the end, ``InvalidCommand`` for wrongly typed arguments."""
        command = checked(ReadToolOutput(part_id=part_id, offset=offset, limit=limit))
        history = await self.history()
        return read_tool_output(history, command.part_id, command.offset, command.limit)

    async def answer_paging_call(self, part_id: str, *, agent_id: str = MAIN_AGENT) -> str:
        """Answer the model's call of the paging tool (``history.PAGING_TOOL``) recorded as
        tool part ``part_id`` (``call_tool``): the page its input asks for becomes the call's
        result (``OutputPage.answer``); an input that does not match the tool's schema, an
        offset past the end, or a part with no output becomes the call's error, saying why.
        Returns the text recorded. Raises ``InvalidCommand`` (nothing written) when
        ``part_id`` is not a call of the paging tool."""
        history = await self.history()
        part = _tool_call(history, part_id, "answer_paging_call", PAGING_TOOL_NAME)
        try:
            output, error = page_for_call(history, part.state.input).answer(), False
        except (ToolOutputUnavailable, ValueError) as exc:
            output, error = str(exc), True
        await self.record_tool_result(part_id, output, error=error, agent_id=agent_id)
        return output

    # --- directory rules ----------------------------------------------------------------------

    async def record_read_result(
        self,
        part_id: str,
        output: str,
        *,
        read_path: str | os.PathLike[str],
        worktree: str | os.PathLike[str],
        agent_id: str = MAIN_AGENT,
    ) -> str:
        """The result of tool call ``part_id`` that read the file ``read_path``: ``output``
        with the rule files (``AGENTS.md``, ``CLAUDE.md``, ``CONTEXT.md``) of the file's
        directories up to ``worktree`` appended as ``<system-reminder>`` blocks, except those
        the system prompt holds or this assistant message loaded already; each is captured
        (``InstructionLoaded``), so every later request and every replay carries the same
        bytes. The files are read in a worker thread. Returns the output recorded. Raises
        ``InstructionPathError`` for a path outside the worktree and ``InvalidCommand`` for
        wrongly typed arguments; either way nothing is written."""
        for name, path in (("read_path", read_path), ("worktree", worktree)):
            if not isinstance(path, str | os.PathLike):
                reason = f"expected a path, got {type(path).__name__}"
                raise InvalidCommand("record_read_result", name, reason)
        history = await self.history()
        part = _tool_call(history, part_id, "record_read_result")
        loaded, claimed = rule_claims(history, part.message_id)
        files = await trio.to_thread.run_sync(
            functools.partial(
                directory_rules, Path(read_path), Path(worktree), loaded=loaded, claimed=claimed
            )
        )
        command = ReadResult(part_id=part_id, output=output, rules=tuple(files), agent_id=agent_id)
        recorded: str = await self._record(command)
        return recorded


def _tool_call(history: History, part_id: str, command: str, tool: str | None = None) -> ToolPart:
    """The tool call ``part_id`` (of ``tool``, when given); ``InvalidCommand`` otherwise."""
    try:
        part = history.part(part_id)
    except (KeyError, TypeError):
        part = None
    if not isinstance(part, ToolPart) or tool not in (None, part.tool):
        reason = f"{part_id!r} is not a call of {tool}" if tool else f"{part_id!r} is no tool call"
        raise InvalidCommand(command, "part_id", reason)
    return part
