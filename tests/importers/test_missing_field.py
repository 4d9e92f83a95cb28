"""A required field dropped from one record of a real transcript, in every format that has
records of fields: a strict import refuses the file naming the record's line (or position)
and the field; a lenient one imports the rest, with the record left out and its loss in the
report and the log (``view`` and ``replay`` show it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger.events._catalogue import InputLeftOut
from contextledger.importers import TraceImportError, import_with_report
from tests.cli.generated import run_cli

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"
MALFORMED = "malformed_record"

#: Per format: a shared transcript, the key of its list of records (``None``: JSON lines, ``""``:
#: the document is the list) and a field each record needs.
CASES = {
    "claude-code": (
        "claude-code-jsonl/vsla_5f8cbb78-38d3-47e9-9504-baa93bb166c9.jsonl", None, "message"
    ),
    "codex": ("codex-rollout/skills__d654a3e78b3c-0__codex-tui-0.125.0.jsonl", None, "payload"),
    "openhands-v1": ("openhands-v1/software-agent-sdk__goal-fixture-events.jsonl", None, "kind"),
    "openhands": ("openhands/resolver_mock_output.jsonl", None, "history"),
    "opencode": (
        "opencode-export/biome-config__f94a4d1e69f1-0__gpt-5.3-codex.json", "messages", "info"
    ),
    "gemini-cli": (
        "gemini-cli/session-bridge__c66a5f5ed92d-0__gemini-3-flash.json", "messages", "type"
    ),
    "swe-agent": ("swe-agent-traj/marshmallow-1867_function_calling.traj", "history", "role"),
    "mini-swe-agent": ("mini-swe-agent/github_issue.traj.json", "", "role"),
}  # fmt: skip
#: The OpenAI chat format has no shared transcript: a small chat log of its own.
CHAT = [
    {"role": "system", "content": "Be terse."},
    {"role": "user", "content": "List the files."},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    ]},
    {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
    {"role": "assistant", "content": "One file: a.py."},
    {"role": "user", "content": "Thanks."},
]  # fmt: skip


def _records(fmt: str) -> tuple[str, Any, str | None, str]:
    """The file name, the parsed transcript (lines, or the document), the records' key and the
    required field of ``fmt``."""
    if fmt == "openai-chat":
        return "chat.json", json.loads(json.dumps(CHAT)), "", "role"
    name, key, field = CASES[fmt]
    path = TRACES / name
    if not path.is_file():
        pytest.skip(f"shared/traces not present: {path} does not exist")
    text = path.read_text()
    parsed = [json.loads(line) for line in text.splitlines()] if key is None else json.loads(text)
    return path.name, parsed, key, field


def _spoiled(fmt: str, pick: int) -> tuple[str, str, int, str]:
    """The transcript of ``fmt`` with the required field dropped from one of the records that
    have it (the ``pick``-th, modulo; never the first, which tells the format); its name, text,
    the record's line (or 1-based position) and the field's path as the error names it."""
    name, parsed, key, field = _records(fmt)
    items = parsed if key is None or key == "" else parsed[key]
    having = [i for i, item in enumerate(items) if i and isinstance(item, dict) and field in item]
    i = having[pick % len(having)]
    items[i] = {k: v for k, v in items[i].items() if k != field}
    if key is None:
        return name, "\n".join(json.dumps(r) for r in items) + "\n", i + 1, field
    path = f"{key}[{i}].{field}" if key else f"[{i}].{field}"
    return name, json.dumps(parsed), i + 1, path


FORMATS = sorted([*CASES, "openai-chat"])


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.sampled_from(FORMATS), st.integers(min_value=0, max_value=10_000))
def test_a_record_missing_a_required_field_is_refused_or_left_out(
    tmp_path: Path, fmt: str, pick: int
) -> None:
    name, text, line, field = _spoiled(fmt, pick)
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(TraceImportError) as caught:
        import_with_report(path)
    assert (caught.value.line, caught.value.field) == (line, field)
    result = import_with_report(path, lenient=True)
    assert result.report.format == fmt
    malformed = [(m.line, m.field) for m in result.report.left_out if m.kind == MALFORMED]
    assert malformed == [(line, field)]
    logged = [
        (item.line, item.field)
        for top in result.sessions
        for session in top.sessions()
        for event in session.events
        if isinstance(event, InputLeftOut)
        for item in event.items
        if item.kind == MALFORMED
    ]
    assert logged == [(line, field)]


@pytest.mark.parametrize("fmt", FORMATS)
def test_view_and_replay_show_the_record_a_lenient_import_left_out(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, text, line, field = _spoiled(fmt, 0)
    path = tmp_path / name
    path.write_text(text)
    db = str(tmp_path / "lenient.db")
    code, out, _ = run_cli(capsys, "import", str(path), "--db", db, "--lenient", "--json")
    assert code == 0
    sessions = [row["session"] for row in json.loads(out)["sessions"] if row["left_out"]]
    shown, replayed = [], []
    for session in sessions:
        code, out, _ = run_cli(capsys, "view", db, "--session", session, "--json")
        assert code == 0
        items = json.loads(out)["left_out_at_import"]
        shown += [(i["line"], i["field"]) for i in items if i["kind"] == MALFORMED]
        code, out, _ = run_cli(capsys, "replay", db, "--session", session)
        assert code == 0
        replayed += [row for row in out.splitlines() if f"× {MALFORMED}: " in row]
    assert shown == [(line, field)]
    (row,) = replayed
    assert f"(line {line})" in row
