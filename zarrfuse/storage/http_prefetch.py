"""The next chunk files of a web server fetched before they are asked for: one GET each,
sent at once, brings a small object's size, time and bytes, so the lookup and the read that
follow ask nothing (docs/sources.md, "Web servers"). Bounded in objects and bytes, each answer
used once within ``KEPT_SECONDS``; read-only mounts only.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from zarrfuse.storage.base import Stat

__all__ = ["NOT_PEEKED", "PeekedObjects"]

MAX_OBJECT_BYTES = 4 << 20
"""Objects up to this size come whole with their first GET; larger ones only say their size."""
MAX_OBJECTS = 16
"""Answers kept (or on their way) and not yet used; the oldest are dropped first."""
KEPT_SECONDS = 30.0
"""An answer older than this is not used: the server is asked again."""

Peek = Callable[[str], "Future[tuple[Stat, bytes | None] | None]"]
"""``peek(key)``: a GET of the key sent at once, whose answer is its stat and (small
objects) bytes; None if absent."""


class NotPeeked:
    """Nothing was fetched ahead for the key: ask the server."""


NOT_PEEKED = NotPeeked()


class PeekedObjects:
    """Answers of GETs made ahead of a lookup and a read, by key."""

    def __init__(self, peek: Peek) -> None:
        self._peek = peek
        self._ahead: OrderedDict[str, tuple[float, Future[tuple[Stat, bytes | None] | None]]] = (
            OrderedDict())
        self._lock = threading.Lock()

    def want(self, keys: Sequence[str]) -> None:
        """Start a GET of each key not already asked for."""
        with self._lock:
            for key in keys:
                if key in self._ahead:
                    continue
                self._ahead[key] = (time.monotonic(), self._peek(key))
                while len(self._ahead) > MAX_OBJECTS:
                    self._ahead.popitem(last=False)[1][1].cancel()

    def _answer(self, key: str) -> tuple[Stat, bytes | None] | NotPeeked | None:
        with self._lock:
            found = self._ahead.get(key)
        if found is None or time.monotonic() - found[0] > KEPT_SECONDS:
            return NOT_PEEKED
        try:
            return found[1].result()
        except Exception:  # noqa: BLE001  (fetched ahead as a guess: the caller asks again)
            return NOT_PEEKED

    def stat(self, key: str) -> Stat | NotPeeked | None:
        """The key's stat as a GET made ahead found it (waiting for one on its way)."""
        answer = self._answer(key)
        if isinstance(answer, NotPeeked) or answer is None:
            return answer
        return answer[0]

    def read(self, key: str, start: int, stop: int) -> bytes | None:
        """Bytes ``[start, stop)`` of the key, if it was fetched whole ahead and holds them;
        its answer is let go once read to its end."""
        answer = self._answer(key)
        if isinstance(answer, NotPeeked) or answer is None or answer[1] is None:
            return None
        whole = answer[1]
        if stop > len(whole):
            return None
        if stop == len(whole):
            with self._lock:
                self._ahead.pop(key, None)
        return whole[start:stop]

    def close(self) -> None:
        with self._lock:
            for _, future in self._ahead.values():
                future.cancel()
            self._ahead.clear()
