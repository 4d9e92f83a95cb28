"""The system prompt: its segments, the two cacheable blocks they form, and the pieces that
fill them (identity, the model family's prompt, the static ``<env>`` block, the skills list).

Segments run from the most stable to the least: identity and prompt change only with the agent
or the model family, so they form a first block that can be cached across sessions; the
environment, pinned memory, instructions and skills are fixed for a session and form the
second. Everything here is a pure function of its arguments: no clock, platform or
filesystem is read, so the same inputs always give the same bytes.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable
from functools import cache
from importlib.resources import files
from typing import Final, Literal, get_args

import msgspec

from contextledger.events._parts import ModelRef

Family = Literal["anthropic", "openai", "gemini", "default"]

#: Every model family with its own prompt file, ``request/prompts/<family>.txt``.
FAMILIES: Final[tuple[Family, ...]] = get_args(Family)

#: The agent's identity, the first words of every system prompt.
IDENTITY: Final = (
    "You are a software engineering agent working inside the user's project through the "
    "tools you are given. You read before you change, keep each change to what the task "
    "needs, and report plainly what you did and what you could not do."
)

#: Model id patterns, tried in order; the first match names the family. Ids are lower-cased
#: and may carry a provider or router prefix (``anthropic/claude-sonnet-4.5``) or a Bedrock
#: region and vendor prefix (``us.anthropic.claude-sonnet-4-20250514-v1:0``), so names are
#: searched anywhere in the id; the short o-series names (``o1``, ``o3``, ``o4``) only count
#: at the start of the id or of a ``/``, ``.`` or ``:`` segment and not followed by a letter
#: or digit.
FAMILY_PATTERNS: Final[tuple[tuple[re.Pattern[str], Family], ...]] = (
    (re.compile(r"claude"), "anthropic"),
    (re.compile(r"gemini"), "gemini"),
    (re.compile(r"gpt-|codex|(?:^|[/.:])o[134](?![0-9a-z])"), "openai"),
)

_WEEKDAYS: Final = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


class SystemSegments(msgspec.Struct, frozen=True, kw_only=True):
    """The parts of a system prompt, most stable first.

    ``prompt`` is the agent's own prompt or, without one, its model family's. ``memory``,
    ``instructions`` and ``skills`` are rendered blocks and may be empty.
    """

    identity: str = IDENTITY
    prompt: str
    environment: str
    memory: str = ""
    instructions: str = ""
    skills: str = ""


def system_blocks(segments: SystemSegments) -> tuple[str, ...]:
    """The system prompt as at most two blocks: identity and prompt, then the session's
    environment, memory, instructions and skills.

    Each segment is trimmed of surrounding whitespace and a blank one is left out; the
    segments of a block are joined with a blank line. A block left empty is dropped, so the
    result holds no empty string.
    """
    static = _join(segments.identity, segments.prompt)
    session = _join(segments.environment, segments.memory, segments.instructions, segments.skills)
    return tuple(block for block in (static, session) if block)


def _join(*segments: str) -> str:
    return "\n\n".join(text for text in (s.strip() for s in segments) if text)


def prompt_family(model: ModelRef, *, declared: str | None = None) -> Family:
    """The family whose prompt suits ``model``.

    A ``declared`` family from the model's metadata wins when it is one of ``FAMILIES``
    (case and surrounding spaces ignored); otherwise the first of ``FAMILY_PATTERNS`` found
    in the model id decides, and an id matching none is ``"default"``. The provider id is
    not consulted: gateways and routers serve every family.
    """
    if declared is not None:
        name = declared.strip().lower()
        for family in FAMILIES:
            if name == family:
                return family
    model_id = model.model_id.lower()
    for pattern, family in FAMILY_PATTERNS:
        if pattern.search(model_id):
            return family
    return "default"


def family_prompt(family: Family) -> str:
    """The prompt of ``family``, from the package's ``request/prompts/<family>.txt``."""
    if family not in FAMILIES:
        raise ValueError(f"unknown prompt family {family!r}")
    return _read_prompt(family)


@cache
def _read_prompt(family: Family) -> str:
    resource = files("contextledger.request").joinpath("prompts", f"{family}.txt")
    return resource.read_text(encoding="utf-8").strip()


def static_environment(
    model: ModelRef,
    *,
    platform: str,
    date: datetime.date,
    is_git: bool,
    shell: str | None = None,
    project_config: str | None = None,
) -> str:
    """The ``<env>`` block: the model, then facts that hold for the whole session.

    The date is a date only, even when a ``datetime`` is passed (a time of day would change
    the system prompt on every call), with a fixed English weekday name, never the locale's.
    The model variant is left out so switching it does not change the system prompt. The
    ``shell`` and ``project_config`` lines appear only when given.
    """
    day = datetime.date(date.year, date.month, date.day)
    lines = [
        f"You are running on the model {model.model_id}, served by {model.provider_id}; "
        f"its exact id is {model.provider_id}/{model.model_id}.",
        "Facts about the environment you are working in:",
        "<env>",
        f"  Is directory a git repo: {'yes' if is_git else 'no'}",
        f"  Platform: {platform}",
        f"  Today's date: {day.isoformat()} ({_WEEKDAYS[day.weekday()]})",
    ]
    if shell:
        lines.append(f"  Default shell: {shell}")
    if project_config:
        lines.append(f"  Project config: {project_config}")
    lines.append("</env>")
    return "\n".join(lines)


class Skill(msgspec.Struct, frozen=True, kw_only=True):
    """A skill the agent can load: its name and when to use it."""

    name: str
    description: str


def render_skills(skills: Iterable[Skill]) -> str:
    """The skills list, sorted by name (then description) so the order they were discovered
    in never changes the bytes; each description is folded onto one line. Empty when there
    are no skills."""
    ordered = sorted(skills, key=lambda s: (s.name, s.description))
    if not ordered:
        return ""
    lines = [
        "Skills hold instructions for particular kinds of task. Load a skill when the task at "
        "hand matches its description:",
        "<skills>",
        *(f"- {s.name}: {' '.join(s.description.split())}" for s in ordered),
        "</skills>",
    ]
    return "\n".join(lines)
