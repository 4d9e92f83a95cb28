"""The mailbox protocol, on trio's mock clock: replies, back-pressure from the bounded
capacity, errors carried to the caller, cancelled callers, closing, a stopped actor."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
import trio

from contextledger.actors._mailbox import DEFAULT_CAPACITY, Mailbox


class Echo(msgspec.Struct, frozen=True):
    value: int


class Slow(msgspec.Struct, frozen=True):
    value: int
    seconds: float = 10.0


class Boom(msgspec.Struct, frozen=True):
    message: str


class Actor:
    """A test actor: echoes values, takes its time, or fails; records what it handled, when."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.mailbox: Mailbox[Any] = Mailbox(capacity)
        self.started: list[tuple[int, float]] = []
        self.handled: list[tuple[int, float]] = []
        self.busy = 0
        self.most_busy = 0

    async def handle(self, command: Any) -> Any:
        self.busy += 1
        self.most_busy = max(self.most_busy, self.busy)
        try:
            match command:
                case Echo(value=value):
                    self.handled.append((value, trio.current_time()))
                    return value * 2
                case Slow(value=value, seconds=seconds):
                    self.started.append((value, trio.current_time()))
                    await trio.sleep(seconds)
                    self.handled.append((value, trio.current_time()))
                    return value
                case Boom(message=message):
                    raise ValueError(message)
            raise TypeError(f"no command {type(command).__name__}")
        finally:
            self.busy -= 1


async def _ask_into(results: dict[int, Any], mailbox: Mailbox[Any], command: Slow) -> None:
    results[command.value] = await mailbox.ask(command)


@pytest.fixture
async def actor() -> AsyncIterator[Actor]:
    actor = Actor()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(actor.mailbox.serve, actor.handle)
        yield actor
        await actor.mailbox.close()


async def test_ask_returns_the_reply(actor: Actor) -> None:
    assert await actor.mailbox.ask(Echo(21)) == 42
    assert [value for value, _ in actor.handled] == [21]


async def test_a_mailbox_holds_at_least_one_command() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Mailbox[Any](0)


async def test_commands_are_handled_one_at_a_time_in_order(
    actor: Actor, autojump_clock: Any
) -> None:
    results: dict[int, Any] = {}
    async with trio.open_nursery() as nursery:
        for value in range(5):
            nursery.start_soon(_ask_into, results, actor.mailbox, Slow(value, seconds=10))
            await trio.sleep(0.001)  # each sender in turn
    assert results == {value: value for value in range(5)}
    assert actor.most_busy == 1
    assert [value for value, _ in actor.handled] == [0, 1, 2, 3, 4]
    # One after the other: 10 s each.
    finished = [round(at) for _, at in actor.handled]
    assert finished == [10, 20, 30, 40, 50]


async def test_a_full_mailbox_makes_the_sender_wait(autojump_clock: Any) -> None:
    actor = Actor(capacity=1)
    results: dict[int, Any] = {}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(actor.mailbox.serve, actor.handle)
        nursery.start_soon(_ask_into, results, actor.mailbox, Slow(1))  # being handled
        await trio.sleep(1)
        nursery.start_soon(_ask_into, results, actor.mailbox, Slow(2))  # fills the mailbox
        await trio.sleep(1)
        # A third sender finds no room: it waits for it, with nothing queued ...
        with trio.move_on_after(5) as waited:
            await actor.mailbox.ask(Slow(3))
        assert waited.cancelled_caught
        assert trio.current_time() == pytest.approx(7)
        # ... so, given up, its command is never handled.
        start = trio.current_time()
        await actor.mailbox.ask(Echo(4))  # waits until commands 1 and 2 are done
        assert trio.current_time() - start == pytest.approx(13)
        await actor.mailbox.close()
    assert [value for value, _ in actor.handled] == [1, 2, 4]
    assert results == {1: 1, 2: 2}


