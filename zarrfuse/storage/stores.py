"""Any other zarr Store (zip, memory, fsspec filesystems other than the web's) as mount
storage, through ``zarr.core.sync.sync`` (blocking the worker thread, never the trio thread).
Times: an fsspec ``info``'s where it gives one, else a stable stand-in (``_store_file_time``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Coroutine, Sequence
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from zarr.abc.store import RangeByteRequest, Store, SuffixByteRequest
from zarr.storage import FsspecStore

from zarrfuse.storage import base
from zarrfuse.storage.base import Document, PartReader, Stat, child_key, stat_each, write_each
from zarrfuse.storage.store_requests import StoreRequests
from zarrfuse.zarr_compat import default_buffer_prototype, sync

__all__ = ["StoreBackend", "StorePartReader", "fsspec_protocols"]

T = TypeVar("T")


class StorePartReader:
    """Parts of a chunk in any zarr Store; every read is a ranged request."""

    def __init__(
        self, backend: StoreBackend, keys: Sequence[str], sizes: Sequence[int | None] | None
    ) -> None:
        self.backend = backend
        self.keys = list(keys)
        self.sizes = tuple(sizes) if sizes is not None else tuple(
            None if (found := backend.stat(k)) is None else found.size for k in self.keys
        )

    def read_into_nowait(self, part: int, start: int, out: memoryview) -> int:
        return 0  # every store request may wait

    def read_into(self, part: int, start: int, out: memoryview) -> None:
        try:
            out[:] = self.backend.read_range(self.keys[part], start, start + len(out))
        except FileNotFoundError:  # gone since it was opened: the open file cannot be read
            raise OSError(errno.EIO, f"{self.keys[part]}: gone since it was opened") from None

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass


class StoreBackend:
    """Any zarr Store, driven from worker threads through zarr's own event loop."""

    def __init__(self, store: Store, requests: StoreRequests | None = None) -> None:
        self.store = store
        self.requests = requests or StoreRequests()
        """The mount's store client, whose bound a remote store's requests take a slot of."""
        self.prototype = default_buffer_prototype()
        self.fallback_time_ns = _store_file_time(store)
        protocols = fsspec_protocols(store)
        self.capabilities = base.Capabilities(  # no stat_by_listing: a listing costs a request each
            remote=bool(protocols) and protocols[0] not in ("file", "local", "memory"),
            can_list=store.supports_listing)

    async def _stat(self, key: str) -> Stat | None:
        """Size and time in one request: fsspec's ``info``, else zarr's ``getsize``."""
        try:
            if isinstance(self.store, FsspecStore):
                root = self.store.path.rstrip("/")
                info = await self.store.fs._info(f"{root}/{key}" if root else key)
                if info.get("type") == "directory":
                    return None
                return Stat(int(info["size"]), _info_time(info) or self.fallback_time_ns)
            return Stat(await self.store.getsize(key), self.fallback_time_ns)
        except (FileNotFoundError, IsADirectoryError):  # absent, or a sub-prefix
            return None

    async def _list_stats(self, prefix: str) -> dict[str, Stat]:
        names = [n async for n in self.store.list_dir(prefix)]
        out = {}
        for name in names:
            found = await self._stat(child_key(prefix, name))
            if found is not None:
                out[name] = found
        return out

    def list_stats(self, prefix: str) -> dict[str, Stat]:
        return self._asked(prefix, self._list_stats(prefix.strip("/")))

    def list_names(self, prefix: str) -> set[str]:
        # Objects and prefixes alike (see list_subdirs): a prefix never matches a chunk key.
        return set(self.list_subdirs(prefix))

    def list_subdirs(self, prefix: str) -> list[str]:
        # zarr's Store API lists objects and prefixes alike; telling them apart would cost a
        # request per name, and the caller looks for NAME/zarr.json anyway.
        prefix = prefix.strip("/")

        async def names() -> list[str]:
            return [n async for n in self.store.list_dir(prefix)]

        return self._asked(prefix, names())

    def stat(self, key: str) -> Stat | None:
        return self._asked(key, self._stat(key))

    def stat_names(self, prefix: str, names: Sequence[str]) -> list[Stat | None]:
        return stat_each(self, prefix, names)

    def size(self, key: str) -> int | None:
        try:
            return self._in_slot(self.store.getsize(key))
        except (FileNotFoundError, IsADirectoryError):
            return None

    def read_range(self, key: str, start: int, stop: int) -> bytes:
        buf = self._asked(key, self.store.get(key, self.prototype, RangeByteRequest(start, stop)))
        if buf is None:
            raise FileNotFoundError(errno.ENOENT, f"{key}: not stored")
        if len(buf) != stop - start:
            raise OSError(errno.EIO, f"{key}: asked for {stop - start} bytes, got {len(buf)}")
        return buf.to_bytes()

    def read_tail(self, key: str, count: int) -> tuple[bytes, int | None] | None:
        """The last ``count`` bytes: one suffix request (zarr's store API tells no size)."""
        buf = self._asked(key, self.store.get(key, self.prototype, SuffixByteRequest(count)))
        return None if buf is None else (buf.to_bytes(), None)

    def open_reader(
        self, keys: Sequence[str], sizes: Sequence[int | None] | None = None
    ) -> PartReader:
        return StorePartReader(self, keys, sizes)

    def read_all(self, key: str) -> bytes | None:
        buf = self._asked(key, self.store.get(key, self.prototype))
        return None if buf is None else buf.to_bytes()

    def read_document(self, key: str) -> Document | None:
        data = self.read_all(key)
        if data is None:
            return None
        found_stat = self.stat(key)
        return Document(data, self.fallback_time_ns if found_stat is None
                        else found_stat.mtime_ns)

    def write(self, key: str, pieces: Sequence[memoryview], *, durable: bool = False) -> int:
        # One set() per part: a single PUT on object stores, temp-then-rename on local ones.
        self._in_slot(self.store.set(key, self.prototype.buffer.from_bytes(b"".join(pieces))))
        return time.time_ns()

    def write_parts(
        self, parts: Sequence[tuple[str, Sequence[memoryview]]], *, durable: bool = False
    ) -> list[int]:
        return write_each(self, parts, durable)

    def recover(self) -> tuple[int, int]:
        return 0, 0  # nothing journalled

    def show_recovered(self) -> int:
        return 0

    def set_mtime(self, key: str, mtime_ns: int) -> bool:
        return False  # zarr's Store API has no way to set a time

    def delete(self, key: str) -> None:
        self._in_slot(self.store.delete(key))

    def close(self) -> None:
        self.requests.close()  # the store belongs to zarr's loop, which ends with the process

    def _asked(self, key: str, request: Coroutine[Any, Any, T]) -> T:
        """Run one store request; a failure other than "absent" or an OSError with its errno
        becomes EIO with its reason in one line (logged as expected, with no traceback)."""
        try:
            return self._in_slot(request)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise
        except OSError as e:
            if e.errno is not None:
                raise
            raise OSError(errno.EIO, f"{key}: {_reason(e)}") from e
        except Exception as e:
            raise OSError(errno.EIO, f"{key}: {_reason(e)}") from e

    def _in_slot(self, request: Coroutine[Any, Any, T]) -> T:
        """One store request on zarr's event loop; a remote store's holds one of the
        mount's request slots (taking one costs a hop to the request loop, about 0.2 ms: a
        zip file's reads, which wait on no network, take none)."""
        if not self.capabilities.remote:
            return sync(request)
        with self.requests.request_slot():
            return sync(request)


