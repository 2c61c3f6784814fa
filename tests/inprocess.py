"""The mount driven in the test process: no kernel, no daemon, no /dev/fuse.

``zarrfuse.fuse.mount`` builds the same ``FileSystem`` and ``FuseOperations`` a mount
serves, and ``InProcess`` sends each request a path-level call makes (lookup, getattr,
setattr, open, read, write, flush, release, create, unlink, rename, readdir) to the adapter,
as the kernel would: errors come back as the errno the kernel would get. What pyfuse3 sends
the kernel (``readdir_reply``, invalidations) is taken by a stand-in. Everything runs inside
one trio run, in a background thread, so synchronous test code (hypothesis state machines,
plain asserts) can drive it: each call is ``trio.from_thread.run``.
"""

from __future__ import annotations

import errno
import os
import threading
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pyfuse3
import pytest
import trio

from zarrfuse.filesystem.attributes import Attributes
from zarrfuse.filesystem.chunks.counters import Counters
from zarrfuse.fuse.config import MountConfig
from zarrfuse.fuse.mount import build_filesystem, build_operations
from zarrfuse.fuse.operations import FuseOperations

__all__ = ["InProcess", "TtlClock", "in_process", "refused"]

ROOT = pyfuse3.ROOT_INODE
CTX = pyfuse3.RequestContext()  # every request comes from one opener, as from one process
MODE = 0o644


