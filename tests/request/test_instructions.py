"""Specification of ``contextledger.request._instructions``: which instruction files are found,
how they are read and rendered, and that nothing outside the worktree is ever read."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from contextledger.request._instructions import (
    InstructionFile,
    InstructionPathError,
    configured_instructions,
    default_global_candidates,
    directory_rules,
    global_instructions,
    project_instructions,
    render_directory_rules,
    render_system_instructions,
    system_instructions,
)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A worktree under ``tmp_path/repo`` with room above it for files outside."""
    root = tmp_path / "repo"
    root.mkdir()
    return root


def paths(files: list[InstructionFile]) -> list[str]:
    return [file.path for file in files]


# Project instructions


def test_project_file_in_the_working_directory(tree: Path) -> None:
    write(tree / "AGENTS.md", "root rules\n")
    assert project_instructions(tree, tree) == InstructionFile(
        path="AGENTS.md", text="root rules\n", source="project"
    )


def test_project_search_goes_upward_to_the_worktree_root(tree: Path) -> None:
    write(tree / "CLAUDE.md", "root")
    (tree / "a" / "b").mkdir(parents=True)
    found = project_instructions(tree / "a" / "b", tree)
    assert found is not None
    assert (found.path, found.text) == ("CLAUDE.md", "root")


def test_nearest_directory_wins_and_ancestors_are_not_stacked(tree: Path) -> None:
    write(tree / "AGENTS.md", "root")
    write(tree / "pkg" / "CONTEXT.md", "pkg")
    (tree / "pkg" / "src").mkdir()
    found = project_instructions(tree / "pkg" / "src", tree)
    assert found is not None
    assert (found.path, found.text) == ("pkg/CONTEXT.md", "pkg")


def test_name_preference_within_a_directory(tree: Path) -> None:
    write(tree / "CONTEXT.md", "context")
    assert project_instructions(tree, tree) == InstructionFile("CONTEXT.md", "context", "project")
    write(tree / "CLAUDE.md", "claude")
    assert project_instructions(tree, tree) == InstructionFile("CLAUDE.md", "claude", "project")
    write(tree / "AGENTS.md", "agents")
    assert project_instructions(tree, tree) == InstructionFile("AGENTS.md", "agents", "project")


def test_no_project_file(tree: Path) -> None:
    (tree / "AGENTS.md").mkdir()
    assert project_instructions(tree, tree) is None


def test_a_file_above_the_worktree_is_never_found(tree: Path) -> None:
    write(tree.parent / "AGENTS.md", "outside")
    (tree / "sub").mkdir()
    assert project_instructions(tree / "sub", tree) is None


def test_working_directory_outside_the_worktree_raises(tree: Path) -> None:
    with pytest.raises(InstructionPathError, match="working directory"):
        project_instructions(tree.parent, tree)


def test_working_directory_through_an_escaping_symlink_raises(tree: Path) -> None:
    (tree.parent / "elsewhere").mkdir()
    (tree / "link").symlink_to(tree.parent / "elsewhere", target_is_directory=True)
    with pytest.raises(InstructionPathError):
        project_instructions(tree / "link", tree)


def test_symlinked_project_file_escaping_the_worktree_is_skipped(tree: Path) -> None:
    secret = write(tree.parent / "secret.md", "secret")
    (tree / "AGENTS.md").symlink_to(secret)
    write(tree / "CLAUDE.md", "claude")
    with capture_logs() as logs:
        found = project_instructions(tree, tree)
    assert found == InstructionFile("CLAUDE.md", "claude", "project")
    assert [(log["event"], log["log_level"], log["path"]) for log in logs] == [
        ("instruction_file_outside_worktree", "warning", "AGENTS.md")
    ]


def test_escaping_symlink_alone_yields_nothing(tree: Path) -> None:
    (tree / "AGENTS.md").symlink_to(write(tree.parent / "secret.md", "secret"))
    with capture_logs() as logs:
        assert project_instructions(tree, tree) is None
    assert len(logs) == 1


