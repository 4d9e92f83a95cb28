"""The facts a summary keeps, read from hand-built Claude Code and opencode sessions, and the
exact strings the fact-retention benchmark measures."""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import given
from hypothesis import strategies as st

from contextledger.compaction._facts import (
    IDENTIFIER_CHARS,
    RANK_NAMES,
    CommandRun,
    FileChange,
    FileRead,
    LineRange,
    PlanStep,
    commands,
    error_lines,
    exact_strings,
    exit_code,
    extract_facts,
    file_actions,
    identifier_strings,
    merge_ranges,
    path_strings,
    read_range,
    text_plan,
    walk_facts,
    within_budget,
)
from contextledger.events._catalogue import RecordedEvent
from contextledger.history._projection import History, Message
from contextledger.testing._builder import SessionBuilder

PYTEST_FAILURE = """Error: Exit code 1
...F
=================================== FAILURES ===================================
___________________________________ test_empty ___________________________________

    def test_empty():
>       assert parse_line('') == []
E       AssertionError: assert [''] == []
E         Left contains one more item: ''

tests/test_parser.py:4: AssertionError
=========================== short test summary info ============================
FAILED tests/test_parser.py::test_empty - AssertionError: assert [''] == []
1 failed, 2 passed in 0.03s"""


def messages(b: SessionBuilder) -> list[Message]:
    """The history messages of ``b``'s events."""
    recorded = [RecordedEvent(b.session_id, i, i, e) for i, e in enumerate(b.events, 1)]
    return History.rebuild(b.session_id, recorded).messages


def claude_code_session() -> SessionBuilder:
    """A Claude Code session: a failing test found, fixed and passing, with a todo list."""
    b = SessionBuilder("ses_cc")
    first = b.user(
        "Fix the failing test in tests/test_parser.py.\nDo not change the public API of parse_line."
    )
    a1 = b.assistant(first)
    b.text(a1, "I'll reproduce the failure, then fix `parse_line` in src/parser.py.")
    todos = b.tool_call(
        a1,
        "TodoWrite",
        {
            "todos": [
                {"id": "1", "content": "Reproduce the failure", "status": "in_progress"},
                {"id": "2", "content": "Fix parse_line for empty input", "status": "pending"},
            ]
        },
    )
    b.tool_result(todos, "Todos have been modified successfully.")
    head = b.tool_call(a1, "Read", {"file_path": "/repo/src/parser.py", "offset": 1, "limit": 40})
    b.tool_result(head, "     1→def parse_line(text):\n     2→    return text.split(',')\n")
    rest = b.tool_call(a1, "Read", {"file_path": "/repo/src/parser.py", "offset": 30, "limit": 30})
    b.tool_result(rest, "    30→# end\n")
    run = b.tool_call(
        a1, "Bash", {"command": "pytest -q tests/test_parser.py", "description": "Run the tests"}
    )
    b.tool_error(run, PYTEST_FAILURE)
    b.finish(a1, "tool-calls")
    second = b.user("Also keep blank fields out.")
    a2 = b.assistant(second)
    b.text(a2, "The issue is that split(',') keeps empty strings, so I will filter them.")
    edit = b.tool_call(
        a2,
        "Edit",
        {
            "file_path": "/repo/src/parser.py",
            "old_string": "return text.split(',')",
            "new_string": "return [field for field in text.split(',') if field]",
        },
    )
    b.tool_result(edit, "The file /repo/src/parser.py has been updated.")
    write = b.tool_call(
        a2,
        "Write",
        {
            "file_path": "/repo/tests/test_blank_fields.py",
            "content": "def test_blank_fields():\n    assert parse_line(',,') == []\n",
        },
    )
    b.tool_result(write, "File created successfully at: /repo/tests/test_blank_fields.py")
    lint = b.tool_call(a2, "Bash", {"command": "ruff check src", "description": "Lint"})
    b.tool_error(lint, "Error: Exit code 1\nsrc/parser.py:2:5: F821 undefined name `fields`")
    b.finish(a2, "tool-calls")
    a3 = b.assistant(second)
    todos = b.tool_call(
        a3,
        "TodoWrite",
        {
            "todos": [
                {"id": "1", "content": "Reproduce the failure", "status": "completed"},
                {"id": "2", "content": "Fix parse_line for empty input", "status": "completed"},
                {"id": "3", "content": "Run the whole suite", "status": "pending"},
            ]
        },
    )
    b.tool_result(todos, "Todos have been modified successfully.")
    again = b.tool_call(a3, "Bash", {"command": "pytest -q tests/test_parser.py"})
    b.tool_result(again, "...\n3 passed in 0.02s")
    b.text(a3, "The parser test passes now.")
    b.finish(a3, "stop")
    return b


