"""The ledger benchmark runs end to end at a tiny size and reports every figure (no timing
assertions: benchmarks are never pass/fail in tests)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import apsw
import pytest
import trio

from contextledger.bench import BENCHMARKS
from contextledger.bench import _ledger as ledger
from contextledger.bench.__main__ import main
from contextledger.bench._common import synthetic_corpus
from contextledger.bench._ledger import BATCH, CEILINGS, SCALING_TARGETS, TARGETS
from contextledger.store import SQLiteStore
from contextledger.store import _sqlite as sqlite_store

FIGURES = (
    "single_appends_per_s",
    "batched_appends_per_s",
    "batched_full_appends_per_s",
    "replay_events_per_s",
    "replay_mb_per_s",
    "floor_insert_per_s",
    "floor_insert_uncheckpointed_per_s",
    "floor_insert_batched_per_s",
    "floor_insert_batched_full_per_s",
    "floor_single_commit_per_s",
    "floor_read_decode_per_s",
    "eventsourcing_batched_per_s",
    "eventsourcing_read_decode_per_s",
)
RATIOS = ("batched_vs_floor", "batched_vs_eventsourcing", "single_vs_floor", "replay_vs_floor")


def test_corpus_has_exactly_the_events_asked_for() -> None:
    corpus = synthetic_corpus(700, turns=2)
    assert sum(len(events) for _, events in corpus) == 700
    assert len({stream for stream, _ in corpus}) == len(corpus) > 1


def test_json(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(ledger, "TURNS", 2)  # several short sessions
    assert main(["ledger", "--json", "--events", "900"]) == 0
    result = json.loads(capsys.readouterr().out)  # exactly one JSON object
    assert result["events"] == 900 and result["single_events"] == 900
    assert result["sessions"] > 1
    assert result["batch_size"] == BATCH and result["encoded_mb"] > 0
    for key in FIGURES:
        assert key in result
    for key in RATIOS:
        assert key in result and key in result["met"]
        assert result["targets"][key] == TARGETS[key]
    assert "eventsourcing_synchronous" in result and "eventsourcing_unavailable" in result
    numbers = [*FIGURES, *RATIOS]
    if result["eventsourcing_unavailable"] is not None:
        # Without the peer its figures and ratio are null, with the reason given.
        numbers = [k for k in numbers if "eventsourcing" not in k]
        assert result["batched_vs_eventsourcing"] is None
    else:
        assert result["eventsourcing_synchronous"] in ("OFF", "NORMAL", "FULL", "EXTRA")
    for key in numbers:
        assert isinstance(result[key], float) and result[key] > 0, key
    for key in RATIOS:
        assert result["met"][key] is None or isinstance(result["met"][key], bool)
    assert result["ceilings"] == CEILINGS
    assert result["scaling_targets"] == SCALING_TARGETS
    assert result["scaling_events"] == [900, 900]  # --events sets both sizes
    for key in (*CEILINGS, *SCALING_TARGETS):
        assert isinstance(result[key], float) and result[key] > 0, key
        assert isinstance(result["met"][key], bool), key


def test_the_unchecked_run_replaces_the_checksums_only_inside_it() -> None:
    crc = sqlite_store.batch_crc  # type: ignore[attr-defined]
    with ledger._without_checksums():
        assert sqlite_store.batch_crc(1, 1, 1, 1, b"x") == 0  # type: ignore[attr-defined]
        assert sqlite_store.stream_crc(1, 1, "s") == 0  # type: ignore[attr-defined]
    assert sqlite_store.batch_crc is crc  # type: ignore[attr-defined]
    assert crc(1, 1, 1, 1, b"x") != 0


def test_the_floor_writes_the_rows_the_store_writes(tmp_path: Path) -> None:
    corpus = ledger._Corpus(2500)
    stored = tmp_path / "stored.db"

    async def append() -> None:
        async with SQLiteStore.open(stored) as store:
            await ledger._appended(store, corpus.batches)

    trio.run(append)
    floor = tmp_path / "floor.db"
    ledger._floor_insert(str(floor), [corpus.rows])
    select = "SELECT position, stream, seq, count, data, crc FROM batches ORDER BY position"
    rows = [apsw.Connection(str(path)).execute(select).fetchall() for path in (stored, floor)]
    assert rows[0] == rows[1] == corpus.rows


def test_table_and_all(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["all", "--events", "250"]) == 0
    out = capsys.readouterr().out
    assert "batched_vs_floor" in out and "floor: read + decode" in out
    assert main(["all", "--json", "--events", "250"]) == 0
    assert set(json.loads(capsys.readouterr().out)) == set(BENCHMARKS)


def test_rejects_unknown_names() -> None:
    with pytest.raises(SystemExit):
        main(["nope"])


def test_runs_without_the_peer(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "eventsourcing", None)  # makes the import fail
    assert main(["ledger", "--json", "--events", "200"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert "not installed" in result["eventsourcing_unavailable"]
    assert result["eventsourcing_batched_per_s"] is None
    assert (
        result["batched_vs_eventsourcing"] is None
        and result["met"]["batched_vs_eventsourcing"] is None
    )
    assert result["batched_vs_floor"] > 0
