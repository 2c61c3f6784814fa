"""Whole chunks read in worker threads, many per blocking call; on a remote store all at once
(``read_many``, else the fetch pool). Why: docs/performance.md, "Requests in flight"."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from zarrfuse.extensions.transformers import ConcatParts
from zarrfuse.filesystem.chunks.mount_context import MountContext
from zarrfuse.filesystem.chunks.part_opening import ChunkKeys, PartOpening, read_span
from zarrfuse.storage.base import Stat

__all__ = ["WholeChunks"]

Listed = Sequence[Stat | None] | None
"""A chunk's parts' stats from a fresh listing, if there is one."""


class WholeChunks:
    """Reads one array's chunks whole through its backend."""

    def __init__(
        self, context: MountContext, parts: ConcatParts, opening: PartOpening,
        keys_of: Callable[[tuple[int, ...]], ChunkKeys],
    ) -> None:
        self.backend = context.backend
        self.parts = parts
        self._opening = opening
        self._keys_of = keys_of
        self.counters = context.counters
        self._fetch_pool = context.fetch_pool
        self._one_object = len(parts.parts) == 1 and parts.parts[0].size is None
        """One part of any size: the chunk is one object, read in one request, unchecked."""

    def read(
        self, coords: Sequence[tuple[int, ...]], listed: Sequence[Listed]
    ) -> list[bytes | None]:
        """Each chunk whole, None where absent. Blocking."""
        if not (self.backend.capabilities.remote and len(coords) > 1):
            return [self._read_one(c, stats) for c, stats in zip(coords, listed, strict=True)]
        # What the backend holds (a warm --cache-dir) is read here: a pool hop costs more.
        out = [self._read_held(c) for c in coords]
        asked = [i for i, data in enumerate(out) if data is None]
        read_many = self.backend.capabilities.read_many if self._one_object else None
        if read_many is not None:  # one thread waits for every request, sent at once
            fetched = [None if found is None else found[1]
                       for found in read_many([self._keys_of(coords[i]).parts[0] for i in asked])]
            self.counters.store["read"] += len(asked)
            self.counters.store_bytes_read += sum(len(d or b"") for d in fetched)
        else:
            fetched = list(self._fetch_pool().map(self._read_one, [coords[i] for i in asked],
                                            [listed[i] for i in asked]))
        for i, data in zip(asked, fetched, strict=True):
            out[i] = data
        return out

    def _read_held(self, c: tuple[int, ...]) -> bytes | None:
        held = self.backend.capabilities.read_held if self._one_object else None
        return None if held is None else held(self._keys_of(c).parts[0])

    def _read_one(self, c: tuple[int, ...], stats: Listed) -> bytes | None:
        chunk = self._keys_of(c)
        if self._one_object:
            self.counters.store["read"] += 1
            whole_chunk = self.backend.read_all(chunk.parts[0])
            self.counters.store_bytes_read += len(whole_chunk or b"")
            return whole_chunk
        opened = self._opening.open(chunk, stats)
        if opened is None:
            return None
        try:
            data = read_span(opened, 0, opened.size)
            self.counters.store["read"] += len(opened.sizes)
            self.counters.store_bytes_read += len(data)
            return bytes(data)
        finally:
            opened.close()
