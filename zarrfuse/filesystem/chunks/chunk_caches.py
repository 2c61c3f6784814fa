"""What a StoredChunks remembers between requests: chunk sizes, and chunks left open.

:class:`KnownSizes` keeps sizes learnt one chunk at a time (a stat, a commit, a delete) for
the listing TTL; :class:`OpenChunkCache` keeps a read-only mount's recently opened chunks
open, shared by every open of the same chunk; :class:`OpenChunk` is such an opened chunk,
counted by its users. Neither touches storage: ``chunk_source`` asks and fills them.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from dataclasses import dataclass

from zarrfuse.filesystem.chunks.recently_used import RecentlyUsed
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
        self._sizes: RecentlyUsed[tuple[int, ...], KnownSize] = RecentlyUsed(capacity, ttl=ttl)

    def get(self, coords: tuple[int, ...]) -> KnownSize | None:
        return self._sizes.get(coords)

    def drop(self, coords: tuple[int, ...]) -> None:
        self._sizes.drop(coords)

    def put(
        self, coords: tuple[int, ...], stat: Stat | None, *, learnt: float | None = None
    ) -> None:
        """Remember ``stat``, unless what is known was learnt later (a stat that raced a
        commit must not overwrite the commit's size with the old one)."""
        learnt = time.monotonic() if learnt is None else learnt
        known = self._sizes.get(coords)
        if known is not None and known.learnt > learnt:
            return
        self._sizes.put(coords, KnownSize(stat, learnt), at=learnt)


@dataclass
class OpenChunk:
    """A chunk opened for reading: its parts' reader and their checked sizes.

    ``close`` releases one user; the reader itself closes when no user and no cache holds it.
    """

    reader: PartReader
    sizes: tuple[int, ...]
    coords: tuple[int, ...] = ()
    users: int = 1
    cached: bool = False
    read_to_end: bool = False
    """Whether a read reached its end (the chunks after it were then fetched ahead)."""

    @property
    def size(self) -> int:
        """The chunk file's size: its present parts together."""
        return sum(self.sizes)

    @property
    def version(self) -> Hashable:
        """Which stored version this is: the parts' sizes, and what the backend knows of
        their identity (a local part's inode and time)."""
        return (self.sizes, getattr(self.reader, "version", None))

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
        self._chunks: RecentlyUsed[tuple[int, ...], OpenChunk] = RecentlyUsed(
            capacity, ttl=ttl, on_evict=_evicted
        )

    def take(self, coords: tuple[int, ...]) -> OpenChunk | None:
        opened = self._chunks.get(coords)
        if opened is not None:
            opened.users += 1
        return opened

    def drop(self, coords: tuple[int, ...]) -> None:
        """The chunk changed in the store: its next open opens it anew."""
        opened = self._chunks.drop(coords)
        if opened is not None:
            _evicted(opened)

    def adopt(self, coords: tuple[int, ...], opened: OpenChunk) -> None:
        if self._chunks.get(coords) is not None:
            return  # another open won the race; this one closes with its only user
        opened.cached = True
        self._chunks.put(coords, opened)


def _evicted(opened: OpenChunk) -> None:
    """An open chunk the cache let go: closed now if nobody reads it, else by its last user."""
    opened.cached = False
    if opened.users <= 0:
        opened.reader.close()
