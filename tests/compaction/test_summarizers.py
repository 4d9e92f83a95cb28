"""Summarizers: the extractive summary (every section, deterministic, incremental, on real
traces) and the model summary (the session's prefix, the text of every wire format)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger.compaction._facts import (
    MAX_ERROR_LINES,
    NAME_CHARS,
    CommandRun,
    FileChange,
    FileRead,
    SessionFacts,
    extract_facts,
)
from contextledger.compaction._summarizers import (
    HEAD_OPENING,
    KEPT_NOTE,
    MAX_COMMANDS,
    MAX_FILES,
    REST_OPENING,
    SECTION_CARRIED,
    SUMMARY_OPENING,
    ExtractiveSummarizer,
    ModelSummarizer,
    Summarizer,
    SummaryInput,
    _keyed,
    extractive_summary,
    response_text,
    summary_request,
)
from contextledger.events._catalogue import RecordedEvent
from contextledger.events._parts import ModelRef, ToolChoice, ToolCompleted, ToolPart
from contextledger.history._projection import History, Message
from contextledger.importers._claude_code import import_claude_code
from contextledger.policy._compaction import rollback_reason, text_tokens
from contextledger.policy._templates import (
    CONTINUATION,
    NONE,
    OPENCODE,
    SummaryTemplate,
    missing_sections,
    render_summary,
    summary_prompt,
)
from contextledger.providers._http import ProviderClient
from contextledger.providers._registry import WIRE_FORMATS
from contextledger.vocabulary._messages import (
    ModelMessage,
    ModelText,
    ModelToolCall,
    ModelToolResult,
)
from contextledger.vocabulary._requests import CacheMark, Request
from tests.compaction.test_facts import claude_code_session, messages, opencode_session
from tests.providers.fixtures import golden_request
from tests.providers.loopback import Loopback, Reply
from tests.providers.responses import ANSWERS, body

TRACES = Path("/work/shared/traces/claude-code-jsonl")
PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
both_templates = pytest.mark.parametrize("template", [OPENCODE, CONTINUATION], ids=lambda t: t.name)


def sections(summary: str) -> dict[str, list[str]]:
    """The lines under each heading of ``summary``."""
    found: dict[str, list[str]] = {}
    lines: list[str] = []
    for line in summary.split("\n"):
        if line.startswith("#"):
            lines = found.setdefault(line.lstrip("#").strip(), [])
        elif line.strip() and not line.startswith("<"):
            lines.append(line)
    return found


def task(
    head: Sequence[Message],
    template: SummaryTemplate = OPENCODE,
    previous: str | None = None,
    **fields: Any,
) -> SummaryInput:
    return SummaryInput(
        session_id="ses_test",
        head=tuple(head),
        transcript=fields.pop("transcript", "user: hello"),
        previous_summary=previous,
        template=template,
        prompt=summary_prompt(template, previous),
        **fields,
    )


# --- the extractive summary -------------------------------------------------------------------


@both_templates
@pytest.mark.parametrize("session", [claude_code_session, opencode_session, None])
def test_every_section_is_there(template: SummaryTemplate, session: Any) -> None:
    head = messages(session()) if session else []
    summary = extractive_summary(extract_facts(head), template)
    assert missing_sections(template, summary) == []
    if session is None:
        leaves = [lines for lines in sections(summary).values() if lines]
        assert all(lines == [NONE] for lines in leaves)


@both_templates
async def test_the_summary_is_deterministic(template: SummaryTemplate) -> None:
    summarizer: Summarizer = ExtractiveSummarizer()
    assert summarizer.max_input_tokens is None
    first = await summarizer.summarize(task(messages(claude_code_session()), template))
    again = await summarizer.summarize(task(messages(claude_code_session()), template))
    assert first == again


def test_opencode_sections_hold_the_facts() -> None:
    summary = sections(extractive_summary(extract_facts(messages(claude_code_session())), OPENCODE))
    assert summary["Goal"] == [
        "- Task: Fix the failing test in tests/test_parser.py.",
        "  Do not change the public API of parse_line.",
        "- Latest request: Also keep blank fields out.",
    ]
    assert summary["Constraints & Preferences"] == ["- Do not change the public API of parse_line."]
    assert summary["Done"] == [
        "- written `/repo/tests/test_blank_fields.py`",
        "- edited `/repo/src/parser.py`",
        "- `$ pytest -q tests/test_parser.py` → ok",
        "- [completed] Reproduce the failure",
        "- [completed] Fix parse_line for empty input",
    ]
    assert summary["In Progress"] == ["- Last step: The parser test passes now."]
    assert summary["Blocked"] == ["- `$ ruff check src` → exit 1"]
    assert summary["Key Decisions"] == [
        "- The issue is that split(',') keeps empty strings, so I will filter them."
    ]
    assert summary["Next Steps"] == ["- [pending] Run the whole suite"]
    critical = summary["Critical Context"]
    assert critical[0] == "- src/parser.py:2:5: F821 undefined name `fields`"
    assert critical[1].startswith("- Identifiers: `parse_line`, ")
    assert summary["Relevant Files"] == [
        "- `/repo/tests/test_blank_fields.py`: written",
        "- `/repo/src/parser.py`: read lines 1-59; edited",
    ]


def test_continuation_sections_hold_the_same_facts() -> None:
    facts = extract_facts(messages(claude_code_session()))
    summary = extractive_summary(facts, CONTINUATION)
    assert summary.startswith("<summary>\n") and summary.endswith("\n</summary>")
    found = sections(summary)
    assert found["Task Overview"][-1] == "- Do not change the public API of parse_line."
    assert "- `$ pytest -q tests/test_parser.py` → ok" in found["Current State"]
    assert "- Last step: The parser test passes now." in found["Current State"]
    assert found["Important Discoveries"][0] == "- `$ ruff check src` → exit 1"
    assert found["Next Steps"] == ["- [pending] Run the whole suite"]
    assert found["Context to Preserve"][0] == "- `/repo/tests/test_blank_fields.py`: written"
    assert found["Context to Preserve"][-1].startswith("- Identifiers: ")


def test_the_last_failing_test_is_blocked_with_its_lines_verbatim() -> None:
    head = messages(claude_code_session())[:2]
    found = sections(extractive_summary(extract_facts(head), OPENCODE))
    assert found["Blocked"] == ["- `$ pytest -q tests/test_parser.py` → exit 1"]
    assert found["Critical Context"][:4] == [
        "- E       AssertionError: assert [''] == []",
        "- E         Left contains one more item: ''",
        "- tests/test_parser.py:4: AssertionError",
        "- FAILED tests/test_parser.py::test_empty - AssertionError: assert [''] == []",
    ]
    assert found["In Progress"][0] == "- [in_progress] Reproduce the failure"


@both_templates
def test_a_second_compaction_keeps_the_facts_of_the_first(template: SummaryTemplate) -> None:
    session = messages(claude_code_session())
    first = extractive_summary(extract_facts(session[:2]), template)
    second = extractive_summary(extract_facts(session[2:]), template, first)
    superseded = {
        "- [in_progress] Reproduce the failure",
        "- [pending] Fix parse_line for empty input",
        "- `$ pytest -q tests/test_parser.py` → exit 1",
        "- Last step: I'll reproduce the failure, then fix `parse_line` in src/parser.py.",
        "- `/repo/src/parser.py`: read lines 1-59",
    }
    kept = [line for line in first.split("\n") if line.startswith(("- ", "  "))]
    lost = [line for line in kept if line not in second.split("\n")]
    assert [line for line in lost if not line.startswith("- Identifiers: ")] == sorted(
        superseded, key=kept.index
    )
    assert "- [completed] Reproduce the failure" in second
    assert "- `$ pytest -q tests/test_parser.py` → ok" in second
    assert "- `/repo/src/parser.py`: read lines 1-59; edited" in second
    assert "  Do not change the public API of parse_line." in second
    assert "`test_empty`" in second and "`test_blank_fields`" in second


@both_templates
def test_a_summary_over_its_token_limit_leaves_out_carried_bullets_first(
    template: SummaryTemplate,
) -> None:
    session = messages(claude_code_session())
    first = extractive_summary(extract_facts(session[:2]), template)
    carried = "\n".join(f"- an older fact number {i:03}" for i in range(60))
    previous = f"{first}\n\n## Critical Context\n{carried}"
    whole = extractive_summary(extract_facts(session[2:]), template, previous)
    limit = text_tokens(len(whole)) - 100
    cut = extractive_summary(extract_facts(session[2:]), template, previous, max_tokens=limit)
    assert text_tokens(len(cut)) <= limit < text_tokens(len(whole))
    kept = [line for line in whole.split("\n") if line not in cut.split("\n")]
    assert kept and all("older fact" in line for line in kept)
    assert "- an older fact number 000" in cut  # the newest carried bullets stay
    assert missing_sections(template, cut) == []
    headings = extractive_summary(extract_facts(session[2:]), template, previous, max_tokens=1)
    assert missing_sections(template, headings) == [] and "older fact" not in headings


@both_templates
def test_an_identifier_list_over_the_limit_keeps_the_names_that_fit(
    template: SummaryTemplate,
) -> None:
    names = tuple(f"name_{i:04d}" for i in range(400))
    facts = SessionFacts(first_request="Rename the fields.", identifiers=names)
    whole = extractive_summary(facts, template)
    limit = text_tokens(len(whole)) // 2
    cut = extractive_summary(facts, template, max_tokens=limit)
    assert text_tokens(len(cut)) <= limit
    assert "Rename the fields." in cut and missing_sections(template, cut) == []
    kept = [n for n in names if f"`{n}`" in cut]
    assert len(kept) > 100 and kept == list(names[: len(kept)])  # the most used first


@both_templates
def test_a_later_summary_over_its_limit_keeps_the_task_it_carries(
    template: SummaryTemplate,
) -> None:
    first = extractive_summary(SessionFacts(first_request="Port the parser to Rust."), template)
    names = tuple(f"name_{i:04d}" for i in range(400))
    later = SessionFacts(latest_request="Now the tests.", identifiers=names)
    whole = extractive_summary(later, template, first)
    limit = text_tokens(len(whole)) // 2
    cut = extractive_summary(later, template, first, max_tokens=limit)
    assert text_tokens(len(cut)) <= limit
    assert "Task: Port the parser to Rust." in cut and "Now the tests." in cut
    assert "`name_0000`" in cut and "`name_0399`" not in cut


def test_file_facts_merge_with_the_previous_summary() -> None:
    previous = render_summary(
        OPENCODE,
        {
            "Relevant Files": [
                "`/repo/a.py`: read lines 1-10, 50-end; created",
                "`/repo/b.py`: read",
            ]
        },
    )
    facts = SessionFacts(
        files_read=(FileRead("/repo/a.py", ()),),
        files_changed=(FileChange("/repo/a.py", "edited"), FileChange("/repo/b.py", "edited")),
    )
    files = sections(extractive_summary(facts, OPENCODE, previous))["Relevant Files"]
    assert files == ["- `/repo/b.py`: read; edited", "- `/repo/a.py`: read; created"]
    ranges = SessionFacts(files_read=(FileRead("/repo/a.py", ()),))
    narrow = render_summary(OPENCODE, {"Relevant Files": ["`/repo/a.py`: read lines 1-10"]})
    wide = render_summary(OPENCODE, {"Relevant Files": ["`/repo/a.py`: edited"]})
    assert "- `/repo/a.py`: read" in extractive_summary(ranges, OPENCODE, narrow).split("\n")
    assert "- `/repo/a.py`: read; edited" in extractive_summary(ranges, OPENCODE, wide)


def test_bullets_move_to_the_section_of_the_same_kind_across_templates() -> None:
    previous = render_summary(
        OPENCODE,
        {
            "Goal": ["Task: ship it"],
            "Key Decisions": ["use msgspec"],
            "Blocked": ["waiting on review"],
            "Relevant Files": ["`src/a.py`: read"],
        },
    )
    found = sections(extractive_summary(SessionFacts(), CONTINUATION, previous))
    assert found["Task Overview"] == ["- Task: ship it"]
    assert found["Important Discoveries"] == ["- waiting on review", "- use msgspec"]
    assert found["Context to Preserve"] == ["- `src/a.py`: read"]


def test_a_model_written_summary_is_carried_line_by_line() -> None:
    previous = (
        "Some preamble.\n\n## Goal\nShip the parser.\n\n## Progress\n* parsed CSV\n"
        "  * with quotes\n\n## Next Steps\n1. Write docs\n2. Release\n\n## Odd Section\n- kept"
    )
    found = sections(extractive_summary(SessionFacts(), OPENCODE, previous))
    assert found["Goal"] == ["- Ship the parser."]
    assert found["Done"] == ["- parsed CSV", "  * with quotes"]
    assert found["Next Steps"] == ["- 1. Write docs", "- 2. Release"]
    assert found["Critical Context"] == ["- Some preamble.", "- kept"]


#: A bullet a model could have written: not one stating a fact of ours (latest request, last
#: step, a command, a file...), which a new summary updates rather than carries.
bullet = st.text(
    st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=40
).filter(lambda text: bool(text.strip()) and _keyed(text).key is None)


@st.composite
def previous_summaries(draw: st.DrawFn) -> tuple[SummaryTemplate, dict[str, list[str]]]:
    template = draw(st.sampled_from([OPENCODE, CONTINUATION]))
    titles = [s.title for s in template.sections if s.title != "Progress"]
    texts = draw(st.lists(bullet, unique=True, max_size=4 * len(titles)))
    placed = draw(st.lists(st.sampled_from(titles), min_size=len(texts), max_size=len(texts)))
    filled: dict[str, list[str]] = {}
    for title, text in zip(placed, texts, strict=True):
        filled.setdefault(title, []).append(text)
    return template, filled


@PROPERTY
@given(previous_summaries())
def test_every_previous_bullet_survives_a_second_summary(
    drawn: tuple[SummaryTemplate, dict[str, list[str]]],
) -> None:
    template, filled = drawn
    previous = render_summary(template, filled)
    summary = extractive_summary(extract_facts(messages(opencode_session())), template, previous)
    found = sections(summary)
    for title, texts in filled.items():
        for text in texts:
            assert f"- {text}" in found[title]
    assert missing_sections(template, summary) == []


def test_a_long_token_a_tool_printed_is_no_identifier_and_does_not_make_the_summary_roll_back() -> (
    None
):
    b = opencode_session()
    reply = b.assistant(b.user("Decode the fixture for parse_line"))
    call = b.tool_call(reply, "bash", {"command": "base64 fixture.bin"})
    b.tool_result(call, "AAAAAAAa" + "A" * 6_000)
    b.finish(reply)
    facts = extract_facts(messages(b))
    assert "parse_line" in facts.identifiers
    assert all(len(name) <= NAME_CHARS for name in facts.identifiers)
    assert rollback_reason(extractive_summary(facts, OPENCODE), overflowed=False) is None


def test_sections_stay_bounded() -> None:
    facts = SessionFacts(
        files_read=tuple(FileRead(f"src/m{i}.py") for i in range(200)),
        commands=tuple(CommandRun(f"make t{i}", "ok", 0) for i in range(200)),
        errors=tuple(f"E{i}: error: boom" for i in range(MAX_ERROR_LINES)),
    )
    previous = render_summary(OPENCODE, {"Done": [f"old {i}" for i in range(100)]})
    found = sections(extractive_summary(facts, OPENCODE, previous))
    assert len(found["Relevant Files"]) == MAX_FILES
    assert found["Relevant Files"][0] == "- `src/m199.py`: read"
    done = found["Done"]
    assert len(done) == MAX_COMMANDS + SECTION_CARRIED
    assert done[0] == "- `$ make t199` → exit 0" and done[-1] == f"- old {SECTION_CARRIED - 1}"


def test_commands_with_backticks_and_many_lines() -> None:
    facts = SessionFacts(
        commands=(
            CommandRun("echo `date`", "ok", 0),
            CommandRun("cat <<EOF > a.txt\nhello\nEOF", "failed", 2),
        )
    )
    found = sections(extractive_summary(facts, OPENCODE))
    assert found["Blocked"] == ["- `$ cat <<EOF > a.txt` (+2 lines) → exit 2"]
    assert found["Done"] == ["- `` $ echo `date` `` → exit 0"]


def _trace_paths() -> list[Path | None]:
    found: list[Path | None] = [*sorted(TRACES.glob("*.jsonl"))] if TRACES.is_dir() else [None]
    return found


def _changed_paths(head: Sequence[Message]) -> set[str]:
    """Files a completed Edit, MultiEdit or Write changed, read straight off the tool parts."""
    return {
        str(part.state.input["file_path"])
        for message in head
        for part in message.parts
        if isinstance(part, ToolPart)
        and part.tool in ("Edit", "MultiEdit", "Write")
        and isinstance(part.state, ToolCompleted)
    }


@pytest.mark.parametrize("path", _trace_paths(), ids=lambda p: p.stem if p else "absent")
@both_templates
def test_a_real_trace_summary_names_the_files_changed(
    path: Path | None, template: SummaryTemplate
) -> None:
    if path is None:
        pytest.skip(f"{TRACES}: /work/shared/traces not found on this machine")
    imported = import_claude_code(path)
    recorded = [
        RecordedEvent(imported.session_id, i, i, e) for i, e in enumerate(imported.events, 1)
    ]
    history = History.rebuild(imported.session_id, recorded)
    head = history.messages[: len(history.messages) // 2]
    summary = extractive_summary(extract_facts(head), template)
    assert missing_sections(template, summary) == []
    changed = _changed_paths(head)
    assert {p for p in changed if f"`{p}`" not in summary} == set()


# --- the model summary ------------------------------------------------------------------------

PROMPT = summary_prompt(OPENCODE)
#: The last user message of a summary request over a task with ``PROMPT``.
INSTRUCTION = f"{SUMMARY_OPENING}\n\n{PROMPT}"


def _session_task(model: ModelRef) -> tuple[Request, SummaryInput]:
    """The golden session's request and a summary task over the same prefix."""
    session = golden_request(model)
    summary_task = task(
        [],
        system=session.system,
        tools=session.tools,
        messages=session.messages,
        marks=session.marks,
    )
    return session, summary_task


