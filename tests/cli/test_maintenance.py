"""``contextledger compact`` and ``contextledger prune``: plans, changes, JSON, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from contextledger.actors import Runtime
from contextledger.config import Config
from contextledger.ledger import SessionLog
from contextledger.policy import Plan, PrunePlan
from contextledger.store import SQLiteStore
from contextledger.testing._builder import SessionBuilder
from contextledger.vocabulary import Model, ModelLimits
from tests.cli.generated import run_cli as _run
from tests.cli.generated import write_generated


@pytest.fixture
def db(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "demo.db"
    write_generated(path, "ses_demo_001", turns=6)
    return path


def _events(capsys: pytest.CaptureFixture[str], db: Path) -> int:
    code, out, _ = _run(capsys, "events", str(db), "--session", "ses_demo_001", "--json")
    assert code == 0
    return len(json.loads(out))


def test_a_dry_run_compaction_prints_the_plan_and_writes_nothing(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _events(capsys, db)
    code, out, _ = _run(
        capsys,
        "compact",
        str(db),
        "--session",
        "ses_demo_001",
        "--context",
        "32000",
        "--dry-run",
        "--json",
    )
    plan = json.loads(out)
    assert code == 0 and plan["dry_run"] is True
    assert plan["plan"]["head_messages"] > 0 and plan["plan"]["tail_start_id"]
    assert _events(capsys, db) == before


def test_a_compaction_shrinks_the_view_and_records_the_summary(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(
        capsys, "compact", str(db), "--session", "ses_demo_001", "--context", "32000", "--json"
    )
    row = json.loads(out)
    assert code == 0 and row["outcome"] == "completed"
    assert row["tokens_after"] < row["tokens_before"]
    code, out, _ = _run(capsys, "view", str(db), "--session", "ses_demo_001", "--json")
    messages = json.loads(out)["messages"]
    assert messages[0]["content"][0]["text"] == "What did we do so far?"
    assert messages[1]["source_id"] == row["summary"]


def test_the_compaction_table_names_the_outcome(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(
        capsys, "compact", str(db), "--session", "ses_demo_001", "--template", "continuation"
    )
    assert code == 0 and "completed" in out


def test_a_dry_run_prune_lists_the_plan_and_writes_nothing(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _events(capsys, db)
    code, out, _ = _run(
        capsys, "prune", str(db), "--session", "ses_demo_001", "--dry-run", "--json"
    )
    result = json.loads(out)
    assert code == 0 and result["dry_run"] is True and result["mode"] == "opencode"
    assert result["plans"], "a six-turn generated session has old outputs worth clearing"
    assert result["plans"][0]["action"] == "clear"
    assert _events(capsys, db) == before


def test_a_prune_clears_outputs_and_reports_the_saving(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "prune", str(db), "--session", "ses_demo_001", "--json")
    result = json.loads(out)
    assert code == 0 and result["plans"]
    assert result["tokens_after"] < result["tokens_before"]
    code, out, _ = _run(capsys, "prune", str(db), "--session", "ses_demo_001")
    assert code == 0 and "nothing to do" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["compact", "--session", "nope"], "no session 'nope'"),
        (
            ["prune", "--session", "ses_demo_001", "--model", "bad"],
            "--model must be provider/model",
        ),
        (["compact", "--session", "ses_demo_001", "--context", "0"], "--context must be positive"),
    ],
)
def test_bad_input_is_refused_with_a_clear_error(
    db: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    before = _events(capsys, db)
    code, _, err = _run(capsys, argv[0], str(db), *argv[1:])
    assert code == 1 and message in err
    assert _events(capsys, db) == before


@pytest.mark.parametrize("level", ["-1", "4", "99"])
def test_prune_refuses_a_level_outside_0_to_3(
    db: Path, capsys: pytest.CaptureFixture[str], level: str
) -> None:
    before = _events(capsys, db)
    with pytest.raises(SystemExit) as exited:
        _run(capsys, "prune", str(db), "--session", "ses_demo_001", "--level", level)
    assert exited.value.code == 2
    assert f"--level: invalid choice: {level} (choose from 0, 1, 2, 3)" in capsys.readouterr().err
    assert _events(capsys, db) == before


# --- the CLI decides as the runtime does -------------------------------------------------------

MODEL = Model(
    provider_id="anthropic",
    model_id="claude-sonnet-4-5",
    limits=ModelLimits(context=200_000, output=32_000),
)
SIZED = ["--model", "anthropic/claude-sonnet-4-5", "--context", "200000", "--output", "32000"]


def _store(path: Path, builder: SessionBuilder) -> None:
    async def write() -> None:
        async with SQLiteStore.open(path) as store:
            log = await SessionLog.open(store, builder.session_id)
            await log.append(builder.events)

    trio.run(write)


def _read_step(b: SessionBuilder, i: int, lines: int) -> str:
    """A user turn whose first step reads ``file_i.py`` (``lines`` lines); its user message."""
    user = b.user(f"fix file_{i}.py")
    reply = b.assistant(user)
    call = b.tool_call(reply, "read", {"path": f"file_{i}.py"})
    b.tool_result(call, f"line {i} of the file\n" * lines)
    b.finish(reply, "tool-calls")
    return user


def test_a_dry_run_compaction_plans_the_slice_the_compaction_then_compacts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another agent's messages, interleaved with the main agent's, are not the main slice's
    head: the dry run's kept tail starts where the compaction's does."""
    b = SessionBuilder("ses_agents")
    for i in range(8):
        user = _read_step(b, i, 400)
        answer = b.assistant(user)
        b.text(answer, f"fixed file_{i}.py")
        b.finish(answer, "stop")
        asked = b.user(f"look around {i}", agent_id="explore")
        found = b.assistant(asked, agent_id="explore")
        b.text(found, "what the explorer found " * 200, agent_id="explore")
        b.finish(found, "stop", agent_id="explore")
    db = tmp_path / "agents.db"
    _store(db, b)
    argv = ["compact", str(db), "--session", "ses_agents", "--context", "32000", "--json"]
    code, out, _ = _run(capsys, *argv, "--dry-run")
    plan = json.loads(out)["plan"]
    code_after, out, _ = _run(capsys, *argv)
    done = json.loads(out)
    assert code == code_after == 0 and done["outcome"] == "completed"
    assert plan["tail_start_id"] == done["tail_start_id"]
    assert plan["head_messages"] == 20  # the main agent's 8 turns before the kept tail


def test_a_prune_in_the_middle_of_a_tool_loop_prunes_as_the_runtime_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The main agent's newest answer called tools: the after-turn prune waits for the turn
    to end, but a prune asked for (``SessionHandle.prune``, the CLI) runs now."""
    b = SessionBuilder("ses_loop")
    for i in range(8):
        _read_step(b, i, 2_500)
    db = tmp_path / "loop.db"
    _store(db, b)
    code, out, _ = _run(
        capsys, "prune", str(db), "--session", "ses_loop", *SIZED, "--dry-run", "--json"
    )
    planned = json.loads(out)["plans"]

    async def runtime_prune() -> list[Plan]:
        async with (
            SQLiteStore.open(db) as store,
            Runtime.open(store, model=MODEL, config=Config()) as runtime,
        ):
            return await (await runtime.session("ses_loop")).prune()

    done = trio.run(runtime_prune)
    assert code == 0 and planned, "old outputs worth clearing, mid tool loop"
    assert [(p["parts"], p["tokens"]) for p in planned] == [
        (len(p.part_ids), p.tokens) for p in done if isinstance(p, PrunePlan)
    ]
