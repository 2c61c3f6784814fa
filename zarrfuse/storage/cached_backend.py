"""A remote backend whose chunk bytes are kept in a ``DiskCache`` (``--cache-dir``), found by
the validator (size, time, ETag) a listing gave: what is cached and why, docs/sources.md,
"A disk cache across mounts".
"""

from __future__ import annotations

import errno
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from zarrfuse.storage.base import Backend, Document, PartReader, Stat, stat_each
from zarrfuse.storage.cached_reads import CachedPartReader
from zarrfuse.storage.disk_cache import BLOCK_SIZE, DiskCache

__all__ = ["CachingBackend"]

VALIDATORS_KEPT = 1 << 20
"""Keys whose last listed validator is remembered (about 150 bytes each)."""


class NotKept:
    """No stat of the key is kept within the trusted listing time: ask the store."""


NOT_KEPT = NotKept()
STATS_SAVED_EVERY = 32
"""A directory's kept stats are written after at least this many new answers (or at close)."""


class CachingBackend:
    """``inner`` (a remote backend) with its object bytes in ``cache``; ``identity`` names
    the store, so blocks of two stores never mix and mounts of one share them."""

    def __init__(
        self, inner: Backend, cache: DiskCache, identity: str, listing_ttl: float | None = None
    ) -> None:
        self.inner = inner
        self.cache = cache
        self.identity = identity
        self.listing_ttl = listing_ttl
        """Seconds a listing kept in the cache is trusted (a read-only mount's TTL); None: never."""
        can = inner.capabilities  # the inner's, its batched reads and fetches ahead through here
        self.capabilities = replace(
            can, open_reader_nowait=self.open_reader_nowait, read_held=self.read_held,
            read_many=self._read_many if can.read_many else None,
            prefetch_objects=self._prefetch_objects if can.prefetch_objects else None,
            list_stats_share=None)  # listings go through this cache's own list_stats
        self._validators: OrderedDict[str, Stat] = OrderedDict()
        self._stats: dict[str, dict[str, Any]] = {}
        """Stats kept on disk (``listing_ttl``), by directory, as read or written here."""
        self._unsaved: dict[str, int] = {}
        """Answers kept in ``_stats`` since the directory's file was last written."""
        self._lock = threading.Lock()

    # --- validators, learnt from what passes through --------------------------------------

    def _learn(self, key: str, stat: Stat | None) -> None:
        with self._lock:
            if stat is None:
                self._validators.pop(key, None)
                return
            self._validators[key] = stat
            self._validators.move_to_end(key)
            if len(self._validators) > VALIDATORS_KEPT:
                self._validators.popitem(last=False)

    def validator(self, key: str, size: int | None) -> Stat | None:
        """The validator of ``key`` if one was listed for an object of ``size`` bytes."""
        with self._lock:
            stat = self._validators.get(key)
        return stat if stat is not None and (size is None or stat.size == size) else None

    def block_name(self, key: str, stat: Stat, block: int) -> str:
        return DiskCache.block_name(
            f"{self.identity}\0{key}\0{stat.size}\0{stat.mtime_ns}\0{stat.etag}\0{block}"
        )

    # --- the Backend interface -------------------------------------------------------------

    def list_stats(self, prefix: str) -> dict[str, Stat]:
        found = self._kept_listing(prefix)
        if found is None:
            found = self.inner.list_stats(prefix)
            if self.listing_ttl is not None:
                self.cache.write_listing(self._listing_name(prefix),
                                         {n: list(s) for n, s in found.items()})
        base = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
        for name, stat in found.items():
            self._learn(base + name, stat)
        return found

    def _listing_name(self, prefix: str) -> str:
        return DiskCache.block_name(f"{self.identity}\0listing\0{prefix.strip('/')}")

    def _kept_listing(self, prefix: str) -> dict[str, Stat] | None:
        if self.listing_ttl is None:
            return None
        kept = self.cache.read_listing(self._listing_name(prefix), self.listing_ttl)
        if kept is None:
            return None
        try:
            return {
                str(n): Stat(int(size), int(mtime), None if etag is None else str(etag))
                for n, (size, mtime, etag) in kept.items()
            }
        except (TypeError, ValueError):  # not what write_listing wrote: ask the store
            return None

    def list_names(self, prefix: str) -> set[str]:
        if self.capabilities.stat_by_listing:  # the same LIST gives the validators: learn them
            return set(self.list_stats(prefix))
        return self.inner.list_names(prefix)

    def list_subdirs(self, prefix: str) -> list[str]:
        return self.inner.list_subdirs(prefix)

    def stat_names(self, prefix: str, names: Sequence[str]) -> list[Stat | None]:
        return stat_each(self, prefix, names)

    def stat(self, key: str) -> Stat | None:
        kept = self._kept_stat(key)
        if not isinstance(kept, NotKept):
            self._learn(key, kept)
            return kept
        found = self.inner.stat(key)
        self._learn(key, found)
        self._keep_stat(key, found)
        return found

    # --- stats kept on disk, for stores that cannot list ------------------------------------

    def _kept_stat(self, key: str) -> Stat | NotKept | None:
        """What a stat of ``key`` answered within the trusted listing time (a web server is
        not asked again per chunk of a warm cache); NOT_KEPT: ask the store."""
        if self.listing_ttl is None:
            return NOT_KEPT
        directory, _, name = key.rpartition("/")
        entry = self._kept_stats(directory).get(name)
        if not isinstance(entry, list) or not entry:
            return NOT_KEPT
        try:
            if time.time() - float(entry[-1]) > self.listing_ttl:
                return NOT_KEPT
            if len(entry) == 1:
                return None  # asked, and absent
            size, mtime, etag, _ = entry
            return Stat(int(size), int(mtime), None if etag is None else str(etag))
        except (TypeError, ValueError):  # not what _keep_stat wrote: ask the store
            return NOT_KEPT

    def _kept_stats(self, directory: str) -> dict[str, Any]:
        with self._lock:
            kept = self._stats.get(directory)
        if kept is None:
            kept = self.cache.read_listing(self._stats_name(directory),
                                           self.listing_ttl or 0.0) or {}
            with self._lock:
                kept = self._stats.setdefault(directory, kept)
        return kept

    def _keep_stat(self, key: str, stat: Stat | None) -> None:
        if self.listing_ttl is None:
            return
        directory, _, name = key.rpartition("/")
        now = time.time()
        kept = self._kept_stats(directory)
        with self._lock:  # written under the lock: an older snapshot never lands last
            kept[name] = [now] if stat is None else [stat.size, stat.mtime_ns, stat.etag, now]
            unsaved = self._unsaved.get(directory, 0) + 1
            # Written whole once per half again as many answers (and at close): rewritten
            # per answer, a directory of n keys cost n**2 / 2 entries of writes.
            if unsaved >= max(STATS_SAVED_EVERY, len(kept) // 2):
                self.cache.write_listing(self._stats_name(directory), kept)
                unsaved = 0
            self._unsaved[directory] = unsaved

    def _save_stats(self) -> None:
        """Every directory's stats not yet written (at close)."""
        with self._lock:
            for directory, unsaved in self._unsaved.items():
                if unsaved:
                    self.cache.write_listing(self._stats_name(directory),
                                             self._stats[directory])
            self._unsaved.clear()

    def _stats_name(self, directory: str) -> str:
        return DiskCache.block_name(f"{self.identity}\0stats\0{directory.strip('/')}")

    def open_reader(
        self, keys: Sequence[str], sizes: Sequence[int | None] | None = None
    ) -> PartReader:
        if sizes is None:
            stats = [self.stat(k) for k in keys]
        else:
            stats = [
                None if size is None else (self.validator(k, size) or self.stat(k))
                for k, size in zip(keys, sizes, strict=True)
            ]
        return CachedPartReader(self, keys, stats)

    def open_reader_nowait(
        self, keys: Sequence[str], sizes: Sequence[int | None] | None = None
    ) -> PartReader | None:
        """A warm cache's open without a worker thread, where every part's validator is
        known here (from the lookup before, or stats kept within the listing time)."""
        if sizes is None and self.listing_ttl is None:
            return None  # open_reader would ask the store
        stats: list[Stat | None] = []
        for i, key in enumerate(keys):
            size = None if sizes is None else sizes[i]
            if sizes is not None and size is None:
                stats.append(None)  # a part the caller knows is absent
                continue
            found = self.validator(key, size)
            if found is None:
                return None
            stats.append(found)
        return CachedPartReader(self, keys, stats)

    def read_all(self, key: str) -> bytes | None:
        if (not self.capabilities.can_list and self.capabilities.read_many
                and isinstance(self._known(key), NotKept)):  # its GET tells the validator
            found = self._read_many([key])[0]
            return None if found is None else found[1]
        stat = self.validator(key, None) or self.stat(key)
        if stat is None:
            return None
        try:
            return self._read_blocks(key, stat, 0, stat.size)
        except OSError:  # gone or replaced since the listing: the store decides
            self._learn(key, None)
            return self.inner.read_all(key)

    def _read_blocks(self, key: str, stat: Stat, start: int, stop: int) -> bytes:
        """Bytes ``[start, stop)`` of the version ``stat`` names, through the cached blocks."""
        out, reader = bytearray(stop - start), CachedPartReader(self, [key], [stat])
        try:
            reader.read_into(0, start, memoryview(out))
        finally:
            reader.close()
        return bytes(out)

    def _prefetch_objects(self, objects: Sequence[tuple[str, int | None]]) -> None:
        """The inner backend's fetching ahead, for objects whose last block is not here."""
        prefetch = self.inner.capabilities.prefetch_objects
        assert prefetch is not None  # stated only where the inner has it
        prefetch([(key, size) for key, size in objects
                  if not self._held_whole(key, self._known(key))])

    def _read_many(self, keys: Sequence[str]) -> list[tuple[Stat, bytes] | None]:
        """``read_all`` of each key: what is held answered here, the rest by the inner's
        batched reads and kept by its validator (listed, or the GET's own)."""
        read_many = self.inner.capabilities.read_many
        assert read_many is not None  # stated only where the inner has it
        stats = [self._known(key) for key in keys]
        asked = [i for i, key in enumerate(keys)
                 if stats[i] is not None and not self._held_whole(key, stats[i])]
        fetched = dict(zip(asked, read_many([keys[i] for i in asked]), strict=True))
        out: list[tuple[Stat, bytes] | None] = []
        for i, (key, stat) in enumerate(zip(keys, stats, strict=True)):
            if i not in fetched:  # kept absent, or its blocks are here
                out.append((stat, data) if isinstance(stat, Stat)
                           and (data := self.read_all(key)) is not None else None)
                continue
            found = fetched[i]
            if isinstance(stat, NotKept) and not self.capabilities.can_list:
                stat = None if found is None else found[0]  # its GET tells the validator
                self._learn(key, stat)
                self._keep_stat(key, stat)
            if found is not None and isinstance(stat, Stat) and found[0].size == stat.size:
                for at in range(0, stat.size, BLOCK_SIZE):
                    self.cache.write(self.block_name(key, stat, at // BLOCK_SIZE),
                                     found[1][at : at + BLOCK_SIZE])
            else:  # not listed, or gone or replaced since the listing: the next one tells
                self._learn(key, None)
            out.append(found)
        return out

    def _known(self, key: str) -> Stat | NotKept | None:
        """The validator ``key`` was listed or kept with; None: kept absent; else NOT_KEPT."""
        return self.validator(key, None) or self._kept_stat(key)

    def _held_whole(self, key: str, stat: Stat | NotKept | None) -> bool:
        return isinstance(stat, Stat) and self.cache.holds(
            self.block_name(key, stat, max(stat.size - 1, 0) // BLOCK_SIZE))

    def read_range(self, key: str, start: int, stop: int) -> bytes:
        """Through the cached blocks (a warm cache asks nothing), by the key's validator."""
        stat = self.validator(key, None) or self.stat(key)
        if stat is None:
            raise FileNotFoundError(key)
        if stop > stat.size:
            raise OSError(errno.EIO, f"{key}: asked for bytes {start}-{stop} of {stat.size}")
        return self._read_blocks(key, stat, start, stop)

    def read_tail(self, key: str, count: int) -> tuple[bytes, int | None] | None:
        stat = self.validator(key, None) or self.stat(key)
        if stat is None:
            return None
        return self._read_blocks(key, stat, max(stat.size - count, 0), stat.size), stat.size

    def read_held(self, key: str) -> bytes | None:
        """The object from its cached blocks, if its validator is known and all are in memory."""
        stat = self.validator(key, None)
        if stat is None:
            return None
        out = bytearray(stat.size)
        if CachedPartReader(self, [key], [stat]).read_into_nowait(0, 0, memoryview(out)) < len(out):
            return None
        return bytes(out)

    def read_document(self, key: str) -> Document | None:
        return self.inner.read_document(key)

    def write(self, key: str, pieces: Sequence[memoryview], *, durable: bool = False) -> int:
        self._learn(key, None)
        try:
            return self.inner.write(key, pieces, durable=durable)
        finally:
            self._learn(key, None)

    def write_parts(
        self, parts: Sequence[tuple[str, Sequence[memoryview]]], *, durable: bool = False
    ) -> list[int]:
        for key, _ in parts:
            self._learn(key, None)
        try:
            return self.inner.write_parts(parts, durable=durable)
        finally:
            for key, _ in parts:
                self._learn(key, None)

    def recover(self) -> tuple[int, int]:
        return self.inner.recover()

    def show_recovered(self) -> int:
        return self.inner.show_recovered()

    def set_mtime(self, key: str, mtime_ns: int) -> bool:
        return self.inner.set_mtime(key, mtime_ns)

    def delete(self, key: str) -> None:
        self._learn(key, None)
        self.inner.delete(key)

    def close(self) -> None:
        self._save_stats()
        self.inner.close()
