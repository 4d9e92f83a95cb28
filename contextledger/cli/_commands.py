"""The CLI's commands: each reads arguments, calls the library and hands rows to output."""

from __future__ import annotations

import argparse
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import msgspec

from contextledger.cli._analysis import imported_left_out, left_out_lines
from contextledger.cli._diffing import stored_turn_views
from contextledger.cli._output import emit_json, emit_table, emit_text
from contextledger.config import Config
from contextledger.events._parts import (
    FilePart,
    ModelRef,
    Part,
    ReasoningPart,
    TextPart,
    ToolCompleted,
    ToolErrored,
    ToolPart,
    struct_tag,
)
from contextledger.history._projection import History
from contextledger.history._truncate import read_tool_output
from contextledger.history._view import ViewOptions, model_view
from contextledger.ledger import SessionLog
from contextledger.simulation import DEFAULT_WINDOW
from contextledger.store._sqlite import SQLiteStore
from contextledger.vocabulary._messages import (
    ModelFile,
    ModelMessage,
    ModelReasoning,
    ModelText,
    ModelToolCall,
    ModelToolResult,
)

_PREVIEW = 60
#: Parts that only mark model-call boundaries; the per-message table leaves them out.
_BOUNDARIES = frozenset({"step-start", "step-finish"})


async def sessions(args: argparse.Namespace) -> None:
    """List the sessions in ``args.db`` with their sizes."""
    async with SQLiteStore.open(args.db, create=False) as store:
        rows = []
        for stream in await store.streams():
            log = await SessionLog.open(store, stream)
            h = log.history
            h.load_all()  # every message's tokens, while the store is open
            rows.append(
                {
                    "session": stream,
                    "events": h.seq,
                    "messages": len(h.messages),
                    "tokens": sum(h.state.part_tokens.values()),
                    "title": h.state.started.title if h.state.started else "",
                }
            )
    if args.json:
        emit_json(rows)
    else:
        emit_table(rows, ["session", "events", "messages", "tokens", "title"])


async def history(args: argparse.Namespace) -> None:
    """Print the history of ``args.session``, as of ``args.at`` when given."""
    async with SQLiteStore.open(args.db, create=False) as store:
        projection = await _projection(store, args.session, args.at)
    _print_history(projection, args.json, parts=args.parts)


async def _projection(store: SQLiteStore, session: str, at: int | None) -> History:
    """The history of ``session`` now, or as of seq ``at``; ValueError when it is unknown."""
    if at is not None and at < 1:
        raise ValueError(f"--at must be a seq of 1 or more, not {at}")
    if at is None:
        projection = (await SessionLog.open(store, session)).history
        projection.load_all()  # read before the store closes
    else:
        projection = History.rebuild(session, await store.read(session, 1, max(at, 0)))
    if projection.seq == 0:
        raise ValueError(f"no session {session!r} in {store.path}")
    return projection


async def view(args: argparse.Namespace) -> None:
    """Print the model view of ``args.session`` as of ``args.at``; with ``args.strategy``,
    the view that strategy sent at model call ``args.turn`` (default: the last)."""
    if args.strategy is not None:
        if args.at is not None or args.model is not None or args.agent is not None:
            raise ValueError("--strategy does not combine with --at, --model or --agent")
        sent = await stored_turn_views(
            args.db,
            args.session,
            args.strategy,
            args.turn,
            provider=args.provider or "anthropic",
            window=DEFAULT_WINDOW if args.window is None else args.window,
        )
        messages, seq = list(sent.after), sent.seq
        extra: dict[str, Any] = {"strategy": sent.strategy, "turn": sent.turn, "calls": sent.calls}
        title = f"under {sent.strategy} at call {sent.turn} of {sent.calls} (at seq {seq})"
    else:
        if args.turn is not None or args.provider is not None or args.window is not None:
            raise ValueError("--turn, --provider and --window need --strategy")
        model = None
        if args.model is not None:
            provider, sep, model_id = args.model.partition("/")
            if not sep or not provider or not model_id:
                raise ValueError(f"--model must be provider/model, not {args.model!r}")
            model = ModelRef(provider_id=provider, model_id=model_id)
        async with SQLiteStore.open(args.db, create=False) as store:
            projection = await _projection(store, args.session, args.at)
        options = ViewOptions.from_config(Config(), model)  # what the runtime sends, by default
        messages = model_view(projection, msgspec.structs.replace(options, agent_id=args.agent))
        seq, extra, title = projection.seq, {}, f"at seq {projection.seq}"
        left_out = imported_left_out(projection)
        if left_out:
            extra["left_out_at_import"] = left_out
    if args.json:
        emit_json({"session_id": args.session, "seq": seq, **extra, "messages": messages})
        return
    rows = [
        {
            "#": i,
            "role": m.role + (" (synthetic)" if m.synthetic else ""),
            "source": m.source_id,
            "content": _content_preview(m),
        }
        for i, m in enumerate(messages)
    ]
    emit_table(
        rows,
        ["#", "role", "source", "content"],
        title=f"model view of {args.session} {title}",
    )
    left_out = extra.get("left_out_at_import", [])
    for line in left_out_lines(left_out, "left out at import") if left_out else ():
        emit_text(line)