def test_symlink_inside_the_worktree_is_followed(tree: Path) -> None:
    write(tree / "docs" / "rules.md", "rules")
    (tree / "AGENTS.md").symlink_to(tree / "docs" / "rules.md")
    assert project_instructions(tree, tree) == InstructionFile("docs/rules.md", "rules", "project")


def test_dangling_and_looping_symlinks_are_absent(tree: Path) -> None:
    (tree / "AGENTS.md").symlink_to(tree / "missing.md")
    (tree / "CLAUDE.md").symlink_to(tree / "CLAUDE.md")
    write(tree / "CONTEXT.md", "context")
    assert project_instructions(tree, tree) == InstructionFile("CONTEXT.md", "context", "project")


# Global instructions


def test_default_global_candidates() -> None:
    home = Path("/home/u")
    assert default_global_candidates({}, home) == (
        Path("/home/u/.config/contextledger/AGENTS.md"),
        Path("/home/u/.claude/CLAUDE.md"),
    )
    assert default_global_candidates({"XDG_CONFIG_HOME": "/xdg"}, home)[0] == Path(
        "/xdg/contextledger/AGENTS.md"
    )
    assert default_global_candidates({"XDG_CONFIG_HOME": "rel"}, home)[0] == Path(
        "/home/u/.config/contextledger/AGENTS.md"
    )


def test_first_existing_global_candidate_wins(tmp_path: Path) -> None:
    first, second, third = tmp_path / "a.md", tmp_path / "b.md", tmp_path / "c.md"
    write(second, "second")
    write(third, "third")
    (tmp_path / "dir.md").mkdir()
    found = global_instructions([tmp_path / "dir.md", first, second, third])
    assert found == InstructionFile(second.as_posix(), "second", "global")
    assert global_instructions([first]) is None
    assert global_instructions([]) is None


def test_global_candidate_keeps_its_absolute_path_through_a_symlink(tmp_path: Path) -> None:
    target = write(tmp_path / "dotfiles" / "CLAUDE.md", "mine")
    link = tmp_path / "home" / ".claude" / "CLAUDE.md"
    link.parent.mkdir(parents=True)
    link.symlink_to(target)
    assert global_instructions([link]) == InstructionFile(link.as_posix(), "mine", "global")


def test_relative_global_candidate_raises() -> None:
    with pytest.raises(InstructionPathError, match="absolute"):
        global_instructions([Path("AGENTS.md")])


# Configured globs


def test_globs_expand_in_sorted_order(tree: Path) -> None:
    for name in ("b.md", "a.md", "c.txt"):
        write(tree / "docs" / "rules" / name, name)
    write(tree / "z.md", "z")
    files = configured_instructions(tree, ["z.md", "docs/rules/*.md"])
    assert files == [
        InstructionFile("z.md", "z", "config"),
        InstructionFile("docs/rules/a.md", "a.md", "config"),
        InstructionFile("docs/rules/b.md", "b.md", "config"),
    ]


def test_recursive_glob(tree: Path) -> None:
    write(tree / "x" / "y" / "rule.md", "deep")
    write(tree / "rule.md", "top")
    assert paths(configured_instructions(tree, ["**/rule.md"])) == ["rule.md", "x/y/rule.md"]


def test_globs_are_deduplicated_by_real_path(tree: Path) -> None:
    write(tree / "docs" / "a.md", "a")
    (tree / "docs" / "alias.md").symlink_to(tree / "docs" / "a.md")
    write(tree / "AGENTS.md", "agents")
    files = configured_instructions(tree, ["docs/*.md", "docs/a.md", "*.md"], exclude=["AGENTS.md"])
    assert paths(files) == ["docs/a.md"]


def test_glob_without_matches_and_directories_are_ignored(tree: Path) -> None:
    (tree / "dir.md").mkdir()
    assert configured_instructions(tree, ["nothing/*.md", "*.md"]) == []


