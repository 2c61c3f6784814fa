"""A chunk's parts read block by block from a ``--cache-dir`` (``cached_backend``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from zarrfuse.storage.base import Backend, PartReader, Stat
from zarrfuse.storage.disk_cache import BLOCK_SIZE, DiskCache

__all__ = ["BlockStore", "CachedPartReader"]


class BlockStore(Protocol):
    """What the reader needs of the caching backend: its cache, block names, the store."""

    inner: Backend
    cache: DiskCache

    def block_name(self, key: str, stat: Stat, block: int) -> str: ...


class CachedPartReader:
    """Parts read block by block from the cache; a missing block is read through the inner
    backend's reader (with its read-ahead) and kept."""

    def __init__(
        self, backend: BlockStore, keys: Sequence[str], stats: Sequence[Stat | None]
    ) -> None:
        self.backend = backend
        self.keys = list(keys)
        self.stats = list(stats)
        self.sizes = tuple(None if s is None else s.size for s in stats)
        self._inner: PartReader | None = None

    def _fetch(self, part: int, start: int, out: memoryview) -> None:
        if self._inner is None:
            self._inner = self.backend.inner.open_reader(self.keys, self.sizes)
        self._inner.read_into(part, start, out)

    def _blocks(self, part: int, start: int, count: int) -> list[tuple[int, int, int, int]]:
        """(block, its length, offset in it, bytes to take) covering ``start..+count``."""
        size = self.sizes[part] or 0
        out = []
        position, end = start, min(start + count, size)
        while position < end:
            block = position // BLOCK_SIZE
            length = min(BLOCK_SIZE, size - block * BLOCK_SIZE)
            offset = position - block * BLOCK_SIZE
            take = min(length - offset, end - position)
            out.append((block, length, offset, take))
            position += take
        return out

    def read_into_nowait(self, part: int, start: int, out: memoryview) -> int:
        stat = self.stats[part]
        if stat is None:
            return 0
        done = 0
        for block, length, offset, take in self._blocks(part, start, len(out)):
            name = self.backend.block_name(self.keys[part], stat, block)
            got = self.backend.cache.read(name, length, offset, out[done : done + take],
                                          nowait=True)
            done += got
            if got < take:
                break
        return done

    def read_into(self, part: int, start: int, out: memoryview) -> None:
        stat = self.stats[part]
        if stat is None:
            self._fetch(part, start, out)
            return
        done = 0
        for block, length, offset, take in self._blocks(part, start, len(out)):
            name = self.backend.block_name(self.keys[part], stat, block)
            target = out[done : done + take]
            if self.backend.cache.read(name, length, offset, target, nowait=False) < take:
                whole = bytearray(length)
                self._fetch(part, block * BLOCK_SIZE, memoryview(whole))
                self.backend.cache.write(name, whole)
                target[:] = memoryview(whole)[offset : offset + take]
            done += take
        if done < len(out):  # past the end: the inner reader says how
            self._fetch(part, start + done, out[done:])

    def release(self) -> None:
        if self._inner is not None:
            self._inner.release()

    def close(self) -> None:
        if self._inner is not None:
            self._inner.close()
            self._inner = None
