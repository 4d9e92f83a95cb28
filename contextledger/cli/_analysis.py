"""``export-trace``, ``replay`` and ``simulate``: write a stored session back as a transcript,
check that a stored session replays to what was recorded, and price context strategies on
transcripts with the prompt-cache simulator; and the text of an import's report."""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from contextledger.cli._output import (
    Progress,
    amount,
    check_out,
    emit_json,
    emit_table,
    emit_text,
    write_out,
)
from contextledger.config import Config
from contextledger.events._catalogue import (
    LeftOut,
    RequestSent,
)
from contextledger.events._parts import ModelRef
from contextledger.history._projection import History, HistoryState
from contextledger.importers._export import export_trace
from contextledger.importers._report import ImportReport, by_reason
from contextledger.ledger import SessionLog
from contextledger.policy._cache import place_marks
from contextledger.providers._registry import WIRE_FORMATS
from contextledger.request._builder import RequestBuilder, RequestInputs
from contextledger.request._system import SystemSegments
from contextledger.simulation import (
    DEFAULT_STRATEGIES,
    DEFAULT_WINDOW,
    PROVIDERS,
    Provider,
    TraceResult,
    simulate_paths_async,
)
from contextledger.store._sqlite import SQLiteStore
from contextledger.strategies import StrategyError


async def export_trace_(args: argparse.Namespace) -> None:
    """Write ``args.session`` of ``args.db`` as a transcript of ``args.format`` (an OpenAI chat
    log or Claude Code JSON lines) to ``args.out`` (atomically), or to stdout."""
    if args.out is not None:
        check_out(args.out, "transcript")
    async with SQLiteStore.open(args.db, create=False) as store:
        recorded = await store.read(args.session, 1)
    if not recorded:
        raise ValueError(f"no session {args.session!r} in {args.db}")
    data = export_trace([r.event for r in recorded], args.format)
    if args.out is None:
        emit_text(data.decode().rstrip("\n"))
    else:
        write_out(args.out, data.decode())


#: How many items of a list the text output shows (line numbers of one left-out group, the
#: places a replayed projection differs).
LINES_SHOWN: Final = 8


def first_shown(items: Sequence[object]) -> str:
    """The first ``LINES_SHOWN`` of ``items``, comma-separated, then how many more."""
    more = len(items) - LINES_SHOWN
    return ", ".join(map(str, items[:LINES_SHOWN])) + (f", … (+{more:,})" if more > 0 else "")


def report_lines(report: ImportReport) -> list[str]:
    """An import report as text: the format, what was read and written, and what was left out,
    one group per kind and reason with the lines it was found on."""
    read = ", ".join(f"{n:,} {kind}" for kind, n in report.read.items())
    written = ", ".join(
        amount(n, kind) for kind, n in report.written.items() if not kind.startswith("event:")
    )
    lines = [
        f"format: {report.format}",
        f"read: {read or 'nothing'}",
        f"wrote: {written or 'nothing'}",
    ]
    return [*lines, *left_out_lines(report.left_out, "left out")]


def left_out_lines(items: Sequence[LeftOut], title: str) -> list[str]:
    """Left-out ``items`` as text under ``title``: their number, then one line per kind and
    reason with the lines they were found on."""
    if not items:
        return [f"{title}: nothing"]
    lines = [f"{title}: {len(items):,}"]
    for kind, reason, at in by_reason(items):
        lines.append(f"  {len(at):,} × {kind}: {reason} (line {first_shown(at)})")
    return lines


def imported_left_out(history: History) -> list[LeftOut]:
    """What the imports of ``history``'s session left out of it (``InputLeftOut`` events)."""
    return [item for event in history.state.left_out for item in event.items]


#: What ``projection_differences`` reads for an id one side does not hold.
_ABSENT: Final = object()


def projection_differences(replayed: HistoryState, loaded: HistoryState) -> list[str]:
    """Where ``loaded`` differs from ``replayed`` (both read whole): each field of
    ``HistoryState`` that differs, by name, or for one keyed by id (``messages``,
    ``part_tokens``, ``compactions``, ...) each id whose entry differs or is in one only
    (``messages[msg_…]``); ``messages`` alone when the same messages are in another order."""
    found: list[str] = []
    for name in replayed.__struct_fields__:
        want, got = getattr(replayed, name), getattr(loaded, name)
        if want == got:
            continue
        if name == "messages":
            want, got = {m.id: m for m in want}, {m.id: m for m in got}
        keys = []
        if isinstance(want, dict) and isinstance(got, dict):
            keys = [k for k in {**want, **got} if want.get(k, _ABSENT) != got.get(k, _ABSENT)]
        found.extend([f"{name}[{key}]" for key in keys] or [name])
    return found


def _prefix_hashes(
    history: History, sent: RequestSent, builders: dict[str, RequestBuilder], config: Config
) -> set[str]:
    """The prefix hashes of the request ``history`` implies for ``sent``'s model with the
    pinned prefix, in every wire format."""
    pin = history.pinned_prefix(sent.agent_id)
    if pin is None:
        return set()
    ref = ModelRef(provider_id=sent.provider_id, model_id=sent.model_id)
    inputs = RequestInputs(
        model=ref,
        segments=SystemSegments(prompt="", environment=""),
        agent=pin.profile.agent,
        system_mode=pin.profile.system_mode,
        tools=pin.tool_table,
        permissions=pin.profile.permissions,
    )
    hashes: set[str] = set()
    for name, builder in builders.items():
        request = builder.build(history, inputs).request
        wire = builder.wire
        marks = place_marks(
            config.request.cache_policy(),
            tools=len(pin.tool_table) if "tool" in wire.markable else 0,
            system_blocks=len(pin.profile.system) if "system" in wire.markable else 0,
            messages=request.messages if "message" in wire.markable else (),
            limit=wire.max_marks,
        )
        request = msgspec.structs.replace(
            request,
            system=pin.profile.system,
            tools=pin.tool_table,
            marks=marks if wire.max_marks else (),
        )
        encoded = builders[name].wire.encode(request)
        hashes.add(hashlib.sha256(encoded.prefix_before_last_message()).hexdigest())
    return hashes