@pytest.mark.parametrize("pattern", ["../*.md", "docs/../../*.md", "", "/etc/*.md"])
def test_patterns_leaving_the_worktree_raise(tree: Path, pattern: str) -> None:
    write(tree.parent / "outside.md", "outside")
    with pytest.raises(InstructionPathError, match="inside the worktree"):
        configured_instructions(tree, [pattern])


def test_absolute_pattern_into_the_worktree_raises(tree: Path) -> None:
    write(tree / "a.md", "a")
    with pytest.raises(InstructionPathError):
        configured_instructions(tree, [str(tree / "*.md")])


@pytest.mark.parametrize("url", ["https://example.com/rules.md", "http://x/y.md", "HTTPS://x"])
def test_url_patterns_raise(tree: Path, url: str) -> None:
    with pytest.raises(InstructionPathError, match="URLs are not supported"):
        configured_instructions(tree, [url])


def test_glob_through_an_escaping_directory_symlink_raises(tree: Path) -> None:
    write(tree.parent / "elsewhere" / "secret.md", "secret")
    (tree / "docs").symlink_to(tree.parent / "elsewhere", target_is_directory=True)
    with pytest.raises(InstructionPathError, match="outside the worktree"):
        configured_instructions(tree, ["docs/*.md"])


def test_glob_matching_an_escaping_file_symlink_raises(tree: Path) -> None:
    (tree / "rules.md").symlink_to(write(tree.parent / "secret.md", "secret"))
    with pytest.raises(InstructionPathError, match="outside the worktree"):
        configured_instructions(tree, ["*.md"])


# System instructions


def test_system_instructions_order_and_sources(tmp_path: Path, tree: Path) -> None:
    home_rules = write(tmp_path / "home" / "AGENTS.md", "global")
    write(tree / "AGENTS.md", "project")
    write(tree / "docs" / "style.md", "style")
    files = system_instructions(
        tree, tree, global_candidates=[home_rules], patterns=["*.md", "docs/*.md"]
    )
    assert files == [
        InstructionFile(home_rules.as_posix(), "global", "global"),
        InstructionFile("AGENTS.md", "project", "project"),
        InstructionFile("docs/style.md", "style", "config"),
    ]


def test_system_instructions_never_repeat_a_file(tree: Path) -> None:
    rules = write(tree / "AGENTS.md", "same")
    files = system_instructions(tree, tree, global_candidates=[rules], patterns=["AGENTS.md"])
    assert files == [InstructionFile(rules.as_posix(), "same", "global")]


def test_system_instructions_without_files(tree: Path) -> None:
    assert system_instructions(tree, tree) == []


# Directory rules


@pytest.fixture
def nested(tree: Path) -> Path:
    write(tree / "AGENTS.md", "root")
    write(tree / "a" / "CLAUDE.md", "a")
    write(tree / "a" / "b" / "AGENTS.md", "b")
    write(tree / "a" / "b" / "c" / "file.py", "print()")
    write(tree / "a" / "x.py", "")
    write(tree / "a" / "b" / "x.py", "")
    return tree


def test_directory_rules_outermost_first(nested: Path) -> None:
    files = directory_rules(nested / "a" / "b" / "c" / "file.py", nested, loaded=[], claimed=[])
    assert files == [
        InstructionFile("AGENTS.md", "root", "directory"),
        InstructionFile("a/CLAUDE.md", "a", "directory"),
        InstructionFile("a/b/AGENTS.md", "b", "directory"),
    ]


def test_directory_rules_skip_loaded_and_claimed(nested: Path) -> None:
    files = directory_rules(
        Path("a/b/c/file.py"), nested, loaded=["AGENTS.md"], claimed=["a/b/AGENTS.md"]
    )
    assert paths(files) == ["a/CLAUDE.md"]


