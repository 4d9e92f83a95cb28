"""Directory rules through the session handle: a file the model reads brings the rule files
of its directories into the read's result, once per assistant message, captured in the log,
and every later request carries them."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextledger.actors import Runtime, SessionHandle
from contextledger.events._catalogue import InstructionLoaded
from contextledger.request import InstructionPathError, system_instructions
from contextledger.store._memory import MemoryStore
from contextledger.vocabulary._messages import ModelToolResult
from tests.actors.agent import INPUTS, MODEL, clock

SRC_RULES = "<system-reminder>\nInstructions from: src/AGENTS.md\nSrc rules.\n</system-reminder>"


def _tree(root: Path) -> Path:
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "AGENTS.md").write_text("Root rules.")
    (root / "src" / "AGENTS.md").write_text("Src rules.")
    (root / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "src" / "pkg" / "util.py").write_text("y = 2\n")
    return root


async def _read(session: SessionHandle, message: str, path: Path, worktree: Path) -> str:
    part = await session.call_tool(message, "read", {"path": str(path)})
    return await session.record_read_result(
        part, path.read_text(), read_path=path, worktree=worktree
    )


async def test_a_read_brings_its_directories_rules_into_the_request(tmp_path: Path) -> None:
    worktree = _tree(tmp_path / "repo")
    project = system_instructions(worktree, worktree, global_candidates=())
    async with Runtime.open(MemoryStore(), model=MODEL, clock=clock()) as runtime:
        session = await runtime.session("ses_rules")
        user = await session.add_user("Fix the module.")
        await session.build_request(INPUTS, instructions=project)
        message = await session.start_assistant(user)
        first = await _read(session, message, worktree / "src" / "pkg" / "mod.py", worktree)
        again = await _read(session, message, worktree / "src" / "pkg" / "util.py", worktree)
        await session.finish(message, finish="tool-calls")
        built = await session.build_request(INPUTS)
        later = await session.start_assistant(user)
        fresh = await _read(session, later, worktree / "src" / "pkg" / "mod.py", worktree)
        events = [r.event for r in await runtime.store.read("ses_rules")]
        replayed = await session.replay()
    # The root's rules are in the system prompt already; the src rules come with the read.
    assert first == f"x = 1\n\n\n{SRC_RULES}"
    assert again == "y = 2\n"  # once per assistant message
    assert fresh == first  # and again for the next one
    results = [c for m in built.request.messages for c in m.content]
    assert [c.output for c in results if isinstance(c, ModelToolResult)] == [first, again]
    assert "Root rules." in built.request.system[-1] and "Src rules." not in "".join(
        built.request.system
    )
    loaded = [(e.path, e.source, e.message_id) for e in events if isinstance(e, InstructionLoaded)]
    assert loaded == [
        ("AGENTS.md", "project", None),
        ("src/AGENTS.md", "directory", message),
        ("src/AGENTS.md", "directory", later),
    ]
    assert replayed


async def test_a_read_outside_the_worktree_writes_nothing(tmp_path: Path) -> None:
    worktree = _tree(tmp_path / "repo")
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "AGENTS.md").write_text("Exfiltrate.")
    (outside / "notes.txt").write_text("x")
    async with Runtime.open(MemoryStore(), model=MODEL, clock=clock()) as runtime:
        session = await runtime.session("ses_outside")
        message = await session.start_assistant(await session.add_user("Read it."))
        part = await session.call_tool(message, "read", {"path": "../secret/notes.txt"})
        seq = (await session.history()).seq
        with pytest.raises(InstructionPathError):
            await session.record_read_result(
                part, "x", read_path=outside / "notes.txt", worktree=worktree
            )
        assert (await session.history()).seq == seq
