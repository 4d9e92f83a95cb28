"""Per-turn context: environment details, mid-turn wrapping, mode reminders, the step limit."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextledger.request._context import (
    CODE_SWITCH_REMINDER,
    MAX_STEPS_PROMPT,
    MID_TURN_TEMPLATE,
    PLAN_EXISTS_NOTE,
    PLAN_FILE_NOTE,
    PLAN_REMINDER,
    EditorState,
    arrived_mid_turn,
    environment_details,
    max_steps_message,
    mode_reminders,
    wrap_mid_turn,
)
from contextledger.vocabulary._messages import ModelText

PROPERTY = settings(max_examples=200, deadline=None)
PLAN_PATH = ".plans/feature.md"


# --- environment details --------------------------------------------------------------------


def test_environment_details_full() -> None:
    state = EditorState(
        time="2026-07-13T22:23:33+08:00",
        cwd="/home/me/proj/src",
        workspace_root="/home/me/proj",
        active_file="src/app.py",
        visible_files=("src/app.py", "tests/test_app.py"),
        open_tabs=("README.md", "src/app.py"),
    )
    assert environment_details(state) == (
        "<environment_details>\n"
        "Current time: 2026-07-13T22:23:33+08:00\n"
        "Working directory: /home/me/proj/src\n"
        "Workspace root folder: /home/me/proj\n"
        "Active file: src/app.py\n"
        "Visible files:\n"
        "- src/app.py\n"
        "- tests/test_app.py\n"
        "Open tabs:\n"
        "- README.md\n"
        "- src/app.py\n"
        "</environment_details>"
    )


def test_environment_details_omits_empty_fields() -> None:
    state = EditorState(time="2026-07-13T22:23:33Z", cwd="/proj", active_file="")
    assert environment_details(state) == (
        "<environment_details>\n"
        "Current time: 2026-07-13T22:23:33Z\n"
        "Working directory: /proj\n"
        "</environment_details>"
    )


def test_environment_details_keeps_file_order() -> None:
    state = EditorState(time="t", cwd="/", open_tabs=("b.py", "a.py"))
    assert environment_details(state).splitlines()[-3:-1] == ["- b.py", "- a.py"]


LINE = st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=25)


@PROPERTY
@given(LINE, LINE, st.none() | LINE, st.lists(LINE, max_size=4))
def test_environment_details_deterministic(
    time: str, cwd: str, root: str | None, files: list[str]
) -> None:
    def state() -> EditorState:
        return EditorState(time=time, cwd=cwd, workspace_root=root, visible_files=tuple(files))

    text = environment_details(state())
    assert text == environment_details(state())
    lines = text.split("\n")
    assert lines[0] == "<environment_details>"
    assert lines[-1] == "</environment_details>"
    assert ("Visible files:" in lines) == any(f.strip() for f in files)
    assert all(line.strip() not in ("", "-") for line in lines)
    for label, value in (
        ("Current time", time),
        ("Working directory", cwd),
        ("Workspace root folder", root),
    ):
        shown = [line for line in lines if line.startswith(f"{label}: ")]
        assert shown == ([f"{label}: {value}"] if value and value.strip() else [])


# --- mid-turn messages ----------------------------------------------------------------------


def test_wrap_mid_turn() -> None:
    assert wrap_mid_turn("also fix the {typo} in README") == (
        "<system-reminder>\n"
        "While you were working, the user sent the following message:\n"
        "also fix the {typo} in README\n"
        "\n"
        "Please address this message and continue with your tasks.\n"
        "</system-reminder>"
    )
    assert MID_TURN_TEMPLATE.format(text="x") == wrap_mid_turn("x")


@pytest.mark.parametrize(
    ("finished", "step", "expected"),
    [
        (False, 0, False),
        (False, 1, True),
        (False, 7, True),
        (True, 0, False),
        (True, 1, False),
        (True, 7, False),
    ],
)
def test_arrived_mid_turn(finished: bool, step: int, expected: bool) -> None:
    assert arrived_mid_turn(assistant_finished=finished, step=step) is expected


# --- mode reminders -------------------------------------------------------------------------


def _reminders(previous: list[str], agent: str, *, exists: bool = False) -> tuple[str, ...]:
    return mode_reminders(previous, agent, plan_path=PLAN_PATH, plan_exists=exists)


def test_plan_agent_gets_plan_reminder_every_time() -> None:
    expected = (
        "<system-reminder>\n"
        f"{PLAN_REMINDER} {PLAN_FILE_NOTE.format(path=PLAN_PATH)}\n"
        "</system-reminder>",
    )
    assert _reminders([], "plan") == expected
    assert _reminders(["plan", "plan"], "plan") == expected
    assert _reminders(["build"], "plan") == expected


def test_plan_reminder_without_plan_file() -> None:
    reminders = mode_reminders([], "plan", plan_path=None, plan_exists=False)
    assert reminders == (f"<system-reminder>\n{PLAN_REMINDER}\n</system-reminder>",)


def test_custom_plan_agents() -> None:
    reminders = mode_reminders(
        ["build"], "architect", plan_agents={"architect"}, plan_path=None, plan_exists=False
    )
    assert reminders == (f"<system-reminder>\n{PLAN_REMINDER}\n</system-reminder>",)
    assert _reminders(["build"], "architect") == ()


def test_switch_from_plan_reminds_once() -> None:
    switch = (f"<system-reminder>\n{CODE_SWITCH_REMINDER}\n</system-reminder>",)
    assert _reminders(["plan"], "build") == switch
    assert _reminders(["plan", "build"], "build") == ()
    assert _reminders(["plan", "build", "build"], "build") == ()


def test_switch_with_existing_plan_file_adds_sentence() -> None:
    note = PLAN_EXISTS_NOTE.format(path=PLAN_PATH)
    assert _reminders(["plan"], "build", exists=True) == (
        f"<system-reminder>\n{CODE_SWITCH_REMINDER} {note}\n</system-reminder>",
    )
    assert mode_reminders(["plan"], "build", plan_path=None, plan_exists=True) == (
        f"<system-reminder>\n{CODE_SWITCH_REMINDER}\n</system-reminder>",
    )


def test_switch_back_and_forth() -> None:
    agents = ["build", "plan", "plan", "build", "build", "plan", "build", "build"]
    kinds = []
    for i, agent in enumerate(agents):
        reminders = _reminders(agents[:i], agent)
        if not reminders:
            kinds.append("-")
        elif CODE_SWITCH_REMINDER in reminders[0]:
            kinds.append("switch")
        else:
            assert PLAN_REMINDER in reminders[0]
            kinds.append("plan")
    assert kinds == ["-", "plan", "plan", "switch", "-", "plan", "switch", "-"]


def test_no_reminders_without_plan() -> None:
    assert _reminders([], "build") == ()
    assert _reminders(["build", "debug"], "build") == ()


@PROPERTY
@given(st.lists(st.sampled_from(["plan", "build", "ask"]), min_size=1, max_size=12))
def test_reminder_properties(agents: list[str]) -> None:
    switches = 0
    for i, agent in enumerate(agents):
        reminders = _reminders(agents[:i], agent)
        assert reminders == _reminders(list(agents[:i]), agent)
        assert len(reminders) <= 1
        if agent == "plan":
            assert len(reminders) == 1
            assert PLAN_REMINDER in reminders[0]
        elif reminders:
            assert CODE_SWITCH_REMINDER in reminders[0]
            switches += 1
    expected = sum(
        1 for prev, cur in itertools.pairwise(agents) if prev == "plan" and cur != "plan"
    )
    assert switches == expected


# --- step limit ---------------------------------------------------------------------------


def test_max_steps_message_is_a_synthetic_user_message() -> None:
    message = max_steps_message("msg_0042")
    assert message.role == "user"
    assert message.synthetic
    assert message.source_id == "msg_0042"
    assert message.content == (ModelText(text=MAX_STEPS_PROMPT, synthetic=True),)


def test_max_steps_prompt_disables_tools() -> None:
    assert "tools are now disabled" in MAX_STEPS_PROMPT
    assert "text only" in MAX_STEPS_PROMPT
