"""Summary templates: the sections a compaction summary must have, and the prompt that asks
for it.

Two templates, selectable by name (``compaction.template``):

* ``opencode``: Goal; Constraints & Preferences; Progress (Done / In Progress / Blocked); Key
  Decisions; Next Steps; Critical Context; Relevant Files.
* ``continuation``: the five-section continuation summary of pi and MiMo Code (Task Overview;
  Current State; Important Discoveries; Next Steps; Context to Preserve), inside
  ``<summary>`` tags.

The rules are the same for both: keep every section and write ``(none)`` when one is empty;
terse bullets; exact paths, commands, error strings and identifiers; never mention the
summary itself. A later compaction updates the previous summary instead of starting over.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import msgspec

from contextledger.history._view import COMPACTION_PROMPT
from contextledger.vocabulary._options import TemplateName

#: What an empty section holds.
NONE: Final = "(none)"


class Section(msgspec.Struct, frozen=True):
    """A heading of the summary (``level`` 2 or 3) and what belongs under it."""

    title: str
    hint: str
    level: int = 2


class SummaryTemplate(msgspec.Struct, frozen=True, kw_only=True):
    """A summary's structure. ``wrapper`` is the tag the whole summary sits in, if any."""

    name: TemplateName
    sections: tuple[Section, ...]
    wrapper: str | None = None

    def titles(self) -> tuple[str, ...]:
        """Every section title, in order."""
        return tuple(s.title for s in self.sections)


OPENCODE: Final = SummaryTemplate(
    name="opencode",
    sections=(
        Section("Goal", "the user's goal, in one sentence"),
        Section("Constraints & Preferences", "what the user asked for or ruled out"),
        Section("Progress", "where the work stands"),
        Section("Done", "finished work", 3),
        Section("In Progress", "work started and not finished", 3),
        Section("Blocked", "what is stuck, and on what", 3),
        Section("Key Decisions", "choices made, with their reason"),
        Section("Next Steps", "what to do next, in order"),
        Section("Critical Context", "facts the rest of the work depends on: errors, values"),
        Section("Relevant Files", "path: why it matters"),
    ),
)

CONTINUATION: Final = SummaryTemplate(
    name="continuation",
    sections=(
        Section("Task Overview", "what the user wants and the criteria for done"),
        Section("Current State", "what is done, what is in progress, files changed"),
        Section("Important Discoveries", "facts, errors and decisions found along the way"),
        Section("Next Steps", "what to do next, in order"),
        Section("Context to Preserve", "exact paths, commands, identifiers, user preferences"),
    ),
    wrapper="summary",
)

TEMPLATES: Final[Mapping[TemplateName, SummaryTemplate]] = {
    "opencode": OPENCODE,
    "continuation": CONTINUATION,
}

RULES: Final = (
    "Rules:\n"
    "- Keep every section, in this order, even when it is empty: write (none) under it.\n"
    "- Use terse bullet points, not prose.\n"
    "- Keep exact file paths, commands, error messages and identifiers, verbatim.\n"
    "- Do not mention that this is a summary or that the conversation was shortened."
)


def skeleton(template: SummaryTemplate) -> str:
    """The template's headings with their hints, as the model is asked to fill them."""
    lines = [f"{'#' * s.level} {s.title}\n[{s.hint}]" for s in template.sections]
    body = "\n\n".join(lines)
    return f"<{template.wrapper}>\n{body}\n</{template.wrapper}>" if template.wrapper else body


_UPDATE: Final = (
    "keep every detail that is still true, drop what is no longer relevant, and merge in the "
    "new facts. Move finished work from in progress to done."
)


def summary_prompt(
    template: SummaryTemplate, previous: str | None = None, *, previous_above: bool = False
) -> str:
    """The instruction closing a summary request. With ``previous`` (the last summary), the
    model updates it: still-true details kept, stale ones dropped, new facts merged; with
    ``previous_above`` the request's messages hold it already (as the answer to
    ``COMPACTION_PROMPT``), so the instruction points to it instead of repeating it."""
    if previous is None:
        head = (
            "Create a new anchored summary of the conversation above, so that the work can "
            "continue from it alone."
        )
    elif previous_above:
        head = (
            "Update the anchored summary above (the latest answer to "
            f'"{COMPACTION_PROMPT}") with the conversation that follows it: {_UPDATE}'
        )
    else:
        head = (
            f"Update the anchored summary below with the conversation above: {_UPDATE}\n\n"
            f"<previous-summary>\n{previous.strip()}\n</previous-summary>"
        )
    return (
        f"{head}\n\nWrite the summary in exactly this Markdown structure:\n\n"
        f"{skeleton(template)}\n\n{RULES}"
    )


def render_summary(template: SummaryTemplate, filled: Mapping[str, Sequence[str]]) -> str:
    """A summary in ``template``'s structure from bullet lines per section title; a section
    with no lines gets ``(none)``. Sections with sub-sections (level 3 after it) hold only
    those."""
    blocks: list[str] = []
    sections = template.sections
    for i, section in enumerate(sections):
        heading = f"{'#' * section.level} {section.title}"
        has_children = i + 1 < len(sections) and sections[i + 1].level > section.level
        lines = list(filled.get(section.title, ()))
        if has_children and not lines:
            blocks.append(heading)
            continue
        body = "\n".join(f"- {line}" for line in lines) if lines else NONE
        blocks.append(f"{heading}\n{body}")
    text = "\n\n".join(blocks)
    return f"<{template.wrapper}>\n{text}\n</{template.wrapper}>" if template.wrapper else text


def missing_sections(template: SummaryTemplate, summary: str) -> list[str]:
    """The section titles ``summary`` lacks (as Markdown headings)."""
    present = {line.lstrip("#").strip() for line in summary.splitlines() if line.startswith("#")}
    return [title for title in template.titles() if title not in present]
