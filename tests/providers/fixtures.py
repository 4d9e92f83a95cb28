"""The fixed session every wire format's golden request is built from.

It has a system prompt in two blocks, two tools, a user message with an image and its
environment block, signed reasoning, parallel tool calls with an image attachment and an
error, a completed compaction, a later turn, and cache marks on the last tool (one hour: a
longer lifetime must come first), the first system block and the last two messages.
"""

from __future__ import annotations

from contextledger.events._catalogue import RecordedEvent
from contextledger.events._parts import ModelRef, ToolSchema
from contextledger.history._projection import History
from contextledger.history._view import ViewOptions, model_view
from contextledger.testing._builder import SessionBuilder
from contextledger.vocabulary._requests import CacheMark, Request

SYSTEM = (
    "You are a careful software engineer.",
    "<env>\n  Platform: linux\n  Today's date: Mon Nov 30 2026\n</env>",
)
TOOLS = (
    ToolSchema(
        name="read",
        description="Read a file.",
        input_schema={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    ),
    ToolSchema(
        name="bash",
        description="Run a shell command.",
        input_schema={"type": "object", "properties": {"command": {"type": "string"}}},
    ),
)


def golden_session(model: ModelRef) -> SessionBuilder:
    """The events of the fixed session, recorded with ``model``."""
    b = SessionBuilder("ses_golden", model=model)
    opening = b.user("Look around the repository.")
    a0 = b.assistant(opening)
    b.text(a0, "It is a small Python package with a parser module.")
    b.finish(a0, "stop")
    b.compact("## Goal\nFix the parser.\n## Relevant Files\n- src/parser.py\n")
    first = b.user(
        "Fix the failing test in parser.py.",
        files=(("image/png", "screenshot.png"),),
        environment="<environment_details>\nCurrent time: 2026-11-30T10:00:00Z\n"
        "</environment_details>",
    )
    a1 = b.assistant(first)
    b.reasoning(a1, "The test output will say which case fails.", signature="sig-1")
    b.text(a1, "Let me look at the parser and run the tests.")
    read = b.tool_call(a1, "read", {"path": "src/parser.py"})
    run = b.tool_call(a1, "bash", {"command": "pytest -q"})
    b.tool_result(
        read,
        "def parse(text):\n    return text.split(',')\n",
        attachments=(("image/png", "diagram.png"),),
    )
    b.tool_error(run, "exit status 1: test_parse_empty failed")
    b.finish(a1, "tool-calls")
    second = b.user("Also handle whitespace.")
    a2 = b.assistant(second)
    b.text(a2, "Done: parse() now strips each field.")
    b.finish(a2, "stop")
    third = b.user("Thanks. Run the tests once more.")
    a3 = b.assistant(third)
    call = b.tool_call(a3, "bash", {"command": "pytest -q"})
    b.tool_result(call, "3 passed in 0.02s")
    return b


def golden_request(model: ModelRef) -> Request:
    """The fixed session's next request for ``model``, with four cache marks."""
    events = golden_session(model).events
    history = History.rebuild(
        "ses_golden", [RecordedEvent("ses_golden", i, i, e) for i, e in enumerate(events, 1)]
    )
    messages = tuple(model_view(history, ViewOptions(model=model)))
    return Request(
        model=model,
        session_id="ses_golden",
        system=SYSTEM,
        tools=TOOLS,
        messages=messages,
        marks=(
            CacheMark(target="tool", index=len(TOOLS) - 1, ttl="1h"),
            CacheMark(target="system", index=0),
            CacheMark(target="message", index=len(messages) - 2),
            CacheMark(target="message", index=len(messages) - 1),
        ),
        max_output_tokens=8192,
    )
