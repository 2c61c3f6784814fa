"""Many chunks of one array decoded in one go (rendered views, whole images), one batch per
core, absent chunks filled without a request. Why: docs/performance.md, "Batch decoding"."""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

import numpy as np
import trio
import zarr

from zarrfuse.api.chunk_decoding import SyncChunkDecoder
from zarrfuse.api.regions import chunk_region
from zarrfuse.api.shard_index import ShardGeometry
from zarrfuse.errors import CorruptChunk, ZarrFuseError
from zarrfuse.filesystem.chunks.shard_reads import ShardReads
from zarrfuse.filesystem.chunks.stored_chunks import StoredChunks
from zarrfuse.request_deadline import waited
from zarrfuse.storage.base import Stat

__all__ = ["ChunkDecoder"]

log = logging.getLogger(__name__)

Coords = tuple[int, ...]
Stored = bytes | memoryview | None
T = TypeVar("T")


class ChunkDecoder:
    """Decodes chunks of ``array``'s read grid (inner chunks, for sharded arrays)."""

    def __init__(
        self,
        array: zarr.Array,
        stored: StoredChunks,
    ) -> None:
        """Reads through ``stored``, in its mount's threads (``MountContext``)."""
        self.array = array
        self.stored = stored
        context = stored.context
        self.shape = tuple(array.shape)
        self.chunks = tuple(array.chunks)
        self.dtype = np.dtype(array.dtype)
        objects = tuple(array.shards or self.chunks)
        self.per_stored = tuple(s // c for s, c in zip(objects, self.chunks, strict=True))
        self._sync = SyncChunkDecoder.for_array(array)
        geometry = ShardGeometry.for_array(array)
        self._shards = None if geometry is None else (
            ShardReads(stored, geometry, self.per_stored, context.counters))
        """Sharded arrays whose inner chunks decode on their own, read by byte ranges."""
        self._objects = self._sync or SyncChunkDecoder.for_stored_objects(array.metadata)
        """The decoder of whole stored objects: chunks, or shards read whole."""
        self._limiter = context.cpu
        self._waits = context.waits
        self._fetch_pool = context.fetch_pool
        self._counters = context.counters

    def stored_coords(self, coords: Coords) -> Coords:
        """The stored chunk (the shard, for sharded arrays) that holds chunk ``coords``."""
        return tuple(c // k for c, k in zip(coords, self.per_stored, strict=True))

    def _fill(self, coords: Coords, shape: Coords | None = None) -> np.ndarray:
        region = chunk_region(coords, shape or self.chunks, self.shape)
        return np.full(
            tuple(r.stop - r.start for r in region), self.array.fill_value, dtype=self.dtype
        )

    async def decode(self, coords: Sequence[Coords]) -> list[np.ndarray]:
        """Each chunk's values, cropped to the array bounds, in ``coords``' order."""
        present: set[Coords]
        if not self.shape:  # a 0-d array: one chunk, no listing to ask
            present = {()}
        elif self._get_answers_presence():
            present = {self.stored_coords(c) for c in coords}
        else:
            stored = {self.stored_coords(c) for c in coords}
            present = await self.stored.listings.stored_among(stored)
        wanted = [c for c in coords if self.stored_coords(c) in present]
        out: dict[Coords, np.ndarray] = {}
        for c in coords:
            if c not in out and self.stored_coords(c) not in present:
                out[c] = self._fill(c)
                self._counters.decoded["filled"] += 1
        if wanted:
            out.update(await self._decode_stored(wanted))
            self._counters.decoded["chunks"] += len(wanted)
        return [out[c] for c in coords]

    def _get_answers_presence(self) -> bool:
        """Whether reading a chunk says as well whether it is stored (a GET's 404 is the
        fill value), so no listing or HEAD per chunk is needed first."""
        if self._shards is not None and self.stored.backend.capabilities.remote:
            return True  # a shard's index or whole read says so: no listing first
        if self.stored.listings.can_list:
            return False
        parts = self.stored.parts.parts
        return self._sync is None or (len(parts) == 1 and parts[0].size is None)

    async def _decode_stored(self, wanted: list[Coords]) -> dict[Coords, np.ndarray]:
        if self._shards is not None:
            return await self._read_by_ranges(wanted)
        objects = list(dict.fromkeys(self.stored_coords(c) for c in wanted))
        shape = tuple(self.array.shards or self.chunks)

        def decode(jobs: Sequence[tuple[Coords, Stored]]) -> dict[Coords, np.ndarray]:
            return self._decode_raw(jobs, self._objects, shape)

        async with self.stored.reading(objects) as read:
            if self.stored.backend.capabilities.remote:
                # Waiting on the network holds no CPU slot: every batch's fetches in flight
                # together (the fetch pool bounds them), then decoded on every core.
                fetched = await waited(
                    trio.to_thread.run_sync(read, objects, limiter=self._waits,
                                                    abandon_on_cancel=True))
                decoded = await self._in_threads(decode,
                                                 list(zip(objects, fetched, strict=True)))
            else:  # each thread reads its share and decodes it: one hop per thread and batch
                decoded = await self._in_threads(
                    lambda batch: decode(list(zip(batch, read(batch), strict=True))), objects)
        if shape == self.chunks:
            return decoded
        out = {}  # a shard read whole: each inner chunk wanted, cut from it
        for c in wanted:
            origin = [s * n for s, n in zip(self.stored_coords(c), shape, strict=True)]
            region = chunk_region(c, self.chunks, self.shape)
            out[c] = decoded[self.stored_coords(c)][tuple(
                slice(r.start - o, r.stop - o) for r, o in zip(region, origin, strict=True))]
        return out

    async def _read_by_ranges(self, wanted: list[Coords]) -> dict[Coords, np.ndarray]:
        """The inner chunks, shard by shard (``shard_reads``): on a remote store all the
        shards at once on the fetch pool, else one batch of shards per CPU slot."""
        assert self._shards is not None
        groups: dict[Coords, list[Coords]] = {}
        for c in wanted:
            groups.setdefault(self.stored_coords(c), []).append(c)
        stats = {}
        for shard in groups:  # a listing's sizes and times: the version a kept index is of
            stats[shard] = await self._listed(shard)
        jobs = list(groups.items())

        shards = self._shards

        def fetch(some: list[tuple[Coords, list[Coords]]]) -> list[tuple[Coords, Stored]]:
            remote = self.stored.backend.capabilities.remote
            reads = self._fetch_pool().map if remote and len(some) > 1 else map
            out: list[tuple[Coords, Stored]] = []
            for pieces in reads(lambda job: shards.fetch(job[0], job[1], stats[job[0]]), some):
                out.extend(pieces.items())
            return out

        def decode(pieces: list[tuple[Coords, Stored]]) -> dict[Coords, np.ndarray]:
            return self._decode_raw(pieces, shards.geometry.inner)

        async with self.stored.unchanged(groups):  # an index and its ranges: one version
            if not self.stored.backend.capabilities.remote:
                return await self._in_threads(lambda some: decode(fetch(some)), jobs)
            # Waiting on the network holds no CPU slot: every batch's requests in flight
            # together (the fetch pool bounds them), then decoded on every core.
            fetched = await waited(trio.to_thread.run_sync(fetch, jobs, limiter=self._waits,
                                                           abandon_on_cancel=True))
        return await self._in_threads(decode, fetched)

    async def _listed(self, shard: Coords) -> list[Stat | None] | None:
        """The shard's parts' sizes and times as a listing says; on a remote store only one
        already made (a round trip would cost more than the read)."""
        keys = self.stored.part_keys(shard)
        if not self.stored.backend.capabilities.remote:
            return await self.stored.listings.listed_stats(keys)
        listing = self.stored.listings.fresh_listing(keys[0].rpartition("/")[0])
        return None if listing is None else [listing.get(k.rpartition("/")[2]) for k in keys]

    async def _in_threads(
        self, work: Callable[[list[T]], dict[Coords, np.ndarray]], items: list[T]
    ) -> dict[Coords, np.ndarray]:
        """``work`` over ``items`` split into one batch per CPU slot."""
        slots = max(1, min(len(items), int(self._limiter.total_tokens)))
        size = math.ceil(len(items) / slots)
        results: dict[Coords, np.ndarray] = {}

        async def run(batch: list[T]) -> None:
            results.update(await waited(trio.to_thread.run_sync(
                work, batch, limiter=self._limiter, abandon_on_cancel=True
            )))

        try:
            async with trio.open_nursery() as nursery:
                for i in range(0, len(items), size):
                    nursery.start_soon(run, items[i : i + size])
        except BaseExceptionGroup as group:  # one batch's failure is the answer's
            raise _first_leaf(group) from None
        return results

    def _decode_raw(
        self, jobs: Sequence[tuple[Coords, Stored]], decoder: SyncChunkDecoder,
        shape: Coords | None = None,
    ) -> dict[Coords, np.ndarray]:
        """Each stored object's bytes (of the grid of ``shape``; the read grid if None)
        decoded by ``decoder`` and cropped to the array bounds; the fill value where None."""
        shape = shape or self.chunks
        out = {}
        stored = [(coords, data) for coords, data in jobs if data is not None]
        for coords, data in jobs:
            if data is None:  # removed since the listing, or not stored in its shard
                out[coords] = self._fill(coords, shape)
        try:
            values = decoder.decode_batch([data for _, data in stored])
        except (ZarrFuseError, MemoryError):
            raise
        except Exception:  # noqa: BLE001  # a chunk does not decode: find which, one by one
            values = []
            for coords, data in stored:
                with self._decoding(coords):
                    values.append(decoder.decode(data))
        for (coords, _), value in zip(stored, values, strict=True):
            region = chunk_region(coords, shape, self.shape)
            out[coords] = value[tuple(slice(0, r.stop - r.start) for r in region)]
        return out

    @contextlib.contextmanager
    def _decoding(self, coords: Coords) -> Iterator[None]:
        """Bytes that do not decode are the store's fault: CorruptChunk, one log line."""
        try:
            yield
        except (ZarrFuseError, MemoryError):
            raise
        except Exception as e:  # any codec's failure: numcodecs, zarr, imagecodecs
            log.debug("chunk %s of %s does not decode", coords, self.array.path, exc_info=True)
            raise CorruptChunk(
                f"chunk {coords} of {self.array.path or '/'} does not decode: "
                f"{type(e).__name__}: {e}"
            ) from None


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    """The first exception a group holds, however deeply nested (a CorruptChunk, say)."""
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first
