"""System prompt segments: block collapsing, model-family prompts, ``<env>`` and skills."""

from __future__ import annotations

import datetime
import itertools
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextledger.events._parts import ModelRef
from contextledger.request._system import (
    FAMILIES,
    IDENTITY,
    Family,
    Skill,
    SystemSegments,
    family_prompt,
    prompt_family,
    render_skills,
    static_environment,
    system_blocks,
)

PROPERTY = settings(max_examples=300, deadline=None)
SEGMENT_FIELDS = ("identity", "prompt", "environment", "memory", "instructions", "skills")
MODEL = ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5", variant="high")
DAY = datetime.date(2026, 7, 13)


def _segments(values: dict[str, str]) -> SystemSegments:
    return SystemSegments(
        identity=values["identity"],
        prompt=values["prompt"],
        environment=values["environment"],
        memory=values["memory"],
        instructions=values["instructions"],
        skills=values["skills"],
    )


# --- system_blocks ---------------------------------------------------------------------------


def test_full_segments_make_two_blocks_in_order() -> None:
    segments = SystemSegments(
        identity="I",
        prompt="P",
        environment="E",
        memory="M",
        instructions="N",
        skills="S",
    )
    assert system_blocks(segments) == ("I\n\nP", "E\n\nM\n\nN\n\nS")


def test_identity_defaults_to_ours() -> None:
    blocks = system_blocks(SystemSegments(prompt="P", environment="E"))
    assert blocks == (f"{IDENTITY}\n\nP", "E")


@pytest.mark.parametrize("present", list(itertools.product((False, True), repeat=6)))
def test_every_combination_of_empty_segments(present: tuple[bool, ...]) -> None:
    values = {
        name: (name.upper() if keep else "")
        for name, keep in zip(SEGMENT_FIELDS, present, strict=True)
    }
    first = "\n\n".join(values[n] for n in SEGMENT_FIELDS[:2] if values[n])
    second = "\n\n".join(values[n] for n in SEGMENT_FIELDS[2:] if values[n])
    assert system_blocks(_segments(values)) == tuple(b for b in (first, second) if b)


def test_blank_segments_leave_no_separator() -> None:
    segments = SystemSegments(
        identity="  \n",
        prompt="\nP\n",
        environment="E\n",
        memory="\n\n",
        instructions="",
        skills=" S ",
    )
    assert system_blocks(segments) == ("P", "E\n\nS")


def test_session_block_alone_is_one_block() -> None:
    segments = SystemSegments(identity="", prompt="", environment="E")
    assert system_blocks(segments) == ("E",)


def test_all_empty_gives_no_block() -> None:
    segments = SystemSegments(identity="", prompt="", environment="")
    assert system_blocks(segments) == ()


@PROPERTY
@given(st.lists(st.text(max_size=30), min_size=6, max_size=6))
def test_blocks_property(texts: list[str]) -> None:
    values = dict(zip(SEGMENT_FIELDS, texts, strict=True))
    blocks = system_blocks(_segments(values))
    assert len(blocks) <= 2
    assert all(block.strip() for block in blocks)
    joined = "\n\n".join(blocks)
    position = 0
    for name in SEGMENT_FIELDS:
        text = values[name].strip()
        if text:
            found = joined.find(text, position)
            assert found >= 0, name
            position = found + len(text)
    static = "\n\n".join(values[n].strip() for n in SEGMENT_FIELDS[:2] if values[n].strip())
    if static:
        assert blocks[0] == static
    assert system_blocks(_segments(values)) == blocks


# --- model families ----------------------------------------------------------------------


def _model(model_id: str, provider_id: str = "some-provider") -> ModelRef:
    return ModelRef(provider_id=provider_id, model_id=model_id)


@pytest.mark.parametrize(
    ("model_id", "family"),
    [
        ("claude-sonnet-4-5", "anthropic"),
        ("claude-3-5-haiku-20241022", "anthropic"),
        ("anthropic/claude-sonnet-4.5", "anthropic"),
        ("us.anthropic.claude-sonnet-4-20250514-v1:0", "anthropic"),
        ("anthropic.claude-3-5-sonnet-20241022-v2:0", "anthropic"),
        ("Claude-Opus-4", "anthropic"),
        ("gpt-4o", "openai"),
        ("gpt-4.1-mini", "openai"),
        ("gpt-5-codex", "openai"),
        ("codex-mini-latest", "openai"),
        ("chatgpt-4o-latest", "openai"),
        ("openai/gpt-5", "openai"),
        ("openai.gpt-oss-120b-1:0", "openai"),
        ("o1", "openai"),
        ("o1-preview", "openai"),
        ("o3-mini", "openai"),
        ("o4-mini-2025-04-16", "openai"),
        ("openai/o3", "openai"),
        ("openrouter/openai/o4-mini:online", "openai"),
        ("gemini-2.5-pro", "gemini"),
        ("google/gemini-2.5-flash", "gemini"),
        ("models/gemini-3-pro-preview", "gemini"),
        ("llama-3.1-405b", "default"),
        ("meta.llama3-3-70b-instruct-v1:0", "default"),
        ("deepseek-r1", "default"),
        ("qwen3-coder", "default"),
        ("gemma-3-27b", "default"),
        ("mistral-large-2407", "default"),
        ("pro1-model", "default"),
        ("foo-o3x", "default"),
        ("amazon.nova-pro-v1:0", "default"),
    ],
)
def test_family_from_model_id(model_id: str, family: str) -> None:
    assert prompt_family(_model(model_id)) == family