@pytest.mark.parametrize("name", sorted(WIRE_FORMATS))
async def test_the_summary_request_repeats_the_session_prefix(
    name: str, nursery: trio.Nursery
) -> None:
    server = await Loopback.start(nursery)
    answers = ANSWERS[name]
    server.script(Reply(200, body(answers.success)))
    session, summary_task = _session_task(answers.model)
    async with ProviderClient(WIRE_FORMATS[name](), server.url, api_key="sk-test") as client:
        summarizer = ModelSummarizer(client, model=answers.model)
        text = await summarizer.summarize(summary_task)
    assert text == "The tests pass: 3 passed in 0.02s."
    request = summarizer.request(summary_task)
    assert (request.system, request.tools, request.marks) == (
        session.system,
        session.tools,
        session.marks,
    )
    assert request.tool_choice is None  # the session's: a change costs its cached messages
    assert request.messages[:-1] == session.messages
    assert request.messages[-1].role == "user"
    assert request.messages[-1].content == (ModelText(text=INSTRUCTION, synthetic=True),)
    [seen] = server.received
    assert seen.body == WIRE_FORMATS[name]().encode(request).body
    cached = WIRE_FORMATS[name]().encode(session).prefix_before_last_message()
    assert seen.body.startswith(cached)


async def test_the_anthropic_body_keeps_the_tool_choice_and_asks_for_text_only(
    nursery: trio.Nursery,
) -> None:
    server = await Loopback.start(nursery)
    server.script(Reply(200, body(ANSWERS["anthropic"].success)))
    session, summary_task = _session_task(ANSWERS["anthropic"].model)
    async with ProviderClient(WIRE_FORMATS["anthropic"](), server.url) as client:
        await ModelSummarizer(client, max_output_tokens=4096).summarize(
            msgspec.structs.replace(summary_task, model=ANSWERS["anthropic"].model)
        )
    sent = json.loads(server.received[0].body)
    assert [t["name"] for t in sent["tools"]] == [t.name for t in session.tools]
    assert [b["text"] for b in sent["system"]] == list(session.system)
    assert "tool_choice" not in sent
    assert sent["max_tokens"] == 4096
    assert sent["messages"][-1]["role"] == "user"
    assert sent["messages"][-1]["content"][-1]["text"] == INSTRUCTION


