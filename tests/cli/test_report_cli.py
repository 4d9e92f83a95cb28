"""``contextledger report``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from contextledger.report import DATA_ID
from contextledger.simulation import DEFAULT_STRATEGIES
from tests.cli.generated import run_cli as _run

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"


def _chat(rounds: int) -> list[dict[str, Any]]:
    """An OpenAI chat transcript: a question, then ``rounds`` tool calls with growing outputs,
    then an answer."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Read every file."},
    ]
    for n in range(rounds):
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{n}",
                        "type": "function",
                        "function": {"name": "read", "arguments": json.dumps({"path": f"{n}.py"})},
                    }
                ],
            }
        )
        messages.append(
            {"role": "tool", "tool_call_id": f"call_{n}", "content": f"line {n}\n" * 400 * n}
        )
    messages.append({"role": "assistant", "content": "All read."})
    return messages


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    path = tmp_path / "traces" / "chat.json"
    path.parent.mkdir()
    path.write_text(json.dumps(_chat(6)))
    return path


def _embedded(path: Path) -> Any:
    match = re.search(
        rf'<script type="application/json" id="{DATA_ID}">(.*?)</script>',
        path.read_text(encoding="utf-8"),
    )
    assert match is not None
    return json.loads(match.group(1))


def _summaries(data: Any) -> Any:
    return {
        trace: {
            name: {provider: figures["summary"] for provider, figures in by_provider.items()}
            for name, by_provider in by_strategy.items()
        }
        for trace, by_strategy in data.items()
    }


def test_report_json_names_the_file_and_what_it_holds(
    chat: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.html"
    code, stdout, _ = _run(
        capsys, "report", str(chat), "--strategy", "baseline", "--out", str(out), "--json"
    )
    assert code == 0
    assert json.loads(stdout) == {
        "report": str(out),
        "traces": 1,
        "strategies": ["baseline"],
        "providers": ["anthropic", "openai"],
    }
    data = _embedded(out)
    assert list(data) == ["traces/chat.json"]
    assert data["traces/chat.json"]["baseline"]["anthropic"]["summary"]["calls"] == 7


def test_report_prints_one_line_and_defaults_to_report_html(
    chat: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, stdout, _ = _run(capsys, "report", str(chat), "--provider", "openai")
    assert code == 0
    strategies = len(DEFAULT_STRATEGIES)
    assert stdout.splitlines() == [
        f"wrote report.html (traces: 1, strategies: {strategies}, providers: 1)"
    ]
    data = _embedded(tmp_path / "report.html")
    assert all(set(by_provider) == {"openai"} for by_provider in data["traces/chat.json"].values())


def _same_figures_as_simulate(capsys: pytest.CaptureFixture[str], out: Path, *argv: str) -> None:
    code, stdout, _ = _run(capsys, "simulate", *argv, "--json")
    assert code == 0
    simulated = json.loads(stdout)
    code, _, _ = _run(capsys, "report", *argv, "--out", str(out))
    assert code == 0
    assert _summaries(_embedded(out)) == simulated


def test_report_figures_equal_simulate_json(
    chat: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _same_figures_as_simulate(
        capsys,
        tmp_path / "r.html",
        str(chat.parent),
        "--strategy",
        "baseline",
        "--strategy",
        "truncate-500",
        "--strategy",
        "compact-at-2000",
        "--window",
        "6000",
    )


def test_report_figures_equal_simulate_json_on_recorded_traces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces = [TRACES / "mini-swe-agent" / "github_issue.traj.json"]
    traces.append(TRACES / "openhands" / "resolver_mock_output.jsonl")
    if not all(t.is_file() for t in traces):
        pytest.skip(f"{TRACES}: the shared traces are not on this machine")
    _same_figures_as_simulate(
        capsys, tmp_path / "r.html", *map(str, traces), "--strategy", "baseline"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--window", "0"), "--window must be positive"),
        (("--strategy", "nope"), "unknown strategy 'nope'"),
    ],
)
def test_bad_arguments_exit_1_and_write_nothing(
    chat: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
    message: str,
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    code, stdout, err = _run(capsys, "report", str(chat), *argv, "--out", str(out / "r.html"))
    assert code == 1 and message in err and not stdout
    assert list(out.iterdir()) == []


def test_a_missing_path_or_output_folder_exits_1(
    chat: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.html"
    code, stdout, err = _run(capsys, "report", str(tmp_path / "missing.json"), "--out", str(out))
    assert code == 1 and "no transcript or folder" in err and not stdout and not out.exists()
    code, stdout, err = _run(capsys, "report", str(chat), "--out", str(tmp_path / "no" / "r.html"))
    assert code == 1 and f"cannot write the report at {tmp_path / 'no'}" in err and not stdout


def test_a_folder_without_transcripts_exits_1_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "r.html"
    code, stdout, err = _run(capsys, "report", str(empty), "--out", str(out))
    assert code == 1 and "no transcript" in err and not stdout
    assert not out.exists()
