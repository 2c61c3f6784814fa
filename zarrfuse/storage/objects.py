"""Raw key I/O on an object store (S3, Azure, GCS) or a web server, through obstore and the
mount's store client; what it asks and why: docs/sources.md, "Object stores" and "Web servers".
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import sys
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, cast

from zarrfuse.errors import UnfitDocument
from zarrfuse.limits import MAX_DOCUMENT_BYTES
from zarrfuse.storage.base import Capabilities, Document, PartReader, Stat, stat_each
from zarrfuse.storage.http_prefetch import MAX_OBJECT_BYTES, NotPeeked, PeekedObjects
from zarrfuse.storage.object_gets import (
    COMMIT_ATTRIBUTE,
    Got,
    WebRanges,
    copy,
    delete,
    get_range,
    get_tail,
    get_version,
    get_whole,
    head,
    list_dir,
    peek,
    put,
    stat_of,
)
from zarrfuse.storage.object_journal import ObjectJournal
from zarrfuse.storage.object_prefetch import ObjectPrefetch
from zarrfuse.storage.object_readers import (
    PREFETCH_WAIT,
    VERSION_SETTLE,
    ObjectPartReader,
    PartGets,
)
from zarrfuse.storage.prefetch import PrefetchBudget, ReadAheadPolicy
from zarrfuse.storage.signed_put import SignedPut
from zarrfuse.storage.store_requests import StoreRequests

__all__ = ["ObjectBackend", "is_web_store"]

log = logging.getLogger(__name__)

# Sequential reads keep up to PREFETCH_DEPTH windows of PREFETCH_WINDOW bytes in flight;
# all reads of a mount together hold at most PREFETCH_BUDGET bytes ahead, and at most
# PREFETCH_REQUESTS ranged GETs run at once. 8 MiB windows: one GET per 8 kernel reads.
PREFETCH_WINDOW = 8 << 20
PREFETCH_DEPTH = 4
PREFETCH_BUDGET = 256 << 20
PREFETCH_REQUESTS = 8


class ObjectBackend:
    """An obstore store (S3, Azure, GCS, a web server), keys relative to its root."""

    def __init__(
        self, store: Any, journal_path: str = "", write_time: float | None = None,
        requests: StoreRequests | None = None,
    ) -> None:
        self.store = store
        self.requests = requests or StoreRequests(timeout=write_time)
        """The mount's store client: every request of this backend goes through it."""
        self.web = is_web_store(store)
        self._ranges = WebRanges() if self.web else None
        self.capabilities = Capabilities(  # a LIST costs what a HEAD does, for every sibling
            remote=True, can_list=not self.web, stat_by_listing=not self.web,
            read_many=self.read_many, prefetch_objects=self.prefetch_objects)
        self._peeked = PeekedObjects(self._send_peek) if self.web else None
        """Web servers: the next chunk files fetched ahead (``prefetch_objects``)."""
        self._signed = (None if write_time is None
                        else SignedPut.of(store, _describe(store), self.requests))
        self._write_time = write_time
        """Seconds a write (a commit: all its PUTs) may wait for the store
        (``--store-timeout``); None: the client's own timeouts (``zarrfuse verify``)."""
        self._journal = ObjectJournal(self, _describe(store), journal_path)
        self._finished: dict[str, tuple[str, Stat]] = {}
        """Keys read from an interrupted commit's temps, with their stats
        (``show_recovered``: read-only mounts)."""
        self.read_ahead_policy = ReadAheadPolicy(
            pool=ThreadPoolExecutor(PREFETCH_REQUESTS, thread_name_prefix="zarrfuse-ahead"),
            budget=PrefetchBudget(PREFETCH_BUDGET),
            window=PREFETCH_WINDOW,
            depth=PREFETCH_DEPTH,
            timeout=PREFETCH_WAIT,
        )
        self.prefetch = ObjectPrefetch(self._send_whole, self.read_ahead_policy.budget)
        self._part_gets = PartGets(self._send_version, self.read_ahead_policy,
                                   self.prefetch.take, min(write_time or VERSION_SETTLE,
                                                           VERSION_SETTLE))

    def close(self) -> None:
        """At unmount: drop queued read-ahead GETs instead of running them before exit."""
        self.read_ahead_policy.pool.shutdown(wait=False, cancel_futures=True)
        if self._peeked is not None:
            self._peeked.close()
        self.requests.close()

    def _send_whole(self, key: str, size: int) -> Future[Got]:
        """A GET of ``size`` bytes of ``key`` sent ahead of its read (no thread waits)."""
        return self._send_version(key, 0, size, None)

    def _send_version(self, key: str, start: int, stop: int, etag: str | None) -> Future[Got]:
        """Bytes ``[start, stop)`` of ``key`` with their version, sent at once (a web
        server's, from its object fetched ahead); ``etag``: of that version only."""
        peeked = self._peeked if etag is None else None
        found = None if peeked is None else peeked.stat(key)
        ahead = peeked.read(key, start, stop) if peeked and isinstance(found, Stat) else None
        if isinstance(found, Stat) and ahead is not None:
            done: Future[Got] = Future()
            done.set_result(Got(memoryview(ahead), found.size, found.etag, None))
            return done
        key = self._read_key(key)
        return self.requests.send(f"GET {key} bytes {start}-{stop - 1}",
                    lambda: get_version(self.store, key, start, stop, etag))

    def _send_peek(self, key: str, limit: int = MAX_OBJECT_BYTES) -> Future[
            tuple[Stat, bytes | None] | None]:
        """The key's stat and, if at most ``limit`` bytes, its bytes, in one GET sent at
        once (None: absent)."""
        return self.requests.send(f"GET {key}", lambda: peek(self.store, key, limit, self._ranges))

    def list_dir(self, prefix: str) -> tuple[dict[str, Stat], list[str]]:
        """The objects (with stats) and the subdirectories under ``prefix``, in one LIST."""
        prefix = prefix.strip("/")
        found = self.requests.request(f"LIST {prefix or '/'}", lambda: list_dir(
            self.store, f"{prefix}/" if prefix else None))
        return ({meta["path"].rpartition("/")[2]: stat_of(meta) for meta in found["objects"]},
                [p.rstrip("/").rpartition("/")[2] for p in found["common_prefixes"]])

    def list_stats(self, prefix: str) -> dict[str, Stat]:
        stats, _ = self.list_dir(prefix)
        for name in stats:
            shown = self._shown(f"{prefix.strip('/')}/{name}".lstrip("/"))
            if shown is not None:
                stats[name] = shown[1]
        return stats

    def list_names(self, prefix: str) -> set[str]:
        return set(self.list_stats(prefix))  # one LIST gives names and stats alike

    def list_subdirs(self, prefix: str) -> list[str]:
        return self.list_dir(prefix)[1]

    def stat_names(self, prefix: str, names: Sequence[str]) -> list[Stat | None]:
        return stat_each(self, prefix, names)

    def stat(self, key: str) -> Stat | None:
        shown = self._shown(key)
        if shown is not None:
            return shown[1]
        if self._peeked is not None:
            peeked = self._peeked.stat(key)
            if not isinstance(peeked, NotPeeked):
                return peeked
        try:
            return stat_of(self.requests.request(f"HEAD {key}", lambda: head(self.store, key)))
        except FileNotFoundError:
            return None

    def read_range(self, key: str, start: int, stop: int) -> bytes | memoryview:
        """Bytes ``[start, stop)`` of ``key``: one ranged GET (none for an empty range)."""
        if stop <= start:
            return b""
        if self._peeked is not None:
            ahead = self._peeked.read(key, start, stop)
            if ahead is not None:
                return ahead
        key = self._read_key(key)
        try:
            return self.requests.request(f"GET {key} bytes {start}-{stop - 1}",
                           lambda: get_range(self.store, key, start, stop))
        except OSError as e:
            if e.errno != errno.EOPNOTSUPP:
                raise
            return self._without_ranges(key, start, stop)

    def _without_ranges(self, key: str, start: int, stop: int) -> bytes | memoryview:
        """Bytes ``[start, stop)`` from a server that ignores ranges (Python's
        ``http.server``): the object whole, kept as if fetched ahead when small, so that the
        reads after it ask nothing; a larger one read no further than ``stop``."""
        if self._peeked is not None:
            self._peeked.want([key])
            ahead = self._peeked.read(key, start, stop)
            if ahead is not None:
                return ahead
        return self.requests.request(f"GET {key}", lambda: get_version(
            self.store, key, start, stop)).data

    def read_tail(self, key: str, count: int) -> tuple[bytes | memoryview, int | None] | None:
        """The last ``count`` bytes of ``key`` and its size: one suffix GET."""
        read_key = self._read_key(key)
        try:
            return self.requests.request(f"GET {read_key} last {count} bytes",
                           lambda: get_tail(self.store, read_key, count))
        except FileNotFoundError:
            return None

    def prefetch_objects(self, objects: Sequence[tuple[str, int | None]]) -> None:
        """Start fetching these (key, size) objects whole (sizes None where unknown): the
        filesystem is about to open them."""
        if self._peeked is not None:
            self._peeked.want([key for key, _ in objects])
        else:
            self.prefetch.want([(key, size) for key, size in objects if size is not None])

    def open_reader(
        self, keys: Sequence[str], sizes: Sequence[int | None] | None = None
    ) -> PartReader:
        if sizes is None:
            sizes = [None if (found := self.stat(k)) is None else found.size for k in keys]
        return ObjectPartReader(self._part_gets, keys, sizes)

    def read_all(self, key: str) -> bytes | None:
        found = self.read_many([key])[0]
        return None if found is None else found[1]

    def read_many(self, keys: Sequence[str]) -> list[tuple[Stat, bytes] | None]:
        """Whole objects with the stats their GETs tell (None where absent), the GETs sent
        at once and this thread waiting for them all: a batch waits about one round trip."""
        futures = [self._send_peek(self._read_key(key), sys.maxsize) for key in keys]
        try:  # no limit: every body is read
            return cast("list[tuple[Stat, bytes] | None]", [f.result() for f in futures])
        finally:
            for future in futures:
                future.cancel()  # a failure above: the rest are not waited for

    def read_document(self, key: str) -> Document | None:
        peeked = self._send_peek(key, MAX_DOCUMENT_BYTES).result()  # None: absent
        if peeked is None:
            return None
        found, data = peeked
        if data is None:  # refused before its body is read
            raise UnfitDocument(f"{key}: {found.size} bytes, over the "
                                f"{MAX_DOCUMENT_BYTES} a metadata document may have")
        return Document(data, found.mtime_ns)

    def write(
        self,
        key: str,
        pieces: Sequence[memoryview],
        *,
        durable: bool = False,
        deadline: float | None = None,
        commit: str | None = None,
    ) -> int:
        # One PUT of the whole part: atomic and durable once answered. Its answer has no
        # LastModified: the PUT's time stands in until the next listing gives the store's.
        data = b"".join(pieces)
        deadline = self._deadline() if deadline is None else deadline
        if commit is not None:
            # A journal temp, named with its commit (``COMMIT_ATTRIBUTE``), which the copy
            # over its key keeps; not through a signed URL (whose signature would have to
            # cover the name): a temp stored after its commit gave up changes no chunk.
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            self.requests.request(f"PUT {key}", lambda: put(
                self.store, key, data, {COMMIT_ATTRIBUTE: commit}, within=wait), bounded=False)
            return time.time_ns()
        self._journal.finishing.settle([key], deadline)  # no old copy lands on it later
        if self._signed is not None and deadline is not None:  # answered in time, and truly
            self._signed.put(key, data, deadline)
        else:
            self.requests.request(f"PUT {key}", lambda: put(
                self.store, key, data), bounded=False)
        return time.time_ns()

    def _deadline(self) -> float | None:
        """When a write starting now must have its answer (``time.monotonic()``); None
        without a write time (the client's own timeouts)."""
        return None if self._write_time is None else time.monotonic() + self._write_time

    async def delete_many_async(self, keys: Sequence[str]) -> None:
        """Remove objects in one bulk request (absent ones are fine: where the store's bulk
        delete fails for one, as Azure's does, each is removed on its own), on the client's
        loop: the journal's clean-up, which no writer waits for."""
        try:
            await self.requests.answer(f"DELETE {len(keys)} objects",
                                       lambda: delete(self.store, keys), bounded=False)
        except FileNotFoundError:
            for key in keys:
                with contextlib.suppress(FileNotFoundError):
                    await self.requests.answer(
                        f"DELETE {key}", functools.partial(delete, self.store, key),
                        bounded=False)

    async def copy_async(self, source: str, key: str) -> None:
        """Replace ``key`` with a copy of ``source``, made by the server (no bytes here)."""
        await self.requests.answer(f"COPY {source} to {key}",
                                   lambda: copy(self.store, source, key), bounded=False)

    async def read_all_async(self, key: str) -> bytes | None:
        """``read_all`` on the client's loop."""
        read_key = self._read_key(key)
        try:
            return await self.requests.answer(f"GET {read_key}",
                                              lambda: get_whole(self.store, read_key, self._ranges))
        except FileNotFoundError:
            return None

    def write_parts(
        self, parts: Sequence[tuple[str, Sequence[memoryview]]], *, durable: bool = False
    ) -> list[int]:
        if len(parts) == 1:  # one PUT is atomic by itself
            return [self.write(parts[0][0], parts[0][1], durable=durable)]
        return self._journal.commit(
            parts, deadline=self._deadline()
        )

    def recover(self) -> tuple[int, int]:
        if self.web:
            return 0, 0  # never written through zarrfuse: no journal to finish
        return self._journal.recover()

    def show_recovered(self) -> int:
        if self.web:
            return 0
        self._finished, interrupted = self._journal.finished_view()
        if interrupted:
            log.warning("%s: %d commit(s) unfinished (a crash, or another mount committing): "
                        "committed ones are shown finished, nothing changed; run `zarrfuse "
                        "verify --repair` (or mount it writable) to finish them in the store",
                        _describe(self.store), interrupted)
        return interrupted

    def _read_key(self, key: str) -> str:
        """Where ``key`` is read: a part a committed transaction replaces is read from its
        temp (read-only mounts, ``show_recovered``; commits still being finished)."""
        shown = self._shown(key)
        return key if shown is None else shown[0]

    def _shown(self, key: str) -> tuple[str, Stat] | None:
        """The temp ``key`` is read from, with its stat, if a committed transaction that
        replaces it is not finished (see ``_read_key``)."""
        finishing = self._journal.finishing.shown(key)
        if finishing is not None:
            temp, size, mtime_ns = finishing
            return temp, Stat(size, mtime_ns)
        return self._finished.get(key) if self._finished else None

    def set_mtime(self, key: str, mtime_ns: int) -> bool:
        return False  # LastModified is set by the store alone

    def delete(self, key: str) -> None:
        """Remove ``key``; an absent one is no error (S3 says nothing, Azure says 404)."""
        deadline = self._deadline()
        self._journal.finishing.settle([key], deadline)
        if self._signed is not None and deadline is not None:  # answered in time, and truly
            self._signed.delete(key, deadline)
            return
        with contextlib.suppress(FileNotFoundError):
            self.requests.request(f"DELETE {key}", lambda: delete(self.store, key),
                    bounded=False)


def is_web_store(store: Any) -> bool:
    """Whether an obstore store is a web server's (``HTTPStore``): never listed, never written."""
    return type(store).__name__ == "HTTPStore"


def _describe(store: Any) -> str:
    """The store as log lines name it (``s3://bucket/prefix``, a web server's URL)."""
    if is_web_store(store):
        return str(store.url)
    bucket = (getattr(store, "config", None) or {}).get("bucket")
    prefix = str(getattr(store, "prefix", None) or "")
    return f"s3://{bucket}/{prefix}".rstrip("/") if bucket else repr(store)
