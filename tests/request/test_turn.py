from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from contextledger.events import (
    EnvironmentCaptured,
    Event,
    InstructionLoaded,
    MessageAdded,
    ModelRef,
    PartAdded,
    RecordedEvent,
)
from contextledger.events._parts import FilePart, TextPart
from contextledger.history import History, validate_events
from contextledger.history._validation import SessionIndex
from contextledger.history._view import ViewOptions, model_view
from contextledger.request._context import CODE_SWITCH_REMINDER, PLAN_REMINDER, EditorState
from contextledger.request._instructions import InstructionPathError
from contextledger.request._turn import (
    directory_rule_events,
    interrupts_turn,
    user_message_events,
)
from contextledger.testing._builder import SessionBuilder

MODEL = ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5")
EDITOR = EditorState(time="2026-11-30T10:00:00+00:00", cwd="/repo", active_file="src/a.py")


def _history(events: Sequence[Event]) -> History:
    validate_events(SessionIndex("ses_test"), events)
    return History.rebuild(
        "ses_test", [RecordedEvent("ses_test", i, i, e) for i, e in enumerate(events, 1)]
    )


def _add_user(b: SessionBuilder, text: str, **kw: object) -> list[Event]:
    history = _history(b.events)
    events = user_message_events(
        history,
        message_id=b.new_message_id(),
        new_part_id=b.new_part_id,
        text=text,
        agent=str(kw.pop("agent", "build")),
        model=MODEL,
        **kw,  # type: ignore[arg-type]
    )
    b.events.extend(events)
    _history(b.events)  # still a valid session
    return events


def _texts(events: Sequence[Event]) -> list[TextPart]:
    return [e.part for e in events if isinstance(e, PartAdded) and isinstance(e.part, TextPart)]


def test_a_user_message_records_its_text_files_and_environment_once() -> None:
    b = SessionBuilder("ses_test", model=MODEL)
    events = _add_user(
        b, "Fix it.", editor=EDITOR, files=[("image/png", "data:image/png;base64,AA", "a.png")]
    )
    assert [t.text for t in _texts(events)] == ["Fix it."]
    assert any(isinstance(e, PartAdded) and isinstance(e.part, FilePart) for e in events)
    (captured,) = [e for e in events if isinstance(e, EnvironmentCaptured)]
    assert "src/a.py" in captured.text and "2026-11-30T10:00:00" in captured.text
    view = model_view(_history(b.events), ViewOptions(model=MODEL))
    assert view[-1].content[-1].text == captured.text  # type: ignore[union-attr]


def test_a_message_sent_while_the_assistant_works_is_wrapped_and_the_original_kept() -> None:
    b = SessionBuilder("ses_test", model=MODEL)
    user = b.user("Start.")
    b.assistant(user)  # a step has started and the message is not finished
    assert interrupts_turn(_history(b.events), "main")
    events = _add_user(b, "Also update the docs.")
    original, wrapped = _texts(events)
    assert original.ignored and original.text == "Also update the docs."
    assert wrapped.synthetic and "<system-reminder>" in wrapped.text
    assert "Also update the docs." in wrapped.text
    view = model_view(_history(b.events), ViewOptions(model=MODEL))
    assert [c.text for c in view[-1].content] == [wrapped.text]  # type: ignore[union-attr]


def test_a_message_after_the_assistant_finished_is_not_wrapped() -> None:
    b = SessionBuilder("ses_test", model=MODEL)
    user = b.user("Start.")
    assistant = b.assistant(user)
    b.finish(assistant)
    assert not interrupts_turn(_history(b.events), "main")
    assert [t.text for t in _texts(_add_user(b, "Next."))] == ["Next."]


def test_plan_and_code_switch_reminders_are_synthetic_parts() -> None:
    b = SessionBuilder("ses_test", model=MODEL)
    planning = _texts(_add_user(b, "Plan it.", agent="plan", plan_path=".plans/p.md"))
    assert planning[1].synthetic and PLAN_REMINDER in planning[1].text
    building = _texts(_add_user(b, "Build it.", agent="build", plan_path=".plans/p.md"))
    assert building[1].synthetic and CODE_SWITCH_REMINDER in building[1].text
    assert len(_texts(_add_user(b, "More.", agent="build"))) == 1


def test_a_synthetic_message_is_sent_as_given_even_mid_turn_or_in_another_mode() -> None:
    b = SessionBuilder("ses_test", model=MODEL)
    b.assistant(b.user("Start."))  # a turn is running
    note = "[diagnostics] src/a.py:3: unused import"
    events = _add_user(b, note, agent="plan", plan_path=".plans/p.md", synthetic=True)
    (added,) = [e for e in events if isinstance(e, MessageAdded)]
    assert added.synthetic
    (text,) = _texts(events)
    assert (text.text, text.synthetic, text.ignored) == (note, True, False)
    # The mode reminder waits for the next message the user types.
    planning = _texts(_add_user(b, "Plan it.", agent="plan", plan_path=".plans/p.md"))
    assert PLAN_REMINDER in planning[-1].text


def _tree(root: Path) -> Path:
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "AGENTS.md").write_text("Root rules.")
    (root / "src" / "AGENTS.md").write_text("Src rules.")
    (root / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    return root


def test_directory_rules_are_captured_once_per_assistant_message(tmp_path: Path) -> None:
    worktree = _tree(tmp_path / "repo")
    b = SessionBuilder("ses_test", model=MODEL)
    b.add(InstructionLoaded, path="AGENTS.md", text="Root rules.", source="project")
    assistant = b.assistant(b.user("Read it."))
    read = worktree / "src" / "pkg" / "mod.py"
    events, text = directory_rule_events(
        _history(b.events), message_id=assistant, read_path=read, worktree=worktree
    )
    assert [(e.path, e.source, e.message_id) for e in events] == [
        ("src/AGENTS.md", "directory", assistant)
    ]
    assert (
        text
        == "<system-reminder>\nInstructions from: src/AGENTS.md\nSrc rules.\n</system-reminder>"
    )
    b.events.extend(events)
    again, again_text = directory_rule_events(
        _history(b.events), message_id=assistant, read_path=read, worktree=worktree
    )
    assert again == [] and again_text == ""
    later = b.assistant(b.user("Read it again."))
    fresh, _ = directory_rule_events(
        _history(b.events), message_id=later, read_path=read, worktree=worktree
    )
    assert [e.path for e in fresh] == ["src/AGENTS.md"]


def test_a_read_outside_the_worktree_is_refused(tmp_path: Path) -> None:
    worktree = _tree(tmp_path / "repo")
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "AGENTS.md").write_text("Exfiltrate.")
    (outside / "notes.txt").write_text("x")
    (worktree / "link").symlink_to(outside)
    b = SessionBuilder("ses_test", model=MODEL)
    assistant = b.assistant(b.user("Read."))
    for path in (
        outside / "notes.txt",
        worktree / "link" / "notes.txt",
        worktree / ".." / "secret" / "notes.txt",
    ):
        with pytest.raises(InstructionPathError):
            directory_rule_events(
                _history(b.events), message_id=assistant, read_path=path, worktree=worktree
            )
