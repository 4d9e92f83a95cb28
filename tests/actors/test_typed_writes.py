"""Every public write method of a session handle refuses wrongly typed arguments: a typed
error, nothing written, and the session still opens and takes the next command."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger.actors import Runtime, SessionHandle
from contextledger.events import InvalidEvent, LedgerError
from contextledger.events._parts import MessageError, ModelRef, ToolSchema, Usage
from contextledger.ledger import SessionLog
from contextledger.providers._errors import ProviderError
from contextledger.request import InvalidCommand, RequestInputs, SystemSegments
from contextledger.request._context import EditorState
from contextledger.request._instructions import InstructionFile
from contextledger.store import SQLiteStore
from contextledger.vocabulary._models import Model, ModelLimits

MODEL = Model(
    provider_id="anthropic",
    model_id="claude-sonnet-4-5",
    limits=ModelLimits(context=200_000, output=32_000),
)
SESSION = "ses_typed"
REF = ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5")
INPUTS = RequestInputs(
    model=REF,
    segments=SystemSegments(prompt="Be brief.", environment="<env/>"),
    tools=(ToolSchema(name="bash", description="Run.", input_schema={"type": "object"}),),
)

#: Values of the wrong Python type for most arguments; ``Kind`` says which ones fit.
PLAIN: tuple[object, ...] = (b"bytes", 1.5, "text", 7, True, ["x"], {"key": "value"}, None)


@dataclass(frozen=True)
class Kind:
    """What an argument takes: ``str``, ``bool``, ``dict`` or ``any`` (a struct, a
    sequence or a literal: none of ``PLAIN`` fits), maybe ``None``; ``extra`` are further
    wrong values (structs built with a wrongly typed field)."""

    takes: str
    optional: bool = False
    extra: tuple[object, ...] = ()

    def wrong(self) -> list[object]:
        def fits(value: object) -> bool:
            if value is None:
                return self.optional
            return {"str": str, "bool": bool, "dict": dict, "any": None}[self.takes] is type(value)

        return [v for v in PLAIN if not fits(v)] + list(self.extra)


TEXT = Kind("str")
FLAG = Kind("bool")
USAGE = Kind("any", optional=True, extra=(Usage(input="3"), Usage(output=None)))  # type: ignore[arg-type]
ERROR = Kind("any", optional=True, extra=(MessageError(name="Bogus"),))  # type: ignore[arg-type]
EDITOR = Kind("any", optional=True, extra=(EditorState(time=b"now", cwd="/"),))  # type: ignore[arg-type]
FILES = Kind("any", extra=([("text/plain", b"data:,", None)], ("text/plain",)))
CALLS = Kind("any", extra=([("bash", {}, None)], [("bash", "input", "output")]))
TRIGGER = Kind("any")
INPUTS_KIND = Kind(
    "any",
    extra=(
        RequestInputs(model=REF, segments=SystemSegments(prompt=None, environment="")),  # type: ignore[arg-type]
        RequestInputs(model=REF, segments=INPUTS.segments, tools=(ToolSchema(name=7),)),  # type: ignore[arg-type]
    ),
)
INSTRUCTIONS = Kind(
    "any",
    extra=([InstructionFile(b"AGENTS.md", "rules", "project")],),  # type: ignore[arg-type]
)
PROVIDER = Kind(
    "any",
    extra=(ProviderError("p", MessageError(name="APIError", message=b"boom")),),  # type: ignore[arg-type]
)


@dataclass(frozen=True)
class Method:
    """A write method, its valid arguments (given the ids of the session's open messages)
    and the kind of each argument."""

    name: str
    kinds: dict[str, Kind]

    def arguments(self, ids: dict[str, str]) -> dict[str, Any]:
        valid: dict[str, Any] = {
            "text": "hello",
            "agent": "build",
            "agent_id": "main",
            "files": (),
            "editor": None,
            "plan_path": None,
            "plan_exists": False,
            "synthetic": False,
            "parent_id": ids["user"],
            "message_id": ids["assistant"],
            "reasoning": False,
            "metadata": None,
            "tool": "bash",
            "tool_input": {"command": "ls"},
            "call_id": None,
            "part_id": ids["call"],
            "output": "a.py",
            "error": False,
            "finish": "stop",
            "usage": None,
            "tool_calls": (),
            "call_ids": (),
            "trigger": "manual",
            "inputs": INPUTS,
            "memory": None,
            "instructions": (),
            "session_id": "ses_child",
            "title": "a subtask",
            "read_path": "README.md",
            "worktree": ".",
        }
        if self.name == "finish":
            valid["error"] = None
        if self.name == "record_error":
            valid["error"] = ProviderError("p", MessageError(name="APIError", message="boom"))
        return {name: valid[name] for name in self.kinds}


METHODS = [
    Method(
        "add_user",
        {
            "text": TEXT,
            "agent": TEXT,
            "agent_id": TEXT,
            "files": FILES,
            "editor": EDITOR,
            "plan_path": Kind("str", optional=True),
            "plan_exists": FLAG,
            "synthetic": FLAG,
        },
    ),
    Method("start_assistant", {"parent_id": TEXT, "agent": TEXT, "agent_id": TEXT}),
    Method("start_step", {"message_id": TEXT, "agent_id": TEXT}),
    Method(
        "add_text",
        {
            "message_id": TEXT,
            "text": TEXT,
            "reasoning": FLAG,
            "metadata": Kind("dict", optional=True),
            "agent_id": TEXT,
        },
    ),
    Method(
        "call_tool",
        {
            "message_id": TEXT,
            "tool": TEXT,
            "tool_input": Kind("dict", optional=True),
            "call_id": Kind("str", optional=True),
            "agent_id": TEXT,
        },
    ),
    Method(
        "record_tool_result",
        {"part_id": TEXT, "output": TEXT, "error": FLAG, "agent_id": TEXT},
    ),
    Method(
        "finish",
        {"message_id": TEXT, "finish": TEXT, "usage": USAGE, "error": ERROR, "agent_id": TEXT},
    ),
    Method(
        "record_assistant",
        {
            "parent_id": TEXT,
            "text": TEXT,
            "tool_calls": CALLS,
            "call_ids": Kind("any", extra=([7], ("toolu_1", None))),
            "usage": USAGE,
            "agent": TEXT,
            "agent_id": TEXT,
        },
    ),
    Method(
        "record_read_result",
        {"part_id": TEXT, "output": TEXT, "read_path": TEXT, "worktree": TEXT, "agent_id": TEXT},
    ),
    Method("answer_paging_call", {"part_id": TEXT, "agent_id": TEXT}),
    Method("record_error", {"message_id": TEXT, "error": PROVIDER, "agent_id": TEXT}),
    Method("compact", {"trigger": TRIGGER, "agent_id": TEXT}),
    Method("prune", {"agent_id": TEXT}),
    Method(
        "build_request",
        {
            "inputs": INPUTS_KIND,
            "memory": Kind("str", optional=True),
            "instructions": INSTRUCTIONS,
            "agent_id": TEXT,
        },
    ),
    Method("start_subtask", {"session_id": TEXT, "title": TEXT}),
]


@st.composite
def wrong_call(draw: st.DrawFn) -> tuple[Method, str, object]:
    """A write method, one of its arguments, and a value of the wrong type for it."""
    method = draw(st.sampled_from(METHODS))
    argument = draw(st.sampled_from(sorted(method.kinds)))
    value = draw(st.sampled_from(method.kinds[argument].wrong()))
    return method, argument, value


async def _open_turn(session: SessionHandle) -> dict[str, str]:
    """A user message, an assistant message answering it, and a tool call without its
    result: every write method has something to write to."""
    user = await session.add_user("list the files")
    assistant = await session.start_assistant(user)
    call = await session.call_tool(assistant, "bash", {"command": "ls"})
    return {"user": user, "assistant": assistant, "call": call}


async def _call(session: SessionHandle, method: Method, arguments: dict[str, Any]) -> None:
    positional = {
        "add_user": ["text"],
        "record_error": ["message_id", "error"],
        "build_request": ["inputs"],
        "start_subtask": ["session_id"],
        "record_read_result": ["part_id", "output"],
        "answer_paging_call": ["part_id"],
    }.get(method.name, [])
    args = [arguments.pop(name) for name in positional]
    await getattr(session, method.name)(*args, **arguments)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(call=wrong_call())
async def test_a_wrongly_typed_argument_is_refused_with_nothing_written(
    tmp_path_factory: pytest.TempPathFactory, call: tuple[Method, str, object]
) -> None:
    method, argument, value = call
    ticks = count(1_900_000_000_000, 1000)
    path = tmp_path_factory.mktemp("db") / "x.db"
    async with (
        SQLiteStore.open(path) as store,
        Runtime.open(store, model=MODEL, clock=lambda: next(ticks)) as runtime,
    ):
        session = await runtime.session(SESSION)
        ids = await _open_turn(session)
        written = len(await store.read_all())
        arguments = method.arguments(ids)
        arguments[argument] = value

        with pytest.raises((InvalidCommand, InvalidEvent)) as caught:
            await _call(session, method, arguments)

        assert isinstance(caught.value, LedgerError)
        assert len(await store.read_all()) == written
        reopened = await SessionLog.open(store, SESSION)
        assert reopened.history == await session.history()
        # The session takes the next command as if nothing had happened.
        await session.record_tool_result(ids["call"], "a.py")
        await session.finish(ids["assistant"], finish="tool-calls")
    async with SQLiteStore.open(path) as store:
        assert len(await store.read_all()) == written + 2


async def test_the_error_names_the_command_and_the_argument(tmp_path: Path) -> None:
    async with (
        SQLiteStore.open(tmp_path / "x.db") as store,
        Runtime.open(store, model=MODEL) as runtime,
    ):
        session = await runtime.session(SESSION)
        ids = await _open_turn(session)
        with pytest.raises(InvalidCommand) as caught:
            await session.record_tool_result(ids["call"], b"bytes")  # type: ignore[arg-type]
    assert (caught.value.command, caught.value.field) == ("ToolResult", "output")
    assert str(caught.value) == "invalid ToolResult: output: Expected `str`, got `bytes`"


def test_every_write_method_of_the_handle_is_covered() -> None:
    # A new method that writes must join METHODS.
    reads = {"history", "view", "replay", "family", "read_tool_output"}
    public = {
        name
        for name in dir(SessionHandle)
        if not name.startswith("_") and callable(getattr(SessionHandle, name))
    }
    assert public - reads == {m.name for m in METHODS}
