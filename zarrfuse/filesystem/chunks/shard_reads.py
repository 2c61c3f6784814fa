"""Inner chunks of a sharded array, read by byte ranges of their shards through the backend
(blocking). Why: docs/performance.md, "Shard reads"."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

import numpy as np

from zarrfuse.api.shard_index import MERGE_GAP, ShardGeometry, merge_ranges
from zarrfuse.errors import CorruptChunk
from zarrfuse.filesystem.chunks.chunk_caches import OpenChunk
from zarrfuse.filesystem.chunks.chunk_listings import logical_stat
from zarrfuse.filesystem.chunks.counters import Counters
from zarrfuse.filesystem.chunks.part_opening import read_span
from zarrfuse.filesystem.chunks.stored_chunks import StoredChunks
from zarrfuse.storage.base import Backend, Stat

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
        self, shard: Coords, group: list[Coords], listed: Sequence[Stat | None] | None
    ) -> dict[Coords, bytes | memoryview | None]:
        """The stored bytes of each inner chunk of ``group`` (all in ``shard``); None for
        one not stored (the fill value). ``listed``: the shard's parts' listed sizes and
        times, where the store lists. Decode them with ``geometry.inner``."""
        rows = {c: self.geometry.flat(self._local(c)) for c in group}
        parts = self.stored.parts.parts
        if len(parts) == 1 and parts[0].size is None:
            key = _Shard(self.stored.backend, self.stored.chunk_key(shard))
        else:
            key = _PartedShard(self.stored, shard, listed)
        stat = None if listed is None else logical_stat(listed)
        try:
            with self.stored.shard_indexes.fetching(shard):  # one reader asks, others wait
                pieces = self._pieces(shard, key, stat, set(rows.values()))
        finally:
            key.close()
        if pieces is None:
            return dict.fromkeys(group)
        return {c: pieces.get(rows[c]) for c in group}

    def _pieces(
        self, shard: Coords, key: _Shard, stat: Stat | None, wanted: set[int]
    ) -> dict[int, bytes | memoryview] | None:
        """The stored bytes of each of ``wanted`` that is stored; None if the shard is not.
        A quarter of the shard or more is fetched in one request (docs/performance.md)."""
        indexes = self.stored.shard_indexes
        changes = indexes.changes
        large = 4 * len(wanted) >= self.geometry.count
        table = indexes.get(shard, stat)
        span: tuple[int, bytes | memoryview] | None = None
        if table is None:
            with _naming(key):
                if large:
                    whole = self._request(key.read_all)
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
        if span is None and large and self.stored.backend.capabilities.remote:
            span = self._fetch_rest(shard, key, table, wanted, changes)
        if span is not None:
            begin, view = span[0], memoryview(span[1])
            return {row: view[start - begin : stop - begin] for row, start, stop in ranges}
        out: dict[int, bytes | memoryview] = {}
        for run in merge_ranges(ranges):
            try:
                data = memoryview(self._request(functools.partial(
                    key.read_range, run.start, run.stop)))
            except FileNotFoundError:  # gone since its index was kept: the fill value
                indexes.drop(shard)
                return None
            for row, start, stop in run.members:
                out[row] = data[start - run.start : stop - run.start]
        indexes.fetched(shard, wanted, changes)
        return out

    def _fetch_rest(
        self, shard: Coords, key: _Shard, table: np.ndarray, wanted: set[int], changes: int
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
            data = self._request(functools.partial(key.read_range, start, stop))
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

    def _read_index(self, key: _Shard) -> np.ndarray | None:
        """The shard's index, in one request; None if the shard is not stored."""
        size = self.geometry.index_size
        if self.geometry.index_at_end:
            tail = self._request(lambda: key.read_tail(size))
            if tail is None:
                return None
            data, shard_size = tail
        else:
            try:
                data = self._request(lambda: key.read_range(0, size))
            except FileNotFoundError:
                return None
            shard_size = None
        return self.geometry.parse_index(bytes(data), shard_size)

    def _request(self, call: Callable[[], T]) -> T:
        """One store request, counted."""
        self._counters.store["read"] += 1
        return call()


class _Shard:
    """A shard stored as one object: each read is one request of the backend."""

    def __init__(self, backend: Backend, key: str) -> None:
        self.backend, self.key = backend, key

    def read_all(self) -> bytes | None:
        return self.backend.read_all(self.key)

    def read_range(self, start: int, stop: int) -> bytes | memoryview:
        return self.backend.read_range(self.key, start, stop)

    def read_tail(self, count: int) -> tuple[bytes | memoryview, int | None] | None:
        return self.backend.read_tail(self.key, count)

    def close(self) -> None:
        pass

    def __str__(self) -> str:
        return self.key


class _PartedShard(_Shard):
    """A shard stored in parts: opened (sizes checked) at its first read, every read of one
    fetch from that opening, a range cut across the parts it spans."""

    def __init__(self, stored: StoredChunks, shard: Coords,
                 listed: Sequence[Stat | None] | None) -> None:
        super().__init__(stored.backend, stored.chunk_key(shard))
        self._open = functools.partial(stored.open_now, shard, listed)
        self._opened: OpenChunk | None = None
        self._asked = False

    def _chunk(self) -> OpenChunk | None:
        if not self._asked:
            self._opened, self._asked = self._open(), True
        return self._opened

    def read_all(self) -> bytes | None:
        opened = self._chunk()
        return None if opened is None else bytes(read_span(opened, 0, opened.size))

    def read_range(self, start: int, stop: int) -> bytes | memoryview:
        opened = self._chunk()
        if opened is None:
            raise FileNotFoundError(self.key)
        return memoryview(read_span(opened, start, min(stop, opened.size)))

    def read_tail(self, count: int) -> tuple[bytes | memoryview, int | None] | None:
        opened = self._chunk()
        if opened is None:
            return None
        return self.read_range(max(opened.size - count, 0), opened.size), opened.size

    def close(self) -> None:
        if self._opened is not None:
            self._opened.close()


@contextlib.contextmanager
def _naming(key: _Shard) -> Iterator[None]:
    """A shard's bad index, named by its shard's key."""
    try:
        yield
    except CorruptChunk as e:
        raise CorruptChunk(f"shard {key}: {e}") from None
