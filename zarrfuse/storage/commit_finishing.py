"""Commits whose record is stored but whose copies are not yet made: they go on in the
background on the store client's loop, each key read from its temp meanwhile, and a write
of such a key waits for them first (why: docs/writing.md, "Journals").
"""

from __future__ import annotations

import errno
import functools
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any

from zarrfuse.storage.store_requests import StoreRequests

__all__ = ["Finishing"]

log = logging.getLogger(__name__)


@dataclass
class _Job:
    tx: str
    temps: dict[str, tuple[str, int]]
    """Each key the commit replaces: its temp and the temp's size."""
    mtime_ns: int
    finish: Callable[[], Coroutine[Any, Any, None]]
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


class Finishing:
    """The commits of one journal still being finished, by key."""

    def __init__(self, name: str, requests: StoreRequests) -> None:
        self._name = name
        self._requests = requests
        self._jobs: dict[str, _Job] = {}
        self._by_key: dict[str, _Job] = {}
        self._lock = threading.Lock()

    def run(
        self,
        tx: str,
        temps: dict[str, tuple[str, int]],
        finish: Callable[[], Coroutine[Any, Any, None]],
        deadline: float,
    ) -> bool:
        """Run ``finish`` until ``deadline``; True if it ended, else it goes on in background."""
        job = _Job(tx, temps, time.time_ns(), finish)
        with self._lock:
            self._jobs[tx] = job
            self._by_key.update(dict.fromkeys(temps, job))
        self._requests.start(f"finishing commit {tx}", lambda: self._work(job))
        if job.done.wait(max(0.0, deadline - time.monotonic())) and job.error is None:
            return True
        if job.error is None:
            log.info("%s: commit %s is stored; the store is still making its copies (its "
                     "chunks are read from the commit's temps meanwhile)", self._name, tx)
        return False

    def shown(self, key: str) -> tuple[str, int, int] | None:
        """Where ``key`` is read while its commit is being finished: (temp, size, time)."""
        with self._lock:
            job = self._by_key.get(key)
        if job is None:
            return None
        temp, size = job.temps[key]
        return temp, size, job.mtime_ns

    def settle(self, keys: Iterable[str], deadline: float | None) -> None:
        """Before ``keys`` are written or deleted: wait until their commits are finished, or
        finish a failed one again; EIO (nothing sent) if that does not end by ``deadline``."""
        with self._lock:
            jobs = {id(job): job for key in keys if (job := self._by_key.get(key)) is not None}
            for job in jobs.values():
                if job.done.is_set() and job.error is not None:  # failed: once more
                    job.done.clear()
                    job.error = None
                    self._requests.start(f"finishing commit {job.tx}",
                                         functools.partial(self._work, job))
        for job in jobs.values():
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            job.done.wait(left)
            if not job.done.is_set() or job.error is not None:
                raise OSError(errno.EIO, f"an earlier commit of these parts ({job.tx}) is not "
                              f"finished yet: {job.error or 'the store is slow'}")

    async def _work(self, job: _Job) -> None:
        try:
            await job.finish()
        except Exception as e:  # noqa: BLE001  (kept, said, and retried by the next write)
            job.error = e
            log.warning("%s: commit %s is stored, but finishing it failed (%s): its chunks "
                        "are read from its temps until a write retries it or the next "
                        "writable mount finishes it", self._name, job.tx, e)
        else:
            with self._lock:
                self._jobs.pop(job.tx, None)
                for key in job.temps:
                    if self._by_key.get(key) is job:
                        del self._by_key[key]
        finally:
            job.done.set()