def opencode_session() -> SessionBuilder:
    """An opencode session: lower-case tools, ``filePath`` inputs, an unfinished command."""
    b = SessionBuilder("ses_oc")
    ask = b.user("Add a --verbose flag to the CLI in app/cli.py")
    a = b.assistant(ask)
    read = b.tool_call(a, "read", {"filePath": "/work/app/cli.py", "offset": 10, "limit": 20})
    b.tool_result(read, "00010| def main(argv):\n")
    whole = b.tool_call(a, "read", {"filePath": "/work/app/flags.py"})
    b.tool_result(whole, "VERBOSE = False\n")
    edit = b.tool_call(
        a, "edit", {"filePath": "/work/app/cli.py", "oldString": "a", "newString": "b"}
    )
    b.tool_result(edit, "Edit applied successfully.")
    failed_edit = b.tool_call(
        a, "edit", {"filePath": "/work/app/missing.py", "oldString": "a", "newString": "b"}
    )
    b.tool_error(failed_edit, "Error: File /work/app/missing.py not found")
    b.tool_call(a, "bash", {"command": "python -m app --verbose", "description": "Try it"})
    b.finish(a, "tool-calls")
    return b


# --- extraction -------------------------------------------------------------------------------


def test_claude_code_requests_and_constraints() -> None:
    facts = extract_facts(messages(claude_code_session()))
    assert facts.first_request == (
        "Fix the failing test in tests/test_parser.py.\nDo not change the public API of parse_line."
    )
    assert facts.latest_request == "Also keep blank fields out."
    assert facts.constraints == ("Do not change the public API of parse_line.",)


def test_claude_code_files_read_with_merged_ranges_and_files_changed() -> None:
    facts = extract_facts(messages(claude_code_session()))
    assert facts.files_read == (FileRead("/repo/src/parser.py", (LineRange(1, 59),)),)
    assert facts.files_changed == (
        FileChange("/repo/src/parser.py", "edited"),
        FileChange("/repo/tests/test_blank_fields.py", "written"),
    )


def test_claude_code_commands_keep_their_latest_run() -> None:
    facts = extract_facts(messages(claude_code_session()))
    assert facts.commands == (
        CommandRun("ruff check src", "failed", 1),
        CommandRun("pytest -q tests/test_parser.py", "ok"),
    )


def test_a_command_that_passes_again_clears_its_failure_lines() -> None:
    facts = extract_facts(messages(claude_code_session()))
    assert facts.errors == ("src/parser.py:2:5: F821 undefined name `fields`",)


def test_error_lines_of_the_last_failing_test_are_verbatim() -> None:
    b = claude_code_session()
    facts = extract_facts(messages(b)[:3])
    assert facts.errors == (
        "E       AssertionError: assert [''] == []",
        "E         Left contains one more item: ''",
        "tests/test_parser.py:4: AssertionError",
        "FAILED tests/test_parser.py::test_empty - AssertionError: assert [''] == []",
    )


def test_the_plan_is_the_latest_todo_list() -> None:
    facts = extract_facts(messages(claude_code_session()))
    assert facts.plan == (
        PlanStep("Reproduce the failure", "completed"),
        PlanStep("Fix parse_line for empty input", "completed"),
        PlanStep("Run the whole suite", "pending"),
    )


def test_decisions_and_last_step_come_from_the_assistant() -> None:
    facts = extract_facts(messages(claude_code_session()))
    assert facts.decisions == (
        "The issue is that split(',') keeps empty strings, so I will filter them.",
    )
    assert facts.last_step == "The parser test passes now."


