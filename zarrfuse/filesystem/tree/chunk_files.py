"""A view's chunk files, **raw** (a chunk's stored bytes) or **rendered** (an image of a
chunk or plane): one interface, :class:`ChunkFiles`, chosen once per array, so no caller asks
which kind a file is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from zarrfuse.api.regions import chunk_region
from zarrfuse.errors import NotFound, NotPermitted
from zarrfuse.filesystem.chunks.stored_chunks import StoredChunks
from zarrfuse.filesystem.chunks.write_check import ChunkCheck
from zarrfuse.filesystem.images.image_dims import ShownDims
from zarrfuse.filesystem.images.rendered_chunks import RenderedChunks
from zarrfuse.storage.base import Stat

__all__ = ["ChunkFiles", "OpenedVersion", "RawChunkFiles", "RenderedChunkFiles"]

Coords = tuple[int, ...]


class ChunkFilesArray(Protocol):
    """The array as its chunk files see it: what they ask of the ``mounted.ArrayView`` that
    holds them."""

    path: str
    stored: StoredChunks
    shown_dims: ShownDims | None
    metadata_time_ns: int
    metadata: dict[str, Any]

    @property
    def checker(self) -> ChunkCheck: ...


@dataclass
class OpenedVersion:
    """One version of a chunk file, opened to read: its size, what tells it from another
    version (the page-cache rule compares it), and its bytes."""

    size: int
    version: Hashable
    read_into: Callable[[int, memoryview], Awaitable[int]]
    close: Callable[[], None]


class ChunkFiles(Protocol):
    """The chunk files of one array's view."""

    every_chunk_exists: bool
    """Every position of the grid is a file (rendered: unstored chunks show the fill
    value), so directories list them all and a failed write loses no name."""

    async def stat(self, coords: Coords) -> Stat:
        """Size and time; NotFound where no such file is shown."""

    async def leaf_stats(self, done: Coords, lo: int, hi: int) -> dict[int, Stat]:
        """The files ``(*done, c)`` (shown coordinates) with ``lo <= c <= hi`` of a fanout
        leaf directory, by ``c``."""

    async def open_version(self, coords: Coords) -> OpenedVersion:
        """The file's current version, to read; NotFound if it is gone."""

    async def committed_bytes(self, coords: Coords) -> bytes:
        """What a writer opened without O_TRUNC starts from."""

    async def commit(
        self, coords: Coords, views: list[memoryview], *, durable: bool, verify: bool
    ) -> None:
        """Store a written file (``views`` laid end to end) as the chunk."""

    async def delete(self, coords: Coords) -> None:
        """Remove the file (``rm``)."""

    async def set_time(self, coords: Coords, mtime_ns: int) -> bool:
        """Keep ``mtime_ns`` as the file's time in the store; False where it cannot."""

    def changed(self, stored: Coords) -> list[Coords]:
        """The stored chunk (shard) ``stored`` changed another way (another program): drop
        what was learnt of it; the coordinates of the files that show it."""

    def drop_below(self, directories: tuple[str, ...]) -> None:
        """Store directories (each ending in ``/``) appeared or went with chunks no change
        names: what was learnt of every stored chunk is asked anew, and what was made of
        those below them (renderings) is dropped."""

    def stored_of(self, coords: Coords) -> Coords:
        """The stored chunk (shard) that file ``coords`` shows."""

    def region(self, coords: Coords) -> tuple[slice, ...]:
        """The region of the array the file shows."""


class RawChunkFiles:
    """Chunk files that are the stored chunks' bytes."""

    every_chunk_exists = False

    def __init__(self, array: ChunkFilesArray) -> None:
        self._array = array
        self._source: StoredChunks = array.stored

    async def stat(self, coords: Coords) -> Stat:
        stat = await self._source.stat(coords)
        if stat is None:
            raise NotFound(f"chunk {coords} of {self._array.path or '/'} is not stored")
        return stat

    async def leaf_stats(self, done: Coords, lo: int, hi: int) -> dict[int, Stat]:
        return await self._source.listings.stored_stats_between(done, lo, hi)

    async def open_version(self, coords: Coords) -> OpenedVersion:
        chunk = await self._source.open(coords)
        if chunk is None:
            raise NotFound(f"chunk {coords} is no longer stored")
        source = self._source
        return OpenedVersion(chunk.size, chunk.version,
                             lambda offset, out: source.read_into(chunk, offset, out),
                             chunk.close)

    async def committed_bytes(self, coords: Coords) -> bytes:
        return await self._source.read_all(coords) or b""

    def changed(self, stored: Coords) -> list[Coords]:
        self._source.drop_cached(stored)
        return [stored]

    def drop_below(self, directories: tuple[str, ...]) -> None:
        self._source.drop_listed()

    def stored_of(self, coords: Coords) -> Coords:
        return coords

    def region(self, coords: Coords) -> tuple[slice, ...]:
        grid = self._array.metadata["chunk_grid"]["configuration"]["chunk_shape"]
        return chunk_region(coords, tuple(grid), tuple(self._array.metadata["shape"]))

    async def commit(
        self, coords: Coords, views: list[memoryview], *, durable: bool, verify: bool
    ) -> None:
        if verify:  # the array's cheapest exact check (verify.py); a thread unless free
            checker = self._array.checker
            if checker.inline:
                checker.check(coords, views)
            else:
                await trio.to_thread.run_sync(checker.check, coords, views,
                                              limiter=self._source.context.cpu)
        await self._source.writes.commit(coords, views, durable=durable)

    async def delete(self, coords: Coords) -> None:
        await self._source.writes.delete(coords)

    async def set_time(self, coords: Coords, mtime_ns: int) -> bool:
        return await self._source.writes.set_time(coords, mtime_ns)