def test_loaded_global_path_is_matched_by_real_path(nested: Path) -> None:
    loaded = [(nested / "AGENTS.md").as_posix()]
    files = directory_rules(nested / "a" / "x.py", nested, loaded=loaded, claimed=[])
    assert paths(files) == ["a/CLAUDE.md"]


def test_directory_rules_one_file_per_directory(nested: Path) -> None:
    write(nested / "a" / "b" / "CLAUDE.md", "shadowed")
    files = directory_rules(
        nested / "a" / "b" / "x.py", nested, loaded=["a/b/AGENTS.md"], claimed=[]
    )
    assert paths(files) == ["AGENTS.md", "a/CLAUDE.md"]


def test_directory_rules_stop_at_the_worktree_root(tmp_path: Path, nested: Path) -> None:
    write(tmp_path / "AGENTS.md", "above")
    files = directory_rules(nested / "a" / "x.py", nested, loaded=[], claimed=[])
    assert paths(files) == ["AGENTS.md", "a/CLAUDE.md"]


def test_reading_a_rule_file_does_not_inject_it(nested: Path) -> None:
    files = directory_rules(nested / "a" / "CLAUDE.md", nested, loaded=["AGENTS.md"], claimed=[])
    assert files == []


def test_reading_a_directory_includes_its_own_rules(nested: Path) -> None:
    files = directory_rules(nested / "a" / "b", nested, loaded=["AGENTS.md"], claimed=[])
    assert paths(files) == ["a/CLAUDE.md", "a/b/AGENTS.md"]


def test_read_path_outside_the_worktree_raises(tmp_path: Path, nested: Path) -> None:
    outside = write(tmp_path / "other" / "x.py", "")
    with pytest.raises(InstructionPathError, match="read path"):
        directory_rules(outside, nested, loaded=[], claimed=[])
    with pytest.raises(InstructionPathError, match="read path"):
        directory_rules(Path("../other/x.py"), nested, loaded=[], claimed=[])


def test_missing_read_path_raises(nested: Path) -> None:
    with pytest.raises(FileNotFoundError):
        directory_rules(nested / "a" / "gone.py", nested, loaded=[], claimed=[])


def test_read_path_through_an_escaping_symlink_raises(tmp_path: Path, nested: Path) -> None:
    write(tmp_path / "other" / "AGENTS.md", "secret")
    write(tmp_path / "other" / "x.py", "")
    (nested / "a" / "link").symlink_to(tmp_path / "other", target_is_directory=True)
    with pytest.raises(InstructionPathError):
        directory_rules(nested / "a" / "link" / "x.py", nested, loaded=[], claimed=[])


def test_escaping_rule_symlink_in_a_directory_is_skipped(tmp_path: Path, nested: Path) -> None:
    (nested / "a" / "b" / "AGENTS.md").unlink()
    (nested / "a" / "b" / "AGENTS.md").symlink_to(write(tmp_path / "secret.md", "secret"))
    with capture_logs() as logs:
        files = directory_rules(nested / "a" / "b" / "x.py", nested, loaded=[], claimed=[])
    assert paths(files) == ["AGENTS.md", "a/CLAUDE.md"]
    assert [log["path"] for log in logs] == ["a/b/AGENTS.md"]


def test_rule_symlinks_to_one_file_are_returned_once(nested: Path) -> None:
    (nested / "a" / "b" / "AGENTS.md").unlink()
    (nested / "a" / "b" / "AGENTS.md").symlink_to(nested / "a" / "CLAUDE.md")
    files = directory_rules(nested / "a" / "b" / "x.py", nested, loaded=[], claimed=[])
    assert paths(files) == ["AGENTS.md", "a/CLAUDE.md"]


# Reading


def test_invalid_utf8_becomes_replacement_characters(tree: Path) -> None:
    (tree / "AGENTS.md").write_bytes(b"ok \xff\xfe done")
    found = project_instructions(tree, tree)
    assert found is not None
    assert found.text == "ok \ufffd\ufffd done"


