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
from typing import TypeVar

import numpy as np

from zarrfuse.api.shard_index import MERGE_GAP, ShardGeometry, merge_ranges
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

    def fetch(
        self, shard: Coords, group: list[Coords], stat: Stat | None
    ) -> dict[Coords, bytes | memoryview | None]:
        """The stored bytes of each inner chunk of ``group`` (all in ``shard``); None for
        one not stored (the fill value). ``stat``: the shard's listed size and time, where
        the store lists. Decode them with ``geometry.inner``."""
        key = self.stored.chunk_key(shard)
        rows = {c: self.geometry.flat(self._local(c)) for c in group}
        with self.stored.shard_indexes.fetching(shard):  # one reader asks, others wait
            pieces = self._pieces(shard, key, stat, set(rows.values()))
        if pieces is None:
            return dict.fromkeys(group)
        return {c: pieces.get(rows[c]) for c in group}

    def _pieces(
        self, shard: Coords, key: str, stat: Stat | None, wanted: set[int]
    ) -> dict[int, bytes | memoryview] | None:
        """The stored bytes of each of ``wanted`` that is stored; None if the shard is not.

        A reader that wants a quarter of the shard's chunks or more (a window of a whole
        image) fetches, in one request, the whole shard where its index is not known yet,
        or else every chunk no reader has fetched yet: the windows after it find theirs
        kept. Fewer chunks (a viewer's tile) cost their own ranges alone."""
        indexes = self.stored.shard_indexes
        changes = indexes.changes
        large = 4 * len(wanted) >= self.geometry.count
        table = indexes.get(shard, stat)
        span: tuple[int, bytes | memoryview] | None = None
        if table is None:
            with _naming(key):
                if large:
                    whole = self._request(lambda: self.stored.backend.read_all(key))
                    if whole is None:
                        return None
                    table = self.geometry.index_from_shard(whole)
                    span = (0, whole)
                else:
                    table = self._read_index(key)
                    if table is None:
                        return None
            indexes.keep(shard, table, stat, changes)
            if span is not None:
                self._fetched(shard, table, wanted, changes, span)
        ranges = self.geometry.ranges(table, sorted(wanted))
        if span is None:
            span = indexes.take(shard, stat, ranges)
        if span is None and large and self.stored.backend.remote:
            span = self._fetch_rest(shard, key, table, wanted, changes)
        if span is not None:
            begin, view = span[0], memoryview(span[1])
            return {row: view[start - begin : stop - begin] for row, start, stop in ranges}
        out: dict[int, bytes | memoryview] = {}
        for run in merge_ranges(ranges):
            try:
                data = memoryview(self._request(functools.partial(
                    self.stored.backend.read_range, key, run.start, run.stop)))
            except FileNotFoundError:  # gone since its index was kept: the fill value
                indexes.drop(shard)
                return None
            for row, start, stop in run.members:
                out[row] = data[start - run.start : stop - run.start]
        indexes.fetched(shard, wanted, changes)
        return out

    def _fetch_rest(
        self, shard: Coords, key: str, table: np.ndarray, wanted: set[int], changes: int
    ) -> tuple[int, bytes | memoryview] | None:
        """One range holding ``wanted`` and every stored chunk not fetched yet, kept for
        the readers that will want them; None if the shard is gone."""
        rest = self.stored.shard_indexes.unfetched(
            shard, self.geometry.stored_rows(table)) | wanted
        ranges = self.geometry.ranges(table, sorted(rest))
        if not ranges:
            return None
        start, stop = min(r[1] for r in ranges), max(r[2] for r in ranges)
        if stop - start > sum(r[2] - r[1] for r in ranges) + MERGE_GAP:
            return None  # chunks scattered (or an index naming far offsets): run by run
        try:
            data = self._request(functools.partial(
                self.stored.backend.read_range, key, start, stop))
        except FileNotFoundError:
            self.stored.shard_indexes.drop(shard)
            return None
        self.stored.shard_indexes.fetched(shard, rest, changes, (start, data), rest - wanted)
        return start, data

    def _fetched(self, shard: Coords, table: np.ndarray, wanted: set[int], changes: int,
                 whole: tuple[int, bytes | memoryview]) -> None:
        """A whole shard was fetched for ``wanted``: kept for the rest of its chunks."""
        every = self.geometry.stored_rows(table)
        self.stored.shard_indexes.fetched(shard, every, changes, whole, every - wanted)

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

    def _request(self, call: Callable[[], T]) -> T:
        """One store request, counted."""
        self._counters.store["read"] += 1
        return call()


@contextlib.contextmanager
def _naming(key: str) -> Iterator[None]:
    """A shard's index that does not decode, or names what no shard holds: named by its
    shard's key."""
    try:
        yield
    except CorruptChunk as e:
        raise CorruptChunk(f"shard {key}: {e}") from None