class RenderedChunkFiles:
    """Chunk files that are images of the chunks (or of their planes)."""

    every_chunk_exists = True

    def __init__(self, array: ChunkFilesArray, rendered: RenderedChunks) -> None:
        self._array = array
        self._rendered = rendered
        self._source: StoredChunks = array.stored

    def _full(self, shown: Coords) -> Coords:
        dims = self._array.shown_dims
        return shown if dims is None else dims.full(shown)

    async def stat(self, coords: Coords) -> Stat:
        """The rendering's exact size, and the time of the stored chunk (shard) that holds
        it, or the metadata's where that is not stored."""
        stored = await self._source.stat(self._rendered.stored_coords(coords))
        mtime_ns = self._array.metadata_time_ns if stored is None else stored.mtime_ns
        return Stat(await self._rendered.size(coords), mtime_ns)

    async def leaf_stats(self, done: Coords, lo: int, hi: int) -> dict[int, Stat]:
        """Every file of the leaf, timed by the stored chunk that holds it: one listing where
        the files differ in the grid's last dimension, else a stat per stored chunk."""
        rendered, array = self._rendered, self._array
        first = rendered.stored_coords(self._full((*done, lo)))
        varying = len(first) - 1 if array.shown_dims is None else array.shown_dims.dims[-1]
        per = rendered.per_stored[varying]
        stored: dict[int, Stat]
        if varying == len(first) - 1:
            stored = await self._source.listings.stored_stats(first[:-1], first[-1], hi // per)
        else:
            stored = {}
            for s in range(first[varying], hi // per + 1):
                stat = await self._source.stat((*first[:varying], s, *first[varying + 1 :]))
                if stat is not None:
                    stored[s] = stat
        out = {}
        for c in range(lo, hi + 1):
            holder = stored.get(c // per)
            mtime_ns = array.metadata_time_ns if holder is None else holder.mtime_ns
            out[c] = Stat(await rendered.size(self._full((*done, c))), mtime_ns)
        return out

    async def open_version(self, coords: Coords) -> OpenedVersion:
        data = await self._rendered.render(coords)
        view = memoryview(data)

        async def read(offset: int, out: memoryview) -> int:
            piece = view[offset : offset + len(out)]  # no copy until the reply buffer's
            out[: len(piece)] = piece
            return len(piece)

        return OpenedVersion(len(data), data, read, lambda: None)

    async def committed_bytes(self, coords: Coords) -> bytes:
        return await self._rendered.render(coords)

    def changed(self, stored: Coords) -> list[Coords]:
        self._source.drop_cached(stored)
        return self._rendered.drop_stored(stored)

    def drop_below(self, directories: tuple[str, ...]) -> None:
        self._source.drop_listed()
        key = self._source.chunk_key
        self._rendered.drop_where(lambda stored: key(stored).startswith(directories))

    def stored_of(self, coords: Coords) -> Coords:
        return self._rendered.stored_coords(coords)

    def region(self, coords: Coords) -> tuple[slice, ...]:
        return self._rendered.region(coords)

    async def commit(
        self, coords: Coords, views: Sequence[memoryview], *, durable: bool, verify: bool
    ) -> None:
        """Decoded and encoded by the rendering (which checks the picture's shape and
        type): ``verify`` has nothing to add."""
        await self._rendered.write(coords, b"".join(views), durable=durable)
        self._source.drop_cached(self._rendered.stored_coords(coords))

    async def delete(self, coords: Coords) -> None:
        raise NotPermitted("chunks of a rendered view cannot be removed")

    async def set_time(self, coords: Coords, mtime_ns: int) -> bool:
        return False  # its time is the stored chunk's
