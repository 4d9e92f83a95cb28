"""Progress on long work: the library's ``on_progress`` callback and the CLI's stderr bar."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from contextledger.cli._main import main
from contextledger.cli._output import Progress, progress_line
from contextledger.simulation import PROVIDERS, simulate_paths
from tests.cli.test_analysis import CHAT


class _Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def chats(tmp_path: Path) -> Path:
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(json.dumps(CHAT))
    return tmp_path


def test_simulation_reports_every_unit_up_to_the_total(chats: Path) -> None:
    calls: list[tuple[int, int, str]] = []
    strategies = ("baseline", "truncate-500")
    results = simulate_paths(
        [chats], strategies, PROVIDERS, on_progress=lambda *call: calls.append(call)
    )
    total = 2 * len(strategies) * len(PROVIDERS)
    assert [done for done, _, _ in calls] == list(range(total + 1))
    assert {reported for _, reported, _ in calls} == {total}
    assert calls[0][2] == f"{chats.name}/a.json baseline anthropic"
    assert all(label for _, _, label in calls[:-1]) and calls[-1][2] == ""
    assert sum(len(p) for s in results.values() for p in s.values()) == total


def test_progress_line_fills_in_proportion() -> None:
    assert progress_line("sim", 0, 4, width=8) == "sim [........] 0/4"
    assert progress_line("sim", 1, 4, "a.json", width=8) == "sim [##......] 1/4 a.json"
    assert progress_line("sim", 4, 4, width=8) == "sim [########] 4/4"
    assert progress_line("sim", 0, 0, width=4) == "sim [####] 0/0"


def test_the_bar_is_redrawn_in_place_on_a_terminal() -> None:
    stream = _Terminal()
    with Progress("sim", stream) as bar:
        bar.update(0, 2, "long note here")
        bar.update(2, 2)
    text = stream.getvalue()
    first, second = text.split("\r")[1:]
    assert first.startswith("sim [") and first.endswith("0/2 long note here")
    # The shorter line is padded over the longer one, then the line is ended.
    assert second.rstrip(" \n").endswith("2/2") and len(second) == len(first) + 1
    assert text.endswith("\n")


def test_the_bar_writes_nothing_when_not_a_terminal() -> None:
    stream = io.StringIO()
    with Progress("sim", stream) as bar:
        bar.update(0, 2, "note")
        bar.update(2, 2)
    assert stream.getvalue() == ""


def test_simulate_writes_no_progress_to_a_pipe(
    chats: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", str(chats), "--strategy", "baseline", "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert set(json.loads(out)) == {f"{chats.name}/a.json", f"{chats.name}/b.json"}
