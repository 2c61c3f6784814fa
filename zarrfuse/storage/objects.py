"""Raw key I/O on an object store (S3) through obstore, for the mount's worker threads.

Requests cost a network round trip, so this backend asks as little as it can: a directory
listing is one LIST (paged by the server, 1000 keys a page) that brings every object's size;
opening a chunk whose sizes a listing already gave costs nothing; a read is one ranged GET,
and sequential reads fetch ahead (``prefetch``). obstore's blocking calls release the GIL,
so worker threads and the read-ahead pool wait in parallel. Errors become ``OSError`` with
EIO and the store's reason, after obstore's bounded retries (``s3``).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

import obstore
from obstore.exceptions import NotFoundError

if TYPE_CHECKING:  # types only: obstore declares them in its stubs
    from obstore import ListResult, ObjectMeta

from zarrfuse.errors import UnfitDocument
from zarrfuse.limits import MAX_DOCUMENT_BYTES
from zarrfuse.storage.base import Document, PartReader, Stat
from zarrfuse.storage.object_journal import ObjectJournal
from zarrfuse.storage.object_prefetch import ObjectPrefetch
from zarrfuse.storage.prefetch import PrefetchBudget, ReadAhead, ReadAheadPolicy
from zarrfuse.storage.request_slots import request_slot
from zarrfuse.storage.signed_put import SignedPut

__all__ = ["ObjectBackend", "ObjectPartReader"]

log = logging.getLogger(__name__)

T = TypeVar("T")

NOT_FOUND = (NotFoundError, FileNotFoundError)
"""What obstore raises for a missing object (its runtime class is the builtin one)."""

# Sequential reads keep up to PREFETCH_DEPTH windows of PREFETCH_WINDOW bytes in flight;
# all reads of a mount together hold at most PREFETCH_BUDGET bytes ahead, and at most
# PREFETCH_REQUESTS ranged GETs run at once. 8 MiB windows: one GET per 8 kernel reads.
PREFETCH_WINDOW = 8 << 20
PREFETCH_DEPTH = 4
PREFETCH_BUDGET = 256 << 20
PREFETCH_REQUESTS = 8
# A window waited for longer than this is abandoned with EIO (obstore's own timeouts and
# retry window end sooner; this only guards against a lost wake-up).
PREFETCH_WAIT = 120.0


def _request(what: str, call: Callable[[], T]) -> T:
    """Run one obstore call (in a request slot); store errors other than "not found" become
    EIO with the reason."""
    try:
        with request_slot():
            return call()
    except NOT_FOUND:
        raise
    except Exception as e:
        if isinstance(e, OSError) and e.errno is not None:
            raise
        reason = " ".join(str(e).split("\n\nDebug source")[0].split())
        log.warning("%s failed: %s", what, reason)
        raise OSError(errno.EIO, f"{what}: {reason}") from e


class _ObjectFetch:
    """A ReadAhead's fetch for one object: served from its whole body when that was fetched
    ahead (``ObjectPrefetch``), else one ranged GET. The body is let go once read to the
    end."""

    def __init__(
        self, backend: ObjectBackend, key: str, size: int, ahead: Future[Any] | None
    ) -> None:
        self.backend, self.key, self.size = backend, key, size
        self._whole: Future[Any] | bytes | memoryview | None = ahead

    def __call__(self, start: int, stop: int) -> bytes | memoryview:
        whole = self._whole
        if isinstance(whole, Future):
            try:
                whole = whole.result(timeout=PREFETCH_WAIT)
            except Exception:  # noqa: BLE001  (fetched ahead as a guess: ask again, below)
                whole = None
            self._whole = whole
        if whole is None or len(whole) != self.size:
            return self.backend.read_range(self.key, start, stop)
        if stop >= self.size:
            self._whole = None  # read to the end: nothing more to serve from it
        return bytes(memoryview(whole)[start:stop])


class ObjectPartReader:
    """Parts of one chunk on an object store; reads are ranged GETs, sequential ones ahead."""

    def __init__(
        self, backend: ObjectBackend, keys: Sequence[str], sizes: Sequence[int | None]
    ) -> None:
        self.backend = backend
        self.keys = list(keys)
        self.sizes = tuple(sizes)
        self._ahead = [
            None if size is None else backend.read_ahead(key, size)
            for key, size in zip(self.keys, self.sizes, strict=True)
        ]

    def _part(self, part: int) -> ReadAhead:
        ahead = self._ahead[part]
        if ahead is None:
            raise OSError(errno.EIO, f"{self.keys[part]}: part is absent")
        return ahead

    def read_into_nowait(self, part: int, start: int, out: memoryview) -> int:
        return self._part(part).read_nowait(start, out)

    def read_into(self, part: int, start: int, out: memoryview) -> None:
        self._part(part).read(start, out)

    def release(self) -> None:
        for ahead in self._ahead:
            if ahead is not None:
                ahead.close()

    def close(self) -> None:
        self.release()


class ObjectBackend:
    """An obstore ``ObjectStore`` (S3), keys relative to its root."""

    stat_by_listing = True
    can_list = True
    remote = True
    """A LIST costs about what a HEAD does and answers for every sibling: the chunk source
    learns one chunk's size by listing its directory (cached), not by asking for it."""

    def __init__(
        self, store: Any, journal_path: str = "", write_time: float | None = None
    ) -> None:
        self.store = store
        self._signed = _signed_put(store) if write_time is not None else None
        self._write_time = write_time
        """Seconds a write (a commit: all its PUTs) may wait for the store
        (``--store-timeout``); None: the client's own timeouts (``zarrfuse verify``)."""
        self._journal = ObjectJournal(self, _describe(store), journal_path)
        self._finished: dict[str, tuple[str, Stat]] = {}
        """Keys read from an interrupted commit's temps, with their stats
        (``show_recovered``: read-only mounts)."""
        self.read_ahead_policy = ReadAheadPolicy(
            pool=ThreadPoolExecutor(PREFETCH_REQUESTS, thread_name_prefix="zarrfuse-fetch"),
            budget=PrefetchBudget(PREFETCH_BUDGET),
            window=PREFETCH_WINDOW,
            depth=PREFETCH_DEPTH,
            timeout=PREFETCH_WAIT,
        )
        self.prefetch = ObjectPrefetch(
            lambda key, size: self.read_range(key, 0, size),
            self.read_ahead_policy.pool,
            self.read_ahead_policy.budget,
        )

    def close(self) -> None:
        """At unmount: drop queued read-ahead GETs instead of running them before exit."""
        self.read_ahead_policy.pool.shutdown(wait=False, cancel_futures=True)

    def _listing(self, prefix: str) -> ListResult[Sequence[ObjectMeta]]:
        prefix = prefix.strip("/")
        return _request(
            f"LIST {prefix or '/'}",
            lambda: obstore.list_with_delimiter(self.store, f"{prefix}/" if prefix else None),
        )

    def list_dir(self, prefix: str) -> tuple[dict[str, Stat], list[str]]:
        """The objects (with stats) and the subdirectories under ``prefix``, in one LIST."""
        found = self._listing(prefix)
        return ({meta["path"].rpartition("/")[2]: _stat(meta) for meta in found["objects"]},
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

    def stat(self, key: str) -> Stat | None:
        shown = self._shown(key)
        if shown is not None:
            return shown[1]
        try:
            return _stat(_request(f"HEAD {key}", lambda: obstore.head(self.store, key)))
        except NOT_FOUND:
            return None

    def _size(self, key: str) -> int | None:
        found = self.stat(key)
        return None if found is None else found.size

    def read_range(self, key: str, start: int, stop: int) -> bytes | memoryview:
        """Bytes ``[start, stop)`` of ``key``: one ranged GET (none for an empty range)."""
        if stop <= start:
            return b""
        key = self._read_key(key)
        data = _request(
            f"GET {key} bytes {start}-{stop - 1}",
            lambda: obstore.get_range(self.store, key, start=start, end=stop),
        )
        if len(data) != stop - start:  # the object was replaced by a shorter one
            raise OSError(
                errno.EIO, f"{key}: asked for {stop - start} bytes, got {len(data)}"
            )
        return memoryview(data)

    def read_tail(self, key: str, count: int) -> tuple[bytes | memoryview, int | None] | None:
        """The last ``count`` bytes of ``key`` and its size: one suffix GET."""
        read_key = self._read_key(key)
        try:
            result = _request(f"GET {read_key} last {count} bytes", lambda: obstore.get(
                self.store, read_key, options={"range": {"suffix": count}}))
            data = _request(f"GET {read_key}", lambda: result.bytes())
        except NOT_FOUND:
            return None
        return memoryview(data), int(result.meta["size"])

    def read_ahead(self, key: str, size: int) -> ReadAhead:
        fetch = _ObjectFetch(self, key, size, self.prefetch.take(key))
        return ReadAhead(fetch, size, self.read_ahead_policy)

    def prefetch_objects(self, objects: Sequence[tuple[str, int]]) -> None:
        """Start fetching these (key, size) objects whole: the filesystem is about to open
        them (the next chunk files of a directory)."""
        self.prefetch.want(objects)

    def open_reader(
        self, keys: Sequence[str], sizes: Sequence[int | None] | None = None
    ) -> PartReader:
        if sizes is None:
            sizes = [self._size(k) for k in keys]
        return ObjectPartReader(self, keys, sizes)

    def open_reader_nowait(
        self, keys: Sequence[str], sizes: Sequence[int | None] | None = None
    ) -> PartReader | None:
        return None  # every open asks the store

    def read_all(self, key: str) -> bytes | None:
        key = self._read_key(key)
        try:
            result = _request(f"GET {key}", lambda: obstore.get(self.store, key).bytes())
        except NOT_FOUND:
            return None
        return result.to_bytes()

    def read_held(self, key: str) -> bytes | None:
        return None  # objects fetched ahead are taken by readers (read_ahead), not here

    def read_document(self, key: str) -> Document | None:
        try:
            result = _request(f"GET {key}", lambda: obstore.get(self.store, key))
            size = int(result.meta["size"])
            if size > MAX_DOCUMENT_BYTES:  # refused before its body is read
                raise UnfitDocument(f"{key}: {size} bytes, over the "
                                    f"{MAX_DOCUMENT_BYTES} a metadata document may have")
            data = _request(f"GET {key}", lambda: result.bytes()).to_bytes()
        except NOT_FOUND:
            return None
        return Document(data, _stat(result.meta).mtime_ns)

    def write(
        self,
        key: str,
        pieces: Sequence[memoryview],
        *,
        durable: bool = False,
        deadline: float | None = None,
    ) -> int:
        # One PUT of the whole part: S3 replaces the object atomically, readers see the old
        # or the new bytes. A PUT is durable once it succeeds, so ``durable`` asks nothing more.
        # Its answer carries no LastModified; the time of the PUT stands in for it until the
        # next listing gives the store's own (a HEAD per write would cost a round trip).
        data = b"".join(pieces)
        if deadline is None:
            deadline = self._deadline()
        self._journal.finishing.settle([key], deadline)  # no old copy lands on it later
        if self._signed is not None and deadline is not None:  # answered in time, and truly
            self._signed.put(key, data, deadline)
        else:
            _request(f"PUT {key}",
                     lambda: obstore.put(self.store, key, data, use_multipart=False))
        return time.time_ns()

    def _deadline(self) -> float | None:
        """When a write starting now must have its answer (``time.monotonic()``); None
        without a write time (the client's own timeouts)."""
        return None if self._write_time is None else time.monotonic() + self._write_time

    def delete_many(self, keys: Sequence[str]) -> None:
        """Remove objects in one bulk request (absent ones are fine: where the store's bulk
        delete fails for one, as Azure's does, each is removed on its own)."""
        try:
            _request(f"DELETE {len(keys)} objects",
                     lambda: obstore.delete(self.store, list(keys)))
        except NOT_FOUND:
            for key in keys:
                self.delete(key)

    def copy(self, source: str, key: str) -> None:
        """Replace ``key`` with a copy of ``source``, made by the server (no bytes here)."""
        _request(f"COPY {source} to {key}", lambda: obstore.copy(self.store, source, key))

    def write_parts(
        self, parts: Sequence[tuple[str, Sequence[memoryview]]], *, durable: bool = False
    ) -> list[int]:
        if len(parts) == 1:  # one PUT is atomic by itself
            return [self.write(parts[0][0], parts[0][1], durable=durable)]
        return self._journal.commit(
            parts, deadline=self._deadline()
        )

    def recover(self) -> tuple[int, int]:
        return self._journal.recover()

    def show_recovered(self) -> int:
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
        with contextlib.suppress(*NOT_FOUND):
            _request(f"DELETE {key}", lambda: obstore.delete(self.store, key))


def _signed_put(store: Any) -> SignedPut | None:
    """PUTs through expiring signed URLs, for stores that sign (S3, Azure, GCS) with
    credentials (an anonymous store signs nothing: its PUTs keep the client's timeouts)."""
    kind = type(store).__name__
    if kind not in ("S3Store", "AzureStore", "GCSStore"):
        return None
    if (getattr(store, "config", None) or {}).get("skip_signature"):
        return None
    headers = {"x-ms-blob-type": "BlockBlob"} if kind == "AzureStore" else None
    return SignedPut(store, _describe(store), headers)


def _describe(store: Any) -> str:
    """The store as log lines name it (``s3://bucket/prefix``)."""
    bucket = (getattr(store, "config", None) or {}).get("bucket")
    prefix = str(getattr(store, "prefix", None) or "")
    return f"s3://{bucket}/{prefix}".rstrip("/") if bucket else repr(store)


def _stat(meta: ObjectMeta) -> Stat:
    """Size and ``LastModified`` of an object, as a listing or a HEAD gives them."""
    modified = meta["last_modified"]
    mtime_ns = int(modified.timestamp()) * 1_000_000_000 + modified.microsecond * 1000
    return Stat(meta["size"], mtime_ns, meta.get("e_tag"))
