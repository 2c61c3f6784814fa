"""Inner chunks of a sharded array, read by byte ranges of their shards through the backend.

A read of some inner chunks of one shard costs, on a remote store, one request for the
shard's index (kept afterwards, ``shard_indexes``) and one ranged request per run of
nearby chunks (``api.shard_index.merge_ranges``); a read of most of a shard's chunks is one
request for the whole shard, its index included. Each inner chunk then decodes at its
codecs' pace on the calling thread (``api.chunk_decoding``), not through zarr's pipeline.
Every call blocks: the chunk decoder runs it on worker threads.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TypeVar

import numpy as np

from zarrfuse.api.shard_index import ShardGeometry, merge_ranges
from zarrfuse.errors import CorruptChunk
from zarrfuse.filesystem.chunks.counters import Counters
from zarrfuse.filesystem.chunks.stored_chunks import StoredChunks
from zarrfuse.storage.base import Stat

__all__ = ["ShardReads"]

Coords = tuple[int, ...]
T = TypeVar("T")


class ShardReads:
    """Reads inner chunks (read-grid coordinates) of one array's shards."""

    def __init__(
        self,
        stored: StoredChunks,
        geometry: ShardGeometry,
        per_stored: Coords,
        counters: Counters,
    ) -> None:
        self.stored = stored
        self.geometry = geometry
        self._per_stored = per_stored
        self._counters = counters

    def read(
        self,
        shard: Coords,
        group: list[Coords],
        stat: Stat | None,
        decoding: Callable[[Coords], AbstractContextManager[None]],
    ) -> dict[Coords, np.ndarray | None]:
        """Each inner chunk of ``group`` (all in ``shard``) decoded, full inner shape; None
        for one not stored (the fill value). ``stat``: the shard's listed size and time,
        where the store lists. ``decoding(coords)``: a context that names a chunk that does
        not decode."""
        key = self.stored.chunk_key(shard)
        rows = {c: self.geometry.flat(self._local(c)) for c in group}
        wanted = set(rows.values())
        indexes = self.stored.shard_indexes
        table = indexes.get(shard, stat)
        whole = None if table is None else indexes.take(shard, stat, wanted)
        if table is None:
            with indexes.fetching(shard):  # one reader asks; the others wait for its answer
                table = indexes.get(shard, stat)
                whole = None if table is None else indexes.take(shard, stat, wanted)
                if table is None:
                    found = self._fetch_index(shard, key, stat, wanted)
                    if found is None:
                        return dict.fromkeys(group)
                    table, whole = found
        pieces = self._pieces(key, table, wanted, whole)
        if pieces is None:  # gone since its index was kept: the fill value
            indexes.drop(shard)
            return dict.fromkeys(group)
        out: dict[Coords, np.ndarray | None] = {}
        for c in group:
            data = pieces.get(rows[c])
            if data is None:
                out[c] = None
                continue
            with decoding(c):
                out[c] = self.geometry.inner.decode(data)
        return out

    def _fetch_index(
        self, shard: Coords, key: str, stat: Stat | None, wanted: set[int]
    ) -> tuple[np.ndarray, bytes | memoryview | None] | None:
        """The shard's index, and the whole shard where most of its chunks are wanted (kept
        for the chunks others will want); None if the shard is not stored."""
        indexes = self.stored.shard_indexes
        changes = indexes.changes
        whole = None
        with _naming(key):
            if 2 * len(wanted) >= self.geometry.count:
                whole = self._request(lambda: self.stored.backend.read_all(key))
                if whole is None:
                    return None
                table = self.geometry.index_from_shard(whole)
            else:
                found = self._read_index(key)
                if found is None:
                    return None
                table = found
        stored = {row for row, _, _ in self.geometry.ranges(table, range(self.geometry.count))}
        indexes.keep(shard, table, stat, changes, whole, stored - wanted)
        return table, whole

    def _local(self, coords: Coords) -> Coords:
        return tuple(c % n for c, n in zip(coords, self._per_stored, strict=True))

    def _read_index(self, key: str) -> np.ndarray | None:
        """The shard's index, in one request; None if the shard is not stored."""
        size = self.geometry.index_size
        backend = self.stored.backend
        if self.geometry.index_at_end:
            tail = self._request(lambda: backend.read_tail(key, size))
            if tail is None:
                return None
            data, shard_size = tail
        else:
            try:
                data = self._request(lambda: backend.read_range(key, 0, size))
            except FileNotFoundError:
                return None
            shard_size = None
        return self.geometry.parse_index(bytes(data), shard_size)

    def _pieces(
        self, key: str, table: np.ndarray, rows: set[int], whole: bytes | memoryview | None
    ) -> dict[int, bytes | memoryview] | None:
        """The stored bytes of each of ``rows`` that the index names: sliced from ``whole``
        or fetched run by run; None if the shard is gone."""
        wanted = self.geometry.ranges(table, sorted(rows))
        if whole is not None:
            view = memoryview(whole)
            return {row: view[start:stop] for row, start, stop in wanted}
        out: dict[int, bytes | memoryview] = {}
        for run in merge_ranges(wanted):
            try:
                data = memoryview(self._request(functools.partial(
                    self.stored.backend.read_range, key, run.start, run.stop)))
            except FileNotFoundError:
                return None
            for row, start, stop in run.members:
                out[row] = data[start - run.start : stop - run.start]
        return out

    def _request(self, call: Callable[[], T]) -> T:
        """One store request, counted."""
        self._counters.store["read"] += 1
        return call()


@contextlib.contextmanager
def _naming(key: str) -> Iterator[None]:
    """A shard's index that does not decode, or cannot be read, named by its key."""
    try:
        yield
    except CorruptChunk as e:
        raise CorruptChunk(f"shard {key}: {e}") from None