async def test_a_waiting_sender_gets_in_as_soon_as_there_is_room(autojump_clock: Any) -> None:
    actor = Actor(capacity=1)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(actor.mailbox.serve, actor.handle)
        for value in (1, 2, 3):
            nursery.start_soon(actor.mailbox.ask, Slow(value))
            await trio.sleep(0)
        # Command 1 is handled, 2 waits in the mailbox, 3 waits for room.
        await trio.sleep(1)
        assert [value for value, _ in actor.started] == [1]
        await trio.sleep(10)
        # 1 is done; 2 started at t=10, which made room for 3.
        assert [(value, round(at)) for value, at in actor.started] == [(1, 0), (2, 10)]
        await actor.mailbox.close()
    assert [(value, round(at)) for value, at in actor.handled] == [(1, 10), (2, 20), (3, 30)]


async def test_an_error_is_raised_in_the_caller_and_the_actor_keeps_serving(
    actor: Actor,
) -> None:
    with pytest.raises(ValueError, match="no such file"):
        await actor.mailbox.ask(Boom("no such file"))
    with pytest.raises(TypeError, match="no command Seq"):

        class Seq(msgspec.Struct, frozen=True):
            pass

        await actor.mailbox.ask(Seq())
    assert await actor.mailbox.ask(Echo(1)) == 2


async def test_a_cancelled_caller_does_not_break_the_actor(
    actor: Actor, autojump_clock: Any
) -> None:
    with trio.move_on_after(3) as scope:
        await actor.mailbox.ask(Slow(7, seconds=10))
    assert scope.cancelled_caught
    assert trio.current_time() == pytest.approx(3)
    # The work goes on and ends; the actor answers the next caller.
    assert await actor.mailbox.ask(Echo(5)) == 10
    assert trio.current_time() == pytest.approx(10)
    assert [value for value, _ in actor.handled] == [7, 5]


async def test_a_caller_cancelled_before_asking_sends_nothing(actor: Actor) -> None:
    with trio.CancelScope() as scope:
        scope.cancel()
        await actor.mailbox.ask(Echo(1))
    assert scope.cancelled_caught
    assert await actor.mailbox.ask(Echo(2)) == 4
    assert [value for value, _ in actor.handled] == [2]


async def test_close_lets_the_queued_commands_finish(autojump_clock: Any) -> None:
    actor = Actor()
    results: dict[int, Any] = {}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(actor.mailbox.serve, actor.handle)
        for value in range(3):
            nursery.start_soon(_ask_into, results, actor.mailbox, Slow(value))
        await trio.sleep(1)
        await actor.mailbox.close()
        with pytest.raises(trio.ClosedResourceError):
            await actor.mailbox.ask(Echo(9))
    # ``serve`` returned (the nursery exited) once every queued command had its reply.
    assert results == {0: 0, 1: 1, 2: 2}
    assert trio.current_time() == pytest.approx(30)


async def test_close_turns_away_a_sender_waiting_for_room(autojump_clock: Any) -> None:
    actor = Actor(capacity=1)
    results: dict[int, Any] = {}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(actor.mailbox.serve, actor.handle)
        nursery.start_soon(_ask_into, results, actor.mailbox, Slow(1))
        await trio.sleep(1)
        nursery.start_soon(_ask_into, results, actor.mailbox, Slow(2))
        await trio.sleep(1)

        async def close_soon() -> None:
            await trio.sleep(1)
            await actor.mailbox.close()

        nursery.start_soon(close_soon)
        with pytest.raises(trio.ClosedResourceError):
            await actor.mailbox.ask(Slow(3))
        assert trio.current_time() == pytest.approx(3)
    assert results == {1: 1, 2: 2}


async def test_callers_of_a_stopped_actor_get_an_error(autojump_clock: Any) -> None:
    actor = Actor()
    errors: list[BaseException] = []

    async def ask(command: Any) -> None:
        try:
            await actor.mailbox.ask(command)
        except trio.BrokenResourceError as exc:
            errors.append(exc)

    async with trio.open_nursery() as nursery:
        serving = trio.CancelScope()

        async def serve() -> None:
            with serving:
                await actor.mailbox.serve(actor.handle)

        nursery.start_soon(serve)
        for value in range(3):  # one being handled, two queued
            nursery.start_soon(ask, Slow(value))
        await trio.sleep(1)
        serving.cancel()
    assert len(errors) == 3 and actor.handled == []
    with pytest.raises(trio.BrokenResourceError):
        await actor.mailbox.ask(Echo(1))
