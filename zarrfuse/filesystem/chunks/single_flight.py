"""One request at a time per key: callers asking for the same thing together share one ask.

Windows of a whole image decoded at once ask for the same store directory's listing; each
asked the store itself (up to 63 listings of 16 directories for one image on S3). Here the
first caller asks; the others wait for it, then find its answer in the cache.
"""

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
        """True for the caller that asks; False for one that waited for another's ask to
        end (it looks in the cache, and asks itself only if that ask failed)."""
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
