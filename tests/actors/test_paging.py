"""The paging tool through the runtime: a request offers ``read_tool_output`` once the view
shows a truncated output, and the model's call of it is answered from the full output in the
log, page by page."""

from __future__ import annotations

import re
from typing import Any

import pytest

from contextledger.actors import Runtime, SessionHandle
from contextledger.config import Config, ToolOutputConfig
from contextledger.events._parts import ToolErrored, ToolPart, ToolSchema
from contextledger.history import PAGING_TOOL, ToolOutputUnavailable
from contextledger.request import InvalidCommand
from contextledger.request._builder import BuiltRequest, RequestInputs
from contextledger.store._memory import MemoryStore
from contextledger.vocabulary._messages import ModelToolResult
from tests.actors.agent import BASH, INPUTS, MODEL, clock

#: 3,000 lines: the view shows the first 2,000 and a hint for the rest.
LOG = "".join(f"line {n}\n" for n in range(3000))
HINT = re.compile(r'read_tool_output\(part_id="([^"]+)", offset=(\d+), limit=(\d+)\)')


def _names(built: BuiltRequest) -> list[str]:
    return [t.name for t in built.request.tools]


def _results(built: BuiltRequest) -> list[ModelToolResult]:
    return [c for m in built.request.messages for c in m.content if isinstance(c, ModelToolResult)]


async def _truncated_turn(session: SessionHandle) -> str:
    user = await session.add_user("Why does the build fail?")
    await session.record_assistant(user, tool_calls=[("bash", {"command": "make"}, LOG)])
    return user


async def _call_paging_tool(session: SessionHandle, user: str, tool_input: dict[str, Any]) -> str:
    """The model calls the paging tool; the host has the runtime answer it."""
    message = await session.start_assistant(user)
    call = await session.call_tool(message, PAGING_TOOL.name, tool_input)
    await session.answer_paging_call(call)
    await session.finish(message, finish="tool-calls")
    return call


async def test_the_model_pages_a_truncated_output_back_through_the_tool() -> None:
    async with Runtime.open(MemoryStore(), model=MODEL, clock=clock()) as runtime:
        session = await runtime.session("ses_paging")
        first = await session.build_request(INPUTS)
        user = await _truncated_turn(session)
        truncated = await session.build_request(INPUTS)
        (shown,) = _results(truncated)
        part_id, offset, limit = HINT.findall(shown.output)[0]
        call = await _call_paging_tool(
            session, user, {"part_id": part_id, "offset": int(offset), "limit": int(limit)}
        )
        paged = await session.build_request(INPUTS)
        history = await session.history()
    assert _names(first) == ["bash"]
    assert _names(truncated) == _names(paged) == ["bash", PAGING_TOOL.name]
    assert truncated.prefix.action == "rotate" and paged.prefix.action == "keep"
    assert (int(offset), int(limit)) == (2000, 1000)
    answer = _results(paged)[-1].output
    assert answer == "".join(f"line {n}\n" for n in range(2000, 3000)) + (
        "\n[lines 2000-2999 of 3000; the end of the output]"
    )
    state = history.part(call).state
    assert not isinstance(state, ToolErrored) and state.output == answer


async def test_a_page_in_the_middle_says_how_to_read_on() -> None:
    async with Runtime.open(MemoryStore(), model=MODEL, clock=clock()) as runtime:
        session = await runtime.session("ses_middle")
        user = await _truncated_turn(session)
        (shown,) = _results(await session.build_request(INPUTS))
        part_id = HINT.findall(shown.output)[0][0]
        await _call_paging_tool(session, user, {"part_id": part_id, "offset": 10, "limit": 5})
        answer = _results(await session.build_request(INPUTS))[-1].output
    assert answer == (
        "line 10\nline 11\nline 12\nline 13\nline 14\n\n[lines 10-14 of 3000; read more with "
        f'read_tool_output(part_id="{part_id}", offset=15, limit=5)]'
    )


