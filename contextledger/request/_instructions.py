"""Finding and reading project instruction files (``AGENTS.md`` and friends).

Files are read once; a builder turns the results into ``InstructionLoaded`` events, so
requests and replays use the same bytes. The rules:

- Names, in order of preference: ``AGENTS.md``, ``CLAUDE.md``, ``CONTEXT.md``. A directory
  contributes at most one file, the first name that exists there.
- Project: the nearest directory from ``cwd`` up to the worktree root (inclusive) that holds
  any of the names wins; ancestors are never stacked.
- Global: the first existing candidate; candidates are absolute paths chosen by the host.
- Configured: glob patterns relative to the worktree, each expanded in sorted order, without
  files already chosen (compared by resolved path).
- Directory rules: the rule file of each directory from the read file's directory up to the
  worktree root (inclusive), outermost first so the most specific rules come last, skipping
  files already loaded, already claimed for this assistant message, or being read.

Every path is resolved. A relative ``cwd`` or read path is taken from the worktree root; both
must exist. A ``cwd``, a read path, a glob pattern or a glob match outside the worktree
(directly, through ``..`` or an absolute pattern, or through a symlink) raises
``InstructionPathError``, as does a URL pattern. A rule file found by the directory search
whose real path lies outside the worktree (a symlink) is skipped with a warning, never read;
a directory's next name is tried instead.

Paths in results are worktree-relative POSIX paths of the real files; global files keep
their absolute candidate path. Text is decoded as UTF-8 with replacement characters, and a
file over ``max_bytes`` is cut with a marker line saying how many bytes were left out.
"""

from __future__ import annotations

import codecs
import os
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Final

import msgspec
import structlog

from contextledger.events._catalogue import InstructionSource

__all__ = [
    "DEFAULT_MAX_BYTES",
    "INSTRUCTION_NAMES",
    "InstructionFile",
    "InstructionPathError",
    "configured_instructions",
    "default_global_candidates",
    "directory_rules",
    "global_instructions",
    "project_instructions",
    "render_directory_rules",
    "render_system_instructions",
    "system_instructions",
]

INSTRUCTION_NAMES: Final = ("AGENTS.md", "CLAUDE.md", "CONTEXT.md")
DEFAULT_MAX_BYTES: Final = 64 * 1024

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_log = structlog.get_logger("contextledger.request._instructions")


class InstructionPathError(ValueError):
    """A path or pattern that would reach outside the worktree, or a URL."""


class InstructionFile(msgspec.Struct, frozen=True):
    """One instruction file as read: its result path, its text and where it came from."""

    path: str
    text: str
    source: InstructionSource


def project_instructions(
    cwd: Path, worktree: Path, *, max_bytes: int = DEFAULT_MAX_BYTES
) -> InstructionFile | None:
    """The rule file of the nearest directory from ``cwd`` up to the worktree root, if any."""
    root = worktree.resolve(strict=True)
    for directory in _ancestors(_inside(root, cwd, "working directory"), root):
        found = _rule_file(directory, root)
        if found is not None:
            return _load(found, _relative(found, root), "project", max_bytes)
    return None


def global_instructions(
    candidates: Sequence[Path], *, max_bytes: int = DEFAULT_MAX_BYTES
) -> InstructionFile | None:
    """The first candidate that is an existing file. Candidates must be absolute."""
    for candidate in candidates:
        if not candidate.is_absolute():
            raise InstructionPathError(f"global instruction path must be absolute: {candidate}")
        found = _real_file(candidate)
        if found is not None:
            return _load(found, candidate.as_posix(), "global", max_bytes)
    return None


def default_global_candidates(env: Mapping[str, str], home: Path) -> tuple[Path, ...]:
    """``$XDG_CONFIG_HOME/contextledger/AGENTS.md`` (``~/.config`` when unset or relative),
    then ``~/.claude/CLAUDE.md``."""
    xdg = env.get("XDG_CONFIG_HOME", "")
    config = Path(xdg) if os.path.isabs(xdg) else home / ".config"
    return (config / "contextledger" / "AGENTS.md", home / ".claude" / "CLAUDE.md")


