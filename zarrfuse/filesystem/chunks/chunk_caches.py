"""What a StoredChunks remembers between requests: chunk sizes, and chunks left open.
Neither touches storage: ``stored_chunks`` asks and fills them."""

from __future__ import annotations

import resource
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from zarrfuse.filesystem.chunks.recently_used import FOR_EVER, RecentlyUsed, Trust
from zarrfuse.storage.base import PartReader, Stat

__all__ = [
    "Asked", "KnownSize", "KnownSizes", "OpenChunk", "OpenChunkCache", "descriptors_to_keep_open",
]


@dataclass(frozen=True)
class KnownSize:
    """A chunk's logical size and time (None: not stored)."""

    stat: Stat | None


Asked = tuple[float, int]
"""When a size was asked (monotonic) and the sizes' ticket then (``KnownSizes.asking``)."""


class KnownSizes:
    """Chunk sizes learnt one chunk at a time, each believed as ``trust`` says; the least
    recently used are dropped past ``capacity``."""

    def __init__(self, capacity: int, trust: Trust) -> None:
        self._sizes: RecentlyUsed[tuple[int, ...], KnownSize] = RecentlyUsed(
            capacity, trust=trust)

    def get(self, coords: tuple[int, ...]) -> KnownSize | None:
        return self._sizes.get(coords)

    def clear(self) -> None:
        self._sizes.clear()

    def drop(self, coords: tuple[int, ...]) -> None:
        self._sizes.drop(coords)

    def asking(self) -> Asked:
        """Taken before a chunk's size is asked of the store, for :meth:`put`."""
        return self._sizes.trust.clock(), self._sizes.ticket()

    def put(self, coords: tuple[int, ...], stat: Stat | None, *, asked: Asked | None = None
            ) -> None:
        """Remember ``stat``: what a commit or a delete just made, or (``asked``) the
        store's answer to an ask begun then, not kept if the chunk changed meanwhile (a stat
        that raced a commit, or a change the store watch reported, is older than it)."""
        if asked is None:
            self._sizes.put(coords, KnownSize(stat))
        else:
            self._sizes.put(coords, KnownSize(stat), at=asked[0], ticket=asked[1])


@dataclass
class OpenChunk:
    """A chunk opened for reading: its parts' reader and their checked sizes. ``close``
    releases one user; the reader closes when no user and no cache holds it."""

    reader: PartReader
    sizes: tuple[int, ...]
    coords: tuple[int, ...] = ()
    users: int = 1
    cached: bool = False
    read_to_end: bool = False
    """Whether a read reached its end (the chunks after it were then fetched ahead)."""
    waited: bool = False
    """Whether opening it waited on storage (in a worker thread)."""

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
    """Recently opened chunks, shared by every open of the same chunk; one per mount,
    bounded in file descriptors. Why: docs/performance.md, "Caches and their tickets"."""

    def __init__(
        self, descriptors: int, trust: Trust = FOR_EVER, *,
        only_while: Callable[[], bool] | None = None,
    ) -> None:
        self._chunks: RecentlyUsed[Hashable, OpenChunk] = RecentlyUsed(
            descriptors, trust=trust, weigh=lambda opened: max(1, len(opened.sizes)),
            on_evict=_evicted,
        )
        self._only_while = only_while

    @property
    def beside_writers(self) -> bool:
        """Whether the mount commits chunks (its opens and commits then share chunk locks)."""
        return self._only_while is not None

    def _trusted(self) -> bool:
        return self._only_while is None or self._only_while()

    def take(self, key: Hashable) -> OpenChunk | None:
        """The chunk kept under ``key`` (its array's and its coordinates), one user more."""
        opened = self._chunks.get(key) if self._trusted() else None
        if opened is not None:
            opened.users += 1
        return opened

    def drop(self, key: Hashable) -> None:
        """The chunk changed in the store: its next open opens it anew."""
        opened = self._chunks.drop(key)
        if opened is not None:
            _evicted(opened)

    def ticket(self) -> int:
        """Taken before a chunk is opened, for :meth:`adopt`."""
        return self._chunks.ticket()

    def adopt(self, key: Hashable, opened: OpenChunk, ticket: int) -> None:
        """Keep ``opened``, unless the chunk changed since ``ticket`` (it may be the old
        version). A chunk not kept closes with its only user."""
        if not self._trusted() or self._chunks.get(key) is not None:
            return  # untrusted, or another open won the race
        opened.cached = True
        if not self._chunks.put(key, opened, ticket=ticket):
            opened.cached = False

    def drop_tagged(self, tag: object) -> None:
        """Every chunk kept under a key ``(tag, coordinates)`` (one array's) is opened anew."""
        for _, opened in self._chunks.drop_where(
                lambda key: isinstance(key, tuple) and key[0] is tag):
            _evicted(opened)

    def clear(self) -> None:
        """Changes may no longer reach the cache: every chunk is opened anew."""
        for opened in self._chunks.clear():
            _evicted(opened)


KEPT_OPEN_AT_MOST = 16384
"""Descriptors a mount keeps open for chunks, whatever the process may open: a tool that
reads every chunk file twice (a second pass) finds them open."""


def descriptors_to_keep_open() -> int:
    """A quarter of the descriptors the process may open (the rest: readers' own handles,
    writers, listings, connections), at most ``KEPT_OPEN_AT_MOST``, at least 64."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return KEPT_OPEN_AT_MOST
    return max(64, min(KEPT_OPEN_AT_MOST, soft // 4))


def _evicted(opened: OpenChunk) -> None:
    """An open chunk the cache let go: closed now if nobody reads it, else by its last user."""
    opened.cached = False
    if opened.users <= 0:
        opened.reader.close()
