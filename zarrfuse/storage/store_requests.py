"""The one way a mount's requests reach a remote store: a client per mount (``StoreRequests``)
owning its event loop, its bound on requests in flight, its ``--store-timeout``, its
background tasks and its signed-URL exchanges (why: docs/sources.md, "One way to the store").
Errors come back as ``OSError``: absent as FileNotFoundError, a server ignoring ranges as
EOPNOTSUPP, any other failure as EIO with the store's reason in one line.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any, NamedTuple, TypeVar

from zarrfuse.limits import REDIRECT_TRAP

__all__ = [
    "ANSWER_BYTES",
    "REQUESTS_IN_FLIGHT",
    "Answer",
    "StoreRequests",
    "ignores_ranges",
    "is_absent",
    "server_fault",
]

T = TypeVar("T")

REQUESTS_IN_FLIGHT = 64
"""Requests to the store in flight at once per mount (zarr-python's reads go as wide at
``async.concurrency`` 64; a browser sends 6 per host)."""

ANSWER_BYTES = 64 << 10
"""The most bytes of a signed URL's answer read (an error's code comes in far less)."""

Request = Callable[[], Awaitable[T]]
"""Makes the request's coroutine; called on the client's loop, once a slot is free."""


class Answer(NamedTuple):
    """A signed URL's answer: its status, its ``Date`` and the start of its body."""

    status: int
    date: str | None
    body: bytes


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A signed URL is answered where it points: a redirect is its answer, never followed."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_SIGNED_URLS = urllib.request.build_opener(_NoRedirects())
"""The opener of signed URLs (stateless: no cookies, no redirects)."""


class StoreRequests:
    """One mount's client of its remote store: loop, bound, timeout, background tasks."""

    def __init__(self, *, timeout: float | None = None,
                 limit: int = REQUESTS_IN_FLIGHT) -> None:
        self.timeout = timeout
        """Each read request's bound in seconds (``--store-timeout``); None: none."""
        self._limit = limit
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0
        self._slots: asyncio.Semaphore | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    def _get(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed() or self._pid != os.getpid():
                # (after a fork, the loop's thread is not in the child: a new one)
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="zarrfuse-requests",
                                 daemon=True).start()
                self._loop, self._pid, self._slots = loop, os.getpid(), None
            return self._loop

    def _semaphore(self) -> asyncio.Semaphore:
        """The bound, made on the loop (called there only)."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._limit)
        return self._slots

    def send(self, what: str, make: Request[T], *, bounded: bool = True) -> Future[T]:
        """Send one request; its answer (or its error, as ``OSError``) comes in the future.
        ``bounded``: cut at the timeout (reads; never a write whose answer may still land)."""
        return asyncio.run_coroutine_threadsafe(self.answer(what, make, bounded=bounded),
                                                self._get())

    def request(self, what: str, make: Request[T], *, bounded: bool = True) -> T:
        """Send one request and wait for its answer (worker threads, never the loop's own)."""
        return self.send(what, make, bounded=bounded).result()

    async def answer(self, what: str, make: Request[T], *, bounded: bool = True) -> T:
        """One request, awaited on the loop (by a task ``start`` runs)."""
        return await _answer(self, what, make, bounded)

    def start(self, what: str, work: Callable[[], Coroutine[Any, Any, None]]) -> Future[None]:
        """Run ``work`` (whose requests go through ``answer``) as a task on the loop: work
        nobody waits for gets no thread. Its failure is the future's (``work`` says its own);
        the tasks end with the process, or at ``close``."""
        loop = self._get()

        async def run() -> None:
            task = asyncio.current_task()
            assert task is not None
            self._tasks.add(task)
            try:
                await work()
            finally:
                self._tasks.discard(task)

        return asyncio.run_coroutine_threadsafe(run(), loop)

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine of requests on the loop and wait for its end (worker threads)."""
        return asyncio.run_coroutine_threadsafe(work, self._get()).result()

    @contextmanager
    def request_slot(self, deadline: float | None = None) -> Iterator[None]:
        """Hold a slot of the bound while the block sends through another client (zarr's
        loop, a signed URL); ConnectionRefusedError (nothing sent) if none is free by
        ``deadline`` (``time.monotonic()``)."""
        loop = self._get()

        async def take() -> asyncio.Semaphore:
            slots = self._semaphore()
            await slots.acquire()
            return slots

        taking = asyncio.run_coroutine_threadsafe(take(), loop)
        try:
            slots = taking.result(None if deadline is None
                                  else max(0.0, deadline - time.monotonic()))
        except concurrent.futures.TimeoutError:
            if not taking.cancel():  # taken meanwhile: given back
                loop.call_soon_threadsafe(taking.result().release)
            raise ConnectionRefusedError(
                errno.ECONNREFUSED, "no request slot free in time (the store is slow)"
            ) from None
        try:
            yield
        finally:
            loop.call_soon_threadsafe(slots.release)

    def exchange(self, method: str, url: str, body: bytes | None, headers: dict[str, str],
                 deadline: float) -> Answer:
        """Send one request to a signed URL (``signed_put``) in a slot of the bound and wait
        in the caller's thread until ``deadline``. Any HTTP status is returned;
        ConnectionRefusedError: not sent; any other OSError: sent, with no answer."""
        with self.request_slot(deadline):
            request = urllib.request.Request(url, data=body, method=method, headers=headers)
            timeout = max(0.1, deadline - time.monotonic())
            try:
                with _SIGNED_URLS.open(request, timeout=timeout) as r:
                    return Answer(r.status, r.headers.get("Date"), r.read(ANSWER_BYTES))
            except urllib.error.HTTPError as e:
                date = e.headers.get("Date") if e.headers else None
                return Answer(e.code, date, e.read(ANSWER_BYTES))
            except urllib.error.URLError as e:
                if isinstance(e.reason, OSError):
                    raise e.reason from None
                raise OSError(errno.EIO, str(e.reason)) from None

    def close(self) -> None:
        """At unmount: cancel background tasks (recovery finishes them) and stop the loop."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is None or loop.is_closed():
            return

        def stop() -> None:
            for task in list(self._tasks):
                task.cancel()
            loop.call_soon(loop.stop)

        loop.call_soon_threadsafe(stop)


async def _answer(client: StoreRequests, what: str, make: Request[T], bounded: bool) -> T:
    async with client._semaphore():
        timeout = client.timeout if bounded else None
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
    """Whether a store error means "no such object": a 404 (obstore's NotFoundError) or a
    410 Gone (a generic error in obstore). A 403 or 5xx read as absent would show fill values."""
    if isinstance(e, FileNotFoundError) or type(e).__name__ == "NotFoundError":
        return True
    return "status code: 410 Gone" in str(e)


def ignores_ranges(e: BaseException) -> bool:
    """Whether a ranged GET failed as the server sent the whole object (``http.server``)."""
    return type(e).__name__ == "NotSupportedError"


_FAULTS = (
    (f"{REDIRECT_TRAP},", "the server redirected to another host: refused "
                          "(--allow-redirects follows it)"),
    ("TooManyRedirects", "the server redirects in a loop"),
    ("TooLarge", "the server's headers are too large"),
    ("IncompleteBody", "the server sent fewer bytes than its Content-Length"),
    ("Parse(", "the server's answer is not HTTP"),
)
"""Web server faults as obstore's debug text names them, and what the log line says."""


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
