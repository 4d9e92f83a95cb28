"""The runtime driven by random commands against a simple model.

A hypothesis state machine records user messages, assistant steps (whole, or streamed with
their tool results arriving later), runs of turns with large outputs that the after-turn
prune clears, overflow errors; builds requests, compacts (the extractive summarizer, or an
empty summary that forces a rollback), prunes, cancels ``compact`` and ``build_request``
calls at a random checkpoint, and closes and reopens the runtime on its SQLite file (in
order, in order while a compaction its caller gave up on still runs, or by cancelling the
runtime in the middle of a compaction). After every step the log, the projection and the
view must keep the ``contextledger.testing`` invariants, no compaction may be left open,
replay must match, and every user text and tool output recorded must be in the log.

Hypothesis calls rules synchronously, so a trio loop runs on a thread of its own and holds
the runtime open; each rule runs its commands there with ``trio.from_thread.run``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Awaitable, Callable
from functools import partial
from itertools import count
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

import trio
import trio.testing
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from contextledger.actors import CompactionExhausted, Runtime, SessionHandle
from contextledger.actors._runtime import INTERRUPTED_DETAIL
from contextledger.compaction._summarizers import ExtractiveSummarizer, SummaryInput
from contextledger.config import Config, PruneConfig
from contextledger.events._catalogue import (
    CompactionRolledBack,
    MessageAdded,
    PartAdded,
    RecordedEvent,
    ToolStateChanged,
)
from contextledger.events._parts import (
    MessageError,
    ModelRef,
    TextPart,
    ToolCompleted,
    ToolErrored,
    ToolSchema,
    Usage,
)
from contextledger.history._view import ViewOptions
from contextledger.providers._errors import ContextOverflowError
from contextledger.request._builder import RequestInputs
from contextledger.request._system import SystemSegments
from contextledger.store._sqlite import SQLiteStore
from contextledger.testing import (
    check_history,
    check_live_view_matches,
    check_rebuild_matches,
    check_snapshot_matches,
    check_tool_pairs,
    check_view_deterministic,
)
from contextledger.vocabulary._models import Model, ModelLimits

T = TypeVar("T")
Reopen = Literal["in order", "during a compaction", "crash"]
REOPENS: Final[tuple[Reopen, ...]] = ("in order", "during a compaction", "crash")

SESSION: Final = "ses_stateful"
#: A small window, so that a few turns with a large reported usage fill it.
MODEL: Final = Model(
    provider_id="anthropic",
    model_id="claude-sonnet-4-5",
    limits=ModelLimits(context=200_000, output=32_000),
)
REF: Final = ModelRef(provider_id=MODEL.provider_id, model_id=MODEL.model_id)
INPUTS: Final = RequestInputs(
    model=REF,
    segments=SystemSegments(prompt="Be brief.", environment="<env/>"),
    tools=(ToolSchema(name="bash", description="Run.", input_schema={"type": "object"}),),
)
#: The after-turn prune on, with thresholds low enough for the session a few dozen steps
#: make (the defaults protect 40,000 tokens and clear no less than 20,000).
CONFIG: Final = Config(prune=PruneConfig(enabled=True, protect_tokens=4_000, minimum_tokens=2_000))
#: Tool output sizes in characters: short, and large enough (about 5,000 tokens) that two
#: of them cross the prune thresholds.
OUTPUT_SIZES: Final = (0, 20_000)
#: Reported usages: none, an ordinary turn, and one that reaches the compaction limit.
USAGES: Final = (None, Usage(input=1_200, output=80), Usage(input=190_000, output=500))
#: Checkpoints a summary takes; cancellations are drawn from 0 to twice this.
SUMMARY_CHECKPOINTS: Final = 6
#: How long a rule waits for the trio thread before the test fails instead of hanging.
THREAD_TIMEOUT_SECONDS: Final = 60.0


class SwitchableSummarizer:
    """The extractive summarizer, or (with ``empty``) one that writes nothing, so the
    compaction rolls back. Either takes ``SUMMARY_CHECKPOINTS`` checkpoints first, as a
    model call would, so that cancellations and closes can land while it works."""

    max_input_tokens: int | None = None

    def __init__(self) -> None:
        self.empty = False
        self._extractive = ExtractiveSummarizer()
        self.running = 0
        self.idle = trio.Event()

    async def summarize(self, task: SummaryInput) -> str:
        self.running += 1
        try:
            await _checkpoints(SUMMARY_CHECKPOINTS)
            if self.empty:
                return ""
            return await self._extractive.summarize(task)
        finally:
            self.running -= 1
            if self.running == 0:
                self.idle.set()
                self.idle = trio.Event()


class RuntimeHost:
    """A trio loop on its own thread with a ``Runtime`` open on an SQLite file. ``call``
    runs an async function there from the synchronous side; ``reopen`` closes the runtime
    and the store and opens them again on the same file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.summarizer = SwitchableSummarizer()
        self._ticks = count(1_900_000_000_000, 1_000)
        self._token: trio.lowlevel.TrioToken | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._stopping = False
        self._runtime: Runtime | None = None
        self._store: SQLiteStore | None = None
        self._work: trio.Nursery | None = None
        self._scope = trio.CancelScope()
        self._close = trio.Event()
        self._opened = trio.Event()
        self._thread = threading.Thread(target=self._run, name="trio-runtime", daemon=True)

    # --- the synchronous side -------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()
        if not self._started.wait(THREAD_TIMEOUT_SECONDS):
            raise TimeoutError("the runtime thread did not start")
        if self._error is not None:
            raise self._error

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        assert self._token is not None
        return trio.from_thread.run(fn, *args, trio_token=self._token)

    def stop(self) -> None:
        if self._token is not None and self._thread.is_alive():
            self.call(self._stop)
        self._thread.join(THREAD_TIMEOUT_SECONDS)
        if self._error is not None:
            raise self._error

    # --- the trio side --------------------------------------------------------------------------

    @property
    def runtime(self) -> Runtime:
        assert self._runtime is not None
        return self._runtime

    @property
    def store(self) -> SQLiteStore:
        assert self._store is not None
        return self._store

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:
            self._error = exc
        finally:
            self._started.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        while not self._stopping:
            self._close = trio.Event()
            async with SQLiteStore.open(self.path) as store:
                with trio.CancelScope() as self._scope:
                    async with (
                        Runtime.open(
                            store,
                            model=MODEL,
                            config=CONFIG,
                            summarizer=self.summarizer,
                            clock=lambda: next(self._ticks),
                        ) as runtime,
                        trio.open_nursery() as work,
                    ):
                        self._store, self._runtime, self._work = store, runtime, work
                        self._opened.set()
                        self._started.set()
                        await self._close.wait()
            self._store = self._runtime = self._work = None

    async def _stop(self) -> None:
        self._stopping = True
        self._close.set()

    async def handle(self) -> SessionHandle:
        return await self.runtime.session(SESSION)

    async def reopen(self, how: Reopen, checkpoints: int) -> None:
        """Close the runtime and open it again on the same file: ``"in order"``; in order
        while a compaction whose caller gave up ``checkpoints`` checkpoints in still runs
        (``"during a compaction"``); or by cancelling the runtime that many checkpoints into
        a compaction (``"crash"``)."""
        opened = self._opened = trio.Event()
        handle = await self.handle()
        if how == "crash":
            assert self._work is not None
            self._work.start_soon(handle.compact)
            await _checkpoints(checkpoints)
            self._scope.cancel()
        else:
            if how == "during a compaction":
                async with trio.open_nursery() as caller:
                    caller.start_soon(handle.compact)
                    await _checkpoints(checkpoints)
                    caller.cancel_scope.cancel()
            self._close.set()
        await opened.wait()

    async def settle(self) -> None:
        """Wait until every actor is idle (a cancelled caller's command still runs), a
        summary being written in a worker thread included."""
        await trio.testing.wait_all_tasks_blocked()
        while self.summarizer.running:
            await self.summarizer.idle.wait()
            await trio.testing.wait_all_tasks_blocked()


