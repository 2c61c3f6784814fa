"""Callers asking for the same key together share one ask; a failed ask leaves the next
caller to ask again. On trio's MockClock: the sleeps only order the tasks, in virtual time."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from zarrfuse.filesystem.chunks.single_flight import SingleFlight


def test_the_first_caller_asks_and_the_others_wait_for_it():
    flights: SingleFlight[str] = SingleFlight()
    asked: list[int] = []
    roles: list[bool] = []

    async def caller(n: int) -> None:
        async with flights.first("dir") as mine:
            roles.append(mine)
            if mine:
                asked.append(n)
                await trio.sleep(0.05)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for n in range(5):
                nursery.start_soon(caller, n)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert len(asked) == 1 and roles.count(True) == 1 and len(roles) == 5


def test_an_ask_that_fails_wakes_the_waiters():
    flights: SingleFlight[str] = SingleFlight()
    woke: list[bool] = []

    async def failing() -> None:
        async with flights.first("dir"):
            await trio.sleep(0.02)
            raise OSError("the store failed")

    async def waiter() -> None:
        await trio.sleep(0.005)
        async with flights.first("dir") as mine:
            woke.append(mine)

    async def main() -> None:
        with pytest.raises((OSError, ExceptionGroup)):  # grouped or not, by trio release
            async with trio.open_nursery() as nursery:
                nursery.start_soon(failing)
                nursery.start_soon(waiter)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert woke == [False]
    async def again() -> bool:
        async with flights.first("dir") as mine:
            return mine

    assert trio.run(again) is True  # nothing left running: the next caller asks