def test_opencode_tools_are_recognised() -> None:
    facts = extract_facts(messages(opencode_session()))
    assert facts.files_read == (
        FileRead("/work/app/cli.py", (LineRange(10, 29),)),
        FileRead("/work/app/flags.py"),
    )
    assert facts.files_changed == (FileChange("/work/app/cli.py", "edited"),)
    assert facts.commands == (CommandRun("python -m app --verbose", "interrupted"),)
    assert facts.errors == ("Error: File /work/app/missing.py not found",)


def test_a_plan_written_as_text_replaces_an_older_todo_list() -> None:
    b = claude_code_session()
    user = b.user("What next?")
    reply = b.assistant(user)
    b.text(reply, "Next steps:\n\n1. Run `pytest -q` on the whole suite\n2. Update the changelog")
    b.finish(reply)
    assert extract_facts(messages(b)).plan == (
        PlanStep("Run `pytest -q` on the whole suite"),
        PlanStep("Update the changelog"),
    )


def test_notices_synthetic_and_excluded_messages_are_no_requests() -> None:
    b = SessionBuilder()
    b.user("Build the docs")
    b.user("[Request interrupted by user]")
    b.user("<command-name>/exit</command-name>")
    b.user("Caveat: generated by local commands.", synthetic=True)
    rolled_back = b.request_compaction(trigger="manual")
    b.roll_back(rolled_back)
    facts = extract_facts(messages(b))
    assert (facts.first_request, facts.latest_request) == ("Build the docs", "Build the docs")


def test_a_long_request_keeps_whole_lines() -> None:
    line = "update src/contextledger/compaction/facts.py " * 10
    b = SessionBuilder()
    b.user("\n".join([line] * 10))
    request = extract_facts(messages(b)).latest_request
    assert request is not None and request.endswith("\n…")
    assert all(kept == line.rstrip() for kept in request.split("\n")[:-1])


def test_identifiers_are_the_most_used_per_character_within_the_budget() -> None:
    b = SessionBuilder()
    user = b.user("Rename parse_line to parse_fields in src/parser.py")
    reply = b.assistant(user)
    b.text(reply, "`parse_line` is used by `CsvReader.read_row` and `parse_line_strict`.")
    call = b.tool_call(reply, "Grep", {"pattern": "parse_line", "path": "src"})
    b.tool_result(call, "src/reader.py:3: from parser import parse_line\n")
    b.finish(reply)
    identifiers = extract_facts(messages(b)).identifiers
    assert identifiers[0] == "parse_line"
    assert {"CsvReader.read_row", "parse_fields", "src/parser.py", "src/reader.py"} <= set(
        identifiers
    )
    many = SessionBuilder()
    many.user(" ".join(f"name_{i:05d}" for i in range(2_000)))
    kept = extract_facts(messages(many)).identifiers
    assert len(kept) == IDENTIFIER_CHARS // len("`name_00000`, ")


def test_values_the_session_wrote_are_kept_and_those_only_printed_are_not() -> None:
    b = SessionBuilder()
    user = b.user("Raise the body limit to 20000 bytes and pin go 1.21.4, as in issue 386.")
    reply = b.assistant(user)
    b.text(
        reply,
        "I'll serve it on localhost:8080 (12,000 requests, v2 API, src/v100/a.py), "
        "then try react 18.3.0-rc.1 and 1.2.3_4.",
    )
    call = b.tool_call(reply, "Bash", {"command": "curl -s localhost:8080/health?n=250"})
    b.tool_result(call, "line 4521: ok after 73 ms, 9.9.9 build\n")
    b.finish(reply)
    identifiers = set(extract_facts(messages(b)).identifiers)
    assert {"20000", "1.21.4", "386", "8080", "250"} <= identifiers
    assert not {"4521", "9.9.9", "000", "100", "73", "18.3", "18.3.0", "1.2"} & identifiers


# --- the pieces -------------------------------------------------------------------------------


