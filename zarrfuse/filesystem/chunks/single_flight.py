"""One request at a time per key: callers asking for the same thing together wait for the
first, then find its answer in the cache (windows of one image listing one directory)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager
from typing import Generic, TypeVar

import trio

from zarrfuse.request_deadline import waited

__all__ = ["SingleFlight"]

K = TypeVar("K", bound=Hashable)


class SingleFlight(Generic[K]):
    """Asks in flight, by key (trio tasks of one thread)."""

    def __init__(self) -> None:
        self._running: dict[K, trio.Event] = {}

    @asynccontextmanager
    async def first(self, key: K) -> AsyncIterator[bool]:
        """True for the caller that asks; False for one that waited for another's ask."""
        running = self._running.get(key)
        if running is not None:
            await waited(running.wait())
            yield False
            return
        event = self._running[key] = trio.Event()
        try:
            yield True
        finally:
            del self._running[key]
            event.set()
