"""The one way a mount's requests reach a remote store: every request to S3, Azure, GCS or a
web server is an obstore coroutine on one event loop, under one bound on requests in flight and
one timeout (``--store-timeout``); obstore's client retries by one policy (``api.s3``).

A worker thread that needs an answer waits for it (``request``); fetches made ahead send
theirs without a thread waiting on each (``send``): 64 requests in flight are 64 coroutines
on one loop, not 64 threads blocked in a client. Remote stores obstore does not serve (other
fsspec filesystems) run on zarr's own loop and take a slot of the same bound
(``request_slot``; a local zip file's reads take none), so the store never sees more than
``REQUESTS_IN_FLIGHT`` from one mount, whichever pool asks. Errors come back as ``OSError``:
"absent" (a 404, or a web server's 410) as FileNotFoundError, a ranged GET the server cannot
answer (it ignores ranges) as EOPNOTSUPP, any other failure as EIO with the store's reason in
one line (a web server's known faults in words: a redirect loop or to another host, headers
too large or not HTTP, a body shorter than its Content-Length), logged by whoever reports it
(the FUSE operation, once); a fetch made ahead that fails is a guess, asked again by the read
that needs it.
"""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import TypeVar

from zarrfuse.limits import REDIRECT_TRAP

__all__ = [
    "REQUESTS_IN_FLIGHT",
    "configure",
    "ignores_ranges",
    "is_absent",
    "limit_requests",
    "request",
    "request_slot",
    "send",
    "server_fault",
]

T = TypeVar("T")

REQUESTS_IN_FLIGHT = 64
"""Requests to the store in flight at once per mount (zarr-python's reads go as wide at
``async.concurrency`` 64; a browser sends 6 per host)."""

Request = Callable[[], Awaitable[T]]
"""Makes the request's coroutine; called on the layer's loop, once a slot is free."""


class _Loop:
    """The layer's event loop, on a thread of its own, started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.limit = REQUESTS_IN_FLIGHT
        self.timeout: float | None = None
        self.slots: asyncio.Semaphore | None = None

    def get(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="zarrfuse-requests",
                                 daemon=True).start()
                self._loop = loop
                self.slots = None
            return self._loop

    def semaphore(self) -> asyncio.Semaphore:
        """The bound, made on the loop (called there only)."""
        if self.slots is None:
            self.slots = asyncio.Semaphore(self.limit)
        return self.slots

    def forget(self) -> None:
        """After a fork: the loop's thread is not in the child."""
        self._lock = threading.Lock()
        self._loop, self.slots = None, None


_LOOP = _Loop()
os.register_at_fork(after_in_child=_LOOP.forget)


def configure(*, timeout: float | None) -> None:
    """Set the timeout of each read request (``--store-timeout``), at mount."""
    _LOOP.timeout = timeout


def limit_requests(count: int) -> None:
    """Set the bound (tests; requests in flight keep their slots)."""
    _LOOP.limit = count

    async def renew() -> None:
        _LOOP.slots = asyncio.Semaphore(count)

    asyncio.run_coroutine_threadsafe(renew(), _LOOP.get()).result(10)


def send(what: str, make: Request[T], *, bounded: bool = True) -> Future[T]:
    """Send one request; its answer (or its error, as ``OSError``) comes in the future.
    ``bounded``: cut at the timeout (reads; never a write whose answer may still land)."""
    return asyncio.run_coroutine_threadsafe(_answer(what, make, bounded), _LOOP.get())


def request(what: str, make: Request[T], *, bounded: bool = True) -> T:
    """Send one request and wait for its answer (worker threads, never the loop's own)."""
    return send(what, make, bounded=bounded).result()


@contextmanager
def request_slot() -> Iterator[None]:
    """Hold one slot of the bound while the block sends a request through another client
    (zarr's loop): the caller's thread waits for the slot, never the loop."""
    loop = _LOOP.get()

    async def take() -> asyncio.Semaphore:
        slots = _LOOP.semaphore()
        await slots.acquire()
        return slots

    slots = asyncio.run_coroutine_threadsafe(take(), loop).result()
    try:
        yield
    finally:
        loop.call_soon_threadsafe(slots.release)


async def _answer(what: str, make: Request[T], bounded: bool) -> T:
    async with _LOOP.semaphore():
        timeout = _LOOP.timeout if bounded else None
        try:
            if timeout is None:
                return await make()
            return await asyncio.wait_for(make(), timeout)
        except TimeoutError:
            raise OSError(errno.EIO, f"{what}: no answer within {timeout:g} s (--store-timeout)"
                                     ": the store stalls, or sends too slowly") from None
        except Exception as e:
            if is_absent(e):
                raise FileNotFoundError(errno.ENOENT, f"{what}: not found") from e
            if ignores_ranges(e):
                raise OSError(errno.EOPNOTSUPP, f"{what}: {_reason(e)}") from e
            if isinstance(e, OSError) and e.errno is not None:
                raise
            raise OSError(errno.EIO, f"{what}: {_reason(e)}") from e


def is_absent(e: BaseException) -> bool:
    """Whether a store error means "no such object": obstore's NotFoundError (a 404; its
    runtime class is FileNotFoundError), or a web server's 410 Gone, which obstore reports as
    a generic error. Nothing else is an absence: a 403 or a 5xx read as "absent" would show
    fill values where the store failed."""
    if isinstance(e, FileNotFoundError) or type(e).__name__ == "NotFoundError":
        return True
    return "status code: 410 Gone" in str(e)


def ignores_ranges(e: BaseException) -> bool:
    """Whether a ranged GET failed because the server ignores ranges (it sent the whole
    object, which obstore refuses): Python's ``http.server`` does."""
    return type(e).__name__ == "NotSupportedError"


_FAULTS = (
    (f"{REDIRECT_TRAP},", "the server redirected to another host: refused "
                          "(--allow-redirects follows it)"),
    ("TooManyRedirects", "the server redirects in a loop"),
    ("TooLarge", "the server's headers are too large"),
    ("IncompleteBody", "the server sent fewer bytes than its Content-Length"),
    ("Parse(", "the server's answer is not HTTP"),
)
"""Faults of a web server as obstore's debug text names them (its first line only says
"error sending request"), and what the log line says instead."""


def server_fault(e: BaseException) -> str | None:
    """A web server's fault in words, if ``e`` is one of ``_FAULTS``."""
    text = str(e)
    return next((fault for token, fault in _FAULTS if token in text), None)


def _reason(e: BaseException) -> str:
    """The store's reason in one line, without obstore's debug dump."""
    fault = server_fault(e)
    if fault is not None:
        return fault
    text = str(e).split("\n\nDebug source")[0].split("Debug source:")[0]
    return " ".join(text.split()) or type(e).__name__
