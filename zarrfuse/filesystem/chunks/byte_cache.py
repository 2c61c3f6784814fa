"""A least-recently-used cache bounded in bytes, shared by worker threads and the trio thread.

Rendered views keep rendered files in one (``RenderCache``), whole images decoded chunks
(``DecodedChunks``); only how a value's size is measured differs.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

import numpy as np

__all__ = ["ByteBoundedCache", "DecodedChunks", "RenderCache"]

V = TypeVar("V")


class ByteBoundedCache(Generic[V]):
    """Recently used values, least recently used first out, at most ``limit_bytes`` in all."""

    def __init__(self, limit_bytes: int, size_of: Callable[[V], int]) -> None:
        self.limit_bytes = limit_bytes
        self._size_of = size_of
        self._entries: OrderedDict[object, V] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: object) -> V | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: object, value: V) -> None:
        size = self._size_of(value)
        if size > self.limit_bytes:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            self._bytes += size - (0 if old is None else self._size_of(old))
            self._entries[key] = value
            while self._bytes > self.limit_bytes:
                _, evicted = self._entries.popitem(last=False)
                self._bytes -= self._size_of(evicted)

    def drop(self, key: object) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            self._bytes -= 0 if old is None else self._size_of(old)


class RenderCache(ByteBoundedCache[bytes]):
    """Rendered files of rendered views."""

    def __init__(self, limit_bytes: int) -> None:
        super().__init__(limit_bytes, len)


class DecodedChunks(ByteBoundedCache[np.ndarray]):
    """Decoded chunks of whole images."""

    def __init__(self, limit_bytes: int) -> None:
        super().__init__(limit_bytes, lambda value: int(value.nbytes))
