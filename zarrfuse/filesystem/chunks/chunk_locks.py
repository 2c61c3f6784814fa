"""One lock per chunk: a reader opens all of a chunk's parts between two commits, never
across one, and two commits of one chunk never interleave."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager

import trio

from zarrfuse.request_deadline import waited

__all__ = ["ChunkLocks"]

Coords = tuple[int, ...]


class ChunkLocks:
    """Locks by grid coordinates, made when first wanted and dropped when nobody holds or
    waits for them (a mount touches millions of chunks, a few at a time)."""

    def __init__(self) -> None:
        self._locks: dict[Coords, _Lock] = {}

    def held(self, coords: Coords) -> _Held:
        """``async with`` it to hold the chunk's lock: a free one is taken without a trip
        through the scheduler; a wait is cut at the request's deadline."""
        return _Held(self._locks, coords)

    @asynccontextmanager
    async def all_held(self, coords: Collection[Coords]) -> AsyncIterator[None]:
        """Hold every one of these chunks' locks for the block, taken in one order for every
        caller (sorted), so two callers never wait for each other."""
        async with contextlib.AsyncExitStack() as stack:
            for c in sorted(set(coords)):
                await stack.enter_async_context(self.held(c))
            yield


class _Lock:
    """A chunk's lock and how many hold it or wait for it."""

    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = trio.Lock()
        self.users = 0


class _Held:
    """One hold of a chunk's lock (a class: a generator cost 8.7 us a hold against 5.6)."""

    __slots__ = ("_coords", "_entry", "_locks")

    def __init__(self, locks: dict[Coords, _Lock], coords: Coords) -> None:
        self._locks, self._coords = locks, coords
        self._entry: _Lock | None = None

    async def __aenter__(self) -> None:
        entry = self._locks.get(self._coords)
        if entry is None:
            entry = self._locks[self._coords] = _Lock()
        self._entry = entry
        entry.users += 1
        try:
            try:
                entry.lock.acquire_nowait()
            except trio.WouldBlock:
                await waited(entry.lock.acquire())
        except BaseException:  # not taken (cut at the deadline, or a task taking it twice)
            self._leave()
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._entry is not None
        self._entry.lock.release()
        self._leave()

    def _leave(self) -> None:
        entry = self._entry
        assert entry is not None
        entry.users -= 1
        if entry.users == 0:  # an entry with users is the only one its chunk has
            del self._locks[self._coords]
