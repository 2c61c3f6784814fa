"""One array, or one OME-Zarr pyramid, as one tiled OME-TIFF file rendered as it is read: the
header computed (``tiff.whole_image``), the chunks under a read's tiles decoded in one batch
per level, cached, never twice at once (neighbouring requests share tiles).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import trio

from zarrfuse.api.regions import chunk_region, overlap
from zarrfuse.filesystem.chunks.mount_context import MountContext
from zarrfuse.filesystem.chunks.stored_chunks import StoredChunks
from zarrfuse.filesystem.images.composite import MEASURED_BYTES, Look, Looks
from zarrfuse.filesystem.images.image_versions import ChunkKey, ImageVersions
from zarrfuse.filesystem.images.render import encode, encoded_size
from zarrfuse.request_deadline import unbounded, waited
from zarrfuse.tiff.whole_image import TileSpan, WholeImagePlan, tile_array

__all__ = ["LevelChunks", "Preview", "WholeImage"]

Coords = tuple[int, ...]
Decode = Callable[[Sequence[Coords]], Awaitable[list[np.ndarray]]]


"""Each whole image's own number in the shared decoded-chunk cache's keys."""


@dataclass(frozen=True)
class LevelChunks:
    """One level of the image: its array's geometry and how its chunks are decoded
    (cropped to the array bounds; absent chunks as the fill value)."""

    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: np.dtype
    decode: Decode
    stored: StoredChunks | None = None
    """Where its chunks are stored (to drop a chunk another program changed)."""
    stored_coords: Callable[[Coords], Coords] | None = None
    """The stored chunk (the shard) that holds a chunk; None: the chunk itself."""


READ_AHEAD_BYTES = 4 << 20
"""Tile bytes decoded ahead of a sequential reader per batch (at least two tiles): batches
of 1 MiB read at 190-210 MB/s, of 4 MiB at 295-318 MB/s (4096 x 4096 uint16, zstd 256 x 256,
in process, 2 cores: the fixed cost of a batch is paid less often)."""
AHEAD_WINDOWS = 4
"""Batches kept decoding ahead: enough that every worker thread always has one."""
LOCAL_WINDOWS_AT_ONCE = 2
"""Batches decoding at once from a local store: one lists and reads its chunks while the one
before it decodes (one at a time, each read 4 MiB in the time the reader took it)."""
REMOTE_AHEAD_WINDOWS = 8
"""On a remote store: a round trip per batch, so more of them in flight. 4 held a whole
image of 4096 x 4096 uint16 at 1.5-1.6x zarr-python's time at 50 ms a request, 8 at
1.0-1.2x (bench scenario ``pace-http``): 32 MiB of tiles ahead, within the decoded cache."""

COLOUR_BATCH_BYTES = 1 << 20
"""Composite tiles coloured in one go (a reader's read): a read waits for the batch of its
tiles, not for a whole read-ahead window's."""

TileKey = tuple[int, int, int, int]  # level, page, row, col


@dataclass(frozen=True)
class _Coloured:
    """A composite tile and what it was coloured from: reused only for a read that serves
    these very chunk arrays through these very windows."""

    chunks: tuple[np.ndarray, ...]
    windows: np.ndarray
    tile: np.ndarray


class WholeImage:
    """The file ``name`` showing ``levels`` (level 0 the full resolution) by ``plan``."""

    def __init__(
        self,
        path: str,
        name: str,
        levels: Sequence[LevelChunks],
        plan: WholeImagePlan,
        *,
        context: MountContext,
        metadata_time_ns: int = 0,
        order: tuple[int, ...] | None = None,
        look: Look | None = None,
    ) -> None:
        """``order``: the levels' dimensions in the plan's order, where they differ (a
        colour axis moved last to be the samples: ``colour_axis``). ``look``: the file
        shows the channels' colour composite (``composite``), not the values."""
        self.path = path
        self.order = order
        self.look = look
        self.siblings: list[WholeImage] = []
        """The same image strip by strip for readers of no tiles (``tiff.strip_image``), its
        colour composite and its preview."""
        self.name = name
        self.levels = list(levels)
        self.plan = plan
        self.metadata_time_ns = metadata_time_ns
        self._context = context
        self._cache = context.decoded
        self._token = next(context.numbers)  # never id(): a rebuilt image may reuse an address
        self._running: dict[tuple[int, ChunkKey, int], trio.Event] = {}
        self.versions = ImageVersions(name, self._stored_key)
        self._reach = 0
        """Where the furthest read of a sequential run ended (where any other read ended):
        the kernel sends a reader's next requests two or more at a time, so a read that
        starts up to a window before this point is sequential too."""
        self._ahead_until = 0
        """How far read-ahead has been asked for (a file offset)."""
        self._remote = any(
            level.stored and level.stored.backend.capabilities.remote for level in self.levels)
        self._windows_ahead = REMOTE_AHEAD_WINDOWS if self._remote else AHEAD_WINDOWS
        """Windows kept decoding ahead: more where each costs a round trip."""
        self._ahead: trio.MemorySendChannel[set[TileKey]] | None = None
        """The windows to decode ahead, in file order (``_decode_in_order``)."""
        self._coloured: dict[TileKey, _Coloured] = {}
        """Composite tiles coloured ahead of the reads, or by one (a tile a read's end cuts is
        read again by the next), the oldest dropped past a few read-ahead windows' bytes."""
        self._coloured_bytes = 0
        self._colouring: dict[TileKey, trio.Event] = {}
        """Tiles being coloured, for a read that needs them to wait for, not colour again."""

    @property
    def size(self) -> int:
        return self.plan.size

    def sources(self) -> list[StoredChunks]:
        """The stored chunks of the levels read from a store."""
        return [level.stored for level in self.levels if level.stored is not None]

    def release(self) -> None:
        """Replaced by a rebuilt image: the chunks its levels keep open are closed, what
        they learnt and its decoded tiles are dropped."""
        for source in self.sources():
            source.drop_listed()
        tokens = {image._token for image in (self, *self.siblings)}
        self._cache.drop_where(lambda key: isinstance(key, tuple) and key[0] in tokens)
        for image in (self, *self.siblings):
            image._data_changed()

    def _stored_key(self, key: ChunkKey) -> ChunkKey:
        stored_coords = self.levels[key[0]].stored_coords
        return key if stored_coords is None else (key[0], stored_coords(key[1]))

    def changed(self, keys: set[str]) -> bool:
        """Whether any of the store ``keys`` another program changed is a chunk of a level;
        if so, drop those chunks and give the image (and siblings) a new version."""
        changed: set[ChunkKey] = set()
        for index, level in enumerate(self.levels):
            if level.stored is None:
                continue
            for coords in {c for key in keys if (c := level.stored.coords_of(key)) is not None}:
                level.stored.drop_cached(coords)
                changed.add((index, coords))
        for image in (self, *self.siblings) if changed else ():
            image.versions.change(changed, image._cached)
            image._data_changed()
        return bool(changed)

    def _cached(self, key: ChunkKey, generation: int) -> np.ndarray | None:
        return self._cache.get((self._token, key, generation))

    def drop_decoded(self) -> None:
        """Every decoded tile is decoded anew (here and in the strip sibling), and the
        handles open follow the store."""
        for image in (self, *self.siblings):
            image._token = next(self._context.numbers)
            image.versions.drop()
            image._data_changed()

    def _data_changed(self) -> None:
        """Measured windows are measured again; coloured tiles are let go (a tile is reused
        only from the chunk arrays it was coloured from: this frees them)."""
        if self.look is not None:
            self.look.drop()
        self._coloured.clear()
        self._coloured_bytes = 0

    async def settle(self, drop: Callable[[int], Awaitable[None]]) -> None:
        """After a change: ``drop(version)`` drops the kernel's pages of a version."""
        await self.versions.settle(drop)

    async def read_into(self, offset: int, out: memoryview, version: int | None = None) -> int:
        """The file's bytes from ``offset`` written into ``out``, as ``version`` (default:
        the current one) shows them; how many (fewer at the end of the file). Tile bytes
        are copied once, from the decoded chunks into ``out``."""
        plan = self.plan
        stop = min(offset + len(out), plan.size)
        if offset >= stop:
            return 0
        at = 0
        if offset < plan.data_start:
            header = plan.header_bytes(offset, min(stop, plan.data_start))
            out[: len(header)] = header
            at = len(header)
        sequential = offset == plan.data_start or (
            self._reach - self._window() <= offset <= self._reach)
        self._reach = max(self._reach, stop) if sequential else stop
        if stop > plan.data_start:
            spans = plan.spans(max(offset, plan.data_start), stop)
            if sequential and self._remote:  # round trips, not cores: beside the reader's
                self._read_ahead(stop)
            tiles = await self._tiles({_tile_key(s) for s in spans}, version)
            if sequential and not self._remote:  # after the reader's own tiles, never ahead
                self._read_ahead(stop)
            for s in spans:
                piece = memoryview(tiles[_tile_key(s)]).cast("B")[s.start : s.stop]
                out[at : at + len(piece)] = piece
                at += len(piece)
        return at

    # --- reading ahead -------------------------------------------------------------------

    def _read_ahead(self, stop: int) -> None:
        """A sequential tile read reached ``stop``: keep the next AHEAD_WINDOWS windows of
        tiles decoded or being decoded in the background, a batch per window."""
        window = self._window()
        windows = self._windows_ahead
        horizon = min(stop + windows * window, self.plan.size)
        start = self._ahead_until  # asked for up to here (at most one window more)
        if not stop <= start <= stop + (windows + 1) * window:  # the reader moved
            start = stop
        while start < horizon:
            end = min(start + window, self.plan.size)
            self._queue_ahead({_tile_key(s) for s in self.plan.spans(start, end)})
            start = end
        self._ahead_until = max(start, stop)

    def _queue_ahead(self, tiles: set[TileKey]) -> None:
        if self._ahead is not None:
            try:
                self._ahead.send_nowait(tiles)
                return
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # its task ended (a failure, logged): a new one
        self._ahead, windows = trio.open_memory_channel[set[TileKey]](math.inf)
        self._ahead.send_nowait(tiles)
        self._context.start_soon(self._decode_in_order, windows)

    async def _decode_in_order(self, windows: trio.MemoryReceiveChannel[set[TileKey]]) -> None:
        """The windows decoded in file order, LOCAL_WINDOWS_AT_ONCE at a time (each on every
        core), each started once the one before it runs: trio starts the tasks it is given
        at once in no set order, and a reader whose window was decoded after the next ones
        waited for all of them. On a remote store every window at once: they wait on round
        trips, not on cores."""
        unbounded()  # it outlives the read that started it
        at_once = trio.Semaphore(self._windows_ahead if self._remote else LOCAL_WINDOWS_AT_ONCE)

        async def one(tiles: set[TileKey]) -> None:
            try:
                await self._decode_ahead(tiles, colour_apart=True)
            finally:
                at_once.release()

        async with windows:
            async for tiles in windows:
                await at_once.acquire()
                self._context.start_soon(one, tiles)

    def _window(self) -> int:
        """Bytes of tiles decoded ahead in one batch."""
        return max(READ_AHEAD_BYTES, 2 * self.plan.tile_nbytes(0))

    async def _decode_ahead(self, tiles: set[TileKey], colour_apart: bool = False) -> None:
        """Decoded, and, for a composite, coloured (the colouring would otherwise be the
        reader's); ``colour_apart``: in a task of its own, beside the next window's
        decoding."""
        regions, wanted = self._wanted(tiles)
        decoded = await self._decoded({(t[0], c) for t, chunks in wanted.items() for c in chunks})
        if self.look is None:
            return
        if colour_apart:
            self._context.start_soon(self._colour, regions, wanted, decoded)
        else:
            await self._colour(regions, wanted, decoded)

    # --- tiles ---------------------------------------------------------------------------

    def _region(self, tile: TileKey) -> tuple[slice, ...]:
        """The tile's region of its level array, as slices (a page is one index of each
        leading dimension), in the array's order of dimensions."""
        shape = self.levels[tile[0]].shape
        order = self.order or tuple(range(len(shape)))
        region: list[slice] = [slice(0)] * len(shape)
        for dim, r in zip(order, self.plan.tile_region(*tile), strict=True):
            n = shape[dim]
            region[dim] = slice(*r.indices(n)[:2]) if isinstance(r, slice) else slice(r, r + 1)
        return tuple(region)

    def _chunks_under(self, level_index: int, region: tuple[slice, ...]) -> list[Coords]:
        """The chunks of the level that a tile's region overlaps."""
        level = self.levels[level_index]
        ranges = [
            range(s.start // c, (s.stop - 1) // c + 1)
            for s, c in zip(region, level.chunks, strict=True)
        ]
        return list(itertools.product(*ranges))

    async def _tiles(
        self, tiles: Iterable[TileKey], version: int | None = None
    ) -> dict[TileKey, np.ndarray]:
        regions, wanted = self._wanted(tiles)
        needed = {(tile[0], c) for tile, chunks in wanted.items() for c in chunks}
        decoded = await self._decoded(needed)
        looks = None if self.look is None else await self._colour(regions, wanted, decoded)
        self.versions.as_served(version, decoded)  # no await from here to the reply
        out = {}
        for tile, chunks in wanted.items():  # coloured again where a version serves others
            kept = self._coloured_from(tile, chunks, decoded, looks)
            out[tile] = self._assemble(tile, regions[tile], chunks, decoded, looks) if (
                kept is None) else kept
        return out

    def _wanted(self, tiles: Iterable[TileKey]) -> tuple[
            dict[TileKey, tuple[slice, ...]], dict[TileKey, list[Coords]]]:
        """Each tile's region, and the chunks under it."""
        regions = {tile: self._region(tile) for tile in tiles}
        return regions, {tile: self._chunks_under(tile[0], r) for tile, r in regions.items()}

    # --- the colour composite ------------------------------------------------------------

    async def _colour(
        self,
        regions: dict[TileKey, tuple[slice, ...]],
        wanted: dict[TileKey, list[Coords]],
        decoded: dict[ChunkKey, np.ndarray],
    ) -> Looks:
        """The look's windows as now (measured first if a change dropped them) and the tiles
        of ``wanted`` coloured through them from ``decoded``, on the colouring thread, kept
        for the reads that serve them; a tile another task is colouring is waited for."""
        look = self.look
        assert look is not None
        while look.windows is None:  # not yet measured, or a change dropped them
            await self._measure(look)
        looks = look.snapshot()
        for tile in wanted:
            if (event := self._colouring.get(tile)) is not None:
                await waited(event.wait())
        todo = sorted(t for t in wanted if t not in self._colouring
                      and self._coloured_from(t, wanted[t], decoded, looks) is None)
        per = max(1, COLOUR_BATCH_BYTES // self.plan.tile_nbytes(todo[0][0])) if todo else 1
        batches = [(todo[i : i + per], trio.Event()) for i in range(0, len(todo), per)]
        for some, event in batches:
            self._colouring.update(dict.fromkeys(some, event))

        def colour(some: list[TileKey]) -> list[tuple[TileKey, _Coloured]]:
            return [(t, _Coloured(tuple(decoded[(t[0], c)] for c in wanted[t]), looks[0],
                                  self._assemble(t, regions[t], wanted[t], decoded, looks)))
                    for t in some]

        try:
            for some, event in batches:  # in file order, each batch's readers let go at once
                for tile, coloured in await waited(trio.to_thread.run_sync(
                        colour, some, limiter=self._context.colouring, abandon_on_cancel=True)):
                    self._keep(tile, coloured)
                self._coloured_batch(some, event)
        finally:  # failed or cut: whoever waits for the rest colours them itself
            for some, event in batches:
                if not event.is_set():
                    self._coloured_batch(some, event)
        return looks

    def _coloured_batch(self, tiles: list[TileKey], event: trio.Event) -> None:
        """The colouring of ``tiles`` that ``event`` stands for is over (not another task's
        colouring of one of them since)."""
        for tile in tiles:
            if self._colouring.get(tile) is event:
                del self._colouring[tile]
        event.set()

    def _keep(self, tile: TileKey, coloured: _Coloured) -> None:
        """Kept, the oldest tiles dropped past a few read-ahead windows' bytes."""
        old = self._coloured.pop(tile, None)
        self._coloured[tile] = coloured
        self._coloured_bytes += coloured.tile.nbytes - (0 if old is None else old.tile.nbytes)
        while self._coloured_bytes > (self._windows_ahead + 2) * self._window():
            first = next(iter(self._coloured))
            self._coloured_bytes -= self._coloured.pop(first).tile.nbytes

    def _coloured_from(self, tile: TileKey, chunks: list[Coords],
                       decoded: dict[ChunkKey, np.ndarray], looks: Looks | None,
                       ) -> np.ndarray | None:
        """The tile kept, if coloured from exactly these chunk arrays through ``looks``."""
        kept = self._coloured.get(tile)
        if kept is None or looks is None or kept.windows is not looks[0]:
            return None
        same = all(a is decoded[(tile[0], c)] for a, c in zip(kept.chunks, chunks, strict=True))
        return kept.tile if same else None

    async def _measure(self, look: Look) -> None:
        """Default windows (``composite``): each channel's minimum and maximum on the
        smallest level, read whole (the data type's range where it is too big)."""
        index = len(self.levels) - 1
        level = self.levels[index]
        if int(np.prod(level.shape)) * level.dtype.itemsize > MEASURED_BYTES:
            look.measure(None)
            return
        region = tuple(slice(0, n) for n in level.shape)
        chunks = self._chunks_under(index, region)
        decoded = await self._decoded({(index, c) for c in chunks})
        block = self._block(index, region, chunks, decoded)
        look.measure(block if self.order is None else np.transpose(block, self.order))

    def _assemble(
        self,
        tile: TileKey,
        region: tuple[slice, ...],
        chunks: list[Coords],
        decoded: dict[ChunkKey, np.ndarray],
        looks: Looks | None = None,
    ) -> np.ndarray:
        """A tile's data (``tile_array``) from the decoded chunks its region overlaps (a
        composite's coloured through ``looks``)."""
        block = self._block(tile[0], region, chunks, decoded)
        if self.order is not None:
            block = np.transpose(block, self.order)
        if self.look is not None:
            block = self.look(block, looks)
        return tile_array(block, self.plan, tile[0])

    def _block(
        self,
        index: int,
        region: tuple[slice, ...],
        chunks: list[Coords],
        decoded: dict[ChunkKey, np.ndarray],
    ) -> np.ndarray:
        """The values of ``region`` of level ``index``, from the decoded chunks it overlaps."""
        level = self.levels[index]
        parts = [(overlap(region, chunk_region(c, level.chunks, level.shape)),
                  decoded[(index, c)]) for c in chunks]
        if len(parts) == 1:  # the common case: the tile is (part of) one chunk, no copy
            (_, within), chunk = parts[0]
            return chunk[within]
        block = np.empty([r.stop - r.start for r in region], dtype=level.dtype)
        for (inside, within), chunk in parts:
            block[inside] = chunk[within]
        return block

    async def _decoded(self, needed: set[ChunkKey]) -> dict[ChunkKey, np.ndarray]:
        """Every chunk in ``needed``, decoded: from the cache, from a decode already under
        way, or decoded now in one batch per level. Kept under the chunk's generation asked
        for: a chunk changed while it decoded (``changed``) is not kept as the new."""
        token = self._token
        generation = self.versions.generation
        running = {key: (token, key, generation(key)) for key in needed}
        found: dict[ChunkKey, np.ndarray] = {}
        waiting: dict[ChunkKey, trio.Event] = {}
        mine: dict[int, list[Coords]] = {}
        for key in needed:
            cached = self._cache.get(running[key])
            if cached is not None:
                found[key] = cached
            elif running[key] in self._running:
                waiting[key] = self._running[running[key]]
            else:
                mine.setdefault(key[0], []).append(key[1])
        done = trio.Event()
        for level, coords in mine.items():
            for c in coords:
                self._running[running[(level, c)]] = done
        try:
            for level, coords in mine.items():
                arrays = await self.levels[level].decode(coords)
                for c, value in zip(coords, arrays, strict=True):
                    found[(level, c)] = value
                    self._cache.put(running[(level, c)], value)
        finally:
            for level, coords in mine.items():
                for c in coords:
                    self._running.pop(running[(level, c)], None)
            done.set()
        for key, event in waiting.items():
            await waited(event.wait())
            cached = self._cache.get(running[key])
            if cached is None:  # evicted at once, or the decode failed: decode it here
                cached = (await self.levels[key[0]].decode([key[1]]))[0]
            found[key] = cached
        return found


def _tile_key(span: TileSpan) -> TileKey:
    return (span.level, span.page, span.row, span.col)


class Preview(WholeImage):
    """``NAME.preview.png``: the composite of the first page of one small level, every
    ``step``-th pixel, uncompressed (size known from its shape); a read renders it whole."""

    def __init__(self, *args: Any, step: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.step = step
        height, width = self.plan.levels[0].shape[-3:-1]
        self._crop = (-(-height // step), -(-width // step))

    @property
    def size(self) -> int:
        return encoded_size("png", (*self._crop, 3), "|u1")

    async def read_into(self, offset: int, out: memoryview, version: int | None = None) -> int:
        if offset >= self.size:
            return 0
        key = (0, 0, 0, 0)
        tile = (await self._tiles([key], version))[key]
        step, (height, width) = self.step, self._crop
        data = encode("png", np.ascontiguousarray(tile[::step, ::step][:height, :width]))
        piece = data[offset : offset + len(out)]
        out[: len(piece)] = piece
        return len(piece)