@pytest.mark.parametrize(
    ("tool_input", "reason"),
    [
        ({"part_id": "prt_missing"}, "no such part"),
        ({"part_id": 7}, "Expected `str`"),
        ({"offset": 2}, "missing required field `part_id`"),
        ({"part_id": "PART", "offset": 5000}, "past the end of the output"),
        ({"part_id": "PART", "lines": 5}, "unknown field `lines`"),
    ],
)
async def test_a_wrong_paging_call_is_answered_with_why(
    tool_input: dict[str, Any], reason: str
) -> None:
    async with Runtime.open(MemoryStore(), model=MODEL, clock=clock()) as runtime:
        session = await runtime.session("ses_wrong")
        user = await _truncated_turn(session)
        (shown,) = _results(await session.build_request(INPUTS))
        part_id = HINT.findall(shown.output)[0][0]
        if tool_input.get("part_id") == "PART":
            tool_input = {**tool_input, "part_id": part_id}
        call = await _call_paging_tool(session, user, tool_input)
        state = (await session.history()).part(call).state
    assert isinstance(state, ToolErrored) and reason in state.error


async def test_only_a_call_of_the_paging_tool_is_answered_by_the_runtime() -> None:
    async with Runtime.open(MemoryStore(), model=MODEL, clock=clock()) as runtime:
        session = await runtime.session("ses_other")
        user = await session.add_user("List the files.")
        message = await session.start_assistant(user)
        call = await session.call_tool(message, "bash", {"command": "ls"})
        seq = (await session.history()).seq
        with pytest.raises(InvalidCommand, match="not a call of read_tool_output"):
            await session.answer_paging_call(call)
        with pytest.raises(InvalidCommand, match="not a call of read_tool_output"):
            await session.answer_paging_call("prt_missing")
        assert (await session.history()).seq == seq


async def test_the_handle_reads_any_page_of_a_recorded_output() -> None:
    async with Runtime.open(MemoryStore(), model=MODEL, clock=clock()) as runtime:
        session = await runtime.session("ses_read")
        await _truncated_turn(session)
        history = await session.history()
        (part_id,) = [p.id for m in history.messages for p in m.parts if isinstance(p, ToolPart)]
        page = await session.read_tool_output(part_id, offset=2998, limit=10)
        with pytest.raises(ToolOutputUnavailable):
            await session.read_tool_output(history.messages[0].parts[0].id)
        with pytest.raises(InvalidCommand):
            await session.read_tool_output(part_id, offset="2")  # type: ignore[arg-type]
    assert page.text == "line 2998\nline 2999\n" and page.next_offset is None


@pytest.mark.parametrize(("when", "offered"), [("always", [True, True]), ("never", [False, False])])
async def test_the_config_says_when_requests_offer_the_paging_tool(
    when: str, offered: list[bool]
) -> None:
    config = Config(tool_output=ToolOutputConfig(paging_tool=when))  # type: ignore[arg-type]
    async with Runtime.open(MemoryStore(), model=MODEL, config=config, clock=clock()) as runtime:
        session = await runtime.session("ses_config")
        first = await session.build_request(INPUTS)
        await _truncated_turn(session)
        truncated = await session.build_request(INPUTS)
    assert [PAGING_TOOL.name in _names(b) for b in (first, truncated)] == offered


async def test_a_host_s_own_paging_tool_is_kept() -> None:
    own = ToolSchema(name=PAGING_TOOL.name, description="The host's pager.")
    inputs = RequestInputs(model=INPUTS.model, segments=INPUTS.segments, tools=(BASH, own))
    async with Runtime.open(MemoryStore(), model=MODEL, clock=clock()) as runtime:
        session = await runtime.session("ses_own")
        await _truncated_turn(session)
        built = await session.build_request(inputs)
    assert built.request.tools == (BASH, own)