def configured_instructions(
    worktree: Path,
    patterns: Sequence[str],
    *,
    exclude: Collection[str] = (),
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[InstructionFile]:
    """Files matching ``patterns`` (worktree-relative globs), in pattern order and sorted
    within each pattern, without duplicates or files named by ``exclude`` (result paths)."""
    root = worktree.resolve(strict=True)
    seen = _keys(root, exclude)
    files: list[InstructionFile] = []
    for pattern in patterns:
        for found in _expand(root, pattern):
            if found not in seen:
                seen.add(found)
                files.append(_load(found, _relative(found, root), "config", max_bytes))
    return files


def system_instructions(
    cwd: Path,
    worktree: Path,
    *,
    global_candidates: Sequence[Path] = (),
    patterns: Sequence[str] = (),
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[InstructionFile]:
    """The system prompt's files: global, then project, then configured; no file twice."""
    root = worktree.resolve(strict=True)
    chosen: list[InstructionFile] = []
    for file in (
        global_instructions(global_candidates, max_bytes=max_bytes),
        project_instructions(cwd, root, max_bytes=max_bytes),
    ):
        if file is not None and not _keys(root, [file.path]) & _keys(root, _paths(chosen)):
            chosen.append(file)
    configured = configured_instructions(
        root, patterns, exclude=_paths(chosen), max_bytes=max_bytes
    )
    return chosen + configured


def directory_rules(
    read_path: Path,
    worktree: Path,
    *,
    loaded: Collection[str],
    claimed: Collection[str],
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[InstructionFile]:
    """Rule files of the directories from ``read_path``'s directory up to the worktree root,
    outermost first, except the file being read and those in ``loaded`` or ``claimed``."""
    root = worktree.resolve(strict=True)
    target = _inside(root, read_path, "read path")
    start = target if target.is_dir() else target.parent
    seen = _keys(root, [*loaded, *claimed]) | {target}
    files: list[InstructionFile] = []
    for directory in reversed(_ancestors(start, root)):
        found = _rule_file(directory, root)
        if found is not None and found not in seen:
            seen.add(found)
            files.append(_load(found, _relative(found, root), "directory", max_bytes))
    return files


def render_system_instructions(files: Sequence[InstructionFile]) -> str:
    """System text: one ``Instructions from: <path>`` block per file, blank-line separated."""
    return "\n\n".join(_block(file) for file in files)


def render_directory_rules(files: Sequence[InstructionFile]) -> str:
    """A ``<system-reminder>`` block per file, to append to a read tool's output."""
    return "\n\n".join(f"<system-reminder>\n{_block(file)}\n</system-reminder>" for file in files)


def _block(file: InstructionFile) -> str:
    return f"Instructions from: {file.path}\n{file.text.rstrip()}"


def _paths(files: Iterable[InstructionFile]) -> list[str]:
    return [file.path for file in files]


def _keys(root: Path, paths: Iterable[str]) -> set[Path]:
    """Resolved paths of result paths (relative ones are taken from ``root``)."""
    return {(root / path).resolve() for path in paths}


def _inside(root: Path, path: Path, what: str) -> Path:
    """``path`` (relative to ``root`` if relative) resolved; it must lie inside ``root``."""
    resolved = (root / path).resolve(strict=True)
    if not resolved.is_relative_to(root):
        raise InstructionPathError(f"{what} is outside the worktree: {path}")
    return resolved


def _ancestors(start: Path, root: Path) -> list[Path]:
    """``start`` and its parents up to ``root`` inclusive, nearest first."""
    return [start, *(parent for parent in start.parents if parent.is_relative_to(root))]


def _rule_file(directory: Path, root: Path) -> Path | None:
    """The real path of ``directory``'s first existing rule file inside ``root``."""
    for name in INSTRUCTION_NAMES:
        found = _real_file(directory / name)
        if found is None:
            continue
        if found.is_relative_to(root):
            return found
        _log.warning(
            "instruction_file_outside_worktree",
            path=_relative(directory / name, root),
            target=str(found),
        )
    return None


def _expand(root: Path, pattern: str) -> list[Path]:
    """Real paths of the files ``pattern`` matches under ``root``, in sorted match order."""
    if _URL.match(pattern):
        raise InstructionPathError(f"instruction URLs are not supported: {pattern}")
    pure = PurePosixPath(pattern)
    if not pattern or pure.is_absolute() or ".." in pure.parts:
        raise InstructionPathError(f"instruction pattern must stay inside the worktree: {pattern}")
    found: list[Path] = []
    for match in sorted(root.glob(pattern)):
        real = _real_file(match)
        if real is None:
            continue
        if not real.is_relative_to(root):
            raise InstructionPathError(f"{pattern} matches a file outside the worktree: {match}")
        found.append(real)
    return found


def _real_file(path: Path) -> Path | None:
    """The real path of ``path`` if it is an existing regular file."""
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    return real if real.is_file() else None


def _relative(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def _load(path: Path, name: str, source: InstructionSource, max_bytes: int) -> InstructionFile:
    return InstructionFile(path=name, text=_read_text(path, max_bytes), source=source)


def _read_text(path: Path, max_bytes: int) -> str:
    """``path`` as UTF-8, cut to ``max_bytes`` with a marker line when longer."""
    if max_bytes < 1:
        raise ValueError(f"max_bytes must be positive, not {max_bytes}")
    with path.open("rb") as stream:
        data = stream.read(max_bytes + 1)
        size = os.fstat(stream.fileno()).st_size
    if len(data) <= max_bytes:
        return data.decode("utf-8", errors="replace")
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text = decoder.decode(data[:max_bytes])
    kept = max_bytes - len(decoder.getstate()[0])
    return f"{text}\n[truncated: {size - kept} of {size} bytes left out]"