def _content_preview(message: ModelMessage) -> str:
    pieces = []
    for c in message.content:
        match c:
            case ModelText(text=text) | ModelReasoning(text=text):
                pieces.append(text)
            case ModelToolCall(tool=tool):
                pieces.append(f"call {tool}")
            case ModelToolResult(tool=tool, output=output, is_error=is_error):
                pieces.append(f"{tool} {'error' if is_error else 'result'}: {output}")
            case ModelFile(mime=mime, filename=filename):
                pieces.append(f"[{mime} {filename or ''}]")
    # An empty piece (a reasoning whose text is encrypted, as Codex's is) is left out.
    body = " | ".join(filter(None, (" ".join(p.split()) for p in pieces)))
    return body if len(body) <= _PREVIEW else body[: _PREVIEW - 1] + "…"


async def output(args: argparse.Namespace) -> None:
    """Print lines ``args.offset`` on of a tool call's full output, as the paging tool reads
    them from the log; the call is named by its part id or by the provider's call id."""
    async with SQLiteStore.open(args.db, create=False) as store:
        projection = await _projection(store, args.session, None)
    page = read_tool_output(
        projection, _tool_part_id(projection, args.call), args.offset, args.limit
    )
    if args.json:
        emit_json(page)
    else:
        emit_text(page.answer())


def _tool_part_id(projection: History, call: str) -> str:
    """The part id of the tool call ``call`` names (a part id, or a provider's call id)."""
    for message in projection.messages:
        for part in message.parts:
            if isinstance(part, ToolPart) and call in (part.id, part.call_id):
                return part.id
    raise ValueError(f"no tool call {call!r} in session {projection.session_id!r}")


async def events(args: argparse.Namespace) -> None:
    """Print the raw events of ``args.session``."""
    async with SQLiteStore.open(args.db, create=False) as store:
        recorded = await store.read(args.session, args.from_seq, args.limit)
        if not recorded and await store.stream_version(args.session) == 0:
            raise ValueError(f"no session {args.session!r} in {args.db}")
    if args.json:
        emit_json(recorded)
        return
    emit_table(
        [
            {
                "seq": r.seq,
                "position": r.position,
                "type": struct_tag(r.event),
                "agent": r.event.agent_id,
                "time": _iso(r.event.time_ms),
            }
            for r in recorded
        ],
        ["seq", "position", "type", "agent", "time"],
    )


def _print_history(projection: History, as_json: bool, *, parts: bool = False) -> None:
    if as_json:
        emit_json(projection.state)
        return
    rows: list[dict[str, Any]] = []
    for message in projection.messages:
        role = message.role + (" (excluded)" if message.excluded else "")
        if parts:
            rows.extend(
                {
                    "message": message.id,
                    "role": role,
                    "part": struct_tag(part),
                    "tokens": projection.part_tokens(part.id),
                    "content": _preview(part),
                }
                for part in message.parts
            )
            continue
        kinds = Counter(struct_tag(p) for p in message.parts if struct_tag(p) not in _BOUNDARIES)
        rows.append(
            {
                "message": message.id,
                "role": role,
                "agent": message.agent_id,
                "parts": ", ".join(k if n == 1 else f"{k} x{n}" for k, n in kinds.items()),
                "tokens": sum(projection.part_tokens(p.id) for p in message.parts),
                "content": next(
                    (
                        preview
                        for p in message.parts
                        if struct_tag(p) not in _BOUNDARIES and (preview := _preview(p))
                    ),
                    "",
                ),
            }
        )
    columns = (
        ["message", "role", "part", "tokens", "content"]
        if parts
        else ["message", "role", "agent", "parts", "tokens", "content"]
    )
    emit_table(rows, columns, title=f"session {projection.session_id} at seq {projection.seq}")
    total = sum(projection.state.part_tokens.values())
    emit_text(f"\n{len(projection.messages):,} messages, {total:,} estimated tokens")


def _preview(part: Part) -> str:
    match part:
        case TextPart(text=text) | ReasoningPart(text=text):
            body = text
        case ToolPart(tool=tool, state=state):
            status = struct_tag(state)
            if isinstance(state, ToolCompleted):
                mark = " [cleared]" if state.compacted_ms is not None else ""
                body = f"{tool} {status}{mark}: {state.output}"
            elif isinstance(state, ToolErrored):
                body = f"{tool} error: {state.error}"
            else:
                body = f"{tool} {status}"
        case FilePart(mime=mime, filename=filename):
            body = f"{mime} {filename or ''}"
        case _:
            body = ""
    body = " ".join(body.split())
    return body if len(body) <= _PREVIEW else body[: _PREVIEW - 1] + "…"


def _iso(time_ms: int) -> str:
    return datetime.fromtimestamp(time_ms / 1000, UTC).isoformat(timespec="milliseconds")
