"""Raw key I/O for the mount: blocking calls, run by the caller in worker threads.

Implementations of one small interface (a third, ``ObjectBackend`` for S3 through obstore,
lives in ``object_backend``). ``LocalBackend`` talks to the directory behind a
``LocalStore`` with plain system calls: a FUSE read must not pay zarr's asyncio round trip
(140-390 us a call, measured) when a ``pread`` costs 10 us. ``StoreBackend`` serves any other
zarr Store (zip, fsspec/S3, ...) through ``zarr.core.sync.sync``, which blocks the calling
worker thread, never the trio thread.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from zarr.abc.store import RangeByteRequest, Store
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync
from zarr.storage import LocalStore, ObjectStore

__all__ = ["Backend", "LocalBackend", "PartReader", "StoreBackend", "backend_for"]


class Backend(Protocol):
    """Key-level access to a store. Keys are full store keys, ``/``-separated."""

    stat_by_listing: bool
    """Whether one chunk's size is better learnt by listing its directory (remote stores)."""

    def list_sizes(self, prefix: str) -> dict[str, int]:
        """Objects directly under ``prefix`` (a directory key, "" for the root): name -> size."""
        ...

    def list_subdirs(self, prefix: str) -> list[str]:
        """Names directly under ``prefix`` that may be sub-prefixes ("directories").

        Stores that cannot tell objects from prefixes cheaply may return objects too; callers
        check each name (for a ``zarr.json`` below it) anyway.
        """
        ...

    def size(self, key: str) -> int | None:
        """Size of one object, None if absent."""
        ...

    def open_reader(
        self, keys: Sequence[str], sizes: Sequence[int | None] | None = None
    ) -> PartReader:
        """Open a chunk's parts for reading; their sizes are fixed from here on.

        ``sizes`` are the parts' sizes from a fresh listing, if the caller has one: backends
        that would pay a request per part to learn them take these instead.
        """
        ...

    def read_all(self, key: str) -> bytes | None:
        """A whole object, None if absent."""
        ...

    def write(self, key: str, pieces: Sequence[memoryview], *, durable: bool = False) -> None:
        """Replace an object with ``pieces`` joined, atomically: readers see the old or the
        new bytes, never a mix."""
        ...

    def delete(self, key: str) -> None:
        """Remove an object; absent is fine."""
        ...

    def close(self) -> None:
        """Release what the backend holds (threads, connections); called at unmount."""
        ...


class PartReader(Protocol):
    """Open parts of one chunk. ``sizes`` holds None for a part that is absent."""

    sizes: tuple[int | None, ...]

    def read_into_nowait(self, part: int, start: int, out: memoryview) -> int:
        """Copy what is available without waiting for I/O (page cache); returns the count."""
        ...

    def read_into(self, part: int, start: int, out: memoryview) -> None:
        """Fill ``out`` from the part at ``start``, waiting for storage as needed."""
        ...

    def release(self) -> None:
        """The last user let go (the reader may stay cached): drop read buffers."""
        ...

    def close(self) -> None: ...


class LocalPartReader:
    """Open file descriptors: a reader keeps the versions it opened, even across renames."""

    def __init__(self, root: str, keys: Sequence[str]) -> None:
        self.keys = list(keys)
        self._fds: list[int | None] = []
        sizes: list[int | None] = []
        try:
            for key in self.keys:
                try:
                    fd = os.open(os.path.join(root, key), os.O_RDONLY | os.O_CLOEXEC)
                except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                    self._fds.append(None)
                    sizes.append(None)
                    continue
                self._fds.append(fd)
                st = os.fstat(fd)
                sizes.append(st.st_size if stat.S_ISREG(st.st_mode) else None)
        except BaseException:
            self.close()
            raise
        self.sizes = tuple(sizes)

    def _fd(self, part: int) -> int:
        fd = self._fds[part]
        if fd is None:
            raise OSError(errno.EIO, f"{self.keys[part]}: part is absent")
        return fd

    def read_into_nowait(self, part: int, start: int, out: memoryview) -> int:
        try:
            return os.preadv(self._fd(part), [out], start, os.RWF_NOWAIT)
        except BlockingIOError:
            return 0
        except OSError as e:
            if e.errno in (errno.EOPNOTSUPP, errno.EINVAL):  # filesystems without RWF_NOWAIT
                return 0
            raise

    def read_into(self, part: int, start: int, out: memoryview) -> None:
        got = os.preadv(self._fd(part), [out], start)
        if got != len(out):
            raise OSError(errno.EIO, f"{self.keys[part]}: short read ({got} of {len(out)} bytes)")

    def release(self) -> None:
        pass  # the page cache holds what was read

    def close(self) -> None:
        for fd in self._fds:
            if fd is not None:
                os.close(fd)
        self._fds = [None] * len(self._fds)


