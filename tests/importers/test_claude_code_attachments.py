"""What a Claude Code attachment sent, as text: the content it carries, whatever shape it has."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from contextledger.importers._claude_code_attachments import (
    _RENDER,
    FIXED_REASON,
    attachment_text,
    typed_by_user,
)


def test_diagnostics_are_a_line_per_finding_under_its_file() -> None:
    finding = {
        "message": "undefined: NormalizeOriginURL",
        "severity": "Error",
        "range": {"start": {"line": 186, "character": 24}},
        "source": "compiler",
    }
    text, _ = attachment_text(
        {"type": "diagnostics", "files": [{"uri": "/repo/tm.go", "diagnostics": [finding]}]}
    )
    assert text == (
        "[diagnostics]\n/repo/tm.go\n  187:25 [Error] undefined: NormalizeOriginURL (compiler)"
    )


def test_a_file_read_in_is_its_name_and_content() -> None:
    read = {"type": "text", "file": {"filePath": "a.css", "content": ".a { color: red }"}}
    text, _ = attachment_text({"type": "file", "filename": "a.css", "content": read})
    assert text == "[file]\na.css\n.a { color: red }"


def test_hook_output_is_sent_only_for_session_start_and_prompt_submit() -> None:
    started = {"type": "hook_success", "hookEvent": "SessionStart", "content": "mode: terse"}
    assert attachment_text(started) == ("[hook_success]\nmode: terse", None)
    assert attachment_text({**started, "hookEvent": "PostToolUse"}) == (None, FIXED_REASON)


def test_task_reminder_items_are_kept_and_an_empty_reminder_is_not() -> None:
    item = {"id": "1", "status": "in_progress", "subject": "rebase"}
    text, _ = attachment_text({"type": "task_reminder", "content": [item], "itemCount": 1})
    assert text is not None and '"subject": "rebase"' in text
    assert attachment_text({"type": "task_reminder", "content": [], "itemCount": 0})[0] is None


def test_only_a_person_s_queued_prompt_is_typed_by_the_user() -> None:
    queued = {"type": "queued_command", "prompt": "and the README"}
    assert typed_by_user(queued)
    assert typed_by_user({**queued, "commandMode": "prompt", "origin": {"kind": "human"}})
    assert not typed_by_user({**queued, "commandMode": "task-notification"})
    assert not typed_by_user({**queued, "origin": {"kind": "coordinator"}})
    assert not typed_by_user({"type": "skill_listing", "content": "x"})
    assert attachment_text({**queued, "prompt": " \n"}) == (None, FIXED_REASON)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
_FIELDS = st.sampled_from(
    ["content", "snippet", "filename", "files", "prompt", "range", "start", "diagnostics",
     "addedLines", "hookEvent", "skills", "file", "response", "origin", "used"]
)  # fmt: skip


@example(kind="hook_success", fields={"hookEvent": {}})
@given(
    kind=st.sampled_from(sorted(_RENDER)),
    fields=st.dictionaries(_FIELDS, _JSON | st.dictionaries(_FIELDS, _JSON), max_size=4),
)
def test_any_shape_of_a_known_kind_gives_text_or_a_reason_never_an_error(
    kind: str, fields: dict[str, Any]
) -> None:
    text, reason = attachment_text({**fields, "type": kind})
    assert (text is None) != (reason is None)
    assert text is None or text.strip()
