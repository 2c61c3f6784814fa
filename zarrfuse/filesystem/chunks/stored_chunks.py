"""One array's stored chunks by grid coordinates: which exist, their sizes, their bytes (the
parts laid end to end). Backend calls run in worker threads; writes are ``StoredWrites``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import trio

from zarrfuse.errors import WriteRefusedError
from zarrfuse.extensions.byte_ranges import pieces_for_span, slice_views
from zarrfuse.extensions.chunk_finishers import ChunkFinisher
from zarrfuse.extensions.transformers import ConcatParts, Part
from zarrfuse.filesystem.chunks.array_keys import ArrayKeys
from zarrfuse.filesystem.chunks.chunk_caches import KnownSizes, OpenChunk
from zarrfuse.filesystem.chunks.chunk_listings import LISTABLE_KEYS, ChunkListings, logical_stat
from zarrfuse.filesystem.chunks.chunk_locks import ChunkLocks
from zarrfuse.filesystem.chunks.grid_order import after
from zarrfuse.filesystem.chunks.mount_context import MountContext
from zarrfuse.filesystem.chunks.part_opening import NotCached, PartOpening, read_parts
from zarrfuse.filesystem.chunks.shard_indexes import ShardIndexes
from zarrfuse.filesystem.chunks.stat_ahead import StatAhead
from zarrfuse.filesystem.chunks.whole_chunks import WholeChunks
from zarrfuse.request_deadline import waited
from zarrfuse.storage.base import Stat
from zarrfuse.zarr_compat import ChunkKeyEncoding

__all__ = ["StoredChunks", "StoredWrites"]

T = TypeVar("T")
L = TypeVar("L")

SINGLE_PART = ConcatParts((Part(""),))

KNOWN_SIZES = 65536
FOLLOWING_CHUNKS = 8  # chunks after one read to its end fetched or warmed ahead


class StoredChunks:
    """The stored chunks of one array, read (and, through ``writes``, written) through a
    backend."""

    def __init__(
        self,
        context: MountContext,
        *,
        array_path: str,
        encoding: ChunkKeyEncoding,
        keys_per_directory: int | None = None,
        parts: ConcatParts | None,
        shard_format: ChunkFinisher | None = None,
        grid: tuple[int, ...] = (),
    ) -> None:
        self.context = context
        self.backend = backend = context.backend
        self.shard_format = shard_format
        self._grid = grid
        self.counters = context.counters
        self.encoding = encoding
        self.parts = parts or SINGLE_PART
        self._prefix = f"{array_path.strip('/')}/" if array_path.strip("/") else ""
        keys = ArrayKeys(encoding, self._prefix, self.parts,
                         lambda parts: self.listings.stored.shape.decode(parts), grid)
        self.chunk_key, self.keys_of = keys.chunk_key, keys.keys_of
        self.part_keys, self.coords_of = keys.part_keys, keys.coords_of
        self.on_chunk_path = keys.on_chunk_path
        trust, open_chunks = context.trust, context.open_chunks
        self._sizes = KnownSizes(KNOWN_SIZES, trust)
        self.shard_indexes = ShardIndexes(trust, context.spans)
        self.locks = ChunkLocks()
        self._open_cache, self._tag = open_chunks, object()  # kept under self._tag
        self._writable = open_chunks is None or open_chunks.beside_writers
        # Bytes fetched ahead must not outlive a write: read-only mounts only. Local warming
        # leaves only the kernel's caches: every mount.
        can = backend.capabilities
        self._prefetch = None if self._writable else can.prefetch_objects
        self._warm_after = can.warm_after
        self._stat_ahead = None if self._prefetch is None or can.can_list else StatAhead(
            grid, self._sizes, self._stat_one, context.start_soon)
        """Read-only mounts of stores that cannot list: the next chunks' sizes asked ahead."""
        self._opening = PartOpening(backend, self.parts, self.counters)
        self._whole = WholeChunks(context, self.parts, self._opening, self.keys_of)
        self.listings = ChunkListings(
            backend,
            prefix=self._prefix,
            encoding=encoding,
            grid=grid,
            parts=self.parts,
            chunk_key=self.chunk_key,
            listable=keys_per_directory is not None
            and keys_per_directory * len(self.parts.parts) <= LISTABLE_KEYS,
            run=self._run,
            trust=trust,
            counters=self.counters,
        )
        """What the store's listings say: which chunks exist, their sizes (and ``stored``)."""
        self.writes = StoredWrites(self)
        """Commits, updates, deletes and times of these chunks."""

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        """A read in a worker thread, abandoned (nothing cached) if its request is cut."""
        run = trio.to_thread.run_sync(fn, *args, limiter=self.context.io, abandon_on_cancel=True)
        return await waited(run)

    async def run_to_end(self, fn: Callable[..., T], *args: Any) -> T:
        """A change to the store in a worker thread: never abandoned halfway."""
        return await trio.to_thread.run_sync(fn, *args, limiter=self.context.io)

    async def size(self, coords: tuple[int, ...]) -> int | None:
        """Logical size of one chunk, None if it is not stored."""
        stat = await self.stat(coords)
        return None if stat is None else stat.size

    async def stat(self, coords: tuple[int, ...]) -> Stat | None:
        """Logical size and time of one chunk, None if not stored; remembered for the listing
        TTL (tools stat a file right after writing it)."""
        if self._stat_ahead is not None:
            await self._stat_ahead.wait(coords)
            self._stat_ahead.after(coords)
        known = self._sizes.get(coords)
        if known is not None:
            self.counters.cache["size_hit"] += 1
            return known.stat
        keys = self.part_keys(coords)
        listed = await self.listings.listed_stats(keys, by_name=True)
        if listed is not None:
            return logical_stat(listed)
        self.counters.store["stat"] += len(keys)
        asked = self._sizes.asking()
        stat = await self._stat_one(coords)
        self._sizes.put(coords, stat, asked=asked)
        return stat

    # --- reading -------------------------------------------------------------------------

    async def _stat_one(self, coords: tuple[int, ...]) -> Stat | None:
        """The chunk's logical stat, its parts asked in a worker thread."""
        return logical_stat(await self._run(self.stat_parts, self.part_keys(coords)))

    def stat_parts(self, keys: Sequence[str]) -> list[Stat | None]:
        return [self.backend.stat(k) for k in keys]

    async def open(self, coords: tuple[int, ...]) -> OpenChunk | None:
        """Open a chunk's parts, checked (PartsError); None if it is absent. Recently opened
        chunks are kept open (``OpenChunkCache``): a repeated open opens nothing."""
        if self._open_cache is not None:
            cached = self._open_cache.take((self._tag, coords))
            if cached is not None:
                self.counters.cache["open_hit"] += 1
                return cached
        ticket = 0 if self._open_cache is None else self._open_cache.ticket()
        async with self.locks.held(coords):
            opened = await self.open_locked(coords)
        if opened is not None and self._open_cache is not None:
            self._open_cache.adopt((self._tag, coords), opened, ticket)
        return opened

    async def open_locked(self, coords: tuple[int, ...]) -> OpenChunk | None:
        chunk = self.keys_of(coords)
        listed = await self.listings.listed_stats(chunk.parts)
        opened = self._opening.open_nowait(chunk, listed)
        if isinstance(opened, NotCached):
            self.counters.cache["open_in_thread"] += 1
            opened = await self._run(self._opening.open, chunk, listed)
            if opened is not None:
                opened.waited = True
        return opened

    def open_now(
        self, coords: tuple[int, ...], listed: Sequence[Stat | None] | None
    ) -> OpenChunk | None:
        """As :meth:`open`, blocking (a worker thread) and past the cache of open chunks: a
        shard read by ranges (``shard_reads``) reads one version of its parts."""
        return self._opening.open(self.keys_of(coords), listed)

    async def read_all(self, coords: tuple[int, ...]) -> bytes | None:
        """The whole chunk (its parts joined), None if it is absent."""
        return await self.read_whole(await self.open(coords))

    async def read_whole(self, opened: OpenChunk | None) -> bytes | None:
        if opened is None:
            return None
        try:
            out = bytearray(sum(opened.sizes))
            await self.read_into(opened, 0, memoryview(out))
            return bytes(out)
        finally:
            opened.close()

    @asynccontextmanager
    async def reading(
        self, coords: Collection[tuple[int, ...]]
    ) -> AsyncIterator[Callable[[Sequence[tuple[int, ...]]], list[bytes | None]]]:
        """A blocking reader of these whole chunks (None where absent) for worker threads while
        the block runs (no thread hop per chunk); each read between two commits."""
        async with self.unchanged(coords):
            # A single unsized part is read whole, unchecked: no listed sizes needed.
            whole = len(self.parts.parts) == 1 and self.parts.parts[0].size is None
            listed = {
                c: None if whole else await self.listings.listed_stats(self.part_keys(c))
                for c in coords
            }

            def read(some: Sequence[tuple[int, ...]]) -> list[bytes | None]:
                return self._whole.read(some, [listed[c] for c in some])

            yield read

    @asynccontextmanager
    async def unchanged(self, coords: Collection[tuple[int, ...]]) -> AsyncIterator[None]:
        """No commit of these chunks runs while the block does (writable mounts: a read of
        a shard's index and then its ranges sees one version)."""
        if not self._writable:  # no commit can run meanwhile
            yield
            return
        async with self.locks.all_held(coords):
            yield

    # --- what was learnt, after a change (``writes`` makes them) --------------------------

    def remember(self, coords: tuple[int, ...], stats: Sequence[Stat | None]) -> None:
        if self._open_cache is not None:  # new opens read the chunk just stored
            self._open_cache.drop((self._tag, coords))
        self._sizes.put(coords, logical_stat(stats))
        self.shard_indexes.drop(coords)
        self.listings.stored.note(coords, stored=logical_stat(stats) is not None)
        self.listings.note(self.part_keys(coords), stats)

    def drop_cached(self, coords: tuple[int, ...]) -> None:
        """The chunk changed another way (zarr, or another program the store watch saw):
        what was learnt of it is asked again."""
        self._sizes.drop(coords)
        self.shard_indexes.drop(coords)
        self.listings.drop(self.chunk_key(coords))
        self.listings.stored.drop(coords)
        if self._open_cache is not None:
            self._open_cache.drop((self._tag, coords))

    def drop_listed(self) -> None:
        """A store directory appeared or went: every chunk is asked and opened anew."""
        self._sizes.clear()
        self.listings.drop_all()
        self.shard_indexes.clear()
        if self._open_cache is not None:
            self._open_cache.drop_tagged(self._tag)

    async def directory_gone(self, key: str) -> bool:
        """Whether the store directory ``key`` is no longer there (moved or removed)."""
        parent, _, name = key.rpartition("/")
        return name not in await self._run(self.backend.list_subdirs, parent)

    def _read_ahead(self, opened: OpenChunk, *, waited: bool) -> None:
        def following() -> list[tuple[str, int]]:
            return self.listings.following(opened.coords, FOLLOWING_CHUNKS)

        if self._prefetch is not None and not self.listings.can_list:
            # A store that cannot list (a web server): the next chunks' keys, whether stored
            # or not (a GET of an absent one says so), sizes unknown.
            self._prefetch([(key, None) for c in after(opened.coords, self._grid,
                                                       FOLLOWING_CHUNKS)
                            for key in self.part_keys(c)])
        elif self._prefetch is not None:
            self._prefetch(following())
        elif self._warm_after is not None:
            self._warm_after(self.part_keys(opened.coords)[0], following, waited=waited)

    async def read_into(self, opened: OpenChunk, offset: int, out: memoryview) -> int:
        """Fill ``out`` with the chunk's bytes from ``offset`` (clamped); returns the count.
        Page-cached bytes are copied here (RWF_NOWAIT), only the rest in a worker thread."""
        total = sum(opened.sizes)
        start = min(offset, total)
        stop = min(offset + len(out), total)
        pending = []
        at = 0
        for piece in pieces_for_span(opened.sizes, start, stop):
            n = piece.stop - piece.start
            view = out[at : at + n]
            done = opened.reader.read_into_nowait(piece.part, piece.start, view)
            if done < n:
                pending.append((piece.part, piece.start + done, view[done:]))
            at += n
        self.counters.store_bytes_read += at
        if stop == total and (pending or not opened.read_to_end):
            # Read to its end, as cp reads: the next files come next. A re-read of a kept chunk
            # is not, unless its bytes had to come from storage again (a new pass).
            opened.read_to_end = True
            self._read_ahead(opened, waited=opened.waited or bool(pending))
        if pending:
            self.counters.store["read"] += len(pending)
            await self._run(read_parts, opened.reader, pending)
        else:
            self.counters.cache["page_cache_hit"] += 1
        return max(stop - start, 0)


