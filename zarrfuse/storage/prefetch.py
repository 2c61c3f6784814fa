"""Read-ahead for one remote object: once reads run sequentially, windows ahead of them are
fetched concurrently; a read that is not sequential fetches its own range only (why:
docs/sources.md, "Object stores"). Thread-safe; no lock is held while waiting for the network.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable
from concurrent.futures import CancelledError, Executor, Future
from dataclasses import dataclass
from typing import Any

__all__ = ["PrefetchBudget", "ReadAhead", "ReadAheadPolicy", "Window"]

Fetch = Callable[[int, int], bytes | memoryview]
"""``fetch(start, stop)``: the object's bytes in ``[start, stop)``, blocking."""
Send = Callable[[int, int], "Future[bytes | memoryview]"]
"""``send(start, stop)``: a GET of those bytes sent at once, no thread waiting for it."""


class PrefetchBudget:
    """Bytes all read-aheads of a mount may hold at once, fetched or in flight."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._used = 0
        self._lock = threading.Lock()

    def take(self, n: int) -> bool:
        with self._lock:
            if self._used + n > self.limit:
                return False
            self._used += n
            return True

    def give(self, n: int) -> None:
        with self._lock:
            self._used -= n

    @property
    def used(self) -> int:
        return self._used


@dataclass
class Window:
    """Bytes ``[start, stop)`` of the object, being fetched (or fetched) ahead of reads."""

    start: int
    stop: int
    future: Future[bytes | memoryview]


@dataclass(frozen=True)
class ReadAheadPolicy:
    """How far and how wide to read ahead, per mount: ``depth`` windows of ``window`` bytes
    fetched by ``pool`` within ``budget``; a wait is abandoned after ``timeout`` seconds."""

    pool: Executor
    budget: PrefetchBudget
    window: int
    depth: int
    timeout: float


class ReadAhead:
    """Sequential detection and the windows fetched ahead for one object of known size."""

    def __init__(
        self, fetch: Fetch, size: int, policy: ReadAheadPolicy, send: Send | None = None
    ) -> None:
        """``send``: how windows are fetched where the store's requests need no thread
        (``store_requests``); without it, ``fetch`` runs on the policy's pool."""
        self.fetch = fetch
        self.send = send
        self.size = size
        self.policy = policy
        self._windows: list[Window] = []  # contiguous, ascending
        self._expected = -1  # where the next sequential read starts
        self._continuing: dict[int, bool] = {}  # read_nowait's verdicts, for the ``read`` after
        self._hits = 0  # sequential reads in a row
        self._ramp = 0  # the size of the next window
        self._lock = threading.Lock()

    # --- bookkeeping (under the lock) -----------------------------------------------------

    def _note(self, start: int, stop: int) -> bool:
        """Record a read of ``[start, stop)``; whether it continues the previous ones (it
        starts where the last ended, or inside a window fetched ahead: the kernel may send
        read-ahead requests slightly out of order)."""
        sequential = (start == self._expected and start > 0) or any(
            w.start <= start < w.stop for w in self._windows
        )
        self._expected = max(stop, self._expected) if sequential else stop
        if not sequential:
            self._drop(lambda w: True)
            self._hits, self._ramp = 0, 0
            return False
        # Ramp up as the kernel does, one more window in flight per sequential read.
        self._hits += 1
        self._ramp = min(self.policy.window, max(2 * self._ramp, stop - start))
        # Windows well behind are done with; the one just behind may still be waited for by
        # a read the kernel sent earlier that a worker thread has not served yet.
        self._drop(lambda w: w.stop + self.policy.window <= start)
        self._schedule(start)
        return True

    def _drop(self, which: Callable[[Window], bool]) -> None:
        keep = []
        for w in self._windows:
            if which(w):
                if w.future.cancel():
                    self.policy.budget.give(w.stop - w.start)
                else:  # already fetching: its bytes stay counted until the GET ends
                    w.future.add_done_callback(self._give_back_when_done(w.stop - w.start))
            else:
                keep.append(w)
        self._windows = keep

    def _give_back_when_done(self, nbytes: int) -> Callable[[Future[Any]], None]:
        """A done-callback that returns ``nbytes`` to the budget when a GET ends."""
        return lambda _: self.policy.budget.give(nbytes)

    def _schedule(self, start: int) -> None:
        """Windows from ``start`` (or the end of those in flight) up to ``depth`` ahead."""
        if self._windows and (self._windows[0].start > start or self._windows[-1].stop < start):
            self._drop(lambda w: True)  # a gap before them: start afresh at ``start``
        at = self._windows[-1].stop if self._windows else start
        policy = self.policy
        horizon = min(self.size, start + min(policy.depth, self._hits) * self._ramp)
        while at < horizon:
            stop = min(at + self._ramp, self.size)
            if not policy.budget.take(stop - at):
                break
            future = (self.send(at, stop) if self.send is not None
                      else policy.pool.submit(self.fetch, at, stop))
            self._windows.append(Window(at, stop, future))
            at = stop

    def _covering(self, start: int, stop: int) -> list[Window]:
        return [w for w in self._windows if w.start < stop and w.stop > start]

    # --- reads ----------------------------------------------------------------------------

    def read_nowait(self, start: int, out: memoryview) -> int:
        """Copy what fetched windows hold from ``start`` on (may start fetches); the count."""
        stop = min(start + len(out), self.size)
        with self._lock:
            sequential = self._note(start, stop)
            windows = self._covering(start, stop) if sequential else []
        done = 0
        for w in windows:
            if w.start > start + done or not w.future.done() or w.future.cancelled():
                break
            if w.future.exception() is not None:
                break
            done += _copy(w, start + done, out[done : stop - start], w.future.result())
        if done < stop - start:
            with self._lock:
                self._continuing[start + done] = sequential
        elif stop >= self.size:
            self._done_with_end()
        return done

    def read(self, start: int, out: memoryview) -> None:
        """Fill ``out`` from ``start``: from windows fetched ahead, else one ranged GET."""
        stop = start + len(out)
        with self._lock:
            sequential = self._continuing.pop(start, None)
            if sequential is None:
                sequential = self._note(start, stop)
            windows = self._covering(start, stop) if sequential else []
        done = 0
        for w in windows:
            if w.start > start + done:
                break
            try:
                data = w.future.result(timeout=self.policy.timeout)
            except CancelledError:  # dropped by a concurrent seek: fetch it here instead
                break
            except BaseException:
                self.close()  # nothing fetched ahead survives a failure; the next read asks anew
                raise
            done += _copy(w, start + done, out[done:], data)
        if done < len(out):
            _fill(out[done:], self.fetch(start + done, stop))
        if stop >= self.size:
            self._done_with_end()

    def _done_with_end(self) -> None:
        """Read to its end: what is fetched ahead goes back to the budget now, not at close."""
        with self._lock:
            self._drop(lambda w: True)

    def close(self) -> None:
        """Drop everything fetched ahead (the object stays readable)."""
        with self._lock:
            self._drop(lambda w: True)
            self._expected = -1
            self._continuing.clear()
            self._hits, self._ramp = 0, 0


def _copy(w: Window, at: int, out: memoryview, data: bytes | memoryview) -> int:
    """Copy ``data`` (window ``w``'s bytes) from object offset ``at`` into ``out``; the count."""
    n = min(len(out), w.stop - at)
    out[:n] = memoryview(data)[at - w.start : at - w.start + n]
    return n


def _fill(out: memoryview, data: bytes | memoryview) -> None:
    if len(data) != len(out):
        raise OSError(errno.EIO, f"asked for {len(out)} bytes, got {len(data)}")
    out[:] = memoryview(data)
