"""The trace sets: every tuned constant is chosen on ``tune``; the figures quoted are ``test``'s.

``tune`` is the seven Claude Code sessions of one user (``claude-code-jsonl``), on which the
calibrated counter, the economic threshold and the ``default`` strategy's sizes were chosen.
``test`` is what none of them was chosen on: Claude Code sessions of four other projects and
Claude Code versions (``claude-code-more``) and Codex CLI rollouts (``codex-rollout``, other
models and another agent's tools). A benchmark reports both; the documentation quotes ``test``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

#: The folders (under the traces folder) of each set.
TRACE_SETS: Final[dict[str, tuple[str, ...]]] = {
    "tune": ("claude-code-jsonl",),
    "test": ("claude-code-more", "codex-rollout"),
}
#: The folders of Claude Code transcripts, for the benchmarks that read only those.
CLAUDE_CODE_FOLDERS: Final = ("claude-code-jsonl", "claude-code-more")


def set_files(traces: Path, name: str, *, folders: tuple[str, ...] | None = None) -> list[Path]:
    """The ``*.jsonl`` transcripts of set ``name`` under ``traces``, sorted; only those in
    ``folders`` when given."""
    chosen = [f for f in TRACE_SETS[name] if folders is None or f in folders]
    return sorted(p for f in chosen if (traces / f).is_dir() for p in (traces / f).glob("*.jsonl"))
