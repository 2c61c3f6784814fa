"""What a ChunkSource remembers between requests: chunk sizes, and chunks left open.

:class:`KnownSizes` keeps sizes learnt one chunk at a time (a stat, a commit, a delete) for
the listing TTL; :class:`OpenChunkCache` keeps a read-only mount's recently opened chunks
open, shared by every open of the same chunk; :class:`OpenChunk` is such an opened chunk,
counted by its users. Neither touches storage: ``chunk_source`` asks and fills them.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass

from zarrfuse.storage.base import PartReader, Stat

__all__ = ["KnownSize", "KnownSizes", "OpenChunk", "OpenChunkCache"]


@dataclass(frozen=True)
class KnownSize:
    """A chunk's logical size and time (None: not stored) as learnt at ``learnt``
    (monotonic)."""

    stat: Stat | None
    learnt: float


class KnownSizes:
    """Chunk sizes learnt one chunk at a time, each trusted for ``ttl`` seconds (None:
    forever, for read-only mounts); the least recently used are dropped past ``capacity``."""

    def __init__(self, capacity: int, ttl: float | None) -> None:
        self.capacity = capacity
        self.ttl = ttl
        self._sizes: OrderedDict[tuple[int, ...], KnownSize] = OrderedDict()

    def get(self, coords: tuple[int, ...]) -> KnownSize | None:
        known = self._sizes.get(coords)
        if known is None:
            return None
        if self.ttl is not None and time.monotonic() - known.learnt >= self.ttl:
            del self._sizes[coords]
            return None
        self._sizes.move_to_end(coords)
        return known

    def drop(self, coords: tuple[int, ...]) -> None:
        self._sizes.pop(coords, None)

    def put(
        self, coords: tuple[int, ...], stat: Stat | None, *, learnt: float | None = None
    ) -> None:
        """Remember ``stat``, unless what is known was learnt later (a stat that raced a
        commit must not overwrite the commit's size with the old one)."""
        learnt = time.monotonic() if learnt is None else learnt
        known = self._sizes.get(coords)
        if known is not None and known.learnt > learnt:
            return
        self._sizes[coords] = KnownSize(stat, learnt)
        self._sizes.move_to_end(coords)
        while len(self._sizes) > self.capacity:
            self._sizes.popitem(last=False)


@dataclass
class OpenChunk:
    """A chunk opened for reading: its parts' reader and their checked sizes.

    ``close`` releases one user; the reader itself closes when no user and no cache holds it.
    """

    reader: PartReader
    sizes: tuple[int, ...]
    users: int = 1
    cached: bool = False

    def close(self) -> None:
        self.users -= 1
        if self.users > 0:
            return
        if self.cached:
            self.reader.release()
        else:
            self.reader.close()


class OpenChunkCache:
    """Recently opened chunks of a read-only mount, shared by every open of the same chunk.

    With a TTL (``--metadata-ttl``), an entry older than it is opened afresh: a remote reader
    holds the sizes it was opened with, and the objects may have been replaced since.
    """

    def __init__(self, capacity: int, ttl: float | None = None) -> None:
        self.capacity = capacity
        self.ttl = ttl
        self._chunks: OrderedDict[tuple[int, ...], tuple[float, OpenChunk]] = OrderedDict()

    def take(self, coords: tuple[int, ...]) -> OpenChunk | None:
        entry = self._chunks.get(coords)
        if entry is None:
            return None
        born, opened = entry
        if self.ttl is not None and time.monotonic() - born >= self.ttl:
            self._evict(coords)
            return None
        self._chunks.move_to_end(coords)
        opened.users += 1
        return opened

    def adopt(self, coords: tuple[int, ...], opened: OpenChunk) -> None:
        if coords in self._chunks:
            return  # another open won the race; this one closes with its only user
        opened.cached = True
        self._chunks[coords] = (time.monotonic(), opened)
        while len(self._chunks) > self.capacity:
            self._evict(next(iter(self._chunks)))

    def _evict(self, coords: tuple[int, ...]) -> None:
        _, evicted = self._chunks.pop(coords)
        evicted.cached = False
        if evicted.users <= 0:
            evicted.reader.close()