def test_large_file_is_cut_with_a_marker(tree: Path) -> None:
    (tree / "AGENTS.md").write_bytes(b"x" * 100)
    found = project_instructions(tree, tree, max_bytes=40)
    assert found is not None
    assert found.text == "x" * 40 + "\n[truncated: 60 of 100 bytes left out]"


def test_file_of_exactly_max_bytes_is_whole(tree: Path) -> None:
    (tree / "AGENTS.md").write_bytes(b"x" * 40)
    found = project_instructions(tree, tree, max_bytes=40)
    assert found is not None
    assert found.text == "x" * 40


def test_cut_never_splits_a_character(tree: Path) -> None:
    (tree / "AGENTS.md").write_bytes("ab\u00e9cd".encode())
    found = project_instructions(tree, tree, max_bytes=3)
    assert found is not None
    assert found.text == "ab\n[truncated: 4 of 6 bytes left out]"


def test_default_cap_is_64_kib(tree: Path) -> None:
    (tree / "AGENTS.md").write_bytes(b"y" * (64 * 1024 + 10))
    found = project_instructions(tree, tree)
    assert found is not None
    assert found.text.endswith("y\n[truncated: 10 of 65546 bytes left out]")


def test_non_positive_max_bytes_raises(tree: Path) -> None:
    write(tree / "AGENTS.md", "x")
    with pytest.raises(ValueError, match="max_bytes"):
        project_instructions(tree, tree, max_bytes=0)


# Rendering


def test_render_system_instructions() -> None:
    files = [
        InstructionFile("/home/u/AGENTS.md", "global\n", "global"),
        InstructionFile("AGENTS.md", "project", "project"),
    ]
    assert render_system_instructions(files) == (
        "Instructions from: /home/u/AGENTS.md\nglobal\n\nInstructions from: AGENTS.md\nproject"
    )
    assert render_system_instructions([]) == ""


def test_render_directory_rules() -> None:
    files = [
        InstructionFile("a/AGENTS.md", "a\n\n", "directory"),
        InstructionFile("a/b/CLAUDE.md", "b", "directory"),
    ]
    assert render_directory_rules(files) == (
        "<system-reminder>\nInstructions from: a/AGENTS.md\na\n</system-reminder>\n\n"
        "<system-reminder>\nInstructions from: a/b/CLAUDE.md\nb\n</system-reminder>"
    )
    assert render_directory_rules([]) == ""


# Location independence


def test_results_do_not_depend_on_where_the_worktree_is(tmp_path: Path, nested: Path) -> None:
    write(nested / "docs" / "rules" / "one.md", "one")
    write(nested / "docs" / "rules" / "two.md", "two")
    (nested / "a" / "link.md").symlink_to("../docs/rules/one.md")
    copy = shutil.copytree(nested, tmp_path / "elsewhere" / "deeper" / "copy", symlinks=True)

    def everything(
        root: Path,
    ) -> tuple[list[InstructionFile], list[InstructionFile], str, str]:
        system = system_instructions(root / "a" / "b", root, patterns=["docs/**/*.md", "a/*.md"])
        rules = directory_rules(
            root / "a" / "b" / "c" / "file.py", root, loaded=paths(system), claimed=[]
        )
        return (system, rules, render_system_instructions(system), render_directory_rules(rules))

    original = everything(nested)
    assert original == everything(copy)
    assert paths(original[0]) == [
        "a/b/AGENTS.md",
        "docs/rules/one.md",
        "docs/rules/two.md",
        "a/CLAUDE.md",
    ]
    assert paths(original[1]) == ["AGENTS.md"]


def test_symlinked_worktree_gives_the_same_paths(tmp_path: Path, nested: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(nested, target_is_directory=True)
    assert system_instructions(alias / "a", alias) == system_instructions(nested / "a", nested)
