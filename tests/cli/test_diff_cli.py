"""``contextledger diff`` and ``contextledger view --strategy``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from contextledger.cli._output import emit_diff
from contextledger.ledger import SessionLog
from contextledger.simulation._synthetic import synthetic_session
from contextledger.simulation._viewdiff import DiffLine, Elided
from contextledger.store._sqlite import SQLiteStore
from tests.cli.generated import run_cli as _run

SESSION = "ses_diff_cli"
CALLS = 63  # model calls of the synthetic session below


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("diff") / "diff.db"

    async def write() -> None:
        async with SQLiteStore.open(path) as store:
            log = await SessionLog.open(store, SESSION)
            await log.append(synthetic_session(SESSION, seed=3, turns=1))

    trio.run(write)
    return path


def test_diff_prints_a_header_then_removed_and_added_lines(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(
        capsys, "diff", str(db), "--session", SESSION, "--strategy", "truncate-500", "--turn", "2"
    )
    assert code == 0
    header, *lines = out.splitlines()
    assert header.startswith(f"{SESSION} under truncate-500, call 2 of {CALLS} (at seq ")
    assert "no actions before the call" in header
    assert any(line.startswith("-") for line in lines)
    assert any(line.startswith("+[... ") for line in lines)
    assert lines[0].endswith(" identical lines ...")  # the user's prompt, unchanged
    assert "\x1b[" not in out  # not a terminal: no colour


def test_context_collapses_identical_runs_and_minus_one_shows_all(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["diff", str(db), "--session", SESSION, "--strategy", "baseline", "--turn", "5"]
    _, out, _ = _run(capsys, *argv)
    header, *lines = out.splitlines()
    assert "0 lines removed, 0 added" in header
    assert len(lines) == 1
    assert lines[0].startswith("... ") and lines[0].endswith(" identical lines ...")
    _, full, _ = _run(capsys, *argv, "--context", "-1")
    shown = full.splitlines()[1:]
    assert len(shown) > 1
    assert all(line.startswith(" ") for line in shown)
    assert f"... {len(shown)} identical lines ..." == lines[0]


def test_diff_json_has_the_figures_and_every_line(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(
        capsys,
        "diff",
        str(db),
        "--session",
        SESSION,
        "--strategy",
        "compact-at-1000",
        "--turn",
        "2",
        "--provider",
        "openai",
        "--json",
    )
    assert code == 0
    result = json.loads(out)
    assert set(result) == {
        "session",
        "strategy",
        "turn",
        "calls",
        "actions",
        "seq",
        "tokens_before",
        "removed",
        "added",
        "same",
        "tokens_after",
        "lines",
    }
    assert (result["session"], result["strategy"], result["turn"], result["calls"]) == (
        SESSION,
        "compact-at-1000",
        2,
        CALLS,
    )
    assert result["actions"] == "compacted"
    assert {line["kind"] for line in result["lines"]} <= {"same", "removed", "added"}
    assert {"kind": "added", "text": "=== ASSISTANT (summary) ==="} in result["lines"]
    kinds = [line["kind"] for line in result["lines"]]
    assert (result["removed"], result["added"], result["same"]) == (
        kinds.count("removed"),
        kinds.count("added"),
        kinds.count("same"),
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--strategy", "nope", "--turn", "1"], "unknown strategy 'nope'"),
        (["--strategy", "baseline", "--turn", "0"], f"the session has {CALLS} model calls"),
        (["--strategy", "baseline", "--turn", "64"], "turn 64 is out of range"),
        (["--strategy", "baseline", "--turn", "1", "--window", "0"], "window must be positive"),
    ],
)
def test_a_bad_strategy_or_turn_exits_1_with_a_message(
    db: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    code, out, err = _run(capsys, "diff", str(db), "--session", SESSION, *extra)
    assert code == 1
    assert out == ""
    assert err.startswith("contextledger: ") and message in err


def test_an_unknown_session_exits_1(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(
        capsys, "diff", str(db), "--session", "nope", "--strategy", "baseline", "--turn", "1"
    )
    assert code == 1
    assert "no session 'nope'" in err


def test_colour_marks_removed_red_added_green_and_identical_grey(
    capsys: pytest.CaptureFixture[str],
) -> None:
    emit_diff([DiffLine("removed", "a"), DiffLine("added", "b"), Elided(2)], color=True)
    emit_diff([DiffLine("same", "c")], color=True)
    assert capsys.readouterr().out.splitlines() == [
        "\x1b[31m-a\x1b[0m",
        "\x1b[32m+b\x1b[0m",
        "\x1b[90m... 2 identical lines ...\x1b[0m",
        "\x1b[90m c\x1b[0m",
    ]


def test_view_with_a_strategy_prints_the_view_it_sent(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["view", str(db), "--session", SESSION]
    code, out, _ = _run(capsys, *base, "--strategy", "truncate-500", "--turn", "3")
    assert code == 0
    assert out.splitlines()[0].startswith(
        f"model view of {SESSION} under truncate-500 at call 3 of {CALLS} (at seq "
    )
    _, out, _ = _run(capsys, *base, "--strategy", "truncate-500", "--turn", "3", "--json")
    sent = json.loads(out)
    _, out, _ = _run(capsys, *base, "--at", str(sent["seq"]), "--json")
    stored = json.loads(out)
    assert (sent["strategy"], sent["turn"], sent["calls"]) == ("truncate-500", 3, CALLS)
    assert len(sent["messages"]) == len(stored["messages"])
    assert json.dumps(sent["messages"]) != json.dumps(stored["messages"])
    assert "more characters truncated]" in json.dumps(sent["messages"])


def test_view_with_a_strategy_defaults_to_the_last_call(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(
        capsys, "view", str(db), "--session", SESSION, "--strategy", "baseline", "--json"
    )
    assert code == 0
    assert json.loads(out)["turn"] == CALLS


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--strategy", "baseline", "--at", "5"], "--strategy does not combine with --at"),
        (["--turn", "2"], "--turn, --provider and --window need --strategy"),
        (["--window", "5"], "--turn, --provider and --window need --strategy"),
        (["--provider", "openai"], "--turn, --provider and --window need --strategy"),
    ],
)
def test_view_refuses_options_that_do_not_combine(
    db: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    code, _, err = _run(capsys, "view", str(db), "--session", SESSION, *extra)
    assert code == 1
    assert message in err