class StoredWrites:
    """Commits, updates, deletes and times of one ``StoredChunks``' chunks, each under the
    chunk's lock."""

    def __init__(self, chunks: StoredChunks) -> None:
        self._chunks = chunks
        self._locks = chunks.locks

    def _write_parts(
        self,
        keys: Sequence[str],
        views: Sequence[memoryview],
        spans: Sequence[tuple[int, int]],
        durable: bool,
    ) -> list[Stat | None]:
        # All parts as one (a journal on local stores): a crash leaves the old or the new chunk.
        mtimes = self._chunks.backend.write_parts(
            [(key, slice_views(views, a, b)) for key, (a, b) in zip(keys, spans, strict=True)],
            durable=durable,
        )
        return [Stat(b - a, m) for (a, b), m in zip(spans, mtimes, strict=True)]

    async def commit(
        self, coords: tuple[int, ...], views: Sequence[memoryview], *, durable: bool
    ) -> None:
        """Store ``views`` (laid end to end, unchanged until this returns) as the chunk's
        parts; WriteRefusedError before anything is written if they cannot be split."""
        async with self._locks.held(coords):
            await self._commit_locked(coords, views, durable)

    async def update(self, coords: tuple[int, ...], change: Callable[[bytes | None], bytes],
                     limit: int, *, durable: bool) -> None:
        """Store ``change(the chunk as stored, or None)`` (in a thread) as the chunk, no other
        commit of it between the read and the write (a rendered plane, a tile of a shard). A
        stored chunk over ``limit`` bytes (more than its codecs make) is refused unread."""
        async with self._locks.held(coords):
            opened = await self._chunks.open_locked(coords)
            if opened is not None and (size := sum(opened.sizes)) > limit:
                opened.close()
                raise WriteRefusedError(f"chunk {coords} is stored as {size} bytes, more than "
                                        f"its codecs make ({limit}); nothing was written")
            current = await self._chunks.read_whole(opened)
            value = await self._chunks.run_to_end(change, current)
            await self._commit_locked(coords, [memoryview(value)], durable)

    async def _commit_locked(
        self, coords: tuple[int, ...], views: Sequence[memoryview], durable: bool
    ) -> None:
        chunks = self._chunks
        if chunks.shard_format is not None:  # CPU work that grows with pages x tiles: a thread
            views = await chunks.run_to_end(chunks.shard_format.shard_with_header, coords, views)
        spans = chunks.parts.split(sum(len(v) for v in views))
        keys = chunks.part_keys(coords)
        chunks.counters.store["write"] += len(keys)
        chunks.counters.store_bytes_written += spans[-1][1] if spans else 0
        stats = await chunks.run_to_end(self._write_parts, keys, views, spans, durable)
        chunks.remember(coords, stats)

    async def delete(self, coords: tuple[int, ...]) -> None:
        """Remove every part of the chunk."""
        self._chunks.counters.store["delete"] += len(self._chunks.parts.parts)
        async with self._locks.held(coords):
            await self._chunks.run_to_end(lambda keys: [*map(self._chunks.backend.delete, keys)],
                                   self._chunks.part_keys(coords))
            self._chunks.remember(coords, [None] * len(self._chunks.parts.parts))

    def _set_part_times(self, keys: Sequence[str], mtime_ns: int) -> list[Stat | None] | None:
        if not all(self._chunks.backend.set_mtime(key, mtime_ns) for key in keys):
            return None
        return self._chunks.stat_parts(keys)

    async def set_time(self, coords: tuple[int, ...], mtime_ns: int) -> bool:
        """Store ``mtime_ns`` as the time of every part of a stored chunk (``touch``, or
        ``rsync`` keeping the source's time); False where the store cannot keep a time."""
        keys = self._chunks.part_keys(coords)
        async with self._locks.held(coords):
            stats = await self._chunks.run_to_end(self._set_part_times, keys, mtime_ns)
            if stats is None:
                return False
            self._chunks.remember(coords, stats)
        return True
