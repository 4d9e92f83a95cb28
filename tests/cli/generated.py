"""What the CLI tests share: running the command, and databases of generated sessions written
the way a live agent appends."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from contextledger.cli._main import main
from contextledger.events._catalogue import Event, MessageAdded
from contextledger.ledger import SessionLog
from contextledger.simulation._synthetic import synthetic_session
from contextledger.store._sqlite import SQLiteStore


def write_generated(path: Path, session_id: str, *, turns: int, seed: int = 7) -> None:
    """Append ``synthetic_session(session_id, seed, turns)`` to the store at ``path``, one
    batch per message added."""
    batches: list[list[Event]] = []
    for event in synthetic_session(session_id, seed=seed, turns=turns):
        if not batches or isinstance(event, MessageAdded):
            batches.append([])
        batches[-1].append(event)

    async def write() -> None:
        async with SQLiteStore.open(path) as store:
            log = await SessionLog.open(store, session_id)
            for batch in batches:
                await log.append(batch)

    trio.run(write)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``contextledger ARGV``: the exit code, and what it wrote to stdout and stderr (not
    what was written before it: a log line of a store written in the test, which structlog's
    defaults print to stdout, such as the checkpointer's ``checkpoint postponed``)."""
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
