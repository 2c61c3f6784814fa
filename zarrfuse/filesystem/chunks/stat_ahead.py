"""The next chunk files' sizes asked together in the background, on a read-only mount of a
store that cannot list (the kernel looks files up one at a time: a HEAD each)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from zarrfuse.filesystem.chunks.chunk_caches import KnownSizes
from zarrfuse.filesystem.chunks.grid_order import after
from zarrfuse.request_deadline import waited
from zarrfuse.storage.base import Stat

__all__ = ["STAT_AHEAD", "StatAhead"]

STAT_AHEAD = 8
"""Chunks after the one asked whose sizes are asked with it."""

Coords = tuple[int, ...]


class StatAhead:
    """Sizes of the chunks after one asked, asked ahead into ``sizes``."""

    def __init__(
        self,
        grid: Coords,
        sizes: KnownSizes,
        stat: Callable[[Coords], Awaitable[Stat | None]],
        start_soon: Callable[..., None],
    ) -> None:
        """``start_soon``: runs an ask in the mount's nursery (``MountContext``)."""
        self._grid = grid
        self._start_soon = start_soon
        self._sizes = sizes
        self._stat = stat
        self._asking: dict[Coords, trio.Event] = {}

    async def wait(self, coords: Coords) -> None:
        """Until the size of ``coords``, if asked ahead, is known (or its ask failed)."""
        event = self._asking.get(coords)
        if event is not None:
            await waited(event.wait())

    def after(self, coords: Coords) -> None:
        """``coords``' size was asked: ask the next chunks' in the background."""
        for following in after(coords, self._grid, STAT_AHEAD):
            if following in self._asking or self._sizes.get(following) is not None:
                continue
            self._asking[following] = trio.Event()
            self._start_soon(self._ask, following)

    async def _ask(self, coords: Coords) -> None:
        try:  # a failure is the mount's to log: the lookup itself asks again, and says why
            asked = self._sizes.asking()
            self._sizes.put(coords, await self._stat(coords), asked=asked)
        finally:
            self._asking.pop(coords).set()