class TtlClock:
    """The clock every TTL of the in-process mounts built after it reads (documents,
    listings, sizes, open chunks, the watch's settling: ``cache_times.ttl_clock``), moved on
    by the test (``ahead``): what the mount learnt outlives its TTL when the test says, not
    after a sleep. ``TtlClock(monkeypatch)``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ahead = 0.0
        monkeypatch.setattr("zarrfuse.fuse.mount.ttl_clock",
                            lambda: lambda: time.monotonic() + self.ahead)


def _attributes(entry: pyfuse3.EntryAttributes) -> Attributes:
    return Attributes(inode=entry.st_ino, mode=entry.st_mode, size=entry.st_size,
                      uid=entry.st_uid, gid=entry.st_gid, time_ns=entry.st_mtime_ns)


def _fields(*, size: bool = False, mtime: bool = False) -> Any:
    """What setattr is told to change (pyfuse3's own type cannot be made outside it)."""
    return types.SimpleNamespace(update_size=size, update_mtime=mtime)


class InProcess:
    """Path-level calls into one mount's adapter; errors come back as ``OSError`` with the
    errno a mount would give, and the reason the daemon logs as the message."""

    def __init__(self, ops: FuseOperations, token: trio.lowlevel.TrioToken) -> None:
        self.ops = ops
        self.fs = ops.fs
        self._token = token
        self._inodes: dict[int, int] = {}  # handle -> inode, as the kernel knows them
        self._no_flush = False  # the mount answered a flush with ENOSYS

    @staticmethod
    async def _ask(fn: Callable[..., Any], *args: Any) -> Any:
        """One request, in the trio thread; a FUSE error as the OSError the caller gets."""
        try:
            return await fn(*args)
        except pyfuse3.FUSEError as e:
            why = e.__context__  # the wrapper's ``from None`` keeps it as the context
            raise OSError(e.errno, str(why) if why else os.strerror(e.errno)) from None

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self._trip(self._ask, fn, *args)

    def watch_starts(self) -> None:
        """The store watch is up, set up before the first request as a fresh mount's is
        (its first round, then it counts)."""
        following = self.fs.following
        assert following is not None, "not a writable mount of a watched local store"

        def up() -> None:
            following.first_round()
            following.started()

        trio.from_thread.run_sync(up, trio_token=self._token)

    def watch_ends(self) -> None:
        """The store watch failed: the mount stops relying on it."""
        assert self.fs.following is not None
        trio.from_thread.run(self.fs.following.end, trio_token=self._token)

    async def _walk(self, path: str) -> int:
        """The inode at ``path``, looked up name by name from the root, as the kernel does
        with no cached entry."""
        inode = ROOT
        for name in [p for p in path.split("/") if p]:
            entry = await self._ask(self.ops.lookup, inode, os.fsencode(name), CTX)
            if entry.st_ino == 0:  # a negative entry: the kernel answers ENOENT
                raise OSError(errno.ENOENT, f"{name!r}: no such file or directory")
            inode = entry.st_ino
        return inode

    def _trip(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` in the trio thread: the requests a path-level call makes go in one
        trip (a trip per request made the in-process tests a third slower, more on a busy
        machine, where each trip waits for the other thread to be scheduled)."""
        return trio.from_thread.run(fn, *args, trio_token=self._token)

    def inode(self, path: str) -> int:
        return int(self._trip(self._walk, path))

    def exists(self, path: str) -> bool:
        return bool(self._trip(self._exists, path))

    async def _exists(self, path: str) -> bool:
        try:
            await self._walk(path)
        except OSError as e:
            if e.errno == errno.ENOENT:
                return False
            raise
        return True

    def listdir(self, path: str = "") -> list[str]:
        return [name for name, _ in self.entries(path)]

    def entries(self, path: str = "") -> list[tuple[str, Any]]:
        """(name, ``Attributes``) of a directory's entries, as one readdir gives them."""
        handle = self._call(self.ops.opendir, self.inode(path), CTX)
        taken: list[tuple[bytes, pyfuse3.EntryAttributes, int]] = []
        try:
            self._call(self.ops.readdir, handle, 0, taken)
        finally:
            self._call(self.ops.releasedir, handle)
        return [(os.fsdecode(name), _attributes(entry)) for name, entry, _ in taken
                if name not in (b".", b"..")]

    def size(self, path: str) -> int:
        return int(self.stat(path).size)

    def stat(self, path: str) -> Any:
        """The node's ``Attributes`` (mode, size, time_ns...), as ``stat(2)`` would show."""

        async def stat() -> Any:
            return await self._ask(self.ops.getattr, await self._walk(path), CTX)

        return _attributes(self._trip(stat))

    def walk(self, path: str = "") -> set[str]:
        """Every file under ``path``, relative to it, as ``find -type f`` lists them."""
        files: set[str] = set()
        for name, attributes in self.entries(path):
            if attributes.is_dir:
                child = f"{path}/{name}" if path else name
                files |= {f"{name}/{below}" for below in self.walk(child)}
            else:
                files.add(name)
        return files

    def set_mtime(self, path: str, mtime_ns: int) -> None:
        """``utime(2)``, as ``touch -d`` and ``rsync -t`` set times."""
        attr = pyfuse3.EntryAttributes()
        attr.st_mtime_ns = mtime_ns
        self._call(self.ops.setattr, self.inode(path), attr, _fields(mtime=True), None, CTX)

    def rename(self, old: str, new: str, flags: int = 0) -> None:
        old_parent, _, old_name = old.rpartition("/")
        new_parent, _, new_name = new.rpartition("/")
        self._call(self.ops.rename, self.inode(old_parent), os.fsencode(old_name),
                   self.inode(new_parent), os.fsencode(new_name), flags, CTX)

    def open(self, path: str, flags: int) -> int:
        """A handle, as ``open(2)`` gives: created when ``O_CREAT`` and absent."""
        return int(self._trip(self._open, path, flags))

    async def _open(self, path: str, flags: int) -> int:
        parent, _, name = path.rpartition("/")
        if flags & os.O_CREAT and not await self._exists(path):
            info, entry = await self._ask(self.ops.create, await self._walk(parent),
                                          os.fsencode(name), MODE, flags, CTX)
            self._inodes[info.fh] = entry.st_ino
            return int(info.fh)
        inode = await self._walk(path)
        try:
            info = await self._ask(self.ops.open, inode, flags, CTX)
        except OSError as e:  # sent to a fresh inode: the kernel looks up again, once
            if e.errno != errno.ESTALE:
                raise
            inode = await self._walk(path)
            info = await self._ask(self.ops.open, inode, flags, CTX)
        self._inodes[info.fh] = inode
        return int(info.fh)

    def pread(self, handle: int, size: int, offset: int) -> bytes:
        return bytes(self._call(self.ops.read, handle, offset, size))

    def pwrite(self, handle: int, data: bytes, offset: int) -> int:
        return int(self._call(self.ops.write, handle, offset, data))

    def ftruncate(self, handle: int, size: int) -> None:
        attr = pyfuse3.EntryAttributes()
        attr.st_size = size
        self._call(self.ops.setattr, self._inodes[handle], attr, _fields(size=True), handle,
                   CTX)

    def fsync(self, handle: int) -> None:
        """``fsync(2)``: a durable flush, which reports a refused commit as close does."""
        self._call(self.ops.fsync, handle, False)

    def close(self, handle: int) -> None:
        """``close(2)``: flush (which reports a refused commit), then release. A flush
        answered ENOSYS is not sent again, and is no error, as in the kernel."""
        self._trip(self._close, handle)

    async def _close(self, handle: int) -> None:
        try:
            if not self._no_flush:
                await self._ask(self.ops.flush, handle)
        except OSError as e:
            if e.errno != errno.ENOSYS:
                raise
            self._no_flush = True
        finally:
            self._inodes.pop(handle, None)
            await self._ask(self.ops.release, handle)

    def read(self, path: str) -> bytes:
        async def read() -> bytes:
            handle = await self._open(path, os.O_RDONLY)
            try:
                out, offset = [], 0
                while chunk := bytes(await self._ask(self.ops.read, handle, offset, 1 << 20)):
                    out.append(chunk)
                    offset += len(chunk)
                return b"".join(out)
            finally:
                await self._close(handle)

        return bytes(self._trip(read))

    def write(self, path: str, data: bytes) -> None:
        async def write() -> None:
            handle = await self._open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            try:
                await self._ask(self.ops.write, handle, 0, data)
            except BaseException:
                await self._ask(self.ops.release, handle)
                raise
            await self._close(handle)

        self._trip(write)

    def unlink(self, path: str) -> None:
        parent, _, name = path.rpartition("/")
        self._call(self.ops.unlink, self.inode(parent), os.fsencode(name), CTX)


def _readdir_reply(token: list[Any], name: bytes, entry: Any, next_id: int) -> bool:
    """The kernel's side of a readdir: every entry fits (``token`` is the list it fills)."""
    token.append((name, entry, next_id))
    return True


def _kernel_forgets(*args: Any) -> None:
    """An invalidation: the stand-in kernel holds no pages or entries to drop."""


@contextmanager
def _kernel_stand_in() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pyfuse3, "readdir_reply", _readdir_reply)
        patch.setattr(pyfuse3, "invalidate_inode", _kernel_forgets)
        patch.setattr(pyfuse3, "invalidate_entry", _kernel_forgets)
        yield


@contextmanager
def in_process(source: str, **options: Any) -> Iterator[InProcess]:
    """The filesystem ``zarrfuse mount SOURCE`` with ``options`` would serve, driven here."""
    config = MountConfig(source=str(source), mountpoint="/nonexistent", **options)
    started = threading.Event()
    box: dict[str, Any] = {}

    async def main() -> None:
        counters = Counters()  # one set for the mount, as ``zarrfuse mount`` keeps them
        fs, _ = build_filesystem(config, counters)
        context = fs.namespace.catalog.context
        try:
            async with context.running():  # its work ahead, as a mount's, in its nursery
                box["driver"] = InProcess(build_operations(fs, config, counters),
                                          trio.lowlevel.current_trio_token())
                box["stop"] = trio.Event()
                started.set()
                await box["stop"].wait()
        finally:
            context.close()

    def run() -> None:
        try:
            trio.run(main)
        except BaseException as e:  # noqa: BLE001  (handed to the test below)
            box["error"] = e
            started.set()

    with _kernel_stand_in():
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        started.wait(60)
        if "error" in box:
            raise box["error"]
        try:
            yield box["driver"]
        finally:
            trio.from_thread.run_sync(box["stop"].set, trio_token=box["driver"]._token)
            thread.join(30)


def refused(attempt: Callable[[], object], says: str = "") -> int:
    """The errno ``attempt`` fails with, as a mount would give it; its message (what the
    mount logs) contains ``says``."""
    with pytest.raises(OSError) as caught:
        attempt()
    assert says in str(caught.value)
    return int(caught.value.errno)