@pytest.mark.parametrize(
    ("last", "repeated"),
    # A required tool call would leave the summary no answer in text: not repeated.
    [(None, None), ("none", "none"), ("auto", "auto"), ("required", None)],
)
def test_the_summary_request_repeats_the_last_request_s_tool_choice(
    last: ToolChoice | None, repeated: ToolChoice | None
) -> None:
    model = ANSWERS["anthropic"].model
    _, summary_task = _session_task(model)
    chosen = msgspec.structs.replace(summary_task, tool_choice=last)
    assert summary_request(chosen, model=model, max_output_tokens=1_000).tool_choice == repeated


def test_without_a_view_the_transcript_goes_as_one_user_message() -> None:
    model = ANSWERS["anthropic"].model
    marks = (CacheMark(target="system", index=0), CacheMark(target="message", index=3))
    summary_task = task([], transcript="user: fix it", system=("sys",), marks=marks, model=model)
    request = ModelSummarizer(_unused_client()).request(summary_task)
    [message] = request.messages
    assert message.content == (
        ModelText(text="user: fix it", synthetic=True),
        ModelText(text=INSTRUCTION, synthetic=True),
    )
    assert request.marks == (CacheMark(target="system", index=0),)
    assert request.max_output_tokens == 13_107
    chunk = task([], transcript="", model=model, max_output_tokens=2048)
    [message] = ModelSummarizer(_unused_client()).request(chunk).messages
    assert message.content == (ModelText(text=INSTRUCTION, synthetic=True),)
    assert ModelSummarizer(_unused_client()).request(chunk).max_output_tokens == 2048


