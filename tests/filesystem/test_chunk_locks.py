"""One lock per chunk (``chunk_locks``): holders of one chunk take turns, other chunks' do
not wait, a block that fails lets the lock go, a wait cut at its request's deadline leaves
the lock to the others, and nothing is kept of a chunk nobody holds."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from zarrfuse.filesystem.chunks.chunk_locks import ChunkLocks
from zarrfuse.request_deadline import PastDeadline, finished, serving


def test_holders_of_one_chunk_take_turns_and_other_chunks_do_not_wait():
    locks = ChunkLocks()
    order: list[tuple[str, object]] = []

    async def hold(name: str, coords: tuple[int, ...]) -> None:
        async with locks.held(coords):
            order.append(("in", name))
            await trio.sleep(0.01)
            order.append(("out", name))

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(hold, "a", (0, 0))
            await trio.sleep(0.001)
            nursery.start_soon(hold, "b", (0, 0))
            nursery.start_soon(hold, "c", (0, 1))
        assert not locks._locks  # nothing kept of chunks nobody holds

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))  # virtual time
    assert order.index(("out", "a")) < order.index(("in", "b"))
    assert order.index(("in", "c")) < order.index(("out", "a"))


async def _free_and_forgotten(locks: ChunkLocks, coords: tuple[int, ...]) -> None:
    """The chunk's lock is taken at once now, and nothing is kept of it after."""
    with trio.fail_after(1):
        async with locks.held(coords):
            pass
    assert not locks._locks


def test_a_block_that_fails_lets_the_lock_go():
    locks = ChunkLocks()

    async def main() -> None:
        with pytest.raises(ValueError):
            async with locks.held((1,)):
                raise ValueError("the commit failed")
        await _free_and_forgotten(locks, (1,))

    trio.run(main)


def test_a_wait_cut_at_its_deadline_leaves_the_lock_to_the_holder():
    locks = ChunkLocks()

    async def main() -> None:
        held, done = trio.Event(), trio.Event()

        async def holder() -> None:
            async with locks.held((2,)):
                held.set()
                await done.wait()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(holder)
            await held.wait()
            token = serving(0.01)
            try:
                with pytest.raises(PastDeadline):
                    async with locks.held((2,)):
                        raise AssertionError("taken while held")
            finally:
                finished(token)
            done.set()
        await _free_and_forgotten(locks, (2,))

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_a_task_that_takes_a_chunk_it_holds_is_refused_and_leaves_nothing_behind():
    locks = ChunkLocks()

    async def main() -> None:
        async with locks.held((3,)):
            with pytest.raises(RuntimeError):
                async with locks.held((3,)):
                    pass
        await _free_and_forgotten(locks, (3,))

    trio.run(main)
