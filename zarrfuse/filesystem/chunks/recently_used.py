"""The one cache class of the filesystem: least recently used out first, bounded in entries or
bytes, trusted for a TTL, thread-safe. Tickets: docs/performance.md, "Caches and their tickets"."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["CHANGES_REMEMBERED", "DROPS_REMEMBERED", "FOR_EVER", "RecentlyUsed", "Trust"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass(frozen=True)
class Trust:
    """How long what was learnt of the store is believed: ``ttl`` seconds (None: for ever),
    and past that while ``kept_true(at)`` (the store watch tells every change since)."""

    ttl: float | None = None
    kept_true: Callable[[float], bool] | None = None
    clock: Callable[[], float] = time.monotonic

    def outlived(self, at: float) -> bool:
        """Whether what was learnt at ``at`` (``clock``) is no longer believed."""
        return self.ttl is not None and self.clock() - at >= self.ttl and not (
            self.kept_true is not None and self.kept_true(at)
        )


FOR_EVER = Trust()
"""Believed until dropped (read-only mounts, whose store is not changed behind them)."""

CHANGES_REMEMBERED = 4096
"""Keys whose last change a cache remembers; past that, an older ticket is refused for any key."""
DROPS_REMEMBERED = 16
"""``drop_where`` tests remembered as changes; past that, the oldest counts for any key."""


class RecentlyUsed(Generic[K, V]):
    """At most ``limit`` in total ``weigh(value)`` (default: 1 per entry); an entry that
    ``trust`` no longer believes is gone. ``on_evict(value)`` runs for each entry that leaves
    for lack of room or age (not for :meth:`drop` or a replaced value)."""

    def __init__(
        self,
        limit: int,
        *,
        trust: Trust = FOR_EVER,
        weigh: Callable[[V], int] | None = None,
        on_evict: Callable[[V], None] | None = None,
    ) -> None:
        self.limit = limit
        self.trust = trust
        self._weigh = weigh or (lambda _: 1)
        self._on_evict = on_evict
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()
        self._changes = 0
        self._changed_at: OrderedDict[K, int] = OrderedDict()  # key -> its last change
        self._forgotten_up_to = 0  # changes up to this one may have been to any key
        self._dropped_where: deque[tuple[int, Callable[[K], bool]]] = deque()

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
            if self.trust.outlived(entry[0]):
                expired = self._pop(key)
                entry = None
            else:
                self._entries.move_to_end(key)
        if expired is not None and self._on_evict is not None:
            self._on_evict(expired)
        return entry

    def ticket(self) -> int:
        """Taken before asking the store for a value to :meth:`put`: the changes so far."""
        return self._changes

    def put(self, key: K, value: V, *, at: float | None = None, ticket: int | None = None
            ) -> bool:
        """Keep ``value`` (put at ``at``; default now); whether it was kept. With ``ticket``
        (a store's answer): not if ``key`` changed since; without: a change of ``key``."""
        weight = self._weigh(value)
        evicted: list[V] = []
        with self._lock:
            if ticket is None:
                self._note_change(key)
            elif self._changed_since(key, ticket):
                return False
            if weight > self.limit:
                return False
            if key in self._entries:
                self._pop(key)
            self._entries[key] = (self.trust.clock() if at is None else at, value)
            self._weight += weight
            while self._weight > self.limit:
                evicted.append(self._pop(next(iter(self._entries))))
        if self._on_evict is not None:
            for value in evicted:
                self._on_evict(value)
        return True

    def changed(self, key: K) -> None:
        """``key``'s value was changed where it is kept (a listing told of a commit):
        answers asked before are refused."""
        with self._lock:
            self._note_change(key)

    def drop(self, key: K) -> V | None:
        """Forget ``key`` (no hook); its value, if it was there. Answers asked before are
        refused."""
        with self._lock:
            self._note_change(key)
            return self._pop(key) if key in self._entries else None

    def drop_where(self, test: Callable[[K], bool]) -> list[tuple[K, V]]:
        """Forget every key ``test`` holds for (no hook); the pairs that were kept. Answers
        asked before are refused for every such key, kept or not."""
        with self._lock:
            keys = [key for key in self._entries if test(key)]
            self._changes += 1
            self._dropped_where.append((self._changes, test))
            if len(self._dropped_where) > DROPS_REMEMBERED:
                self._forgotten_up_to = self._dropped_where.popleft()[0]
            return [(key, self._pop(key)) for key in keys]

    def clear(self) -> list[V]:
        """Forget everything (no hook); the values kept. Answers asked before are refused."""
        with self._lock:
            values = [value for _, value in self._entries.values()]
            self._entries.clear()
            self._weight = 0
            self._changes += 1
            self._changed_at.clear()
            self._dropped_where.clear()
            self._forgotten_up_to = self._changes
        return values

    def _note_change(self, key: K) -> None:
        self._changes += 1
        self._changed_at[key] = self._changes
        self._changed_at.move_to_end(key)
        if len(self._changed_at) > CHANGES_REMEMBERED:
            self._forgotten_up_to = self._changed_at.popitem(last=False)[1]

    def _changed_since(self, key: K, ticket: int) -> bool:
        if ticket < self._forgotten_up_to:
            return True
        last = self._changed_at.get(key)
        if last is not None and last > ticket:
            return True
        return any(at > ticket and test(key) for at, test in self._dropped_where)

    def _pop(self, key: K) -> V:
        _, value = self._entries.pop(key)
        self._weight -= self._weigh(value)
        return value
