"""What one mount shares with every array it shows: backend, trust, counters, thread bounds,
caches and the nursery of its background work; never a module global, so two mounts in one
process share nothing (docs/performance.md, "Requests in flight")."""

from __future__ import annotations

import itertools
import logging
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import trio

from zarrfuse.filesystem.chunks.byte_cache import DecodedChunks, RenderCache
from zarrfuse.filesystem.chunks.chunk_caches import OpenChunkCache
from zarrfuse.filesystem.chunks.counters import Counters
from zarrfuse.filesystem.chunks.recently_used import Trust
from zarrfuse.filesystem.chunks.shard_indexes import KeptSpans, kept_spans
from zarrfuse.request_deadline import past_deadline
from zarrfuse.storage.base import Backend

__all__ = ["FETCH_THREADS", "IO_THREADS", "WAITING_THREADS", "MountContext"]

log = logging.getLogger(__name__)

IO_THREADS = 16
"""Worker threads for store I/O at once: storage calls block, trio must not."""
WAITING_THREADS = 40
"""Batches waiting on their fetches at once (trio's own default bound)."""
FETCH_THREADS = 64
"""Chunk reads in flight at once on a remote store, for every batch of the mount together."""


@dataclass(eq=False)
class MountContext:
    """One mount's shared state; ``close`` at unmount."""

    backend: Backend
    trust: Trust
    """How long what is learnt of the store is believed (``--metadata-ttl``, the watch)."""
    counters: Counters = field(default_factory=Counters)
    open_chunks: OpenChunkCache | None = None
    """Chunks kept open (read-only mounts, and writable ones while the watch runs)."""
    cache_bytes: int = 256 << 20
    """The budget of each cache of decoded or rendered chunks (``--cache-mb``)."""

    def __post_init__(self) -> None:
        self.io = trio.CapacityLimiter(IO_THREADS)
        self.cpu = trio.CapacityLimiter(os.cpu_count() or 1)
        """Decoding, encoding and rendering: a thread per core."""
        self.colouring = trio.CapacityLimiter(1)
        """Colouring composite tiles: numpy steps on 256 x 256 planes that hold the GIL for
        most of their time (two threads coloured slower than one), so one thread, beside the
        decoding ones and never queued behind the next windows' decoding."""
        self.waits = trio.CapacityLimiter(WAITING_THREADS)
        """Threads that wait on a batch's fetches (the fetch pool's, or batched requests)."""
        self.rendered = RenderCache(self.cache_bytes)
        self.decoded = DecodedChunks(self.cache_bytes)
        self.spans: KeptSpans = kept_spans()  # whole shards until their chunks are taken
        self.numbers = itertools.count()
        """Cache keys of sources and images (never ``id()``: a rebuilt one may reuse a freed
        address)."""
        self._lock = threading.Lock()
        self._fetches: ThreadPoolExecutor | None = None
        self._nursery: trio.Nursery | None = None

    def fetch_pool(self) -> ThreadPoolExecutor:
        """The pool that fetches a batch's chunks from a remote store, made on first use under
        a lock (worker threads ask for it at once)."""
        with self._lock:
            if self._fetches is None:
                self._fetches = ThreadPoolExecutor(FETCH_THREADS,
                                                   thread_name_prefix="zarrfuse-fetch")
            return self._fetches

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The mount's nursery for work nobody waits for, cancelled when the block ends."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                yield
            finally:
                self._nursery = None
                nursery.cancel_scope.cancel()

    def start_soon(self, work: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Run a guess ahead of a read in the mount's nursery (not outside ``running``); its
        failure is logged at debug: the read itself asks again, and says why."""
        name = getattr(work, "__qualname__", work)

        async def guess() -> None:
            try:
                await work(*args)
            # A guess: the read that needs it reports. It inherits the deadline of the request
            # that started it, and a wait cut there (a BaseException, alone or in a nursery's
            # group) must not end the mount; trio's Cancelled goes on.
            except BaseException as e:
                if not (isinstance(e, Exception) or past_deadline(e)):
                    raise
                log.debug("%s, ahead of a read: %r", name, e)

        if self._nursery is None:
            log.debug("not serving: %s not started", name)
            return
        self._nursery.start_soon(guess, name=name)  # the task says what it guesses

    def close(self) -> None:
        """At unmount: kept chunks closed, queued fetches dropped, the backend closed."""
        if self.open_chunks is not None:
            self.open_chunks.clear()
        with self._lock:
            fetches, self._fetches = self._fetches, None
        if fetches is not None:
            fetches.shutdown(wait=False, cancel_futures=True)
        self.backend.close()

