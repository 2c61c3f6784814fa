"""What a mount has done: requests by kind, bytes, store requests, cache hits, errors.

One ``Counters`` object per mount, shared by the layers that count; ``zarrfuse stats`` shows a
snapshot. Counting is a dict increment on the trio thread or a worker thread; CPython's GIL
makes each increment atomic enough for monitoring (a rare lost update is acceptable).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

__all__ = ["Counters"]


class Counters:
    """Named monotonic counters, grouped by what they count."""

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        """FUSE requests by operation (lookup, read, write, ...)."""
        self.request_seconds: defaultdict[str, float] = defaultdict(float)
        """Time spent answering FUSE requests, by operation (wall clock in the daemon)."""
        self.errors: Counter[str] = Counter()
        """FUSE errors answered, by errno name (ENOENT, EIO, ...)."""
        self.store: Counter[str] = Counter()
        """Store operations by kind (list, stat, read, write, delete)."""
        self.bytes_read = 0
        """Bytes delivered to readers through the mount."""
        self.bytes_written = 0
        """Bytes accepted from writers through the mount."""
        self.store_bytes_read = 0
        """Bytes fetched from the store (parts, byte ranges)."""
        self.store_bytes_written = 0
        """Bytes stored (committed parts)."""
        self.cache: Counter[str] = Counter()
        """Cache outcomes: listing_hit, listing_miss, page_cache_hit (reads served without
        waiting for storage)."""
        self.decoded: Counter[str] = Counter()
        """Chunks rendered views and whole images needed: ``chunks`` decoded from stored
        bytes, ``filled`` absent and shown as the fill value (no store request)."""

    def snapshot(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return {
            "requests": dict(self.requests),
            "request_seconds": {k: round(v, 6) for k, v in self.request_seconds.items()},
            "errors": dict(self.errors),
            "store_requests": dict(self.store),
            "bytes_read": self.bytes_read,
            "bytes_written": self.bytes_written,
            "store_bytes_read": self.store_bytes_read,
            "store_bytes_written": self.store_bytes_written,
            "cache": dict(self.cache),
            "decoded": dict(self.decoded),
        }
