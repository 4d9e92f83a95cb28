"""``import_trace``: each format recognised by its content, unknown ones refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contextledger.importers import TraceImportError, detect_format, import_trace
from tests.importers.test_mini_swe_agent import LEGACY
from tests.importers.test_openai_chat import CHAT, TRACES, assert_imported, trace_dir
from tests.importers.test_openhands import RESOLVER, RUN
from tests.importers.test_swe_agent import OLD

CLAUDE_RECORD = {
    "type": "user",
    "uuid": "u1",
    "sessionId": "s1",
    "timestamp": "2025-07-01T10:00:00.000Z",
    "message": {"role": "user", "content": "hello"},
}


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("name", "data", "kind"),
    [
        ("run.traj", OLD, "swe-agent"),
        ("mini.traj.json", LEGACY, "mini-swe-agent"),
        ("mini.json", {"trajectory_format": "mini-swe-agent-1", "messages": []}, "mini-swe-agent"),
        ("chat.json", CHAT, "openai-chat"),
        ("chat2.json", {"messages": CHAT}, "openai-chat"),
    ],
)
def test_json_documents_are_recognised(tmp_path: Path, name: str, data: Any, kind: str) -> None:
    path = _write(tmp_path, name, json.dumps(data, indent=2))
    assert detect_format(path) == kind
    (session,) = import_trace(path)
    assert_imported(session)


def test_openhands_lines_give_one_session_per_run(tmp_path: Path) -> None:
    path = _write(tmp_path, "output.jsonl", f"{json.dumps(RUN)}\n{json.dumps(RESOLVER)}\n")
    assert detect_format(path) == "openhands"
    sessions = import_trace(path)
    assert len(sessions) == 2


def test_a_single_line_file_is_read_as_lines(tmp_path: Path) -> None:
    path = _write(tmp_path, "output.jsonl", json.dumps(RUN))
    assert len(import_trace(path)) == 1
    path = _write(tmp_path, "session.jsonl", json.dumps(CLAUDE_RECORD))
    assert detect_format(path) == "claude-code"
    (session,) = import_trace(path)
    assert_imported(session)


@pytest.mark.parametrize(
    "text",
    ['{"hello": "world"}', "[1, 2]", "[]", '"x"', "not json\nat all", "[1]\n[2]\n", "\n"],
)
def test_an_unknown_format_is_refused(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path, "x.json", text)
    with pytest.raises(TraceImportError, match="unknown trace format"):
        import_trace(path)


#: Each shared trace folder and the format ``import_trace`` must find there.
FOLDERS = {
    "claude-code-jsonl": "claude-code",
    "swe-agent-traj": "swe-agent",
    "openhands": "openhands",
    "mini-swe-agent": "mini-swe-agent",
}


def test_every_shared_trace_is_dispatched_to_its_importer() -> None:
    trace_dir("")
    seen = 0
    for folder, kind in FOLDERS.items():
        for path in sorted((TRACES / folder).glob("*")):
            assert detect_format(path) == kind, path.name
            seen += 1
            if kind != "claude-code" or path.name.startswith("vsla_6dc88126"):
                for session in import_trace(path):
                    assert_imported(session)
    assert seen == 14