async def _checkpoints(n: int) -> None:
    for _ in range(n):
        await trio.lowlevel.checkpoint()


async def cancelled_after(checkpoints: int, fn: Callable[[], Awaitable[object]]) -> bool:
    """Run ``fn``, cancelled at its ``checkpoints``-th checkpoint; whether it was."""
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:

            async def cancel() -> None:
                await _checkpoints(checkpoints)
                scope.cancel()

            nursery.start_soon(cancel)
            with contextlib.suppress(CompactionExhausted):
                await fn()
            nursery.cancel_scope.cancel()
    return scope.cancelled_caught


class RuntimeMachine(RuleBasedStateMachine):
    """Drives one session of a runtime. The model: the user texts and tool outputs recorded,
    the assistant message being streamed (a new user message or step waits for its finish),
    the tool calls still without a result (they may get it after the finish), and whether
    the runtime ever crashed."""

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.host = RuntimeHost(directory / f"runtime-{next(_instances)}.db")
        self.host.start()
        self.counter = count()
        self.user_texts: list[str] = []
        self.user_ids: list[str] = []
        self.outputs: list[str] = []
        self.open_message: str | None = None
        self.open_calls = 0
        self.pending: list[str] = []
        self.crashed = False

    def teardown(self) -> None:
        self.host.stop()

    def _output(self, kind: str, size: int) -> str:
        """A tool output or error, unique, padded to ``size`` characters."""
        return f"{kind} {next(self.counter)} ".ljust(size, "x")

    def _do(self, fn: Callable[[SessionHandle], Awaitable[T]]) -> T:
        async def run() -> T:
            return await fn(await self.host.handle())

        return self.host.call(run)

    # --- recording ------------------------------------------------------------------------------

    @precondition(lambda self: self.open_message is None)
    @rule()
    def add_user(self) -> None:
        self._add_user()

    def _add_user(self) -> None:
        text = f"user message {next(self.counter)}: fix src/mod.py"

        async def add(session: SessionHandle) -> str:
            return await session.add_user(text)

        self.user_ids.append(self._do(add))
        self.user_texts.append(text)

    @precondition(lambda self: self.open_message is None)
    @rule(
        new_turn=st.booleans(),
        text=st.sampled_from(["", "Looking.", "Done."]),
        sizes=st.lists(st.sampled_from(OUTPUT_SIZES), max_size=2),
        usage=st.sampled_from(USAGES),
    )
    def record_assistant(
        self, new_turn: bool, text: str, sizes: list[int], usage: Usage | None
    ) -> None:
        """A whole assistant step, answering a new user message or the latest one."""
        if new_turn or not self.user_ids:
            self._add_user()
        tool_calls = [
            ("bash", {"command": f"pytest -k {n}"}, self._output("output", size))
            for n, size in enumerate(sizes)
        ]
        parent = self.user_ids[-1]

        async def record(session: SessionHandle) -> str:
            return await session.record_assistant(
                parent, text=text, tool_calls=tool_calls, usage=usage
            )

        self._do(record)
        self.outputs.extend(output for _, _, output in tool_calls)

    @precondition(lambda self: self.open_message is None)
    @rule(turns=st.integers(2, 4))
    def record_turns(self, turns: int) -> None:
        """Several turns in a row, each a tool step with a large output and an answer whose
        finish runs the after-turn prune."""
        cleared = 0
        for _ in range(turns):
            self._add_user()
            output = self._output("output", max(OUTPUT_SIZES))
            cleared += self._do(partial(_whole_turn, parent=self.user_ids[-1], output=output))
            self.outputs.append(output)
        event(f"record_turns: the after-turn prune {'cleared' if cleared else 'did nothing'}")

    @precondition(lambda self: self.user_ids and self.open_message is None)
    @rule()
    def start_assistant(self) -> None:
        parent = self.user_ids[-1]

        async def start(session: SessionHandle) -> str:
            return await session.start_assistant(parent)

        self.open_message = self._do(start)
        self.open_calls = 0

    @precondition(lambda self: self.open_message is not None)
    @rule(text=st.sampled_from(["Reading the file.", "Thinking it over."]), reasoning=st.booleans())
    def stream_text(self, text: str, reasoning: bool) -> None:
        message = self.open_message
        assert message is not None

        async def add(session: SessionHandle) -> str:
            return await session.add_text(message, text, reasoning=reasoning)

        self._do(add)

    @precondition(lambda self: self.open_message is not None and len(self.pending) < 3)
    @rule(tool=st.sampled_from(["bash", "read"]))
    def stream_tool_call(self, tool: str) -> None:
        message = self.open_message
        assert message is not None
        tool_input = {"n": next(self.counter)}

        async def call(session: SessionHandle) -> str:
            return await session.call_tool(message, tool, tool_input)

        self.pending.append(self._do(call))
        self.open_calls += 1

    @precondition(lambda self: self.pending)
    @rule(data=st.data(), error=st.booleans(), size=st.sampled_from(OUTPUT_SIZES))
    def tool_result(self, data: st.DataObject, error: bool, size: int) -> None:
        part_id = self.pending.pop(data.draw(st.integers(0, len(self.pending) - 1)))
        output = self._output("error" if error else "output", size)

        async def record(session: SessionHandle) -> None:
            await session.record_tool_result(part_id, output, error=error)

        self._do(record)
        self.outputs.append(output)

    @precondition(lambda self: self.open_message is not None)
    @rule(usage=st.sampled_from(USAGES))
    def finish(self, usage: Usage | None) -> None:
        message = self.open_message
        assert message is not None
        reason = "tool-calls" if self.open_calls else "stop"

        async def finish(session: SessionHandle) -> int:
            return len(await session.finish(message, finish=reason, usage=usage))

        event(f"finish: the after-turn prune {'cleared' if self._do(finish) else 'did nothing'}")
        self.open_message = None

    @precondition(lambda self: self.user_ids and self.open_message is None)
    @rule()
    def overflow_error(self) -> None:
        parent = self.user_ids[-1]
        error = ContextOverflowError(
            "anthropic", MessageError(name="ContextOverflowError", message="prompt is too long")
        )

        async def fail(session: SessionHandle) -> str:
            message = await session.start_assistant(parent)
            try:
                result = await session.record_error(message, error)
            except CompactionExhausted as exc:  # the turn has used its attempts
                assert str(exc).startswith("compaction exhausted")
                return "exhausted"
            assert result is not None
            return f"{result.outcome} {result.reason or ''} {result.detail[:50]}"

        event(f"overflow error: compaction {self._do(fail)}")

    # --- requests, compaction, pruning ----------------------------------------------------------

    @precondition(lambda self: self.user_ids and self.open_message is None)
    @rule()
    def build_request(self) -> None:
        async def build(session: SessionHandle) -> str:
            before = len((await session.history()).state.compactions)
            try:
                built = await session.build_request(INPUTS)
            except CompactionExhausted:
                return "compaction exhausted"
            assert built.request.messages
            after = len((await session.history()).state.compactions)
            return "compacted first" if after > before else "built"

        event(f"build_request: {self._do(build)}")

    @rule(empty=st.booleans())
    def compact(self, empty: bool) -> None:
        self.host.summarizer.empty = empty

        async def compact(session: SessionHandle) -> str:
            result = await session.compact()
            if empty:
                assert result.outcome == "rolled_back"
            return f"{result.outcome} {result.reason or ''} {result.detail[:50]}"

        event(f"compact: {self._do(compact)}")
        self.host.summarizer.empty = False

    @rule()
    def prune(self) -> None:
        async def prune(session: SessionHandle) -> int:
            return len(await session.prune())

        event(f"prune: {'cleared' if self._do(prune) else 'nothing to clear'}")

    @rule(
        what=st.sampled_from(["compact", "build_request"]),
        checkpoints=st.integers(0, 2 * SUMMARY_CHECKPOINTS + 6),
    )
    def cancel(self, what: str, checkpoints: int) -> None:
        self.host.summarizer.empty = False

        async def cancel(session: SessionHandle) -> bool:
            if what == "compact":
                return await cancelled_after(checkpoints, session.compact)
            return await cancelled_after(checkpoints, lambda: session.build_request(INPUTS))

        event(f"cancel {what}: {'cancelled' if self._do(cancel) else 'finished first'}")

    @rule(how=st.sampled_from(REOPENS), checkpoints=st.integers(0, 2 * SUMMARY_CHECKPOINTS + 6))
    def reopen(self, how: Reopen, checkpoints: int) -> None:
        self.host.summarizer.empty = False
        self.host.call(self.host.reopen, how, checkpoints)
        self.crashed = self.crashed or how == "crash"

    # --- invariants -----------------------------------------------------------------------------

    @invariant()
    def the_log_and_view_keep_their_invariants(self) -> None:
        self.host.call(self._check)

    async def _check(self) -> None:
        await self.host.settle()
        session = await self.host.handle()
        history = await session.history()
        recorded = await self.host.store.read(SESSION)
        check_history(history)
        check_rebuild_matches(history, recorded)
        check_snapshot_matches(history)
        options = ViewOptions.from_config(self.host.runtime.config, REF)
        check_view_deterministic(history, options, recorded=recorded)
        check_live_view_matches(history, options)
        check_tool_pairs(await session.view(model=REF))
        still_open = [
            c.request_message_id
            for c in history.state.compactions.values()
            if c.status == "requested"
        ]
        assert not still_open, f"compactions left open: {still_open}"
        if not self.crashed:
            # Closing in order finishes every compaction; only a crash leaves one for the
            # next load to roll back.
            interrupted = [
                r.event.request_message_id
                for r in recorded
                if isinstance(r.event, CompactionRolledBack)
                and r.event.detail == INTERRUPTED_DETAIL
            ]
            assert not interrupted, f"compactions left open by a close: {interrupted}"
        assert await session.replay()
        users, outputs = _recorded_texts(recorded)
        for text in self.user_texts:
            assert any(text in user for user in users), f"{text!r} is not in the log"
        missing = set(self.outputs) - outputs
        assert not missing, f"tool outputs not in the log: {sorted(missing)}"


