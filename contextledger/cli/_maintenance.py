"""``compact`` and ``prune``: change a stored session the way the runtime would, or, with
``--dry-run``, print what would be done without writing anything."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import msgspec

from contextledger.cli._output import emit_json, emit_table, emit_text
from contextledger.compaction._compactor import compact as run_compaction
from contextledger.compaction._summarizers import ExtractiveSummarizer
from contextledger.config import Config
from contextledger.events._catalogue import CompactionRequested, RecordedEvent
from contextledger.events._ids import IdGenerator
from contextledger.events._parts import ModelRef
from contextledger.history._projection import History
from contextledger.ledger import SessionLog
from contextledger.policy._cadence import estimate_view_tokens
from contextledger.policy._compaction import CompactionPlan, plan_compaction
from contextledger.policy._decisions import prune_plans, slice_pressure, slice_view
from contextledger.policy._overflow import usable
from contextledger.policy._prune import (
    Plan,
    PrunePlan,
    StripPlan,
    TrimPlan,
    plan_events,
)
from contextledger.store._sqlite import SQLiteStore
from contextledger.vocabulary._models import Model, ModelLimits


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _config(args: argparse.Namespace) -> Config:
    path: Path | None = args.config
    return Config.load(path) if path is not None else Config()


def _model(args: argparse.Namespace, history: History) -> Model:
    """The model the session is sized for: ``--model`` or the session's, with the window
    ``--context`` and output ``--output``."""
    ref = history.state.started.model if history.state.started else None
    if args.model is not None:
        provider, sep, model_id = args.model.partition("/")
        if not sep or not provider or not model_id:
            raise ValueError(f"--model must be provider/model, not {args.model!r}")
        ref = ModelRef(provider_id=provider, model_id=model_id)
    if args.context < 1 or args.output < 0:
        raise ValueError("--context must be positive and --output not negative")
    return Model(
        provider_id=ref.provider_id if ref else "unknown",
        model_id=ref.model_id if ref else "unknown",
        limits=ModelLimits(context=args.context, output=args.output),
    )


async def _log(store: SQLiteStore, session: str) -> SessionLog:
    log = await SessionLog.open(store, session)
    if log.history.seq == 0:
        raise ValueError(f"no session {session!r} in {store.path}")
    return log


def _view_size(history: History, config: Config, agent: str) -> dict[str, int]:
    """The size of the agent's model view as the decisions read it: messages, and tokens at
    four characters each of its JSON (``estimate_view_tokens``)."""
    view = slice_view(history, config, agent)
    return {"view_messages": len(view), "estimated_tokens": estimate_view_tokens(view)}


# --- compact ----------------------------------------------------------------------------------


async def compact(args: argparse.Namespace) -> None:
    """Compact ``args.session`` with the extractive summarizer (``--dry-run``: plan only)."""
    config = _config(args)
    if args.template is not None:
        config = msgspec.structs.replace(
            config, compaction=msgspec.structs.replace(config.compaction, template=args.template)
        )
    async with SQLiteStore.open(args.db, create=False) as store:
        log = await _log(store, args.session)
        model = _model(args, log.history)
        before = _view_size(log.history, config, args.agent)
        if args.dry_run:
            plan = _dry_plan(log.history, model, config, args.agent)
            _print_plan(log.session_id, plan, before, args.json)
            return
        result = await run_compaction(
            log,
            ExtractiveSummarizer(),
            model=model,
            config=config,
            clock=_now_ms,
            trigger="manual",
            agent_id=args.agent,
        )
        after = _view_size(log.history, config, args.agent)
    row = {
        "session": log.session_id,
        "outcome": result.outcome,
        "reason": result.reason,
        "request": result.request_message_id,
        "summary": result.summary_message_id,
        "tail_start_id": result.tail_start_id,
        "cleared": result.cleared,
        "messages_before": before["view_messages"],
        "messages_after": after["view_messages"],
        "tokens_before": before["estimated_tokens"],
        "tokens_after": after["estimated_tokens"],
    }
    if args.json:
        emit_json(row)
        return
    emit_table([row], list(row), title=f"compaction of {log.session_id}")
    if result.detail:
        emit_text(f"detail: {result.detail}")


def _dry_plan(history: History, model: Model, config: Config, agent: str) -> CompactionPlan:
    """The plan of a manual compaction requested now, on a copy of the history."""
    copy = History.from_snapshot(history.snapshot())
    last_message = history.messages[-1].id if history.messages else None
    now = _now_ms()
    request = CompactionRequested(
        session_id=history.session_id,
        agent_id=agent,
        time_ms=now,
        message_id=IdGenerator("msg", last_message).next(now),
        part_id=IdGenerator("prt", history.index.last_part_id or None).next(now),
        auto=False,
        trigger="manual",
    )
    copy.validate([request])
    copy.apply(RecordedEvent(history.session_id, history.seq + 1, 0, request))
    return plan_compaction(
        copy,
        request.message_id,
        config=config,
        usable_tokens=usable(model, config),
        agent_id=agent,
    )


def _print_plan(session: str, plan: CompactionPlan, before: dict[str, int], as_json: bool) -> None:
    row: dict[str, Any] = {
        "session": session,
        "head_messages": len(plan.head_ids),
        "head_first_id": plan.head_first_id,
        "head_last_id": plan.head_last_id,
        "tail_start_id": plan.tail_start_id,
        "tail_tokens": plan.tail_tokens,
        "head_tokens": plan.head_tokens,
        "chunks": len(plan.chunks),
        "previous_summary": plan.previous_summary is not None,
        "attempt": plan.attempt,
        "exhausted": plan.exhausted,
        "template": plan.template,
        "manifest": [f.path for f in plan.file_manifest],
        **before,
    }
    if as_json:
        emit_json({"dry_run": True, "plan": row})
        return
    columns = [c for c in row if c != "manifest"]
    emit_table([row], columns, title=f"compaction plan for {session} (dry run: nothing written)")
    if plan.file_manifest:
        emit_text("files to remember: " + ", ".join(row["manifest"]))


# --- prune ------------------------------------------------------------------------------------


async def prune(args: argparse.Namespace) -> None:
    """Prune ``args.session`` by the configured (or ``--mode``) rule (``--dry-run``: plan
    only), as ``SessionHandle.prune`` does: even when the after-turn prune is off, and in the
    middle of a tool loop."""
    config = _config(args)
    settings = config.prune
    if args.mode is not None:
        settings = msgspec.structs.replace(settings, mode=args.mode)
    async with SQLiteStore.open(args.db, create=False) as store:
        log = await _log(store, args.session)
        history = log.history
        model = _model(args, history)
        before = _view_size(history, config, args.agent)
        config = msgspec.structs.replace(config, prune=settings)
        level = (
            args.level
            if args.level is not None
            else slice_pressure(history, model, config, agent_id=args.agent)
        )
        now = _now_ms()
        plans = prune_plans(
            history, model, config, agent_id=args.agent, now_ms=now, force=True, level=level
        )
        if plans and not args.dry_run:
            await log.append(
                plan_events(plans, session_id=log.session_id, time_ms=now, agent_id=args.agent)
            )
        after = _view_size(log.history, config, args.agent)
    rows = [_plan_row(p) for p in plans]
    summary = {
        "session": log.session_id,
        "mode": settings.mode,
        "level": level,
        "dry_run": args.dry_run,
        "plans": rows,
        "tokens_before": before["estimated_tokens"],
        "tokens_after": after["estimated_tokens"],
    }
    if args.json:
        emit_json(summary)
        return
    what = "would do" if args.dry_run else "did"
    if not rows:
        emit_text(f"prune ({settings.mode}, level {level}): nothing to do for {log.session_id}")
        return
    emit_table(
        rows,
        ["action", "parts", "tokens", "reason"],
        title=f"prune ({settings.mode}, level {level}) {what} on {log.session_id}",
    )
    if not args.dry_run:
        tokens = (before["estimated_tokens"], after["estimated_tokens"])
        emit_text(f"estimated view tokens: {tokens[0]:,} -> {tokens[1]:,}")


def _plan_row(plan: Plan) -> dict[str, Any]:
    match plan:
        case PrunePlan():
            return {
                "action": "clear",
                "parts": len(plan.part_ids),
                "tokens": plan.tokens,
                "reason": plan.reason,
            }
        case TrimPlan():
            return {
                "action": "trim",
                "parts": 1,
                "tokens": None,
                "reason": f"keep {plan.head_chars}+{plan.tail_chars} chars",
            }
        case StripPlan():
            return {
                "action": "strip",
                "parts": len(plan.part_ids),
                "tokens": None,
                "reason": plan.reason,
            }
