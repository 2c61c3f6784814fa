"""Writing one array's stored chunks: a commit split into the chunk's parts and written as
one (a crash leaves the old or the new chunk), a read-change-write, a delete and a time set,
each under the chunk's lock. Held by the :class:`~zarrfuse.filesystem.chunks.stored_chunks.
StoredChunks` it writes (``writes``), whose reads, locks and caches it uses."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from zarrfuse.errors import WriteRefusedError
from zarrfuse.extensions.byte_ranges import slice_views
from zarrfuse.extensions.chunk_finishers import ChunkFinisher
from zarrfuse.extensions.transformers import ConcatParts
from zarrfuse.filesystem.chunks.chunk_caches import OpenChunk
from zarrfuse.filesystem.chunks.chunk_locks import ChunkLocks
from zarrfuse.filesystem.chunks.counters import Counters
from zarrfuse.storage.base import Backend, Stat

__all__ = ["StoredWrites", "WrittenChunks"]

T = TypeVar("T")


class WrittenChunks(Protocol):
    """What the writes use of the chunk source that holds them (``StoredChunks``)."""

    backend: Backend
    parts: ConcatParts
    counters: Counters
    shard_format: ChunkFinisher | None
    locks: ChunkLocks

    def part_keys(self, coords: tuple[int, ...]) -> list[str]: ...
    async def open_locked(self, coords: tuple[int, ...]) -> OpenChunk | None: ...
    async def read_whole(self, opened: OpenChunk | None) -> bytes | None: ...
    async def run_to_end(self, fn: Callable[..., T], *args: Any) -> T: ...
    def remember(self, coords: tuple[int, ...], stats: Sequence[Stat | None]) -> None: ...
    def stat_parts(self, keys: Sequence[str]) -> list[Stat | None]: ...


class StoredWrites:
    """Commits, updates, deletes and times of the chunks of one ``StoredChunks``."""

    def __init__(self, chunks: WrittenChunks) -> None:
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
        """Store the bytes of ``views`` (laid end to end) as the chunk: split into its parts,
        each replaced atomically. The views must not change until this returns.

        A value that cannot be split, or that the shard layout refuses, is refused
        (WriteRefusedError) before anything is written.
        """
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
