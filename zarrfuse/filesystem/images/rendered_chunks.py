"""One array's chunks as rendered image files: decode through zarr, encode, cache; and back.
The grid is the read-chunk grid (a shard's inner chunks: one tile never costs a whole
shard); unstored chunks render as the fill value; work runs on the CPU worker threads.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np
import trio
import zarr

from zarrfuse.api.chunk_encoding import ChunkEncoder
from zarrfuse.api.regions import chunk_region, overlap
from zarrfuse.errors import ReadOnlyError
from zarrfuse.filesystem.chunks.chunk_decoder import ChunkDecoder
from zarrfuse.filesystem.images.planes import plane_chunks
from zarrfuse.filesystem.images.render import decode, encode, encoded_size
from zarrfuse.request_deadline import waited

__all__ = ["READ_AHEAD_CHUNKS", "RenderedChunks"]

READ_AHEAD_CHUNKS = 16
"""Chunks of a directory rendered ahead per batch (one or two batches kept ahead)."""


class RenderedChunks:
    """Chunks of one zarr array as files of one format."""

    def __init__(
        self,
        array: zarr.Array,
        fmt: str,
        *,
        decoder: ChunkDecoder,
        encoder: ChunkEncoder | None = None,
        colour: int | None = None,
    ) -> None:
        """``encoder``: writes encode whole stored objects (chunks, or shards) with it and
        store them through the decoder's chunk source, as chunk files are (parts, journal,
        chunk lock); None: the files are read-only."""
        self.array = array
        self.fmt = fmt
        self.dtype = np.dtype(array.dtype)
        read_chunks = tuple(array.chunks)
        planes = plane_chunks(fmt, tuple(array.shape), read_chunks,
                              getattr(array.metadata, "dimension_names", None), colour)
        self.planes = planes is not None
        self.colour = colour if planes is not None else None
        """The axis whose channels each file shows as one colour picture (RGB last)."""
        self.chunk_shape = read_chunks if planes is None else planes
        """What one file shows: a read chunk, or one 2-D plane of it (``planes``)."""
        self._pieces = tuple(max(1, r // c)
                             for r, c in zip(read_chunks, self.chunk_shape, strict=True))
        """Files per read chunk along each dimension (all 1 unless ``planes``)."""
        self._span = tuple(-(-c // r) for r, c in zip(read_chunks, self.chunk_shape,
                                                      strict=True))
        """Read chunks per file along each dimension: all 1 but a colour axis whose channels
        are stored one (or a few) per chunk, whose tile is made from several chunks."""
        self._read_grid = tuple(math.ceil(s / r)
                                for s, r in zip(array.shape, read_chunks, strict=True))
        self.grid = tuple(
            math.ceil(s / c) for s, c in zip(array.shape, self.chunk_shape, strict=True)
        )
        self.per_stored = tuple(
            k * n for k, n in zip(decoder.per_stored, self._pieces, strict=True)
        )
        """Files per stored chunk (shard) along each dimension; all 1 for whole chunks of an
        unsharded array."""
        self._ahead_dim = max((d for d, n in enumerate(self.grid) if n > 1), default=None)
        """The dimension along which the files of a directory follow each other: the last
        of extent > 1 (rendered views leave extent-1 dimensions out of the path)."""
        context = decoder.stored.context
        self._limiter = context.cpu
        self._cache = context.rendered
        self._start_soon = context.start_soon
        self._token = next(context.numbers)
        """This source's own number in the render cache's keys. Never ``id()``: the catalog
        rebuilds a view when its array changes, and a new source may get a freed one's
        address, whose cached renderings would then be served as its own."""
        self._decoder = decoder
        self._encoder = encoder
        self._running: dict[tuple[int, ...], trio.Event] = {}
        self._writes: dict[tuple[int, ...], int] = {}
        """Writes per chunk since the mount: a rendering that began before a write is not
        kept (it may show the old values)."""
        self._ahead_until: tuple[tuple[int, ...], int] | None = None
        """The line of chunks being read ahead (coordinates but the ahead dimension) and how
        far along it renderings were asked for."""

    def cache_key(self, coords: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
        """The key of file ``coords``'s rendering in the shared render cache."""
        return (self._token, coords)

    def stored_coords(self, coords: tuple[int, ...]) -> tuple[int, ...]:
        """The stored chunk (the shard, for sharded arrays) that holds file ``coords``."""
        return self._decoder.stored_coords(self._read_coords(coords))

    def drop_stored(self, stored: tuple[int, ...]) -> list[tuple[int, ...]]:
        """The stored chunk (shard) ``stored`` changed another way: the renderings of its
        files are dropped (and those under way not kept). Returns the files' coordinates."""
        reads = itertools.product(*(
            range(s * k, min((s + 1) * k, g))
            for s, k, g in zip(stored, self._decoder.per_stored, self._read_grid, strict=True)))
        files = sorted({f for read in reads for f in self._files_of(read)})
        for c in files:
            self._writes[c] = self._writes.get(c, 0) + 1
            self._cache.drop(self.cache_key(c))
        return files

    def drop_where(self, below: Callable[[tuple[int, ...]], bool]) -> None:
        """The renderings of files whose stored chunk is ``below`` are dropped (and those
        under way not kept): their chunks went or came with no change naming them."""
        def ours_below(key: object) -> bool:
            return (isinstance(key, tuple) and key[0] == self._token
                    and below(self.stored_coords(key[1])))

        dropped = [key[1] for key, _ in self._cache.drop_where(ours_below)
                   if isinstance(key, tuple)]
        for c in {*dropped, *(c for c in self._running if below(self.stored_coords(c)))}:
            self._writes[c] = self._writes.get(c, 0) + 1

    def _read_coords(self, coords: tuple[int, ...]) -> tuple[int, ...]:
        """The (first) read chunk that holds file ``coords``."""
        return tuple(c * s // n for c, s, n in zip(coords, self._span, self._pieces,
                                                   strict=True))

    def _reads_of(self, coords: tuple[int, ...]) -> list[tuple[int, ...]]:
        """Every read chunk file ``coords`` shows part of (one, unless it spans several)."""
        first = self._read_coords(coords)
        return list(itertools.product(*(
            range(f, min(f + s, g))
            for f, s, g in zip(first, self._span, self._read_grid, strict=True))))

    def _files_of(self, read: tuple[int, ...]) -> list[tuple[int, ...]]:
        """Every file that shows part of read chunk ``read``."""
        return list(itertools.product(*(
            range(r // s, r // s + 1) if s > 1 else range(r * n, min((r + 1) * n, g))
            for r, s, n, g in zip(read, self._span, self._pieces, self.grid, strict=True))))

    def image_shape(self, coords: Sequence[int]) -> tuple[int, ...]:
        """The shape of the image in file ``coords``: a plane's two dimensions, or the chunk's
        (cropped to the array bounds)."""
        shape = self.shape_of(coords)
        if not self.planes:
            return shape
        return shape[-2:] if self.colour is None else (*shape[-2:], shape[self.colour])

    def _picture(self, value: np.ndarray) -> np.ndarray:
        """A file's values as the picture it shows: a plane, or a colour tile (y, x, RGB)."""
        if self.colour is not None:
            value = np.moveaxis(value, self.colour, -1)
            return value.reshape(value.shape[-3:])
        return value.reshape(value.shape[-2:])

    def _region_values(self, coords: tuple[int, ...], picture: np.ndarray) -> np.ndarray:
        """The inverse of ``_picture``: the values in the shape of the file's region."""
        shape = list(self.shape_of(coords))
        if self.colour is None:
            return picture.reshape(shape)
        moved = [n for d, n in enumerate(shape) if d != self.colour] + [shape[self.colour]]
        return np.moveaxis(picture.reshape(moved), -1, self.colour)

    def region(self, coords: Sequence[int]) -> tuple[slice, ...]:
        return chunk_region(coords, self.chunk_shape, self.array.shape)

    def shape_of(self, coords: Sequence[int]) -> tuple[int, ...]:
        return tuple(s.stop - s.start for s in self.region(coords))

    async def size(self, coords: tuple[int, ...]) -> int:
        """Exact file size, known without decoding the chunk; but strings of variable length
        are rendered to know it (their NPY is as wide as the chunk's longest value)."""
        if self.dtype.kind == "T":
            return len(await self.render(coords))
        return encoded_size(self.fmt, self.image_shape(coords), self.dtype.str)

    def _encode_all(self, values: list[np.ndarray]) -> list[bytes]:
        if self.planes:
            values = [self._picture(v) for v in values]
        return [encode(self.fmt, np.asarray(v)) for v in values]

    async def _decode(self, batch: list[tuple[int, ...]]) -> list[np.ndarray]:
        """The values of each file of ``batch``: its read chunk decoded once (``ChunkDecoder``),
        and for planes, the plane cut out of it."""
        if not self.planes:
            return await self._decoder.decode(batch)
        read = list(dict.fromkeys(r for c in batch for r in self._reads_of(c)))
        decoded = dict(zip(read, await self._decoder.decode(read), strict=True))
        out = []
        for c in batch:
            if any(s > 1 for s in self._span):
                out.append(self._assemble(c, decoded))
                continue
            chunk = decoded[self._read_coords(c)]
            at = tuple(slice((i % n) * p, (i % n + 1) * p)
                       for i, n, p in zip(c, self._pieces, self.chunk_shape, strict=True))
            out.append(chunk[at[:-2]])
        return out

    async def render(self, coords: tuple[int, ...]) -> bytes:
        """The chunk's file, rendered once: a render already under way (for another reader,
        or ahead) is waited for, not repeated. The chunks after it in its directory are
        rendered ahead, a batch at a time, since tools read a directory in order."""
        self._read_ahead(coords)
        key = self.cache_key(coords)
        while True:
            cached = self._cache.get(key)
            if cached is not None:
                return cached
            running = self._running.get(coords)
            if running is None:
                break
            await waited(running.wait())
        return (await self._render_batch([coords]))[coords]

    async def _render_batch(self, batch: list[tuple[int, ...]]) -> dict[tuple[int, ...], bytes]:
        """Decode ``batch`` in one go (``ChunkDecoder``), encode it in a worker thread, and
        keep each file unless its chunk was written meanwhile."""
        done = trio.Event()
        writes = {c: self._writes.get(c, 0) for c in batch}
        for c in batch:
            self._running[c] = done
        try:
            values = await self._decode(batch)
            files = await trio.to_thread.run_sync(
                self._encode_all, values, limiter=self._limiter
            )
            out = dict(zip(batch, files, strict=True))
            for c, data in out.items():
                if self._writes.get(c, 0) == writes[c]:
                    self._cache.put(self.cache_key(c), data)
            return out
        finally:
            for c in batch:
                if self._running.get(c) is done:
                    del self._running[c]
            done.set()

    def _read_ahead(self, coords: tuple[int, ...]) -> None:
        """Keep the next READ_AHEAD_CHUNKS..2*READ_AHEAD_CHUNKS chunks of ``coords``' line
        rendered or rendering (batches in the background)."""
        d = self._ahead_dim
        if d is None:
            return
        line = (*coords[:d], *coords[d + 1 :])
        asked = self._ahead_until[1] if self._ahead_until and self._ahead_until[0] == line else 0
        if asked > coords[d] + READ_AHEAD_CHUNKS or asked >= self.grid[d]:
            return
        start = max(asked, coords[d] + 1)
        stop = min(start + 2 * READ_AHEAD_CHUNKS, self.grid[d])
        batch = [
            c for i in range(start, stop)
            if (c := (*coords[:d], i, *coords[d + 1 :])) not in self._running
            and self._cache.get(self.cache_key(c)) is None
        ]
        self._ahead_until = (line, stop)
        if batch:
            self._start_soon(self._render_batch, batch)

    def _overlap(self, region: Sequence[slice], read: tuple[int, ...],
                 shape: Sequence[int] | None = None,
                 ) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
        """Where ``region`` and read chunk ``read`` (or the chunk of ``shape`` there: a
        stored object) overlap: the slices of it within the region's values, and within
        the chunk's."""
        return overlap(region, chunk_region(read, self.array.chunks if shape is None else shape,
                                            self.array.shape))

    def _assemble(self, coords: tuple[int, ...],
                  decoded: dict[tuple[int, ...], np.ndarray]) -> np.ndarray:
        """A file's values from the read chunks it spans."""
        region = self.region(coords)
        block = np.empty([r.stop - r.start for r in region], dtype=self.dtype)
        for read in self._reads_of(coords):
            inside, within = self._overlap(region, read)
            block[inside] = decoded[read][within]
        return block

    def _decoded_file(self, coords: tuple[int, ...], data: bytes) -> np.ndarray:
        """A written file's values, in the shape of its region (EINVAL unless it fits)."""
        value = decode(self.fmt, data, self.image_shape(coords), self.dtype)
        return self._region_values(coords, value) if self.planes else value.reshape(
            self.shape_of(coords))

    async def _store_objects(self, coords: tuple[int, ...], data: bytes, durable: bool) -> None:
        """Store a written file in the objects (chunks, shards) it lies in: one covered whole
        is encoded from it alone, another updated under its chunk lock."""
        assert self._encoder is not None
        encoder, stored = self._encoder, self._decoder.stored
        value = await trio.to_thread.run_sync(self._decoded_file, coords, data,
                                              limiter=self._limiter)
        region = self.region(coords)
        objects = sorted({self._decoder.stored_coords(r) for r in self._reads_of(coords)})
        for obj in objects:
            inside, within = self._overlap(region, obj, encoder.chunk_shape)
            part = value[inside]
            if part.shape == encoder.chunk_shape:  # the whole object: nothing to read
                encoded = await trio.to_thread.run_sync(
                    encoder.encode_over, None, within, part, limiter=self._limiter)
                await stored.writes.commit(obj, [memoryview(encoded)], durable=durable)
            else:
                await stored.writes.update(obj, functools.partial(encoder.encode_over,
                                                           within=within, values=part),
                                    limit=encoder.stored_limit, durable=durable)

    async def write(self, coords: tuple[int, ...], data: bytes, *, durable: bool) -> None:
        """Decode a written file and store it as its chunk's (or shard's) data (``durable``:
        synced). Refused (EINVAL), the array unchanged, unless it holds this file's shape
        and data type."""
        self._writes[coords] = self._writes.get(coords, 0) + 1
        self._cache.drop(self.cache_key(coords))
        try:
            if self._encoder is None:
                raise ReadOnlyError(f"rendered files of {self.array.path or '/'} are read-only")
            await self._store_objects(coords, data, durable)
        finally:
            self._writes[coords] += 1  # renderings begun during the write are not kept
            self._cache.drop(self.cache_key(coords))
