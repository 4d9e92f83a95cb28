"""Bounded mailboxes: how actors receive typed commands and send typed replies.

An actor reads ``Envelope``s from a memory channel of fixed capacity, so a busy actor slows
its callers down instead of queueing without bound. ``ask`` sends a command with a reply slot
and waits for the answer; an exception raised while handling the command is carried back and
raised in the caller.

A round trip costs two task switches and nothing else: the command goes into the channel
without a scheduling point when there is room (the caller waits for its reply next, which is
one), the actor takes the commands queued meanwhile without yielding between them, and the
reply wakes the caller directly (a ``Reply`` slot, not a channel per command).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

import msgspec
import trio

Command = TypeVar("Command", bound=msgspec.Struct)

#: Commands an actor's mailbox holds before senders wait.
DEFAULT_CAPACITY = 64


class Failed(msgspec.Struct, frozen=True):
    """The reply to a command whose handling raised ``error``."""

    error: Any


class Reply:
    """Where the reply to one command goes: the asking task waits here, the actor fills it
    once. A caller that stopped waiting (cancelled) leaves the reply to be dropped."""

    __slots__ = ("_done", "_result", "_task", "_waiting")

    def __init__(self) -> None:
        self._task = trio.lowlevel.current_task()
        self._result: Any = None
        self._done = False
        self._waiting = False

    def send(self, result: Any) -> None:
        """Deliver ``result`` (a ``Failed`` to raise an error); later calls are ignored."""
        if self._done:
            return
        self._done = True
        self._result = result
        if self._waiting:
            self._waiting = False
            trio.lowlevel.reschedule(self._task)

    async def wait(self) -> Any:
        """The reply (raising a ``Failed`` reply's error)."""
        if not self._done:
            self._waiting = True
            await trio.lowlevel.wait_task_rescheduled(self._abort)
        result = self._result
        if isinstance(result, Failed):
            raise result.error
        return result

    def _abort(self, _: Any) -> trio.lowlevel.Abort:
        self._waiting = False
        self._done = True
        return trio.lowlevel.Abort.SUCCEEDED


class Envelope(msgspec.Struct, frozen=True):
    """A command and where to send its reply."""

    command: Any
    reply: Reply


class Mailbox(Generic[Command]):
    """The inbox of one actor."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("a mailbox holds at least one command")
        self._send, self._receive = trio.open_memory_channel[Envelope](capacity)

    async def ask(self, command: Command) -> Any:
        """Send ``command`` and wait for the reply (raising what the handler raised).

        Waits while the mailbox is full. Raises ``trio.ClosedResourceError`` once the mailbox
        is closed, and ``trio.BrokenResourceError`` when the actor stops without handling the
        command."""
        await trio.lowlevel.checkpoint_if_cancelled()
        envelope = Envelope(command, Reply())
        try:
            self._send.send_nowait(envelope)
        except trio.WouldBlock:
            await self._send.send(envelope)
        return await envelope.reply.wait()

    async def serve(self, handle: Callable[[Any], Awaitable[Any]]) -> None:
        """Handle commands one at a time until the mailbox is closed. If this task stops
        otherwise (cancelled), the command being handled and those queued are answered with
        ``trio.BrokenResourceError``."""
        receive = self._receive
        envelope: Envelope | None = None
        try:
            while True:
                try:
                    envelope = receive.receive_nowait()
                except trio.WouldBlock:
                    try:
                        envelope = await receive.receive()
                    except trio.EndOfChannel:
                        return
                except trio.EndOfChannel:
                    return
                try:
                    result: Any = await handle(envelope.command)
                except Exception as exc:  # carried back to the caller
                    result = Failed(exc)
                # A caller that went away (cancelled) misses the reply; the work is done anyway.
                envelope.reply.send(result)
                envelope = None
        finally:
            if envelope is not None:
                envelope.reply.send(_stopped())
            while True:
                try:
                    receive.receive_nowait().reply.send(_stopped())
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
            receive.close()

    async def close(self) -> None:
        """Stop accepting commands; ``serve`` returns once the queued ones are handled.
        Senders still waiting for room get ``trio.ClosedResourceError``."""
        await self._send.aclose()


def _stopped() -> Failed:
    return Failed(trio.BrokenResourceError("the actor stopped before answering"))
