"""What a mount has done, for ``zarrfuse stats``: one per mount, incremented from any thread
without a lock (a rare lost update is acceptable for monitoring)."""

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
        """Cache outcomes: listing_hit, listing_miss, page_cache_hit."""
        self.decoded: Counter[str] = Counter()
        """Chunks of rendered views and whole images: ``chunks`` decoded, ``filled`` absent."""

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
