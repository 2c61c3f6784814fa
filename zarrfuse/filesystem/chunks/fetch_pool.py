"""The one pool of threads that fetches chunks of a batch from a remote store.

A batch (a rendered directory, a whole image) reads many chunks; on a remote store each is a
round trip, so they are fetched together, up to ``FETCH_THREADS`` in flight for the whole
mount. The pool is made on first use (local mounts never start its threads), under a lock:
batches ask for it from several worker threads at once.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ["FETCH_THREADS", "fetch_pool"]

FETCH_THREADS = 64
"""Chunk reads in flight at once on a remote store, for every batch of the mount together."""

_pool: list[ThreadPoolExecutor] = []
_lock = threading.Lock()


def fetch_pool() -> ThreadPoolExecutor:
    """The mount's fetch pool (the same one for every caller)."""
    with _lock:
        if not _pool:
            _pool.append(ThreadPoolExecutor(FETCH_THREADS, thread_name_prefix="zarrfuse-fetch"))
        return _pool[0]