def test_a_model_is_required() -> None:
    with pytest.raises(ValueError, match="needs a model"):
        ModelSummarizer(_unused_client()).request(task([]))


def _unused_client() -> ProviderClient:
    return ProviderClient(WIRE_FORMATS["anthropic"](), "http://127.0.0.1:9")


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_the_text_of_every_wire_format(name: str) -> None:
    assert response_text(name, ANSWERS[name].success) == "The tests pass: 3 passed in 0.02s."


REASONING_ONLY: dict[str, dict[str, Any]] = {
    "anthropic": {"content": [{"type": "thinking", "thinking": "## Goal\n- x", "signature": "s"}]},
    "openai-chat": {"choices": [{"message": {"content": None, "reasoning_content": "## Goal"}}]},
    "openrouter": {"choices": [{"message": {"content": "", "reasoning": "## Goal"}}]},
    "openai-responses": {
        "output": [{"type": "reasoning", "summary": [{"type": "summary_text", "text": "## Goal"}]}]
    },
    "bedrock": {
        "output": {
            "message": {"content": [{"reasoningContent": {"reasoningText": {"text": "## Goal"}}}]}
        }
    },
    "gemini": {"candidates": [{"content": {"parts": [{"text": "## Goal", "thought": True}]}}]},
}


@pytest.mark.parametrize("name", sorted(REASONING_ONLY))
def test_a_reasoning_only_answer_falls_back_to_its_reasoning(name: str) -> None:
    assert response_text(name, REASONING_ONLY[name]).startswith("## Goal")


