"""The aider chat history importer: one session per header, user blocks, replies, token lines,
console output left out, and the shared traces against ``shared/traces/SOURCES-more.md``."""

from __future__ import annotations

from contextledger.events._catalogue import (
    MessageAdded,
    PartAdded,
    SessionStarted,
    UsageReported,
)
from contextledger.events._parts import TextPart, Usage
from contextledger.importers import ImportedSession, import_aider, import_aider_lines
from contextledger.importers._aider import usage_of
from tests.importers.test_openai_chat import assert_imported, messages, of_type, trace_dir

HISTORY = """\
-*- mode: fundamental -*-
> flake8...Failed  
#### # Fix any errors below  
####   
#### aider/repomap.py:22:1: E402  

# aider chat started at 2024-08-05 19:33:32

> /Users/me/.venv/bin/aider aider/utils.py  
> Aider v0.47.2-dev  
> Models: claude-3-5-sonnet-20240620 with diff edit format, weak model claude-3-haiku  
> Added aider/utils.py to the chat.  

#### Use the Spinner instead  

Certainly! Here's the change:

aider/utils.py
```python
<<<<<<< SEARCH
print()
=======
spinner.step()
>>>>>>> REPLACE
```

> Tokens: 5,244 sent, 1.2k cache write, 604 received. Cost: $0.02 request, $0.02 session.  
> Applied edit to aider/utils.py  

#### /add aider/io.py  
> Added aider/io.py to the chat  

# aider chat started at 2024-08-05 19:40:00

#### /ask what does io.py do?  
> Tokens: 1.8k sent, 89 received.  
"""  # noqa: W291


def _sessions() -> list[ImportedSession]:
    return import_aider_lines(HISTORY.splitlines(), source="history.md")


def _texts(session: ImportedSession) -> list[tuple[str, bool]]:
    parts = [e.part for e in of_type(session.events, PartAdded)]
    return [(p.text, p.ignored) for p in parts if isinstance(p, TextPart)]


def _started(session: ImportedSession) -> SessionStarted:
    started = session.events[0]
    assert isinstance(started, SessionStarted)
    return started


def test_one_session_per_header_and_one_for_a_headless_start() -> None:
    headless, first, second = _sessions()
    for session in (headless, first, second):
        assert_imported(session)
    assert _started(headless).config["headless"] is True
    started = _started(first)
    assert started.config["started_at"] == "2024-08-05 19:33:32"
    assert started.config["aider_version"] == "v0.47.2-dev"
    assert started.time_ms == 1722886412000
    assert started.model is not None and started.model.model_id == "claude-3-5-sonnet-20240620"


def test_a_run_of_user_lines_is_one_message_without_its_markup() -> None:
    headless, _, _ = _sessions()
    assert _texts(headless) == [("# Fix any errors below\n\naider/repomap.py:22:1: E402", False)]


def test_the_reply_is_assistant_text_and_the_token_line_its_usage() -> None:
    _, first, _ = _sessions()
    assert [m.role for m in messages(first)] == ["user", "assistant", "user"]
    reply = _texts(first)[1][0]
    assert reply.startswith("Certainly!") and reply.endswith(">>>>>>> REPLACE\n```")
    (usage,) = [e.usage for e in of_type(first.events, UsageReported)]
    assert usage == Usage(input=4044, output=604, cache_write=1200)


def test_commands_are_kept_but_only_the_models_commands_are_sent() -> None:
    _, first, second = _sessions()
    assert _texts(first)[2] == ("/add aider/io.py", True)
    assert _texts(second)[0] == ("/ask what does io.py do?", False)
    (reply,) = messages(second, "assistant")
    assert reply.parent_id == messages(second, "user")[0].message_id


def test_console_output_and_the_mode_line_are_left_out_with_their_lines() -> None:
    headless, first, _ = _sessions()
    assert [(i.line, i.kind, i.field) for i in headless.left_out] == [
        (1, "mode_line", ""),
        (2, "console", ""),
    ]
    assert [(i.line, i.field) for i in first.left_out] == [
        (9, "to line 12"),
        (28, ""),
        (31, ""),
    ]


def test_token_lines_in_their_variants() -> None:
    assert usage_of("> Tokens: 12,566 sent, 84 received.") == Usage(input=12566, output=84)
    assert usage_of("> Tokens: 4.5k sent, 2.0k cache hit, 1.1k received.") == Usage(
        input=2500, output=1100, cache_read=2000
    )
    assert usage_of("> Tokens: 3k sent, 1k cached, 10 received. Cost: $0.01") == Usage(
        input=2000, output=10, cache_read=1000
    )
    assert usage_of("> Added aider/io.py to the chat") is None


#: ``shared/traces/SOURCES-more.md``, aider_history rows: ``# aider chat started`` headers /
#: runs of consecutive ``####`` lines / ``> Tokens:`` lines; the fixture "starts with an emacs
#: mode line and mid-session output (no header before line 94)".
SOURCES: dict[str, tuple[int, int, int]] = {
    "aider__tests-fixtures-chat-history.md": (1133, 1776, 839),
    "zen-mcp-server__.aider.chat.history.md": (4, 8, 0),
}
#: Sessions made of the lines before the first header: the fixture's first 93 lines hold a
#: user message; the zen-mcp-server file starts with its header.
HEADLESS = {"aider__tests-fixtures-chat-history.md": 1, "zen-mcp-server__.aider.chat.history.md": 0}


def test_each_shared_history_has_the_documented_counts() -> None:
    folder = trace_dir("aider-history")
    for name, (headers, users, tokens) in SOURCES.items():
        sessions = import_aider(folder / name)
        empty = [i for s in sessions for i in s.left_out if i.kind == "empty_session"]
        assert len(sessions) + len(empty) == headers + HEADLESS[name]
        assert all(any(isinstance(e, MessageAdded) for e in s.events) for s in sessions)
        assert len({s.session_id for s in sessions}) == len(sessions)
        events = [e for s in sessions for e in s.events]
        assert sum(1 for e in of_type(events, MessageAdded) if e.role == "user") == users
        assert len(of_type(events, UsageReported)) == tokens
        assert sum(s.read.get("tokens line", 0) for s in sessions) == tokens