async def replay(args: argparse.Namespace) -> None:
    """Check that ``args.session`` replays to its stored projection and recorded requests;
    raises ``ValueError`` (exit 1) on a mismatch, after printing the result."""
    async with SQLiteStore.open(args.db, create=False) as store:
        loaded = await SessionLog.open(store, args.session)
        if loaded.history.seq == 0:
            raise ValueError(f"no session {args.session!r} in {args.db}")
        loaded.history.load_all()  # compared whole below, after the store closes
        recorded = await store.read(args.session, 1)
    config = Config.load(args.config) if args.config is not None else Config()
    rebuilt = History(args.session)
    # One set per agent: each agent's requests hold its own slice.
    builders: dict[str, dict[str, RequestBuilder]] = {}
    requests = matched = 0
    mismatched: list[int] = []
    for event in recorded:
        if isinstance(event.event, RequestSent):
            requests += 1
            agent = event.event.agent_id
            if agent not in builders:
                builders[agent] = {
                    name: RequestBuilder(kind(), config, agent_id=agent)
                    for name, kind in WIRE_FORMATS.items()
                }
            hashes = _prefix_hashes(rebuilt, event.event, builders[agent], config)
            if event.event.prefix_hash in hashes:
                matched += 1
            else:
                mismatched.append(event.seq)
        rebuilt.apply(event)
    # The states, not their encodings: a projection restored from a snapshot holds its token
    # estimates in the order it read its messages, one rebuilt from events in event order.
    differences = projection_differences(rebuilt.state, loaded.history.state)
    projection_ok = not differences
    ok = projection_ok and not mismatched
    left_out = imported_left_out(rebuilt)
    result: dict[str, Any] = {
        "session": args.session,
        "events": len(recorded),
        "projection_matches": projection_ok,
        "projection_differences": differences,
        "requests": requests,
        "prefix_hashes_matched": matched,
        "mismatched_request_seqs": mismatched,
        "left_out_at_import": len(left_out),
        "ok": ok,
    }
    if args.json:
        emit_json(result)
    else:
        emit_text(f"session {args.session}: {len(recorded):,} events")
        for line in left_out_lines(left_out, "left out at import") if left_out else ():
            emit_text(line)
        if projection_ok:
            emit_text("projection from events equals the one loaded from the snapshot and tail")
        else:
            emit_text(
                "projection from events DIFFERS FROM the one loaded from the snapshot and "
                f"tail in {first_shown(differences)}"
            )
        if requests:
            emit_text(f"requests: {matched:,} of {requests:,} prefix hashes reproduced")
            if mismatched:
                emit_text("not reproduced at seq " + ", ".join(str(s) for s in mismatched))
        else:
            emit_text("no requests recorded")
    if not ok:
        raise ValueError(f"session {args.session!r} does not replay to what was recorded")


async def run_simulation(
    args: argparse.Namespace, label: str
) -> tuple[tuple[str, ...], tuple[Provider, ...], dict[str, dict[str, dict[str, TraceResult]]]]:
    """The strategies and providers ``args`` name (``--strategy``, ``--provider``; the defaults
    when absent) and ``args.paths`` simulated under them with ``args.window``, a progress bar
    labelled ``label`` on a terminal. Raises ``ValueError`` for a window below 1, an unknown
    strategy or a path that does not exist."""
    window: int = args.window
    if window < 1:
        raise ValueError("--window must be positive")
    strategies = tuple(args.strategy) if args.strategy else DEFAULT_STRATEGIES
    providers = tuple(args.provider) if args.provider else PROVIDERS
    try:
        with Progress(label) as bar:
            results = await simulate_paths_async(
                args.paths,
                strategies,
                providers,
                window,
                on_progress=bar.update,
                summarizer=args.summarizer,
            )
    except StrategyError as exc:
        raise ValueError(str(exc)) from exc
    if not results:
        raise ValueError(
            f"no transcript (.jsonl, .json, .traj) under {', '.join(map(str, args.paths))}"
        )
    return strategies, providers, results


async def simulate(args: argparse.Namespace) -> None:
    """Simulate ``args.paths`` under each strategy and provider; print the headline figures."""
    _, _, results = await run_simulation(args, "simulate")
    if args.json:
        emit_json(
            {
                trace: {
                    name: {provider: r.summary() for provider, r in by_provider.items()}
                    for name, by_provider in by_strategy.items()
                }
                for trace, by_strategy in results.items()
            }
        )
        return
    rows = [
        {"trace": trace, "strategy": name, "provider": provider, **r.summary()}
        for trace, by_strategy in results.items()
        for name, by_provider in by_strategy.items()
        for provider, r in by_provider.items()
    ]
    emit_table(
        rows,
        [
            "trace",
            "strategy",
            "provider",
            "calls",
            "peak_prompt",
            "billed_input_cost",
            "summary_cost",
            "cost",
            "lower_bound",
            "cost_vs_lower_bound",
            "retention",
            "retention_older",
            "compactions",
            "over_window_calls",
            "failed_at",
        ],
    )


__all__ = [
    "DEFAULT_WINDOW",
    "export_trace_",
    "imported_left_out",
    "left_out_lines",
    "replay",
    "report_lines",
    "run_simulation",
    "simulate",
]
