"""Open chunk parts on an object store or a web server, every part of one stored version:
the first GETs of all parts sent together pin a version (their commit ids and sizes agree),
later GETs ask ``If-Match`` its ETag. Why: docs/writing.md, "Reading one version".
"""

from __future__ import annotations

import errno
import functools
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from zarrfuse.storage.object_gets import Got
from zarrfuse.storage.prefetch import ReadAhead, ReadAheadPolicy

__all__ = ["FIRST_BYTES", "PREFETCH_WAIT", "VERSION_SETTLE", "ObjectPartReader", "PartGets"]

PREFETCH_WAIT = 120.0
"""Seconds a body fetched ahead is waited for before it is asked for again (obstore's own
timeouts and retry window end sooner; this only guards against a lost wake-up)."""
VERSION_SETTLE = 10.0
"""Seconds the parts of a chunk may disagree (a commit's copies land in milliseconds; a
store that throttles takes longer) before a read gives up with EIO."""
FIRST_BYTES = 64 << 10
"""What the first GET of a part not being read asks: its first bytes (all of a small one,
as a checksum, a header or an index is), served to its first read."""

SendGet = Callable[[str, int, int, "str | None"], "Future[Got]"]
"""``send(key, start, stop, etag)``: a GET of a part's bytes with their version, sent at
once; ``etag``: of that version only."""


@dataclass(frozen=True)
class PartGets:
    """What the readers of one store share: how GETs are sent, and how waited for."""

    send: SendGet
    policy: ReadAheadPolicy
    take_ahead: Callable[[str], Future[Got] | None]
    """The whole object fetched ahead of its first read (``object_prefetch``), if it was."""
    settle: float = VERSION_SETTLE


class ObjectPartReader:
    """Parts of one chunk on an object store, all of one stored version."""

    def __init__(self, gets: PartGets, keys: Sequence[str], sizes: Sequence[int | None]) -> None:
        self.keys = list(keys)
        self.sizes = tuple(sizes)
        self.version = object()
        """What this reader's pages hold: its own pinned version (``OpenChunk.version``)."""
        self._gets = gets
        self._ahead_whole = [None if size is None else gets.take_ahead(key)
                             for key, size in zip(self.keys, self.sizes, strict=True)]
        self._etags: list[str | None] | None = None
        """The pinned version of each part (None: not pinned yet)."""
        self._held: dict[int, tuple[int, memoryview]] = {}
        """Bytes the pinning GETs brought (part -> start, bytes), served to later reads."""
        self._pinning = threading.Lock()
        self._ahead = [
            None if size is None else ReadAhead(
                functools.partial(self._fetch, p), size, gets.policy,
                send=functools.partial(self._send, p))
            for p, size in enumerate(self.sizes)
        ]

    # --- the version -------------------------------------------------------------------------

    def _pin(self, part: int, start: int, stop: int) -> None:
        """Pin one version of every part, the first GETs sent together; bytes ``[start,
        stop)`` of ``part`` are among those held after."""
        deadline = time.monotonic() + self._gets.settle
        pause, fresh = 0.01, False
        while True:
            futures: dict[int, Future[Got]] = {}
            ranges: dict[int, tuple[int, int]] = {}
            for q, size in enumerate(self.sizes):
                if size is None:
                    continue
                ahead = None if fresh else self._ahead_whole[q]
                if ahead is not None:
                    futures[q], ranges[q] = ahead, (0, size)
                    continue
                lo, hi = (start, stop) if q == part else (0, min(size, FIRST_BYTES))
                futures[q], ranges[q] = self._gets.send(self.keys[q], lo, hi, None), (lo, hi)
            ahead_taken = {q for q, f in enumerate(self._ahead_whole) if f is not None}
            self._ahead_whole = [None] * len(self.sizes)
            got, why = self._gathered(futures, ahead_taken)
            if why is None:
                self._etags = [None if q not in got else got[q].etag
                               for q in range(len(self.sizes))]
                self._held = {q: (ranges[q][0], g.data) for q, g in got.items()}
                return
            if time.monotonic() + pause > deadline:
                raise OSError(errno.EIO, f"{self.keys[part]}: {why} for "
                                         f"{self._gets.settle:g} s; not served")
            time.sleep(pause)
            pause, fresh = min(2 * pause, 0.5), True

    def _gathered(
        self, futures: dict[int, Future[Got]], ahead: set[int]
    ) -> tuple[dict[int, Got], str | None]:
        """Each part's first GET, and why they are not one version (None: they are). A part
        the listing showed and the store no longer has is one being replaced; a fetch made
        ahead that failed was a guess, asked again."""
        got: dict[int, Got] = {}
        why: str | None = None
        for q, future in futures.items():
            try:
                got[q] = future.result(timeout=PREFETCH_WAIT)
            except FileNotFoundError:
                if len(futures) == 1 and q not in ahead:  # one object: gone, not landing
                    raise
                why = why or f"part {self.keys[q]} is gone"
            except Exception:
                if q not in ahead:
                    raise
                why = why or f"part {self.keys[q]} fetched ahead failed"
        if why is not None:
            return got, why
        if len({g.commit for g in got.values()}) > 1:
            return got, "its parts are of different commits (one is landing)"
        for q, g in got.items():
            if g.size != self.sizes[q]:
                raise OSError(errno.EIO, f"{self.keys[q]}: {g.size} bytes in the store, "
                              f"{self.sizes[q]} when listed: the chunk changed since it was "
                              "opened (open it again)")
        return got, None

    # --- fetching ----------------------------------------------------------------------------

    def _held_range(self, part: int, start: int, stop: int) -> memoryview | None:
        """Bytes ``[start, stop)`` of ``part`` if the pinning GETs brought them; let go once
        read to their end."""
        held = self._held.get(part)
        if held is None:
            return None
        at, data = held
        if not at <= start <= stop <= at + len(data):
            return None
        if stop == at + len(data):
            self._held.pop(part, None)
        return data[start - at : stop - at]

    def _fetch(self, part: int, start: int, stop: int) -> bytes | memoryview:
        """Bytes ``[start, stop)`` of ``part``, of the pinned version. Blocking."""
        if self._etags is None:
            with self._pinning:
                if self._etags is None:
                    self._pin(part, start, stop)
        held = self._held_range(part, start, stop)
        if held is not None:
            return bytes(held)
        assert self._etags is not None
        etag = self._etags[part]
        return self._gets.send(self.keys[part], start, stop, etag).result().data

    def _send(self, part: int, start: int, stop: int) -> Future[bytes | memoryview]:
        """A window's GET sent at once, of the pinned version (from a worker thread while
        not pinned yet)."""
        if self._etags is None:
            return self._gets.policy.pool.submit(self._fetch, part, start, stop)
        out: Future[bytes | memoryview] = Future()
        held = self._held_range(part, start, stop)
        if held is not None:
            out.set_result(bytes(held))
            return out
        sent = self._gets.send(self.keys[part], start, stop, self._etags[part])

        def done(f: Future[Got]) -> None:
            if f.cancelled():
                out.cancel()
            elif f.exception() is not None:
                out.set_exception(f.exception())
            else:
                out.set_result(f.result().data)

        out.set_running_or_notify_cancel()
        sent.add_done_callback(done)
        return out

    # --- PartReader ----------------------------------------------------------------------------

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
        """No handle reads it now: the next one pins the version stored then, and the
        kernel keeps no page of this one for it."""
        self._etags, self._held, self.version = None, {}, object()
        for ahead in self._ahead:
            if ahead is not None:
                ahead.close()

    def close(self) -> None:
        self.release()
