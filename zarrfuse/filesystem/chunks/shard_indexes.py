"""Shard indexes kept between reads, and whole shards until their chunks are taken, trusted
as a listing is and only for the version read. Why: docs/performance.md, "Shard reads"."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from zarrfuse.filesystem.chunks.recently_used import RecentlyUsed, Trust
from zarrfuse.storage.base import Stat

__all__ = ["KeptIndex", "KeptSpan", "ShardIndexes"]

INDEX_BYTES_KEPT = 16 << 20
"""Bytes of index tables kept per array (16 per inner chunk: a million inner chunks)."""
WHOLE_SHARD_BYTES_KEPT = 128 << 20
"""Bytes of shards kept, for the whole mount, until their chunks are taken."""


class KeptIndex(NamedTuple):
    table: np.ndarray
    """(offset, length) of each inner chunk, flat (``api.shard_index``)."""
    stat: Stat | None
    """The shard's size and time when the index was read, where a listing gave them."""
    fetched: set[int]
    """Index rows whose bytes some reader has fetched since."""


class KeptSpan(NamedTuple):
    start: int
    data: bytes | memoryview
    """The shard's bytes from ``start`` (all of it, or the rest a reader fetched)."""
    stat: Stat | None
    untaken: set[int]
    """Index rows in it that no reader has taken yet."""


WHOLE_SHARD_SECONDS = 30.0
"""A kept span serves the windows of one read, not later reads: it leaves after this."""

KeptSpans = RecentlyUsed[tuple[object, tuple[int, ...]], KeptSpan]
"""A mount's kept spans, of all its arrays (``MountContext.spans``)."""


def kept_spans() -> KeptSpans:
    """An empty store of spans, with the budget a mount's spans share."""
    return RecentlyUsed(WHOLE_SHARD_BYTES_KEPT, trust=Trust(WHOLE_SHARD_SECONDS),
                        weigh=lambda kept: len(kept.data))


class ShardIndexes:
    """One array's kept shard indexes (and spans of shards), by shard coordinates."""

    def __init__(self, trust: Trust, spans: KeptSpans | None = None) -> None:
        self._kept: RecentlyUsed[tuple[int, ...], KeptIndex] = RecentlyUsed(
            INDEX_BYTES_KEPT, trust=trust, weigh=lambda kept: int(kept.table.nbytes))
        self._trust = trust
        self._changes = 0
        self._spans = kept_spans() if spans is None else spans
        self._lock = threading.Lock()
        self._fetching: dict[tuple[int, ...], threading.Event] = {}
        """Shards being fetched, each set once its fetch ends."""
        self._tag = object()

    @property
    def changes(self) -> int:
        """How many changes were seen: read before fetching, given to :meth:`keep`."""
        return self._changes

    @contextlib.contextmanager
    def fetching(self, shard: tuple[int, ...]) -> Iterator[None]:
        """Around a fetch of ``shard``'s index or a span: a second reader waits for it, then
        finds what it kept. No lock is held while the store answers."""
        with self._lock:
            running = self._fetching.get(shard)
            if running is None:
                mine = self._fetching[shard] = threading.Event()
        if running is not None:
            running.wait()
            yield
            return
        try:
            yield
        finally:
            with self._lock:
                del self._fetching[shard]
            mine.set()

    def get(self, shard: tuple[int, ...], stat: Stat | None) -> np.ndarray | None:
        """The kept index of ``shard``, if it was read from the version ``stat`` names
        (None: the store lists nothing to compare, the TTL alone decides)."""
        kept = self._kept.get(shard)
        if kept is None:
            return None
        if _other_version(stat, kept.stat):
            self.drop(shard)
            return None
        return kept.table

    def unfetched(self, shard: tuple[int, ...], rows: set[int]) -> set[int]:
        """Those of ``rows`` no reader has fetched since the index was kept."""
        kept = self._kept.get(shard)
        with self._lock:
            return set(rows) if kept is None else rows - kept.fetched

    def take(
        self, shard: tuple[int, ...], stat: Stat | None, ranges: list[tuple[int, int, int]]
    ) -> tuple[int, bytes | memoryview] | None:
        """The kept span of ``shard`` (start, bytes) if it holds every one of ``ranges``
        ((row, start, stop)), those rows marked taken (it leaves once all are)."""
        key = (self._tag, shard)
        with self._lock:
            entry = self._spans.entry(key)
            if entry is None:
                return None
            at, kept = entry
            if _other_version(stat, kept.stat) or self._trust.outlived(at):
                self._spans.drop(key)
                return None
            end = kept.start + len(kept.data)
            if any(start < kept.start or stop > end for _, start, stop in ranges):
                return None
            kept.untaken.difference_update(row for row, _, _ in ranges)
            if not kept.untaken:
                self._spans.drop(key)
            return kept.start, kept.data

    def keep(self, shard: tuple[int, ...], table: np.ndarray, stat: Stat | None,
             changes: int) -> None:
        """Keep an index read after ``changes`` changes, unless one more came meanwhile."""
        with self._lock:
            if changes == self._changes:
                self._kept.put(shard, KeptIndex(table, stat, set()))

    def fetched(self, shard: tuple[int, ...], rows: set[int], changes: int,
                span: tuple[int, bytes | memoryview] | None = None,
                untaken: set[int] | None = None) -> None:
        """``rows`` were fetched (after ``changes`` changes); ``span`` (start, bytes) holds
        ``untaken`` rows more, kept for the readers that will want them."""
        with self._lock:
            if changes != self._changes:
                return
            kept = self._kept.get(shard)
            if kept is not None:
                kept.fetched.update(rows)
            if span is not None and untaken:
                self._spans.put((self._tag, shard), KeptSpan(span[0], span[1], (
                    None if kept is None else kept.stat), set(untaken)))

    def drop(self, shard: tuple[int, ...]) -> None:
        with self._lock:
            self._changes += 1
            self._kept.drop(shard)
            self._spans.drop((self._tag, shard))

    def clear(self) -> None:
        """Every shard is read anew (a store directory went away with an unknown set)."""
        with self._lock:
            self._changes += 1
            self._kept.clear()
            self._spans.drop_where(lambda key: key[0] is self._tag)


def _other_version(listed: Stat | None, kept: Stat | None) -> bool:
    """Whether what was kept is of another version than the listed one (unknown: no)."""
    return listed is not None and kept is not None and listed != kept
