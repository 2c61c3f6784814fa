"""A PUT (or DELETE) to an object store whose answer is the truth, within a deadline: sent
to a signed URL that expires when the writer gives up, and answered EIO only once it has
expired at the store (by the store's clock, bounded by each answer's ``Date``). Why: a
request that has left cannot be cancelled (docs/sources.md, "Signed PUTs").
"""

from __future__ import annotations

import collections
import contextlib
import errno
import hashlib
import logging
import math
import threading
import time
from email.utils import parsedate_to_datetime
from typing import Any, Literal

from zarrfuse.storage.object_gets import get_whole, sign
from zarrfuse.storage.store_requests import StoreRequests

__all__ = ["MARGIN", "SignedPut"]

log = logging.getLogger(__name__)

MARGIN = 1.0
"""Seconds waited past a URL's expiry before it counts as expired at the store (signed
times have whole seconds)."""

_RETRY_PAUSE = 0.2


class SignedPut:
    """PUTs through URLs that expire when their writer gives up."""

    def __init__(self, store: Any, name: str, requests: StoreRequests,
                 headers: dict[str, str] | None = None) -> None:
        self._store = store
        self._requests = requests
        self._name = name
        self._headers = {"Content-Type": "application/octet-stream", **(headers or {})}
        self._ahead: collections.deque[float] = collections.deque(maxlen=16)
        """Upper bounds of how far our clock runs ahead of the store's (seconds)."""
        self._lock = threading.Lock()

    @classmethod
    def of(cls, store: Any, name: str, requests: StoreRequests) -> SignedPut | None:
        """PUTs through expiring signed URLs, for stores that sign (S3, Azure, GCS) with
        credentials (an anonymous store signs nothing: its PUTs keep the client's
        timeouts; a web server takes no PUT)."""
        kind = type(store).__name__
        if kind not in ("S3Store", "AzureStore", "GCSStore"):
            return None
        if (getattr(store, "config", None) or {}).get("skip_signature"):
            return None
        headers = {"x-ms-blob-type": "BlockBlob"} if kind == "AzureStore" else None
        return cls(store, name, requests, headers)

    def clock_ahead(self) -> float:
        """How far our clock may run ahead of the store's: the least of the bounds its
        answers gave (each ``Date`` bounds it from above), never below 0."""
        with self._lock:
            return max(0.0, min(self._ahead)) if self._ahead else 0.0

    def put(self, key: str, data: bytes, deadline: float) -> None:
        """Store ``data`` at ``key``, or raise ``OSError(EIO)`` once the store can no longer
        store it. Answers by ``deadline`` (``time.monotonic()``), or after at least one
        second of validity plus the clock margin when less is left."""
        self._send("PUT", key, data, deadline)

    def delete(self, key: str, deadline: float) -> None:
        """Remove ``key`` (absent is no error) the same way: an ``rm`` answered EIO never
        takes effect later."""
        self._send("DELETE", key, None, deadline)

    def _send(
        self, method: Literal["PUT", "DELETE"], key: str, data: bytes | None, deadline: float
    ) -> None:
        ahead = self.clock_ahead()
        started, now = time.monotonic(), time.time()
        if started >= deadline:  # the commit's earlier PUTs took its time: send nothing
            raise OSError(errno.EIO, f"{method} {key}: the write's time (--store-timeout) "
                          "ran out before it was sent")
        # A signed time has whole seconds (S3's X-Amz-Date is ``now`` cut to the second):
        # the URL is valid until ``floor(now) + expires`` at the store, at least a second.
        signed = math.floor(now)
        expires = max(math.ceil(now - signed + 1),
                      math.floor(now + (deadline - started) - ahead - MARGIN - signed))
        url = sign(self._store, method, key, expires)
        latest = math.floor(time.time())  # the signer read the clock in this second or before
        final = started + (latest + expires - now) + ahead + MARGIN
        """When the URL has expired at the store, by our clock."""
        while True:
            outcome = self._try(method, key, url, data, final)
            if outcome is None:
                return
            if outcome == "retry" and time.monotonic() + _RETRY_PAUSE < final - MARGIN:
                time.sleep(_RETRY_PAUSE)
                continue
            break
        if outcome == "unknown":
            time.sleep(max(0.0, final - time.monotonic()))
            if data is not None:
                self._look_later(key, data)
            raise OSError(
                errno.EIO,
                f"{method} {key}: no answer within the write's time (--store-timeout); its "
                "signed URL has expired, so the store will not take it",
            )
        raise OSError(errno.EIO, f"{method} {key}: {outcome}")

    def _try(
        self, method: str, key: str, url: str, data: bytes | None, final: float
    ) -> str | None:
        """None when done; "retry" when refused before doing it (server error, refused
        connection); "unknown" when it may have been done; else the reason it was not."""
        headers = self._headers if data is not None else {}
        sent_at = time.time()
        try:
            answer = self._requests.exchange(method, url, data, headers, final)
        except ConnectionRefusedError:  # not sent
            return "retry"
        except OSError as e:  # a timeout, a reset: sent, maybe done
            log.debug("%s: %s %s sent at %.3f: %s", self._name, method, key, sent_at, e)
            return "unknown"
        self._learn_clock(answer.date)
        if 200 <= answer.status < 300:
            return None
        if answer.status == 404 and method == "DELETE":  # absent already (Azure says so)
            return None
        if answer.status >= 500:
            log.debug("%s: %s %s: %d, tried again", self._name, method, key, answer.status)
            return "retry"
        code = _error_code(answer.body.decode("utf-8", "replace"))
        return f"the store refused it ({answer.status}{f' {code}' if code else ''})"

    def _learn_clock(self, date: str | None) -> None:
        if not date:
            return
        with contextlib.suppress(TypeError, ValueError, IndexError):
            server = parsedate_to_datetime(date).timestamp()
            with self._lock:
                self._ahead.append(time.time() - server)

    def _look_later(self, key: str, data: bytes) -> None:
        """Whether a PUT answered EIO was stored before its URL expired: one line if so."""
        digest = hashlib.sha256(data).digest()

        async def look() -> None:
            try:
                held = await self._requests.answer(
                    f"GET {key}", lambda: get_whole(self._store, key))
            except OSError:  # absent, or the store still away: nothing to say
                return
            if hashlib.sha256(held).digest() == digest:
                log.warning("%s: PUT %s was answered EIO, but the store had taken it before "
                            "its URL expired: %s holds the bytes that write sent",
                            self._name, key, key)

        self._requests.start(f"check of PUT {key}", look)


def _error_code(body: str) -> str | None:
    """S3's and Azure's ``<Code>`` of an XML error body."""
    start = body.find("<Code>")
    end = body.find("</Code>", start)
    return body[start + 6 : end] if 0 <= start < end else None
