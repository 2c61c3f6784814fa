"""What the store's listings say about one array's chunks: which are stored, their sizes.
Why: docs/performance.md, "Listings kept"."""

from __future__ import annotations

import errno
import os
from bisect import bisect_left, bisect_right
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from typing import Any, TypeVar

import trio

from zarrfuse.extensions.chunk_keys import last_name_tail
from zarrfuse.extensions.transformers import ConcatParts
from zarrfuse.filesystem.chunks.counters import Counters
from zarrfuse.filesystem.chunks.grid_order import after
from zarrfuse.filesystem.chunks.key_stats import KeyStats
from zarrfuse.filesystem.chunks.recently_used import RecentlyUsed, Trust
from zarrfuse.filesystem.chunks.single_flight import SingleFlight
from zarrfuse.filesystem.chunks.stored_set import KeyShape, StoredSet
from zarrfuse.storage.base import Backend, Stat
from zarrfuse.zarr_compat import ChunkKeyEncoding

__all__ = ["LISTABLE_KEYS", "ChunkListings", "logical_stat", "split_key"]

L = TypeVar("L")

LISTING_CACHE_DIRS = 256
# A directory whose chunks are asked about one by one is listed instead, once it has cost
# this many stats within a listing TTL, provided it can hold at most LISTABLE_KEYS keys.
LIST_AFTER_STATS = 2
LISTABLE_KEYS = 4096
# Rows of chunks whose directories are listed ahead of a reader in grid order (stored_among).
LIST_AHEAD_DIRS = 8
STAT_THREADS = min(4, len(os.sched_getaffinity(0)))
"""Threads that list one big local directory together."""


def split_key(key: str) -> tuple[str, str]:
    """A store key as (its directory, its last name)."""
    directory, _, name = key.rpartition("/")
    return directory, name


def logical_stat(stats: Iterable[Stat | None]) -> Stat | None:
    """A chunk's size and time: its present parts together, and the newest of their times;
    None when no part is stored."""
    present = [stat for stat in stats if stat is not None]
    if not present:
        return None
    return Stat(sum(s.size for s in present), max(s.mtime_ns for s in present))