def test_provider_id_alone_does_not_decide() -> None:
    assert prompt_family(_model("my-alias", provider_id="anthropic")) == "default"


@pytest.mark.parametrize("declared", ["gemini", "Gemini", " gemini "])
def test_declared_family_wins(declared: str) -> None:
    assert prompt_family(_model("claude-sonnet-4-5"), declared=declared) == "gemini"


def test_declared_default_wins_over_pattern() -> None:
    assert prompt_family(_model("gpt-4o"), declared="default") == "default"


@pytest.mark.parametrize("declared", ["beast", "claude", "", "anthropic_without_todo"])
def test_unknown_declared_falls_back_to_patterns(declared: str) -> None:
    assert prompt_family(_model("gpt-4o"), declared=declared) == "openai"
    assert prompt_family(_model("llama-3"), declared=declared) == "default"


def test_families_are_the_four() -> None:
    assert set(FAMILIES) == {"anthropic", "openai", "gemini", "default"}


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_prompt_loads(family: Family) -> None:
    text = family_prompt(family)
    assert len(text) > 500
    assert text == text.strip()
    assert "\n\n" in text


def test_family_prompts_differ() -> None:
    texts = {family_prompt(f) for f in FAMILIES}
    assert len(texts) == len(FAMILIES)
    assert all(IDENTITY not in t for t in texts)


def test_unknown_family_prompt_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown prompt family"):
        family_prompt("beast")  # type: ignore[arg-type]


# --- static environment -------------------------------------------------------------------


def test_static_environment_layout() -> None:
    env = static_environment(
        MODEL,
        platform="linux",
        date=DAY,
        is_git=True,
        shell="/bin/bash",
        project_config="AGENTS.md, .contextledger/",
    )
    assert env == (
        "You are running on the model claude-sonnet-4-5, served by anthropic; "
        "its exact id is anthropic/claude-sonnet-4-5.\n"
        "Facts about the environment you are working in:\n"
        "<env>\n"
        "  Is directory a git repo: yes\n"
        "  Platform: linux\n"
        "  Today's date: 2026-07-13 (Monday)\n"
        "  Default shell: /bin/bash\n"
        "  Project config: AGENTS.md, .contextledger/\n"
        "</env>"
    )


def test_static_environment_optional_lines() -> None:
    env = static_environment(MODEL, platform="darwin", date=DAY, is_git=False)
    assert "  Is directory a git repo: no" in env.splitlines()
    assert "shell" not in env
    assert "Project config" not in env
    assert env.endswith("</env>")


def test_static_environment_ignores_variant() -> None:
    other = ModelRef(provider_id=MODEL.provider_id, model_id=MODEL.model_id)
    assert static_environment(MODEL, platform="linux", date=DAY, is_git=True) == (
        static_environment(other, platform="linux", date=DAY, is_git=True)
    )


@PROPERTY
@given(
    st.dates(),
    st.booleans(),
    st.sampled_from(["linux", "darwin", "win32"]),
    st.none() | st.text(max_size=20),
)
def test_static_environment_deterministic_and_date_only(
    day: datetime.date, is_git: bool, platform: str, shell: str | None
) -> None:
    first = static_environment(MODEL, platform=platform, date=day, is_git=is_git, shell=shell)
    again = static_environment(MODEL, platform=platform, date=day, is_git=is_git, shell=shell)
    assert first == again
    date_line = next(line for line in first.splitlines() if "Today's date" in line)
    weekday = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
    assert date_line == f"  Today's date: {day.isoformat()} ({weekday[day.weekday()]})"
    assert not re.search(r"\d{1,2}:\d{2}", first)


def test_datetime_argument_gives_no_time_of_day() -> None:
    moment = datetime.datetime(2026, 7, 13, 22, 23, 33)
    env = static_environment(MODEL, platform="linux", date=moment, is_git=True)
    assert env == static_environment(MODEL, platform="linux", date=DAY, is_git=True)
    assert "22:23" not in env


# --- skills -------------------------------------------------------------------------------


def test_no_skills_render_empty() -> None:
    assert render_skills([]) == ""


def test_skills_sorted_by_name() -> None:
    skills = [
        Skill(name="review", description="Review a change."),
        Skill(name="commit", description="Write a commit\n  message."),
    ]
    text = render_skills(skills)
    assert text.splitlines()[1:] == [
        "<skills>",
        "- commit: Write a commit message.",
        "- review: Review a change.",
        "</skills>",
    ]


@PROPERTY
@given(
    st.lists(
        st.builds(Skill, name=st.text(min_size=1, max_size=10), description=st.text(max_size=20)),
        max_size=8,
    ),
    st.randoms(use_true_random=False),
)
def test_skills_order_never_changes_bytes(skills: list[Skill], rnd: random.Random) -> None:
    shuffled = list(skills)
    rnd.shuffle(shuffled)
    assert render_skills(shuffled) == render_skills(skills)
    assert (render_skills(skills) == "") == (not skills)