def _reason(e: BaseException) -> str:
    return " ".join(f"{type(e).__name__}: {e}".split())


def _info_time(info: dict[str, Any]) -> int | None:
    """The modification time in an fsspec ``info`` dict, in ns; None if it has none."""
    for field in ("mtime", "LastModified", "last_modified", "Last-Modified", "updated"):
        value = info.get(field)
        with contextlib.suppress(TypeError, ValueError, OverflowError):
            if isinstance(value, int | float):
                return int(value * 1_000_000_000)
            if isinstance(value, str):
                value = (
                    parsedate_to_datetime(value) if field == "Last-Modified"
                    else datetime.fromisoformat(value)
                )
            if isinstance(value, datetime):
                return int(value.timestamp()) * 1_000_000_000 + value.microsecond * 1000
    return None


def fsspec_protocols(store: Store) -> tuple[str, ...]:
    """An fsspec store's protocol names (``("https", "http")``), main first; else empty."""
    fs = getattr(store, "fs", None)
    if fs is None:
        return ()
    return (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)


def _store_file_time(store: Store) -> int:
    """A stable stand-in time: the store's own file's mtime (a zip), or the epoch."""
    path = getattr(store, "path", None)
    if isinstance(path, str | os.PathLike) and not isinstance(store, FsspecStore):
        with contextlib.suppress(OSError):
            return os.stat(path).st_mtime_ns
    return 0