_CALL = {"name": "bash", "arguments": "{}"}
#: An answer of each wire format with the text "## Goal" and a tool call after it.
TEXT_AND_TOOL_CALL: dict[str, dict[str, Any]] = {
    "anthropic": {
        "content": [
            {"type": "text", "text": "## Goal"},
            {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}},
        ]
    },
    **{
        name: {
            "choices": [
                {
                    "message": {
                        "content": "## Goal",
                        "tool_calls": [{"id": "c1", "type": "function", "function": _CALL}],
                    }
                }
            ]
        }
        for name in ("openai-chat", "openrouter", "openai-compatible")
    },
    "openai-responses": {
        "output": [
            {"type": "message", "content": [{"type": "output_text", "text": "## Goal"}]},
            {"type": "function_call", "call_id": "c1", **_CALL},
        ]
    },
    "bedrock": {
        "output": {
            "message": {
                "content": [
                    {"text": "## Goal"},
                    {"toolUse": {"toolUseId": "t1", "name": "bash", "input": {}}},
                ]
            }
        }
    },
    "gemini": {
        "candidates": [
            {"content": {"parts": [{"text": "## Goal"}, {"functionCall": {"name": "bash"}}]}}
        ]
    },
}


@pytest.mark.parametrize("name", sorted(TEXT_AND_TOOL_CALL))
def test_9_2_30_a_tool_call_in_the_answer_is_left_out_of_the_summary(name: str) -> None:
    """opencode: a model emitting a tool call during the summary leaves no tool part; here
    only the answer's text becomes the summary (an answer of only a tool call is empty, and
    the compactor rolls it back)."""
    assert response_text(name, TEXT_AND_TOOL_CALL[name]) == "## Goal"


