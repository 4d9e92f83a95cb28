"""``contextledger output``: a page of a tool call's full output, as the paging tool reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from contextledger.actors import Runtime
from contextledger.cli._output import amount
from contextledger.store._sqlite import SQLiteStore
from contextledger.vocabulary._models import Model, ModelLimits
from tests.cli.generated import run_cli

MODEL = Model(
    provider_id="anthropic",
    model_id="claude-sonnet-4-5",
    limits=ModelLimits(context=200_000, output=32_000),
)
LOG = "".join(f"line {n}\n" for n in range(3000))


@pytest.fixture
def db(tmp_path: Path) -> tuple[Path, str]:
    """A database whose session ran one command with a 3,000-line output; the call's
    provider id."""
    path = tmp_path / "output.db"

    async def write() -> None:
        async with SQLiteStore.open(path) as store, Runtime.open(store, model=MODEL) as runtime:
            session = await runtime.session("ses_out")
            user = await session.add_user("Why does the build fail?")
            message = await session.start_assistant(user)
            part = await session.call_tool(message, "bash", {"command": "make"}, call_id="toolu_1")
            await session.record_tool_result(part, LOG)
            await session.finish(message, finish="tool-calls")

    trio.run(write)
    return path, "toolu_1"


def test_output_prints_a_page_as_the_model_reads_it(
    db: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    path, call = db
    args = ("output", str(path), "--session", "ses_out", call, "--offset", "2998")
    code, out, _ = run_cli(capsys, *args)
    assert code == 0
    assert out == "line 2998\nline 2999\n\n[lines 2998-2999 of 3000; the end of the output]\n"


def test_output_as_json_names_the_part_and_the_next_page(
    db: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    path, call = db
    args = ("output", str(path), "--session", "ses_out", call, "--limit", "2", "--json")
    code, out, _ = run_cli(capsys, *args)
    page = json.loads(out)
    assert code == 0
    assert page["text"] == "line 0\nline 1\n"
    assert (page["offset"], page["limit"], page["next_offset"]) == (0, 2, 2)
    assert page["total_lines"] == 3000 and page["part_id"].startswith("prt_")
    # The part id names the same call.
    again = ("output", str(path), "--session", "ses_out", page["part_id"], "--limit", "2")
    assert run_cli(capsys, *again)[1].startswith("line 0\nline 1\n")


@pytest.mark.parametrize(
    ("call", "extra", "message"),
    [
        ("toolu_nope", (), "no tool call 'toolu_nope'"),
        ("toolu_1", ("--offset", "4000"), "past the end of the output"),
    ],
)
def test_output_of_nothing_is_an_error(
    db: tuple[Path, str],
    capsys: pytest.CaptureFixture[str],
    call: str,
    extra: tuple[str, ...],
    message: str,
) -> None:
    path, _ = db
    code, out, err = run_cli(capsys, "output", str(path), "--session", "ses_out", call, *extra)
    assert code == 1 and out == "" and message in err


def test_an_amount_of_one_is_singular_and_others_plural_with_thousands() -> None:
    assert amount(1, "sessions") == "1 session"
    assert amount(0, "sessions") == "0 sessions"
    assert amount(1_683, "events") == "1,683 events"
    assert amount(1, "user messages") == "1 user message"
