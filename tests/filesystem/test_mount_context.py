"""The mount context's background work (issue 53 point 5): a guess made ahead of a read runs
in the mount's nursery, and nothing it raises ends the mount."""

from __future__ import annotations

import trio
import trio.testing

from zarrfuse.filesystem.chunks.mount_context import MountContext
from zarrfuse.filesystem.chunks.recently_used import Trust
from zarrfuse.request_deadline import finished, serving, waited


def test_a_guess_past_its_requests_deadline_does_not_end_the_mount():
    """A guess inherits the deadline of the request that started it (stat-ahead on a store
    that stalls); its wait cut there is the guess's failure, not the mount's: before, the
    cut (a BaseException) ended the nursery, and the daemon with it."""
    context = MountContext(None, Trust(60.0))  # type: ignore[arg-type]  (nothing is read)
    ran: list[str] = []

    async def stalled_guess() -> None:
        await waited(trio.sleep(10))
        ran.append("never")

    async def stalled_guesses() -> None:  # two waits at once: the cut comes in a group
        async with trio.open_nursery() as nursery:
            for _ in range(2):
                nursery.start_soon(stalled_guess)

    async def main() -> None:
        async with context.running():
            token = serving(1.0)  # this task serves a request answered within 1 s
            context.start_soon(stalled_guess)
            context.start_soon(stalled_guesses)
            finished(token)
            await trio.sleep(5)  # the guess's deadline passes; the mount goes on
            ran.append("still serving")

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert ran == ["still serving"]