def test_every_wire_format_has_a_tool_call_answer() -> None:
    assert sorted(TEXT_AND_TOOL_CALL) == sorted(ANSWERS)


#: The reasoning of each wire format's ``REASONING_ONLY`` answer, said before a tool call.
REASONING_AND_TOOL_CALL: dict[str, dict[str, Any]] = {
    "anthropic": {
        "content": [
            *REASONING_ONLY["anthropic"]["content"],
            {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}},
        ]
    },
    **{
        name: {
            "choices": [
                {
                    "message": {
                        **REASONING_ONLY[name]["choices"][0]["message"],
                        "tool_calls": [{"id": "c1", "type": "function", "function": _CALL}],
                    }
                }
            ]
        }
        for name in ("openai-chat", "openrouter")
    },
    "openai-responses": {
        "output": [
            *REASONING_ONLY["openai-responses"]["output"],
            {"type": "function_call", "call_id": "c1", **_CALL},
        ]
    },
    "bedrock": {
        "output": {
            "message": {
                "content": [
                    *REASONING_ONLY["bedrock"]["output"]["message"]["content"],
                    {"toolUse": {"toolUseId": "t1", "name": "bash", "input": {}}},
                ]
            }
        }
    },
    "gemini": {
        "candidates": [
            {
                "content": {
                    "parts": [
                        *REASONING_ONLY["gemini"]["candidates"][0]["content"]["parts"],
                        {"functionCall": {"name": "bash"}},
                    ]
                }
            }
        ]
    },
}


