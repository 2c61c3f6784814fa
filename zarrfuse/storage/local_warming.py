"""The next chunk files of a local store read into the kernel's caches before they are read:
opened in one background thread and asked for with ``posix_fadvise(WILLNEED)``, so the
reader's opens and reads are answered in the trio thread. Only the kernel's caches hold
anything, so it is as safe on writable mounts (why: docs/performance.md, ``local_warming``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence

__all__ = ["AHEAD_BYTES", "KernelWarming"]

log = logging.getLogger(__name__)

AHEAD_BYTES = 8 << 20
"""Bytes asked for ahead per request: a window of small files, or the head of a large one."""
QUEUED = 64
"""Files waiting to be warmed; the oldest are dropped first (the reader has passed them)."""
JOIN_SECONDS = 10.0
"""How long the unmount waits for the thread's last file."""
REMEMBERED = 256
"""Files remembered as asked for, or as found uncached (the oldest are forgotten first)."""

Opener = Callable[[str, bool], int | None]
"""``open(key, cached_only)``: a read-only descriptor of the regular file ``key``, None if
absent; with ``cached_only``, BlockingIOError unless the kernel has its path cached."""


class KernelWarming:
    """A background thread that opens files and asks the kernel to read them ahead."""

    def __init__(self, opener: Opener) -> None:
        self._open = opener
        self._queue: deque[tuple[str, int]] = deque(maxlen=QUEUED)
        self._asked: OrderedDict[str, None] = OrderedDict()
        """Files queued or warmed lately: not asked for again."""
        self._needed: OrderedDict[str, None] = OrderedDict()
        """Files this thread found uncached, and warmed, not read yet."""
        self._refill_at: str | None = None
        """The file halfway through the files asked for last: read to its end, name the next."""
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def after(
        self, key: str, following: Callable[[], Sequence[tuple[str, int]]], *, waited: bool
    ) -> None:
        """The file ``key`` was read to its end: warm the ``following()`` (key, size) files
        if that read ``waited`` on storage, or if this thread warmed it (a second pass over
        cached files costs nothing). Inside the window asked for last, ``following()`` is
        called again only halfway through it (naming 8 files costs 80 us, measured)."""
        with self._wake:
            streak = self._needed.pop(key, False) is None
            inside = key in self._asked and key != self._refill_at
        if (waited or streak) and not inside:
            self.want(following())

    def want(self, objects: Sequence[tuple[str, int]]) -> None:
        """Queue these (key, size) files, up to ``AHEAD_BYTES`` and ``QUEUED``; cheap."""
        budget = AHEAD_BYTES
        with self._wake:
            if self._closed:
                return
            added: list[str] = []
            for key, size in objects:
                if budget <= 0 or len(added) == QUEUED:  # the nearest, never the last 64
                    break
                budget -= size
                if key in self._asked:
                    continue
                _remember(self._asked, key)
                self._queue.append((key, min(size, AHEAD_BYTES)))
                added.append(key)
            if added:
                self._refill_at = added[(len(added) - 1) // 2]
            if self._queue:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="zarrfuse-warming", daemon=True
                    )
                    self._thread.start()
                self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._queue and not self._closed:
                    self._wake.wait()
                if self._closed:
                    return
                key, length = self._queue.popleft()
            self._warm(key, length)

    def _warm(self, key: str, length: int) -> None:
        try:
            try:
                fd = self._open(key, True)
                needed = False
            except BlockingIOError:
                fd = self._open(key, False)
                needed = True
        except OSError as e:  # a special file, a path leading out: the reader will say so
            log.debug("not warming %s: %s", key, e)
            return
        if fd is None:
            return
        try:
            with contextlib.suppress(OSError):
                os.posix_fadvise(fd, 0, length, os.POSIX_FADV_WILLNEED)
        finally:
            os.close(fd)
        if needed:
            with self._wake:
                _remember(self._needed, key)

    def close(self) -> None:
        """Stop the thread (at unmount); files queued are left."""
        with self._wake:
            self._closed = True
            self._queue.clear()
            self._wake.notify()
            thread = self._thread
        if thread is not None:
            thread.join(JOIN_SECONDS)  # an open stuck on a dead disk must not hold the unmount
            if thread.is_alive():
                log.warning("the warming thread is still waiting on the store; left behind")


def _remember(keys: OrderedDict[str, None], key: str) -> None:
    keys[key] = None
    while len(keys) > REMEMBERED:
        keys.popitem(last=False)
