"""Embedding the runtime in an asyncio application, through trio's guest mode.

``embed_in_asyncio`` starts trio as a guest of the running asyncio loop
(``trio.lowlevel.start_guest_run``): both loops share the thread, trio's I/O wait runs on a
helper thread and its ticks are asyncio callbacks (a busy tick queued ``HOST_TURNS`` turns of
the asyncio loop later, so asyncio tasks woken meanwhile go first). Inside the guest it
opens the store and a ``Runtime``, and serves a bounded queue of calls. The asyncio side
holds a ``RuntimeBridge``: ``await bridge.call(fn)`` queues ``fn`` (a trio coroutine function
taking the runtime) with ``send_nowait`` (a trio channel may be fed from the host, which runs
on the same thread), a trio task runs it, and its result or exception resolves the asyncio
future the caller awaits. Calls run concurrently, each in a trio task of its own; a session
still serialises the commands sent to it.

    async with embed_in_asyncio(MemoryStore(), model=model) as bridge:
        async def turn(runtime: Runtime) -> str:
            session = await runtime.session("ses_1")
            return await session.add_user("Fix the failing test.")

        user_id = await bridge.call(turn)

Cancelling the asyncio task that awaits a call cancels the trio task running it. Leaving the
block closes the runtime in order (commands already sent are handled, a compaction in
progress completes or rolls back) and then the store, and returns only once the trio run has
finished. A host loop carries one guest run at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any, Final, Generic, Protocol, TypeVar

import trio

from contextledger.actors._runtime import Runtime, SessionHandle, wall_clock_ms
from contextledger.compaction._summarizers import Summarizer
from contextledger.config import Config
from contextledger.store._protocol import EventStore
from contextledger.vocabulary._models import Model

T = TypeVar("T")

#: Calls in flight at once; an asyncio task calling beyond this waits for a free slot (the
#: same back-pressure the actors' mailboxes give trio callers).
DEFAULT_MAX_CALLS: Final = 64
#: Turns of the host loop a guest batch that follows straight on another waits for. asyncio
#: runs a callback queued during a turn in the next turn, ahead of what the turn's I/O and
#: timers make ready; a task they wake takes two turns (the callback that resolves its
#: future, then its step). Queued for the next turn, every busy guest batch would run before
#: each of them, and the host task after two more batches; three turns later, the host's
#: woken tasks run first and wait for at most the batch in progress.
HOST_TURNS: Final = 3


class EmbeddedRuntimeClosed(RuntimeError):
    """A call was made after the embedded runtime was closed."""


class _Outcome(Protocol):
    """The result of the trio run (``outcome.Outcome``): its value, or its error raised."""

    def unwrap(self) -> object: ...


class _Call(Generic[T]):
    """One call from asyncio: the function to run in trio and the future it resolves."""

    def __init__(self, fn: Callable[[Runtime], Awaitable[T]], future: asyncio.Future[T]) -> None:
        self.fn = fn
        self.future = future
        self.scope = trio.CancelScope()

    async def run(self, runtime: Runtime) -> None:
        try:
            with self.scope:
                if not self.future.done():
                    result = await self.fn(runtime)
                    if not self.future.done():
                        self.future.set_result(result)
        except Exception as exc:
            if not self.future.done():
                self.future.set_exception(exc)
        finally:
            # Cancelled in trio (by the caller, or because the bridge is closing).
            if not self.future.done():
                self.future.cancel()


class RuntimeBridge:
    """The asyncio side of an embedded runtime. Its methods are asyncio coroutines."""

    def __init__(self, send: trio.MemorySendChannel[_Call[Any]], max_calls: int) -> None:
        self._send = send
        self._slots = asyncio.Semaphore(max_calls)

    async def call(self, fn: Callable[[Runtime], Awaitable[T]]) -> T:
        """Run ``fn(runtime)`` in a trio task and return its result (or raise its
        exception). Cancelling the awaiting task cancels the trio task."""
        async with self._slots:
            future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
            call = _Call(fn, future)
            try:
                self._send.send_nowait(call)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                raise EmbeddedRuntimeClosed("the embedded runtime is closed") from None
            try:
                return await future
            except asyncio.CancelledError:
                call.scope.cancel()
                raise

    async def call_session(self, session_id: str, fn: Callable[[SessionHandle], Awaitable[T]]) -> T:
        """Run ``fn(handle)`` with the handle of ``session_id`` (started as needed)."""

        async def with_handle(runtime: Runtime) -> T:
            return await fn(await runtime.session(session_id))

        return await self.call(with_handle)


async def _serve(
    runtime: Runtime,
    receive: trio.MemoryReceiveChannel[_Call[Any]],
    nursery_ready: Callable[[trio.Nursery], None],
) -> None:
    async with receive, trio.open_nursery() as nursery:
        nursery_ready(nursery)
        async for call in receive:
            nursery.start_soon(call.run, runtime)


@asynccontextmanager
async def embed_in_asyncio(
    store: EventStore | AbstractAsyncContextManager[EventStore],
    *,
    model: Model,
    config: Config | None = None,
    wire: str = "anthropic",
    summarizer: Summarizer | None = None,
    clock: Callable[[], int] = wall_clock_ms,
    idle_seconds: float = 300.0,
    max_calls: int = DEFAULT_MAX_CALLS,
) -> AsyncIterator[RuntimeBridge]:
    """Run a ``Runtime`` (arguments as ``Runtime.open``) as a trio guest of the running
    asyncio loop for the duration of the block, and yield the bridge that calls into it.

    ``store`` is a store, or an async context manager that opens one inside trio (such as
    ``SQLiteStore.open(path)``), which the block then also closes. Raises what opening the
    store or the runtime raised. If the block raises, calls still running are cancelled; if
    the task running the block is cancelled, the trio run is cancelled and waited for.
    """
    if max_calls < 1:
        raise ValueError("max_calls must be at least 1")
    loop = asyncio.get_running_loop()
    send, receive = trio.open_memory_channel[_Call[Any]](max_calls)
    opened: asyncio.Future[None] = loop.create_future()
    finished: asyncio.Future[_Outcome] = loop.create_future()
    serving: list[trio.Nursery] = []
    run_scope = trio.CancelScope()

    async def trio_main() -> None:
        with run_scope:
            async with AsyncExitStack() as stack:
                if isinstance(store, AbstractAsyncContextManager):
                    opened_store: EventStore = await stack.enter_async_context(store)
                else:
                    opened_store = store
                runtime = await stack.enter_async_context(
                    Runtime.open(
                        opened_store,
                        model=model,
                        config=config if config is not None else Config(),
                        wire=wire,
                        summarizer=summarizer,
                        clock=clock,
                        idle_seconds=idle_seconds,
                    )
                )
                opened.set_result(None)
                await _serve(runtime, receive, serving.append)

    def done(result: _Outcome) -> None:
        if not finished.done():
            finished.set_result(result)

    trio.lowlevel.start_guest_run(
        trio_main,
        run_sync_soon_threadsafe=loop.call_soon_threadsafe,
        run_sync_soon_not_threadsafe=lambda fn: _after_host_turns(loop, fn, HOST_TURNS),
        done_callback=done,
        host_uses_signal_set_wakeup_fd=True,
    )
    try:
        either: list[asyncio.Future[Any]] = [opened, finished]
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if not opened.done():
            finished.result().unwrap()  # what failed to open
            raise EmbeddedRuntimeClosed("the runtime stopped before it opened")
        try:
            yield RuntimeBridge(send, max_calls)
        except BaseException:
            for nursery in serving:
                nursery.cancel_scope.cancel()
            raise
        finally:
            send.close()
    except asyncio.CancelledError:
        run_scope.cancel()
        raise
    finally:
        await _wait_finished(finished, run_scope)
    finished.result().unwrap()


def _after_host_turns(
    loop: asyncio.AbstractEventLoop, fn: Callable[[], object], turns: int
) -> None:
    """Run ``fn`` in the ``turns``-th turn of ``loop`` from now (see ``HOST_TURNS``)."""
    if turns <= 1:
        loop.call_soon(fn)
    else:
        loop.call_soon(_after_host_turns, loop, fn, turns - 1)


async def _wait_finished(finished: asyncio.Future[_Outcome], run_scope: trio.CancelScope) -> None:
    """Wait for the trio run to end (a host loop must never stop under a running guest),
    cancelling it if the waiting task is cancelled meanwhile."""
    cancelled = False
    while not finished.done():
        try:
            await asyncio.shield(finished)
        except asyncio.CancelledError:
            cancelled = True
            run_scope.cancel()
    if cancelled:
        with contextlib.suppress(BaseException):
            finished.result().unwrap()
        raise asyncio.CancelledError
