"""Whole small objects fetched before they are read: when a read reaches the end of a chunk
file, the GETs of the chunks after it start at once (``want``), and opening one finds its
bytes fetched or on their way (``take``). Bounded in objects and bytes; read-only mounts
only, so bytes fetched ahead never outlive a write through the mount.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from zarrfuse.storage.object_gets import Got
from zarrfuse.storage.prefetch import PrefetchBudget

__all__ = ["MAX_OBJECTS", "MAX_OBJECT_BYTES", "ObjectPrefetch"]

MAX_OBJECT_BYTES = 4 << 20
"""Objects up to this size are fetched whole ahead; larger ones are read with ranged GETs."""
MAX_OBJECTS = 32
"""Objects kept fetched (or fetching) and not yet opened; the oldest are dropped first."""

Send = Callable[[str, int], "Future[Got]"]
"""``send(key, size)``: a GET of the whole object of ``size`` bytes with its version, sent
at once (``store_requests``: no thread waits for it)."""


class ObjectPrefetch:
    """Objects fetched whole ahead of their first read, by key and size."""

    def __init__(self, send: Send, budget: PrefetchBudget) -> None:
        self._send = send
        self._budget = budget
        self._ahead: OrderedDict[str, tuple[int, Future[Got]]] = OrderedDict()
        self._lock = threading.Lock()

    def want(self, objects: Sequence[tuple[str, int]]) -> None:
        """Start fetching these (key, size) objects, small ones only, within the budget."""
        with self._lock:
            for key, size in objects:
                if key in self._ahead or not 0 < size <= MAX_OBJECT_BYTES:
                    continue
                if not self._budget.take(size):
                    break
                self._ahead[key] = (size, self._send(key, size))
                while len(self._ahead) > MAX_OBJECTS:
                    self._drop(next(iter(self._ahead)))

    def take(self, key: str) -> Future[Got] | None:
        """The fetch of ``key`` started ahead; it is no longer kept here (the reader holds
        it, and checks the size and version it gives)."""
        with self._lock:
            found = self._ahead.get(key)
            if found is None:
                return None
            self._drop(key, cancel=False)
        return found[1]

    def _drop(self, key: str, *, cancel: bool = True) -> None:
        """Stop keeping ``key``; its budget comes back once its GET is over (``cancel``: a
        GET no reader took is called off, in flight or not)."""
        size, future = self._ahead.pop(key)
        if cancel and future.cancel():
            self._budget.give(size)
        else:
            future.add_done_callback(lambda _: self._budget.give(size))
