"""The one bound on requests in flight to a remote store, for the whole mount.

Readers, rendered views, whole images, shard reads and every kind of read-ahead send their
requests from different thread pools; each request to a remote store (an obstore call, a
web server's GET or HEAD) takes one of ``REQUESTS_IN_FLIGHT`` slots for as long as it runs,
so however many of them want the store at once, it never sees more than that from one
mount. A request waits for a slot in its own thread: nothing holds a slot while it waits
for another, so they cannot deadlock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["REQUESTS_IN_FLIGHT", "limit_requests", "request_slot"]

REQUESTS_IN_FLIGHT = 64
"""Requests to the store in flight at once per mount (zarr-python's reads go as wide at
``async.concurrency`` 64; a browser sends 6 per host)."""

_slots = [threading.BoundedSemaphore(REQUESTS_IN_FLIGHT)]


@contextmanager
def request_slot() -> Iterator[None]:
    """Hold one of the mount's request slots while the block sends its request."""
    slots = _slots[0]
    with slots:
        yield


def limit_requests(count: int) -> None:
    """Set the bound (tests; requests already in flight keep their slots)."""
    _slots[0] = threading.BoundedSemaphore(count)