@pytest.mark.parametrize("name", sorted(REASONING_AND_TOOL_CALL))
def test_an_answer_of_a_tool_call_without_text_is_empty_even_with_reasoning(name: str) -> None:
    """The request keeps the session's tool choice, so the model may call a tool: its
    reasoning then plans a step of the task, not a summary."""
    assert response_text(name, REASONING_AND_TOOL_CALL[name]) == ""
    assert response_text(name, REASONING_ONLY[name]).startswith("## Goal")


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_an_empty_answer_is_empty(name: str) -> None:
    assert response_text(name, {}) == ""


def test_chat_content_parts_are_joined() -> None:
    answer = {"choices": [{"message": {"content": [{"type": "text", "text": "## Goal"}]}}]}
    assert response_text("openai-compatible", answer) == "## Goal"


def test_an_unknown_wire_format_is_refused() -> None:
    with pytest.raises(ValueError, match="no summary reader"):
        response_text("carrier-pigeon", {})


def test_a_model_summarizer_reads_the_compacted_models_window_by_default() -> None:
    from contextledger.compaction._summarizers import ModelSummarizer
    from contextledger.providers import ProviderClient, wire_format

    client = ProviderClient(wire_format("anthropic"), "http://127.0.0.1:9")
    assert ModelSummarizer(client).max_input_tokens == 0