class StorePartReader:
    """Parts of a chunk in any zarr Store; every read is a ranged request."""

    def __init__(self, backend: StoreBackend, keys: Sequence[str]) -> None:
        self.backend = backend
        self.keys = list(keys)
        self.sizes = tuple(backend.size(k) for k in self.keys)

    def read_into_nowait(self, part: int, start: int, out: memoryview) -> int:
        return 0  # every store request may wait

    def read_into(self, part: int, start: int, out: memoryview) -> None:
        out[:] = self.backend.read(self.keys[part], start, start + len(out))

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass


class LocalBackend:
    """A directory on a local filesystem, as laid out by zarr's ``LocalStore``."""

    stat_by_listing = False

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str) -> str:
        return os.path.join(self.root, key)

    def list_sizes(self, prefix: str) -> dict[str, int]:
        out: dict[str, int] = {}
        try:
            with os.scandir(self._path(prefix)) as entries:
                for entry in entries:
                    if entry.is_file(follow_symlinks=False):
                        try:
                            out[entry.name] = entry.stat(follow_symlinks=False).st_size
                        except FileNotFoundError:
                            pass  # removed while listing
        except (FileNotFoundError, NotADirectoryError):
            pass
        return out

    def list_subdirs(self, prefix: str) -> list[str]:
        try:
            with os.scandir(self._path(prefix)) as entries:
                return [e.name for e in entries if e.is_dir(follow_symlinks=False)]
        except (FileNotFoundError, NotADirectoryError):
            return []

    def size(self, key: str) -> int | None:
        try:
            st = os.stat(self._path(key))
        except (FileNotFoundError, NotADirectoryError):
            return None
        return st.st_size if stat.S_ISREG(st.st_mode) else None

    def open_reader(
        self, keys: Sequence[str], sizes: Sequence[int | None] | None = None
    ) -> PartReader:
        return LocalPartReader(str(self.root), keys)  # an open fd's fstat is the truth

    def read_all(self, key: str) -> bytes | None:
        try:
            with open(self._path(key), "rb") as f:
                return f.read()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None

    def write(self, key: str, pieces: Sequence[memoryview], *, durable: bool = False) -> None:
        # Same scheme as zarr's LocalStore: a uniquely named temp file beside the target,
        # then rename over it. A crash leaves the old file or the new one, never a torn one.
        path = self._path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temp = f"{path}.{uuid.uuid4().hex}.partial"
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            try:
                _write_all(fd, pieces)
                if durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
            raise
        if durable:
            dir_fd = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    def delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            os.unlink(self._path(key))

    def close(self) -> None:
        pass  # plain system calls: nothing held


