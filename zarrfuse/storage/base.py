"""The storage interface the mount's filesystem talks to: raw key I/O, blocking calls run in
worker threads. Implementations: ``local``, ``objects`` (obstore), ``stores`` (any zarr Store)
and the ``cached_backend`` wrapper; each states what it can do beyond it in ``Capabilities``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

__all__ = ["Backend", "Capabilities", "Document", "PartReader", "Stat", "child_key",
           "stat_each", "write_each"]


class Stat(NamedTuple):
    """Size and modification time of one stored object (a stable stand-in time where the
    store keeps none, so every mount shows the same time for the same bytes)."""

    size: int
    mtime_ns: int
    etag: str | None = None
    """The store's entity tag where it gives one: tells two versions of one second apart."""


class Document(NamedTuple):
    """A small object read whole (a ``zarr.json``) and its modification time."""

    data: bytes
    mtime_ns: int


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do beyond ``Backend``, stated once, asked instead of its type or
    attributes. An optional method is here, or None (and the backend has no such method)."""

    remote: bool
    """Each request waits a round trip: batches are fetched with many requests in flight."""
    can_list: bool = True
    """Whether the store can list (web servers cannot): else existence is learnt per key."""
    stat_by_listing: bool = False
    """Whether one chunk's size is better learnt by listing its directory (remote stores)."""
    read_many: Callable[[Sequence[str]], list[tuple[Stat, bytes] | None]] | None = None
    """``read_all`` of each key with its stat, all in flight at once on one thread."""
    open_reader_nowait: Callable[[Sequence[str], Sequence[int | None] | None],
                                 PartReader | None] | None = None
    """As ``open_reader``, or None if it would wait on storage."""
    read_held: Callable[[str], bytes | None] | None = None
    """A whole object held apart from the store (a ``--cache-dir`` block), or None."""
    prefetch_objects: Callable[[Sequence[tuple[str, int | None]]], None] | None = None
    """Start fetching these (key, size) objects whole, sizes None where unknown: the
    filesystem is about to open them (read-only mounts)."""
    warm_after: Callable[..., None] | None = None
    """``(key, following, *, waited)``: ``key`` was read to its end; have the kernel read
    the ``following()`` (key, size) files ahead where that helps."""
    list_stats_share: Callable[[str, int, int], dict[str, Stat]] | None = None
    """``(prefix, i, n)``: ``list_stats`` of the names in share ``i`` of ``n`` (each name in
    one share, however the directory changes meanwhile): ``n`` threads list one directory
    together, a stat that waits on the disk leaving the others going."""
    watched_root: str | None = None
    """The local directory whose changes the kernel can tell (``--watch``)."""


class Backend(Protocol):
    """Key-level access to a store. Keys are full store keys, ``/``-separated."""

    capabilities: Capabilities

    def list_stats(self, prefix: str) -> dict[str, Stat]:
        """Objects directly under ``prefix`` (a directory key, "" for the root): name -> size
        and time, from the listing alone (no request per object)."""
        ...

    def list_names(self, prefix: str) -> set[str]:
        """Names of the objects directly under ``prefix``: one listing, nothing per object."""
        ...

    def list_subdirs(self, prefix: str) -> list[str]:
        """Names directly under ``prefix`` that may be sub-prefixes; may include objects where
        the store cannot tell them apart cheaply (callers check each)."""
        ...

    def stat(self, key: str) -> Stat | None:
        """Size and time of one object, None if absent."""
        ...

    def stat_names(self, prefix: str, names: Sequence[str]) -> list[Stat | None]:
        """``stat`` of each ``prefix/name``, in one call (a local directory is opened once)."""
        ...

    def open_reader(
        self, keys: Sequence[str], sizes: Sequence[int | None] | None = None
    ) -> PartReader:
        """Open a chunk's parts for reading; their sizes are fixed from here on. ``sizes``,
        from a fresh listing, spare backends a request per part."""
        ...

    def read_all(self, key: str) -> bytes | None:
        """A whole object, None if absent."""
        ...

    def read_range(self, key: str, start: int, stop: int) -> bytes | memoryview:
        """Bytes ``[start, stop)`` of an object in one request; FileNotFoundError if it is
        absent, EIO if it has fewer."""
        ...

    def read_tail(self, key: str, count: int) -> tuple[bytes | memoryview, int | None] | None:
        """The last ``count`` bytes of an object (all of it if smaller) in one request, with
        its size where the answer tells it; None if it is absent."""
        ...

    def read_document(self, key: str) -> Document | None:
        """A whole object and its time, in one request; None if absent."""
        ...

    def write(self, key: str, pieces: Sequence[memoryview], *, durable: bool = False) -> int:
        """Replace an object with ``pieces`` joined, atomically: readers see the old or the
        new bytes, never a mix. Returns its new modification time (the store's where it
        tells it cheaply, else the time of the write)."""
        ...

    def write_parts(
        self, parts: Sequence[tuple[str, Sequence[memoryview]]], *, durable: bool = False
    ) -> list[int]:
        """Replace several objects (a chunk's parts) as one: after a crash at any moment,
        and :meth:`recover`, all are old or all are new (where the store can promise it).
        Returns their new times."""
        ...

    def recover(self) -> tuple[int, int]:
        """Finish or undo the multi-part writes a crash interrupted (writable mounts, before
        serving, and ``zarrfuse verify --repair``): (rolled forward, rolled back)."""
        ...

    def show_recovered(self) -> int:
        """For read-only mounts: read every chunk as ``recover`` would leave it, changing
        nothing stored; returns how many commits were interrupted."""
        ...

    def set_mtime(self, key: str, mtime_ns: int) -> bool:
        """Set an object's modification time, if the store can (False: it cannot, as S3's
        ``LastModified`` is the store's own)."""
        ...

    def delete(self, key: str) -> None:
        """Remove an object; absent is fine."""
        ...

    def close(self) -> None:
        """Release what the backend holds (threads, connections); called at unmount."""
        ...


class PartReader(Protocol):
    """Open parts of one chunk. ``sizes`` holds None for a part that is absent."""

    sizes: tuple[int | None, ...]

    def read_into_nowait(self, part: int, start: int, out: memoryview) -> int:
        """Copy what is available without waiting for I/O (page cache); returns the count."""
        ...

    def read_into(self, part: int, start: int, out: memoryview) -> None:
        """Fill ``out`` from the part at ``start``, waiting for storage as needed."""
        ...

    def release(self) -> None:
        """The last user let go (the reader may stay cached): drop read buffers."""
        ...

    def close(self) -> None: ...


def write_each(
    backend: Backend, parts: Sequence[tuple[str, Sequence[memoryview]]], durable: bool
) -> list[int]:
    """``write_parts`` for backends without a journal: one atomic write per part (a crash
    between two may leave parts of two commits)."""
    return [backend.write(key, pieces, durable=durable) for key, pieces in parts]


def child_key(prefix: str, name: str) -> str:
    """The key of ``name`` directly under the directory key ``prefix`` ("": the root)."""
    return f"{prefix}/{name}" if prefix else name


def stat_each(backend: Backend, prefix: str, names: Sequence[str]) -> list[Stat | None]:
    """``stat_names`` for a store where each name costs its own request anyway."""
    return [backend.stat(child_key(prefix, name)) for name in names]