_instances = count()


async def _whole_turn(session: SessionHandle, parent: str, output: str) -> int:
    """A tool step and an answer to ``parent``; how many prune plans the answer's finish
    carried out."""
    await session.record_assistant(
        parent, tool_calls=[("read", {"path": "src/mod.py"}, output)], usage=USAGES[1]
    )
    answer = await session.start_assistant(parent)
    await session.add_text(answer, "Done.")
    return len(await session.finish(answer, usage=USAGES[1]))


def _recorded_texts(recorded: list[RecordedEvent]) -> tuple[list[str], set[str]]:
    """The texts of user messages, and every tool output and error, in ``recorded``."""
    users: set[str] = set()
    texts: list[str] = []
    outputs: set[str] = set()
    for r in recorded:
        fact = r.event
        if isinstance(fact, MessageAdded) and fact.role == "user":
            users.add(fact.message_id)
        elif (
            isinstance(fact, PartAdded)
            and isinstance(fact.part, TextPart)
            and fact.part.message_id in users
        ):
            texts.append(fact.part.text)
        elif isinstance(fact, ToolStateChanged):
            if isinstance(fact.state, ToolCompleted):
                outputs.add(fact.state.output)
            elif isinstance(fact.state, ToolErrored):
                outputs.add(fact.state.error)
    return texts, outputs


def test_the_runtime_keeps_its_invariants_under_random_commands(tmp_path: Path) -> None:
    class OnTmpPath(RuntimeMachine):
        def __init__(self) -> None:
            super().__init__(tmp_path)

    run_state_machine_as_test(
        OnTmpPath,
        settings=settings(
            max_examples=50,
            stateful_step_count=40,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