class StoreBackend:
    """Any zarr Store, driven from worker threads through zarr's own event loop."""

    stat_by_listing = False  # its listings cost a request per entry

    def __init__(self, store: Store) -> None:
        self.store = store
        self.prototype = default_buffer_prototype()

    async def _list_sizes(self, prefix: str) -> dict[str, int]:
        names = [n async for n in self.store.list_dir(prefix)]
        out = {}
        for name in names:
            key = f"{prefix}/{name}" if prefix else name
            try:
                out[name] = await self.store.getsize(key)
            except (FileNotFoundError, IsADirectoryError):
                pass  # a sub-prefix, not an object
        return out

    def list_sizes(self, prefix: str) -> dict[str, int]:
        return sync(self._list_sizes(prefix.strip("/")))

    def list_subdirs(self, prefix: str) -> list[str]:
        # zarr's Store API lists objects and prefixes alike; telling them apart would cost a
        # request per name, and the caller looks for NAME/zarr.json anyway.
        prefix = prefix.strip("/")

        async def names() -> list[str]:
            return [n async for n in self.store.list_dir(prefix)]

        return sync(names())

    def size(self, key: str) -> int | None:
        try:
            return sync(self.store.getsize(key))
        except (FileNotFoundError, IsADirectoryError):
            return None

    def read(self, key: str, start: int, stop: int) -> bytes:
        buf = sync(self.store.get(key, self.prototype, RangeByteRequest(start, stop)))
        if buf is None or len(buf) != stop - start:
            got = "nothing" if buf is None else f"{len(buf)} bytes"
            raise OSError(errno.EIO, f"{key}: asked for {stop - start} bytes, got {got}")
        return buf.to_bytes()

    def open_reader(
        self, keys: Sequence[str], sizes: Sequence[int | None] | None = None
    ) -> PartReader:
        return StorePartReader(self, keys)

    def read_all(self, key: str) -> bytes | None:
        buf = sync(self.store.get(key, self.prototype))
        return None if buf is None else buf.to_bytes()

    def write(self, key: str, pieces: Sequence[memoryview], *, durable: bool = False) -> None:
        # One set() per part: a single PUT on object stores, temp-then-rename on local ones.
        sync(self.store.set(key, self.prototype.buffer.from_bytes(b"".join(pieces))))

    def delete(self, key: str) -> None:
        sync(self.store.delete(key))

    def close(self) -> None:
        pass  # the store belongs to zarr's event loop, which closes with the process


# Bytes per write system call when storing a part. One 1 MiB write makes the page cache take
# 1 MiB folios, and on this VM (whose free memory goes back to the host) those cost 1.7-2.2 ms
# per MiB against 0.21 ms in 256 KiB writes, measured in one process, interleaved; with
# memory the host still backs, 256 KiB writes cost the same as one 1 MiB write.
WRITE_STEP = 256 << 10


def _write_all(fd: int, pieces: Sequence[memoryview]) -> None:
    """Write the pieces in order, in system calls of at most WRITE_STEP bytes."""
    batch: list[memoryview] = []
    batched = 0
    iov_max = os.sysconf("SC_IOV_MAX")
    for piece in pieces:
        for start in range(0, len(piece), WRITE_STEP):
            part = piece[start : start + WRITE_STEP]
            if batch and (batched + len(part) > WRITE_STEP or len(batch) == iov_max):
                _writev_all(fd, batch)
                batch, batched = [], 0
            batch.append(part)
            batched += len(part)
    if batch:
        _writev_all(fd, batch)


def _writev_all(fd: int, pieces: list[memoryview]) -> None:
    """``writev`` the pieces (at most IOV_MAX), resuming after short writes."""
    while pieces:
        written = os.writev(fd, pieces)
        for i, piece in enumerate(pieces):
            if written < len(piece):
                pieces = [piece[written:], *pieces[i + 1 :]]
                break
            written -= len(piece)
        else:
            pieces = []


def backend_for(store: Store) -> Backend:
    """The fastest backend that serves ``store`` exactly."""
    if isinstance(store, LocalStore):
        return LocalBackend(Path(store.root))
    if isinstance(store, ObjectStore):
        from zarrfuse.object_backend import ObjectBackend  # noqa: PLC0415  (needs obstore)

        return ObjectBackend(store.store)
    return StoreBackend(store)
