"""``cachesim``: the Anthropic cache simulator against the cache reads Claude Code recorded.

Each Claude Code transcript in the traces folder records, per API call, the tokens the
provider read from its cache. The transcript is replayed into a history; at each API call the
Anthropic request is built (``RequestBuilder``, with Claude Code's breakpoints: the last tool,
the system prompt and the last two messages) and the calls are simulated in time order with
the price entry of the call's model. Per call, the simulated cache-read *growth* (this call's
read minus the previous call's) is compared with the recorded one; growth, not the read
itself, so that the difference between Claude Code's own system prompt and tools and ours (a
constant offset) does not count.

Keys, per trace (under ``traces``): ``calls``, ``median_error`` and ``p90_error`` (absolute
tokens), ``median_recorded_growth`` (for scale), ``relative_median_error`` (median error over
median absolute recorded growth); overall: ``median_error``, ``p90_error`` over every call.
There is no target: the figure says how far the simulator can be trusted.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any, Final

from contextledger.bench._common import Options, table
from contextledger.bench._estimation import DEFAULT_TRACES, trace_dir
from contextledger.cachesim import read_growth_errors, sim_request, simulate
from contextledger.cachesim._blocks import SimRequest
from contextledger.config import Config, RequestConfig
from contextledger.events._catalogue import MessageAdded, RecordedEvent
from contextledger.events._parts import ModelRef, ToolSchema
from contextledger.history._projection import History
from contextledger.importers._claude_code import ImportedSession, import_claude_code
from contextledger.prices._tables import price_for
from contextledger.providers._anthropic import AnthropicMessages
from contextledger.request._builder import RequestBuilder, RequestInputs
from contextledger.request._system import SystemSegments, family_prompt

#: Claude Code's breakpoints (and the default ones): the tools, the system prompt and the
#: last two messages, so the cached prefix grows with every call.
CLAUDE_CODE_MARKS: Final = Config(request=RequestConfig(cache_messages=2))
TOOLS: Final = tuple(
    ToolSchema(name=n, description=f"The {n} tool.", input_schema={"type": "object"})
    for n in ("Bash", "Edit", "Glob", "Grep", "Read", "Task", "TodoWrite", "Write")
)


def _simulated_reads(session: ImportedSession) -> tuple[list[int], list[int]]:
    """Per API call of the main thread: the simulated and the recorded cache reads."""
    events = session.events
    calls = {c.message_id: c for c in session.calls}
    history = History(session.session_id)
    builder = RequestBuilder(AnthropicMessages(), CLAUDE_CODE_MARKS)
    requests: list[SimRequest] = []
    recorded: list[int] = []
    model_id = ""
    done = 0
    for index, event in enumerate(events):
        call = calls.get(event.message_id) if isinstance(event, MessageAdded) else None
        if call is None:
            continue
        history.apply_all(
            RecordedEvent(session.session_id, i, i, e)
            for i, e in enumerate(events[done:index], done + 1)
        )
        done = index
        model = ModelRef(provider_id="anthropic", model_id=call.model)
        inputs = RequestInputs(
            model=model,
            segments=SystemSegments(prompt=family_prompt("anthropic"), environment="<env>\n</env>"),
            tools=TOOLS,
        )
        built = builder.build(history, inputs)
        pin = built.prefix.event(session.session_id)
        if pin is not None:
            history.apply(RecordedEvent(session.session_id, done, 0, pin))
        requests.append(sim_request(built.request, call.time_ms / 1000, call.usage.output))
        recorded.append(call.usage.cache_read)
        model_id = model_id or call.model
    if not requests:
        return [], []
    result = simulate(requests, price_for(model_id, "anthropic"))
    return [r.cache_read for r in result.requests], recorded


def _growth(values: Sequence[int]) -> list[int]:
    return [b - a for a, b in zip([0, *values], values, strict=False)]


def run(options: Options) -> dict[str, Any]:
    """Measure and return the figures (see the module docstring)."""
    folder = trace_dir(DEFAULT_TRACES)
    paths = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    if not paths:
        return {"available": False, "reason": f"no Claude Code traces under {folder}"}
    per_trace: dict[str, Any] = {}
    all_errors: list[int] = []
    for path in paths:
        session = import_claude_code(path, session_id="ses_cachesim")
        simulated, recorded = _simulated_reads(session)
        if options.events:
            simulated, recorded = simulated[: options.events], recorded[: options.events]
        errors = read_growth_errors(simulated, recorded)
        growth = [abs(g) for g in _growth(recorded)]
        scale = statistics.median(growth) if growth else 0
        per_trace[path.name] = {
            "calls": len(simulated),
            "median_error": errors.median,
            "p90_error": errors.p90,
            "median_recorded_growth": scale,
            "relative_median_error": errors.median / scale if scale else None,
        }
        all_errors.extend(abs(e) for e in errors.errors)
    ordered = sorted(all_errors)
    return {
        "available": True,
        "traces": per_trace,
        "calls": len(ordered),
        "median_error": statistics.median(ordered) if ordered else 0,
        "p90_error": ordered[max(0, -(-9 * len(ordered) // 10) - 1)] if ordered else 0,
    }


def render(result: dict[str, Any]) -> str:
    """The figures as a table."""
    if not result.get("available"):
        return f"cachesim: not measured: {result.get('reason')}\n"
    rows = [["trace", "calls", "median error", "p90 error", "median recorded growth"]]
    for name, r in result["traces"].items():
        rows.append(
            [
                name,
                str(r["calls"]),
                f"{r['median_error']:,.0f}",
                f"{r['p90_error']:,.0f}",
                f"{r['median_recorded_growth']:,.0f}",
            ]
        )
    text = "cachesim: simulated vs recorded Anthropic cache-read growth per call (tokens)\n"
    text += table(rows, right=[False, True, True, True, True])
    text += (
        f"all {result['calls']} calls: median error {result['median_error']:,.0f}, "
        f"p90 error {result['p90_error']:,.0f} tokens\n"
    )
    return text
