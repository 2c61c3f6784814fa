"""Open chunk parts on an object store or a web server: reads are ranged GETs, sequential
ones fetched ahead (``prefetch``), and a small object fetched whole ahead of its first read
(``object_prefetch``) is served from that body."""

from __future__ import annotations

import errno
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from zarrfuse.storage.prefetch import ReadAhead

__all__ = ["ObjectFetch", "ObjectPartReader"]

PREFETCH_WAIT = 120.0
"""Seconds a body fetched ahead is waited for before it is asked for again (obstore's own
timeouts and retry window end sooner; this only guards against a lost wake-up)."""

ReadRange = Callable[[str, int, int], "bytes | memoryview"]
"""``read_range(key, start, stop)``: one ranged GET, blocking."""


class ObjectFetch:
    """A ReadAhead's fetch for one object: served from its whole body when that was fetched
    ahead, else one ranged GET. The body is let go once read to the end."""

    def __init__(
        self, read_range: ReadRange, key: str, size: int, ahead: Future[Any] | None
    ) -> None:
        self.read_range, self.key, self.size = read_range, key, size
        self._whole: Future[Any] | bytes | memoryview | None = ahead

    def __call__(self, start: int, stop: int) -> bytes | memoryview:
        whole = self._whole
        if isinstance(whole, Future):
            try:
                whole = whole.result(timeout=PREFETCH_WAIT)
            except Exception:  # noqa: BLE001  (fetched ahead as a guess: ask again, below)
                whole = None
            self._whole = whole
        if whole is None or len(whole) != self.size:
            return self.read_range(self.key, start, stop)
        if stop >= self.size:
            self._whole = None  # read to the end: nothing more to serve from it
        return bytes(memoryview(whole)[start:stop])


class ObjectPartReader:
    """Parts of one chunk on an object store; ``read_ahead(key, size)`` gives each present
    part's reader."""

    def __init__(
        self,
        read_ahead: Callable[[str, int], ReadAhead],
        keys: Sequence[str],
        sizes: Sequence[int | None],
    ) -> None:
        self.keys = list(keys)
        self.sizes = tuple(sizes)
        self._ahead = [
            None if size is None else read_ahead(key, size)
            for key, size in zip(self.keys, self.sizes, strict=True)
        ]

    def _part(self, part: int) -> ReadAhead:
        ahead = self._ahead[part]
        if ahead is None:
            raise OSError(errno.EIO, f"{self.keys[part]}: part is absent")
        return ahead

    def read_into_nowait(self, part: int, start: int, out: memoryview) -> int:
        return self._part(part).read_nowait(start, out)

    def read_into(self, part: int, start: int, out: memoryview) -> None:
        self._part(part).read(start, out)

    def release(self) -> None:
        for ahead in self._ahead:
            if ahead is not None:
                ahead.close()

    def close(self) -> None:
        self.release()
