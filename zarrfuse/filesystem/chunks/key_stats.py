"""Chunk sizes learnt key by key (a web server; a local directory too large to list in full),
each answer kept for the listing TTL. Why: docs/performance.md, "Listings kept"."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import trio

from zarrfuse.filesystem.chunks.counters import Counters
from zarrfuse.filesystem.chunks.recently_used import RecentlyUsed, Trust
from zarrfuse.storage.base import Backend, Stat, child_key

__all__ = ["ASKED_KEYS", "KeyStats"]

ASKED_KEYS = 1 << 18
"""Keys whose answer (size, or absent) is kept for the TTL."""


class KeyStats:
    """Each key's own answer (its size and time, or None: absent), kept for the TTL."""

    def __init__(
        self, backend: Backend, run: Callable[..., Awaitable[Any]], trust: Trust,
        counters: Counters,
    ) -> None:
        self._backend = backend
        self._run = run
        self._counters = counters
        self._answers: RecentlyUsed[str, Stat | None] = RecentlyUsed(
            ASKED_KEYS, trust=trust)

    def put(self, key: str, stat: Stat | None) -> None:
        """What a commit or a removal just made of ``key``."""
        self._answers.put(key, stat)

    def drop(self, key: str) -> None:
        self._answers.drop(key)

    def clear(self) -> None:
        self._answers.clear()

    def known(self, keys: Iterable[str]) -> list[Stat | None] | None:
        """The kept answers for all of ``keys`` (None in the list: absent); None unless
        every one is kept."""
        out = []
        for key in keys:
            entry = self._answers.entry(key)
            if entry is None:
                return None
            out.append(entry[1])
        return out

    async def ask(self, directory: str, names: Iterable[str], *, together: bool) -> dict[str, Stat]:
        """Which of ``names`` in ``directory`` exist, with their sizes; ``together``: a request
        each, all at once (a web server), else one worker-thread call (a local directory)."""
        found: dict[str, Stat] = {}
        missing: list[str] = []
        for name in dict.fromkeys(names):
            entry = self._answers.entry(child_key(directory, name))
            if entry is None:
                missing.append(name)
            elif entry[1] is not None:
                found[name] = entry[1]
        if not missing:
            self._counters.cache["listing_hit"] += 1
            return found
        self._counters.store["stat"] += len(missing)
        ticket = self._answers.ticket()
        if together:
            async with trio.open_nursery() as nursery:
                for name in missing:
                    nursery.start_soon(self._ask_one, directory, name, found, ticket)
            return found
        stats = await self._run(self._backend.stat_names, directory, missing)
        for name, stat in zip(missing, stats, strict=True):
            self._learnt(directory, name, stat, found, ticket)
        return found

    async def _ask_one(self, directory: str, name: str, found: dict[str, Stat],
                       ticket: int) -> None:
        stat = await self._run(self._backend.stat, child_key(directory, name))
        self._learnt(directory, name, stat, found, ticket)

    def _learnt(self, directory: str, name: str, stat: Stat | None,
                found: dict[str, Stat], ticket: int) -> None:
        """Keep the store's answer for ``name`` (unless the key changed since ``ticket``);
        a present key joins ``found``."""
        self._answers.put(child_key(directory, name), stat, ticket=ticket)
        if stat is not None:
            found[name] = stat
