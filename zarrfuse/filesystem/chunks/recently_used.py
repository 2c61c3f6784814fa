"""The one cache class of the filesystem: least recently used out first, bounded in entries or
in bytes, entries optionally trusted for a TTL, evicted entries optionally handed to a hook.

Chunk sizes, open chunks, listings, rendered files and decoded chunks are all kept in one of
these; they differ only in the bound, the TTL and what eviction must do (close a reader).
Thread-safe: worker threads and the trio thread share them.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["RecentlyUsed", "outlived"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def outlived(at: float, ttl: float | None, trusted_while: Callable[[], bool] | None) -> bool:
    """Whether what was learnt at ``at`` (monotonic) is past its ``ttl`` (None: never), and
    not kept true another way (``trusted_while()``: the store watch tells every change)."""
    return ttl is not None and time.monotonic() - at >= ttl and not (
        trusted_while is not None and trusted_while()
    )


class RecentlyUsed(Generic[K, V]):
    """At most ``limit`` in total ``weigh(value)`` (default: 1 per entry); an entry older
    than ``ttl`` seconds (None: never) is gone, unless ``trusted_while()`` says entries are
    kept true another way (the store watch tells every change). ``on_evict(value)`` runs for
    each entry that leaves for lack of room or age (not for :meth:`drop` or a replaced
    value)."""

    def __init__(
        self,
        limit: int,
        *,
        ttl: float | None = None,
        weigh: Callable[[V], int] | None = None,
        on_evict: Callable[[V], None] | None = None,
        trusted_while: Callable[[], bool] | None = None,
    ) -> None:
        self.limit = limit
        self.ttl = ttl
        self._trusted_while = trusted_while
        self._weigh = weigh or (lambda _: 1)
        self._on_evict = on_evict
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        """The value, made most recently used; None if absent or older than the TTL."""
        entry = self.entry(key)
        return None if entry is None else entry[1]

    def entry(self, key: K) -> tuple[float, V] | None:
        """(when it was put, monotonic; the value), as :meth:`get` finds it."""
        expired: V | None = None
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if outlived(entry[0], self.ttl, self._trusted_while):
                expired = self._pop(key)
                entry = None
            else:
                self._entries.move_to_end(key)
        if expired is not None and self._on_evict is not None:
            self._on_evict(expired)
        return entry

    def put(self, key: K, value: V, *, at: float | None = None) -> None:
        """Keep ``value`` (put at ``at``, monotonic; default now). A value heavier than the
        whole limit is not kept."""
        weight = self._weigh(value)
        if weight > self.limit:
            return
        evicted: list[V] = []
        with self._lock:
            if key in self._entries:
                self._pop(key)
            self._entries[key] = (time.monotonic() if at is None else at, value)
            self._weight += weight
            while self._weight > self.limit:
                evicted.append(self._pop(next(iter(self._entries))))
        if self._on_evict is not None:
            for value in evicted:
                self._on_evict(value)

    def drop(self, key: K) -> V | None:
        """Forget ``key`` (no hook); its value, if it was there."""
        with self._lock:
            return self._pop(key) if key in self._entries else None

    def clear(self) -> list[V]:
        """Forget everything (no hook); the values that were kept."""
        with self._lock:
            values = [value for _, value in self._entries.values()]
            self._entries.clear()
            self._weight = 0
        return values

    def _pop(self, key: K) -> V:
        _, value = self._entries.pop(key)
        self._weight -= self._weigh(value)
        return value