def test_read_ranges() -> None:
    assert read_range({"file_path": "a"}) is None
    assert read_range({"offset": 1}) is None
    assert read_range({"offset": 100}) == LineRange(100)
    assert read_range({"limit": 50}) == LineRange(1, 50)
    assert read_range({"offset": 0, "limit": 10}) == LineRange(1, 10)
    assert read_range({"path": "a", "view_range": [5, -1]}) == LineRange(5)
    assert merge_ranges([LineRange(50, 60), LineRange(1, 10), LineRange(11, 20)]) == (
        LineRange(1, 20),
        LineRange(50, 60),
    )
    assert merge_ranges([LineRange(5, 9), LineRange(100), LineRange(1, 6)]) == (
        LineRange(1, 9),
        LineRange(100),
    )
    assert merge_ranges([LineRange(10), LineRange(20, 30)]) == (LineRange(10),)


def test_file_actions_of_patch_and_editor_tools() -> None:
    patch = (
        "*** Begin Patch\n*** Add File: docs/new.md\n+hi\n*** Update File: src/app.py\n"
        "@@\n-a\n+b\n*** Delete File: old.txt\n*** End Patch"
    )
    assert file_actions("patch", {"patchText": patch}) == [
        ("docs/new.md", "created"),
        ("src/app.py", "edited"),
        ("old.txt", "deleted"),
    ]
    assert file_actions("editor", {"command": "view", "path": "/r/a.py"}) == [("/r/a.py", "read")]
    assert file_actions("editor", {"command": "create", "path": "/r/b.py"}) == [
        ("/r/b.py", "created")
    ]
    assert file_actions("write", {"content": "no path"}) == []


def test_exit_codes() -> None:
    assert exit_code({"exit": 2}, "Exit code 1") == 2
    assert exit_code({"exit": True}, "") is None
    assert exit_code({}, "Error: Exit code 127\nbash: foo: command not found") == 127
    assert exit_code({}, "--- FAIL: TestParse\nFAIL\nexit status 1") == 1
    assert exit_code({}, "Command exited with code 3") == 3
    assert exit_code({}, "line 1\nexit code 9 in the middle\nline 3\nline 4\nline 5\nend") is None
    assert exit_code({}, "all good") is None


def test_text_plans_need_an_announcing_line() -> None:
    assert text_plan("Done:\n- fixed a\n- fixed b") == ()
    assert text_plan("Remaining work:\n- one") == ()
    assert text_plan("Plan:\n1. a\n2. b\n\nNext:\n- c\n- d") == (PlanStep("c"), PlanStep("d"))
    assert text_plan("Plan:\n1. a\n2. b\n\nSummary:\n- c\n- d") == (PlanStep("a"), PlanStep("b"))


# --- exact strings ----------------------------------------------------------------------------


def test_paths() -> None:
    text = (
        "See /usr/lib/python3/dist-packages, ./build, ~/vsla and src/contextledger/events "
        "and tests/test_x.py:12:5, setup.py. And/or read/write are words; "
        "https://github.com/owner/repo.git is a URL; </system-reminder> is a tag."
    )
    assert path_strings(text) == [
        "/usr/lib/python3/dist-packages",
        "./build",
        "~/vsla",
        "src/contextledger/events",
        "tests/test_x.py",
        "setup.py",
        "https://github.com/owner/repo.git",
    ]


def test_identifiers() -> None:
    text = (
        "Call parse_line via CsvReader.read_row or reader.readRow, not plain words; "
        "HTTPServer, os.path.join and __init__ count; e.g. x_1 and 3.14 do not; "
        "nor src/my_module.py parts."
    )
    assert identifier_strings(text) == [
        "parse_line",
        "CsvReader.read_row",
        "reader.readRow",
        "HTTPServer",
        "os.path.join",
        "__init__",
    ]


def test_commands() -> None:
    text = "Ran `$ pytest -q` and ``$ echo `date` ``.\n$ make test\n  - $ ruff check .\nnot $ this"
    assert commands(text) == ["pytest -q", "echo `date`", "make test", "ruff check ."]
    assert commands("- `` $ echo `date` `` → exit 0") == ["echo `date`"]


