"""Many chunks of one array, decoded in one go: what rendered views and whole images read.

Which chunks are stored comes from the chunk source's cached listings: an absent chunk is
the fill value at no store request. The stored ones are split into one batch per core; a
worker thread reads its batch and decodes it through the array's codecs
(``api.chunk_decoding``). Sharded arrays (an inner chunk is a range of its shard) are read
one shard at a time by byte ranges, the shard's index kept (``shard_reads``), or, where
their codecs need zarr (codecs around the sharding codec, nested shards), through zarr, one
call per shard; on a remote store all the shards at once, through the fetch pool.
"""

from __future__ import annotations

import contextlib
import functools
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
from zarrfuse.filesystem.chunks.counters import Counters
from zarrfuse.filesystem.chunks.fetch_pool import fetch_pool
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
        *,
        limiter: trio.CapacityLimiter,
        counters: Counters,
    ) -> None:
        self.array = array
        self.stored = stored
        self.shape = tuple(array.shape)
        self.chunks = tuple(array.chunks)
        self.dtype = np.dtype(array.dtype)
        objects = tuple(array.shards or self.chunks)
        self.per_stored = tuple(s // c for s, c in zip(objects, self.chunks, strict=True))
        self._sync = SyncChunkDecoder.for_array(array)
        geometry = ShardGeometry.for_array(array)
        self._shards = None if geometry is None or not _one_object(stored) else (
            ShardReads(stored, geometry, self.per_stored, counters))
        """Sharded arrays whose shards are one object each, read by byte ranges."""
        self._limiter = limiter
        self._counters = counters

    def stored_coords(self, coords: Coords) -> Coords:
        """The stored chunk (the shard, for sharded arrays) that holds chunk ``coords``."""
        return tuple(c // k for c, k in zip(coords, self.per_stored, strict=True))

    def _fill(self, coords: Coords) -> np.ndarray:
        region = chunk_region(coords, self.chunks, self.shape)
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
        """Whether reading a chunk says as well whether it is stored: a store that cannot
        list (a web server) would be asked first by a HEAD per chunk, but a chunk of one
        part of no fixed size is read by one GET, and its 404 is the absent chunk (the fill
        value), and zarr reads a shard the same way (an absent shard is the fill value); a
        server's error stays an error."""
        if self._shards is not None and self.stored.backend.remote:
            return True  # a shard's index or whole read says so: no listing first
        if self.stored.listings.can_list:
            return False
        parts = self.stored.parts.parts
        return self._sync is None or (len(parts) == 1 and parts[0].size is None)

    async def _decode_stored(self, wanted: list[Coords]) -> dict[Coords, np.ndarray]:
        if self._shards is not None:
            return await self._read_by_ranges(wanted)
        if self._sync is None:
            groups = self._by_shard(wanted)
            if self.stored.backend.remote and len(groups) > 1:
                # Each shard a round trip or two: all of them in flight at once.
                return await waited(trio.to_thread.run_sync(
                    functools.partial(self._read_shards, at_once=True), groups,
                    limiter=self._limiter, abandon_on_cancel=True))
            return await self._in_threads(self._read_shards, groups)
        async with self.stored.reading(wanted) as read:
            if self.stored.backend.remote:
                # Waiting on the network holds no CPU slot: every batch's fetches in flight
                # together (the fetch pool bounds them), then decoded on every core.
                fetched = await waited(
                    trio.to_thread.run_sync(read, wanted, abandon_on_cancel=True))
                return await self._in_threads(self._decode_raw,
                                              list(zip(wanted, fetched, strict=True)))
            # Each thread reads its share and decodes it: one hop per thread and batch.
            return await self._in_threads(
                lambda batch: self._decode_raw(list(zip(batch, read(batch), strict=True))),
                wanted,
            )

    async def _read_by_ranges(self, wanted: list[Coords]) -> dict[Coords, np.ndarray]:
        """The inner chunks, shard by shard (``shard_reads``): on a remote store all the
        shards at once on the fetch pool, else one batch of shards per CPU slot."""
        assert self._shards is not None
        groups: dict[Coords, list[Coords]] = {}
        for c in wanted:
            groups.setdefault(self.stored_coords(c), []).append(c)
        stats = {}
        for shard in groups:  # a listing's size and time: the version a kept index is of
            stats[shard] = await self._listed(shard)
        jobs = list(groups.items())

        shards = self._shards

        def fetch(some: list[tuple[Coords, list[Coords]]]) -> list[tuple[Coords, Stored]]:
            reads = fetch_pool().map if self.stored.backend.remote and len(some) > 1 else map
            out: list[tuple[Coords, Stored]] = []
            for pieces in reads(lambda job: shards.fetch(job[0], job[1], stats[job[0]]), some):
                out.extend(pieces.items())
            return out

        def decode(pieces: list[tuple[Coords, Stored]]) -> dict[Coords, np.ndarray]:
            return self._decode_raw(pieces, shards.geometry.inner)

        async with self.stored.unchanged(groups):  # an index and its ranges: one version
            if not self.stored.backend.remote:
                return await self._in_threads(lambda some: decode(fetch(some)), jobs)
            # Waiting on the network holds no CPU slot: every batch's requests in flight
            # together (the fetch pool bounds them), then decoded on every core.
            fetched = await waited(trio.to_thread.run_sync(fetch, jobs, abandon_on_cancel=True))
        return await self._in_threads(decode, fetched)

    async def _listed(self, shard: Coords) -> Stat | None:
        """The shard's size and time as a listing says; on a remote store only one already
        made (a round trip before each read would cost more than the read)."""
        key = self.stored.part_keys(shard)[0]
        if not self.stored.backend.remote:
            listed = await self.stored.listings.listed_stats([key])
            return None if listed is None else listed[0]
        directory, _, name = key.rpartition("/")
        listing = self.stored.listings.fresh_listing(directory)
        return None if listing is None else listing.get(name)

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
        self, jobs: Sequence[tuple[Coords, Stored]], decoder: SyncChunkDecoder | None = None
    ) -> dict[Coords, np.ndarray]:
        """Each chunk's stored bytes decoded (by ``decoder``: a shard's inner chunks; else
        the array's own) and cropped to the array bounds; the fill value where None."""
        decoder = decoder or self._sync
        assert decoder is not None
        out = {}
        stored = [(coords, data) for coords, data in jobs if data is not None]
        for coords, data in jobs:
            if data is None:  # removed since the listing, or not stored in its shard
                out[coords] = self._fill(coords)
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
            region = chunk_region(coords, self.chunks, self.shape)
            out[coords] = value[tuple(slice(0, r.stop - r.start) for r in region)]
        return out

    @contextlib.contextmanager
    def _decoding(self, coords: Coords) -> Iterator[None]:
        """Stored bytes that do not decode are the store's fault, not a bug: CorruptChunk,
        one log line with the reason (the traceback only at --debug)."""
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

    def _by_shard(self, coords: list[Coords]) -> list[list[Coords]]:
        """``coords`` grouped by the shard that holds them, in order; a shard's group whose
        span would hold more than twice the chunks wanted (the end of one row and the start
        of the next) is split by rows, so a read never decodes much it was not asked for."""
        groups: dict[Coords, list[Coords]] = {}
        for c in coords:
            groups.setdefault(self.stored_coords(c), []).append(c)
        out = []
        for group in groups.values():
            low, high = _bounds(group)
            if math.prod(h - lo for lo, h in zip(low, high, strict=True)) <= 2 * len(group):
                out.append(group)
                continue
            rows: dict[Coords, list[Coords]] = {}
            for c in group:
                rows.setdefault(c[:-1], []).append(c)
            out.extend(rows.values())
        return out

    def _read_shards(
        self, groups: list[list[Coords]], *, at_once: bool = False
    ) -> dict[Coords, np.ndarray]:
        """Each group's shard in turn, or (``at_once``) all of them on the fetch pool."""
        reads = fetch_pool().map if at_once else map
        out: dict[Coords, np.ndarray] = {}
        for values in reads(self._read_shard, groups):
            out.update(values)
        return out

    def _read_shard(self, group: list[Coords]) -> dict[Coords, np.ndarray]:
        """Inner chunks of one shard, read through zarr in one call over the region they
        span: zarr fetches the shard's index once (and a whole shard in one request) where a
        call per inner chunk fetched the index again for each. A region that does not decode
        is read again chunk by chunk, to name the chunk at fault."""
        low, high = _bounds(group)
        span = tuple(slice(lo * n, min(hi * n, size))
                     for lo, hi, n, size in zip(low, high, self.chunks, self.shape, strict=True))
        try:
            values = np.asarray(self.array[span])
        except (ZarrFuseError, MemoryError):
            raise
        except Exception:  # noqa: BLE001  # find which chunk does not decode
            values = None
        out = {}
        for c in group:
            region = chunk_region(c, self.chunks, self.shape)
            if values is None:
                with self._decoding(c):
                    out[c] = np.asarray(self.array[region])
                continue
            out[c] = values[tuple(slice(r.start - s.start, r.stop - s.start)
                                  for r, s in zip(region, span, strict=True))]
        return out


def _one_object(stored: StoredChunks) -> bool:
    """Whether each stored chunk is one object (no concat-parts split)."""
    parts = stored.parts.parts
    return len(parts) == 1 and parts[0].size is None


def _bounds(group: list[Coords]) -> tuple[Coords, Coords]:
    """The smallest box of chunk coordinates holding ``group``: first, and one past last."""
    columns = list(zip(*group, strict=True))
    return tuple(min(c) for c in columns), tuple(max(c) + 1 for c in columns)


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    """The first exception a group holds, however deeply nested (a CorruptChunk, say)."""
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first