def test_a_head_starting_with_the_models_message_is_opened_by_a_user_message() -> None:
    answer = ModelMessage(
        role="assistant", content=(ModelText(text="I read the file."),), source_id="m2"
    )
    follow = ModelMessage(role="user", content=(ModelText(text="And then?"),), source_id="m3")
    task = SummaryInput(
        session_id="ses_s",
        head=(),
        transcript="",
        previous_summary="the earlier summary",
        template=CONTINUATION,
        prompt="Summarise.",
        model=ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5"),
        messages=(answer, follow),
        marks=(CacheMark(target="system", index=0), CacheMark(target="message", index=1)),
    )
    request = summary_request(task, max_output_tokens=1_000)
    roles = [m.role for m in request.messages]
    assert roles == ["user", "assistant", "user", "user"]
    assert request.messages[0].content == (ModelText(text=HEAD_OPENING, synthetic=True),)
    # The mark stays on the same message ("And then?"), one index further on.
    assert request.marks == (
        CacheMark(target="system", index=0),
        CacheMark(target="message", index=2),
    )
    assert request.messages[2] is follow
    opened = summary_request(
        msgspec.structs.replace(task, messages=(follow,), marks=()), max_output_tokens=1_000
    )
    assert [m.role for m in opened.messages] == ["user", "user"]  # a user head is left as it is


def test_the_instruction_names_the_kept_messages_and_follows_the_rest_of_the_head() -> None:
    user = ModelMessage(role="user", content=(ModelText(text="Fix  the\nparser."),), source_id="m1")
    call = ModelMessage(
        role="assistant",
        content=(ModelToolCall(call_id="c1", tool="bash", input={"command": "pytest"}),),
        source_id="m2",
    )
    result = ModelMessage(
        role="tool",
        content=(ModelToolResult(call_id="c1", tool="bash", output="3 passed"),),
        source_id="m2",
    )
    model = ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5")
    kept = task([], messages=(user, call, result), kept=2, model=model)
    (*sent, instruction) = summary_request(kept, max_output_tokens=1_000).messages
    assert sent == [user, call, result]
    assert instruction.content == (
        ModelText(
            text=INSTRUCTION
            + "\n\n"
            + KEPT_NOTE.format(count=2, role="assistant's", opening="a call of the `bash` tool"),
            synthetic=True,
        ),
    )
    first_kept = msgspec.structs.replace(kept, kept=3)
    note = summary_request(first_kept, max_output_tokens=1_000).messages[-1].content[0]
    assert (
        isinstance(note, ModelText)
        and 'user\'s message that opens with "Fix the parser."' in note.text
    )
    rest = msgspec.structs.replace(kept, kept=0, rest="[User]: And the lexer.")
    (*sent, last) = summary_request(rest, max_output_tokens=1_000).messages
    assert sent == [user, call, result]
    assert last.content == (
        ModelText(
            text=f"{REST_OPENING}\n<conversation>\n[User]: And the lexer.\n</conversation>",
            synthetic=True,
        ),
        ModelText(text=INSTRUCTION, synthetic=True),
    )