def test_error_lines() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "a.py", line 1, in <module>\n'
        "json.decoder.JSONDecodeError: Expecting value\n"
        "    except ImportError:\n"
        "src/a.c:3:5: error: 'x' undeclared\n"
        "- E   assert 1 == 2\n"
        "error[E0308]: mismatched types\n"
        "errors: 0\n"
        "thread 'main' panicked at src/main.rs:2:5\n"
        "test_parse ... FAILED\n"
        "! LaTeX Error: File `preamble.tex' not found.\n"
    )
    assert error_lines(text) == [
        "json.decoder.JSONDecodeError: Expecting value",
        "src/a.c:3:5: error: 'x' undeclared",
        "E   assert 1 == 2",
        "error[E0308]: mismatched types",
        "thread 'main' panicked at src/main.rs:2:5",
        "test_parse ... FAILED",
        "! LaTeX Error: File `preamble.tex' not found.",
    ]


def test_exact_strings_is_the_union_and_deterministic() -> None:
    text = "FAILED tests/a.py::test_b - KeyError: 'x'\n$ pytest tests/a.py\nSee parse_line."
    strings = exact_strings(text)
    assert strings == {
        "FAILED tests/a.py::test_b - KeyError: 'x'",
        "pytest tests/a.py",
        "tests/a.py",
        "parse_line",
        "test_b",
        "KeyError",
    }
    assert exact_strings(text) == strings


def test_within_budget_skips_what_does_not_fit() -> None:
    assert within_budget(["aaaa", "b" * 20, "cc"], 15) == ("aaaa", "cc")


#: Pieces of tool output: paths, names, URLs, error lines and every kind of line break.
_FRAGMENTS = st.sampled_from(
    [
        "src/app.py",
        "/repo/tests/test_x.py::case_1 PASSED",
        "parse_line",
        "CamelName",
        "a.b.c",
        "https://example.com/a/b.py",
        "ValueError: bad",
        "E   assert 1 == 2",
        "FAILED tests/t.py",
        "$ pytest -q",
        "exit code 1",
        " ",
        "x",
        "\n",
        "\r\n",
        "\r",
        "\x85",
        "\u2028",
    ]
)


@given(
    outputs=st.lists(st.lists(_FRAGMENTS, max_size=40).map("".join), min_size=1, max_size=4),
    piece_chars=st.integers(1, 64),
)
def test_walking_the_facts_in_pieces_gives_the_facts_of_the_whole_texts(
    outputs: list[str], piece_chars: int
) -> None:
    b = SessionBuilder("ses_pieces")
    user = b.user(f"Fix it.\n{outputs[0]}")
    reply = b.assistant(user)
    for n, output in enumerate(outputs):
        b.text(reply, output)
        call = b.tool_call(reply, "Bash", {"command": f"run {n}", "note": output})
        if n % 2:
            b.tool_error(call, output)
        else:
            b.tool_result(call, output)
    b.finish(reply, "tool-calls")
    history = messages(b)
    walking = walk_facts(history, piece_chars=piece_chars)
    steps = 0
    while True:
        try:
            next(walking)
            steps += 1
        except StopIteration as walked:
            assert walked.value == extract_facts(history)
            break
    assert steps >= len(history)


def _steps_of(walking: Iterator[None]) -> int:
    return sum(1 for _ in walking)


def test_a_message_of_many_short_outputs_is_walked_in_pieces() -> None:
    b = SessionBuilder("ses_short_outputs")
    reply = b.assistant(b.user("Run the checks."))
    for n in range(40):
        b.tool_result(b.tool_call(reply, "Bash", {"command": f"check {n}"}), "ok\n" * 50)
    b.finish(reply, "tool-calls")
    history = messages(b)
    # Each output (150 characters) is shorter than a piece: the pauses come from the
    # characters scanned since the last one, not from any single text.
    assert _steps_of(walk_facts(history, piece_chars=1_000)) >= 40 * 150 // 1_000


def test_the_names_of_a_head_are_ranked_in_steps() -> None:
    b = SessionBuilder("ses_many_names")
    names = " ".join(f"name_{n}" for n in range(3 * RANK_NAMES))
    b.user(f"Keep these: {names}")
    history = messages(b)
    # One message, scanned in one piece: every other step is a pause of the ranking.
    assert _steps_of(walk_facts(history, piece_chars=10**9)) >= 1 + 3