class ChunkListings:
    """Cached listings of the store directories that hold one array's chunks."""

    def __init__(
        self,
        backend: Backend,
        *,
        prefix: str,
        encoding: ChunkKeyEncoding,
        grid: tuple[int, ...],
        parts: ConcatParts,
        chunk_key: Callable[[tuple[int, ...]], str],
        listable: bool,
        run: Callable[..., Awaitable[Any]],
        trust: Trust,
        counters: Counters,
    ) -> None:
        self.backend = backend
        self.parts = parts
        self.chunk_key = chunk_key
        self.counters = counters
        self._prefix = prefix
        self._listable = listable
        self._run = run
        self._ttl, self._clock = trust.ttl, trust.clock
        self._listings: RecentlyUsed[str, dict[str, Stat]] = RecentlyUsed(
            LISTING_CACHE_DIRS, trust=trust)
        self._names: RecentlyUsed[str, Collection[str]] = RecentlyUsed(
            LISTING_CACHE_DIRS, trust=trust)
        """Names-only listings (which chunks exist), for directories not listed in full."""
        self._stats_by_directory: dict[str, tuple[float, int]] = {}
        self._grid = grid
        self._name_tail = last_name_tail(encoding)
        self._next_rows: set[str] = set()  # the row after stored_among's last batch
        self._flights: SingleFlight[tuple[int, str]] = SingleFlight()
        self.can_list = backend.capabilities.can_list
        self._key_stats = KeyStats(backend, run, trust, counters)
        """What each key's own request said (``key_stats``)."""
        self.stored = StoredSet(
            shape=KeyShape(encoding, grid),
            prefix=prefix,
            part_suffixes=[p.key_suffix for p in parts.parts],
            list_files=self.listed_names,
            backend=backend,
            run=run,
            trust=trust,
            counters=counters,
        )
        """Which chunks are stored, a coordinate at a time (for listing sparse grids)."""

    def following(self, coords: tuple[int, ...], count: int) -> list[tuple[str, int]]:
        """The parts (key, size) of the stored chunks among the ``count`` after ``coords`` in
        grid order (the order of a view's listings), as fresh listings say. No request: a
        chunk whose directory has not been listed is left out."""
        out: list[tuple[str, int]] = []
        for following in after(coords, self._grid, count):
            keys = self.part_keys(following)
            listing = self.fresh_listing(split_key(keys[0])[0])
            if listing is None:
                continue
            stats = [listing.get(split_key(k)[1]) for k in keys]
            out += [(k, st.size) for k, st in zip(keys, stats, strict=True) if st is not None]
        return out

    def part_keys(self, coords: tuple[int, ...]) -> list[str]:
        key = self.chunk_key(coords)
        return [key + p.key_suffix for p in self.parts.parts]

    def fresh_listing(self, directory: str) -> dict[str, Stat] | None:
        """The cached listing of ``directory`` if it is still within its TTL (a hit)."""
        cached = self._listings.get(directory)
        if cached is not None:
            self.counters.cache["listing_hit"] += 1
        return cached

    async def listing(self, directory: str) -> dict[str, Stat]:
        listing = self.fresh_listing(directory)
        if listing is not None:
            return listing
        return await self._list_into(self._listings, directory, self._list_stats)

    async def _list_stats(self, directory: str) -> dict[str, Stat]:
        """The directory's names with their sizes and times. A local directory that may hold
        more keys than a listing is worth is listed by a thread per core, each taking the
        stats of its share of the names: a stat that reads its inode from the disk waits
        there, and the others go on (``find`` over 100,000 chunk files, cold: 0.89 s of
        stats, 0.6 s so)."""
        share = self.backend.capabilities.list_stats_share
        if self._listable or share is None or STAT_THREADS == 1:
            return await self._run(self.backend.list_stats, directory)
        listed: dict[str, Stat] = {}

        async def list_share(index: int) -> None:
            listed.update(await self._run(share, directory, index, STAT_THREADS))

        async with trio.open_nursery() as nursery:
            for index in range(STAT_THREADS):
                nursery.start_soon(list_share, index)
        return listed

    async def _list_into(
        self,
        cache: RecentlyUsed[str, L],
        directory: str,
        list_directory: Callable[[str], Awaitable[L]],
    ) -> L:
        """List ``directory`` (a worker thread) and keep the result in ``cache`` for the
        TTL, the oldest directories out first."""
        async with self._flights.first((id(cache), directory)) as mine:
            if not mine and (listed := cache.get(directory)) is not None:
                return listed
            self.counters.cache["listing_miss"] += 1
            self.counters.store["list"] += 1
            now, ticket = self._clock(), cache.ticket()
            listing = await list_directory(directory)
            cache.put(directory, listing, at=now, ticket=ticket)  # unless changed meanwhile
            return listing

    async def asked(self, directory: str, names: Iterable[str]) -> dict[str, Stat]:
        """For a store that cannot list: which of ``names`` in ``directory`` exist, asked
        key by key (a HEAD each on a web server, all at once): what a listing would say."""
        return await self._key_stats.ask(directory, names, together=True)

    def _by_key(self, directory: str) -> bool:
        """Whether to learn sizes in ``directory`` key by key (``key_stats``): a local
        directory that may hold more keys than a listing is worth, not listed yet."""
        return (self.can_list and not self._listable
                and not self.backend.capabilities.stat_by_listing
                and self.fresh_listing(directory) is None)

    async def _stats_by_key(self, directory: str, names: Iterable[str]) -> dict[str, Stat]:
        """The sizes of those of ``names`` a names-only listing finds in ``directory``."""
        present = await self.stored_names(directory)
        return await self._key_stats.ask(directory, (n for n in names if n in present),
                                         together=False)

    async def stored_names(self, directory: str) -> Collection[str]:
        """The object names in ``directory``: its fresh full listing, else a names-only
        listing kept for the TTL (no stat per entry)."""
        listing = self.fresh_listing(directory)
        if listing is not None:
            return listing.keys()
        cached = self._names.get(directory)
        if cached is not None:
            self.counters.cache["listing_hit"] += 1
            return cached
        return await self._list_into(
            self._names, directory, lambda d: self._run(self.backend.list_names, d))

    async def stored_among(self, coords: Iterable[tuple[int, ...]]) -> set[tuple[int, ...]]:
        """Which of these chunks are stored, from one listing per store directory (never a
        request per chunk); a reader going row by row has the next rows' listed with them."""
        coords_list = list(coords)
        by_directory: dict[str, list[tuple[tuple[int, ...], str]]] = {}
        for c in coords_list:
            for key in self.part_keys(c):
                directory, name = split_key(key)
                by_directory.setdefault(directory, []).append((c, name))
        if self.can_list and by_directory:
            # A reader that reached the row after the last one goes on row by row: list the
            # next rows' directories with this batch's, at once. Random access lists no more.
            sequential = not self._next_rows.isdisjoint(by_directory)
            self._next_rows = set(self._directories_after(max(coords_list), 1))
            ahead = self._directories_after(max(coords_list), LIST_AHEAD_DIRS)
            await self._list_together([*by_directory, *(ahead if sequential else ())])
        found: set[tuple[int, ...]] = set()
        for directory, candidates in by_directory.items():
            names: Collection[str]
            if self.can_list:
                names = await self.stored_names(directory)
            else:
                names = (await self.asked(directory, (name for _, name in candidates))).keys()
            found.update(c for c, name in candidates if name in names)
        return found

    def _directories_after(self, coords: tuple[int, ...], count: int) -> list[str]:
        """The store directories of the ``count`` rows of chunks after ``coords``' row (grid
        order over all dimensions but the last)."""
        rows = after(coords[:-1], self._grid[:-1], count)
        return [split_key(self.chunk_key((*row, 0)))[0] for row in rows]

    async def _list_together(self, directories: Iterable[str]) -> None:
        """List the directories without a fresh listing, all at once."""
        stale = [d for d in dict.fromkeys(directories)
                 if self._listings.get(d) is None and self._names.get(d) is None]
        if len(stale) < 2:
            return  # one is listed where it is needed, as before
        async with trio.open_nursery() as nursery:
            for directory in stale:
                nursery.start_soon(self.stored_names, directory)

    async def listed_names(self, directory: str) -> Collection[str]:
        """The names of the objects in ``directory`` (a cached listing)."""
        return (await self.listing(directory)).keys()

    async def stored_stats(
        self,
        done: tuple[int, ...],
        lo: int,
        hi: int,
        only: Iterable[int] | None = None,
        *,
        first: bool = False,
    ) -> dict[int, Stat]:
        """Stored chunks ``(*done, c)`` for ``lo <= c <= hi``: last coordinate -> logical size
        and time. ``only``: the candidates for ``c`` if known; ``first``: stop at the first."""
        by_directory = self._row_names(done, range(lo, hi + 1) if only is None else only)
        suffixes = [p.key_suffix for p in self.parts.parts]
        found: dict[int, Stat] = {}
        for directory, candidates in by_directory.items():
            names = (name + suffix for _, name in candidates for suffix in suffixes)
            if self._by_key(directory):
                listing = await self._stats_by_key(directory, names)
            elif self.can_list:
                listing = await self.listing(directory)
            else:
                listing = await self.asked(directory, names)
            if not listing:
                continue
            for c, name in candidates:
                if len(suffixes) == 1:  # most arrays: no per-chunk joining of parts
                    stat = listing.get(name + suffixes[0])
                else:
                    stat = logical_stat(listing.get(name + suffix) for suffix in suffixes)
                if stat is not None:
                    found[c] = stat
                    if first:
                        return found
        return found

    def _row_names(self, done: tuple[int, ...], values: Iterable[int],
                   ) -> dict[str, list[tuple[int, str]]]:
        """The chunks ``(*done, c)`` for ``c`` in ``values``, by store directory: ``(c, its
        key's last name)``. One key encoded where the encoding names the last coordinate
        plainly (``last_name_tail``), else each."""
        by_directory: dict[str, list[tuple[int, str]]] = {}
        if self._name_tail is not None:
            values = list(values)
            if values:
                directory = split_key(self.chunk_key((*done, values[0])))[0]
                tail = self._name_tail
                by_directory[directory] = [(c, f"{c}{tail}") for c in values]
            return by_directory
        for c in values:
            directory, name = split_key(self.chunk_key((*done, c)))
            by_directory.setdefault(directory, []).append((c, name))
        return by_directory

    async def stored_stats_between(
        self, done: tuple[int, ...], lo: int, hi: int, *, first: bool = False
    ) -> dict[int, Stat]:
        """``stored_stats`` of a leaf directory: every candidate's key where the directory is
        dense, else only the values ``stored`` finds (docs/performance.md, "Listings kept")."""
        if not self.can_list:
            return await self.stored_stats(done, lo, hi, first=first)
        directory = split_key(self.chunk_key((*done, lo)))[0]
        if self._by_key(directory):
            names = len(await self.stored_names(directory))
        else:
            names = len(await self.listing(directory))
        if 2 * names >= (hi - lo + 1) * len(self.parts.parts):
            return await self.stored_stats(done, lo, hi, first=first)
        values = await self.stored.values(done)
        candidates = values[bisect_left(values, lo) : bisect_right(values, hi)]
        return await self.stored_stats(done, lo, hi, candidates, first=first)

    async def listed_densely(self, done: tuple[int, ...], lo: int, hi: int) -> bool:
        """Whether the store directory of the chunks ``(*done, c)``, ``lo <= c <= hi``, holds
        at least half as many names as the range has parts: looking each candidate's names up
        in its listing (``any_listed``) then costs at most twice what decoding them would."""
        directory = split_key(self.chunk_key((*done, lo)))[0]
        return 2 * len(await self.listing(directory)) >= (hi - lo + 1) * len(self.parts.parts)

    async def any_listed(self, done: tuple[int, ...], lo: int, hi: int) -> bool:
        """Whether a chunk ``(*done, c)``, ``lo <= c <= hi``, is stored: its names looked for
        in the listings of its directories, in order, until one is found."""
        directory = split_key(self.chunk_key((*done, lo)))[0]
        listing = await self.listing(directory)
        for c in range(lo, hi + 1):
            for key in self.part_keys((*done, c)):
                at, name = split_key(key)
                if name in (listing if at == directory else await self.listing(at)):
                    return True
        return False

    async def listed_keys(
        self, directory: str, chunk_at: Callable[[str], tuple[int, ...] | None]
    ) -> tuple[list[str], dict[tuple[int, ...], Stat]]:
        """One store directory (relative to the array) as the source layout lists it: its
        subdirectory names, and the chunks whose key's last name ``chunk_at`` recognises
        among its files (parts joined: coords -> logical size and newest time)."""
        store_directory = (self._prefix + directory).rstrip("/")
        if not self.can_list:
            raise OSError(
                errno.EIO, "this store cannot list, and --layout source shows what listings "
                "find: mount it with the default fanout layout"
            )
        listing = await self.listing(store_directory)
        self.counters.store["list"] += 1
        subdirs = await self._run(self.backend.list_subdirs, store_directory)
        suffixes = [p.key_suffix for p in self.parts.parts]
        parts: dict[tuple[int, ...], list[Stat | None]] = {}
        for name, stat in listing.items():
            for index, suffix in enumerate(suffixes):
                if not name.endswith(suffix):
                    continue
                coords = chunk_at(name[: len(name) - len(suffix)] if suffix else name)
                if coords is not None:
                    parts.setdefault(coords, [None] * len(suffixes))[index] = stat
        chunks: dict[tuple[int, ...], Stat] = {}
        for coords, stats in parts.items():
            logical = logical_stat(stats)
            if logical is not None:
                chunks[coords] = logical
        return sorted(subdirs), chunks

    def worth_listing(self, directory: str) -> bool:
        """Whether to list ``directory`` rather than stat one more chunk in it (``cp`` stats
        each new name first; one listing answers the rest for the TTL)."""
        if not self._listable:
            return False
        now = self._clock()
        since, count = self._stats_by_directory.get(directory, (now, 0))
        if self._ttl is not None and now - since >= self._ttl:
            since, count = now, 0
        if len(self._stats_by_directory) >= LISTING_CACHE_DIRS:
            self._stats_by_directory.clear()
        self._stats_by_directory[directory] = (since, count + 1)
        return count >= LIST_AFTER_STATS

    async def listed_stats(
        self, keys: Sequence[str], *, by_name: bool = False
    ) -> list[Stat | None] | None:
        """The parts' sizes and times from a fresh listing of their directory (listed anew
        where the backend prefers it, or ``by_name`` and ``worth_listing``); None without."""
        if not self.can_list:
            return None
        directory = split_key(keys[0])[0]
        if self._by_key(directory) and (known := self._key_stats.known(keys)) is not None:
            return known  # what a view's listing of this directory asked (``key_stats``)
        listing = self.fresh_listing(directory)
        if listing is None and self._listable and (
            self.backend.capabilities.stat_by_listing or (by_name and self.worth_listing(directory))
        ):
            listing = await self.listing(directory)
        if listing is None:
            return None
        return [listing.get(split_key(k)[1]) for k in keys]

    def note(self, keys: Sequence[str], stats: Sequence[Stat | None]) -> None:
        """The parts at ``keys`` were just written or removed (``stats``, None: removed):
        their directory's cached listings say so at once."""
        for key, stat in zip(keys, stats, strict=True):
            self._key_stats.put(key, stat)
        directory = split_key(keys[0])[0]
        self._names.drop(directory)
        self._listings.changed(directory)  # a listing under way may predate the write
        cached = self._listings.get(directory)
        if cached is None:
            return
        for key, stat in zip(keys, stats, strict=True):
            name = split_key(key)[1]
            if stat is None:
                cached.pop(name, None)
            else:
                cached[name] = stat

    def drop_all(self) -> None:
        """Every directory is listed anew (one appeared: its files may predate its watch)."""
        for kept in (self._listings, self._names, self._key_stats):
            kept.clear()
        self.stored.drop_all()

    def drop(self, key: str) -> None:
        """The chunk at ``key`` changed another way: its directory is listed anew."""
        directory = split_key(key)[0]
        self._listings.drop(directory)
        self._names.drop(directory)
        for suffix in (p.key_suffix for p in self.parts.parts):
            self._key_stats.drop(key + suffix)
