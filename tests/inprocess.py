"""The filesystem driven in the test process: no kernel, no daemon, no /dev/fuse.

``zarrfuse.fuse.mount.build_filesystem`` builds the same ``FileSystem`` a mount serves, and
``InProcess`` calls the methods ``fuse.operations`` calls for each request (lookup, getattr,
setattr, open, read, write, flush, release, create, unlink, rename, readdir) by path.
Everything runs inside one trio run, in a background thread, so synchronous test code
(hypothesis state machines, plain asserts) can drive it: each call is
``trio.from_thread.run``.
"""

from __future__ import annotations

import errno
import functools
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import trio

from zarrfuse.errors import ZarrFuseError
from zarrfuse.fuse.config import MountConfig
from zarrfuse.fuse.mount import build_filesystem

__all__ = ["InProcess", "in_process", "refused"]

ROOT = 1  # pyfuse3.ROOT_INODE
PID = os.getpid()  # every call comes from this process, as one opener


class InProcess:
    """Path-level calls into one ``FileSystem``; errors come back as ``OSError`` with the
    errno a mount would give."""

    def __init__(self, fs: Any, token: trio.lowlevel.TrioToken) -> None:
        self.fs = fs
        self._token = token
        self._inodes: dict[int, int] = {}  # handle -> inode, as the kernel knows them

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        async def call() -> Any:
            try:
                return await fn(*args)
            except ZarrFuseError as e:
                raise OSError(e.errno, str(e)) from e

        return trio.from_thread.run(call, trio_token=self._token)

    def _sync(self, fn: Callable[..., Any], *args: Any) -> Any:
        async def call() -> Any:
            try:
                return fn(*args)
            except ZarrFuseError as e:
                raise OSError(e.errno, str(e)) from e

        return trio.from_thread.run(call, trio_token=self._token)

    def inode(self, path: str) -> int:
        inode = ROOT
        for name in [p for p in path.split("/") if p]:
            inode = self._call(self.fs.lookup, inode, name).inode
        return inode

    def exists(self, path: str) -> bool:
        try:
            self.inode(path)
        except OSError as e:
            if e.errno == errno.ENOENT:
                return False
            raise
        return True

    def listdir(self, path: str = "") -> list[str]:
        return [name for name, _ in self.entries(path)]

    def entries(self, path: str = "") -> list[tuple[str, Any]]:
        """(name, ``Attributes``) of a directory's entries, as one readdir gives them."""
        handle = self._call(self.fs.opendir, self.inode(path))
        try:
            return [(name, attrs) for name, attrs, _ in self._call(self.fs.readdir, handle, 0)]
        finally:
            self._sync(self.fs.releasedir, handle)

    def size(self, path: str) -> int:
        return int(self.stat(path).size)

    def stat(self, path: str) -> Any:
        """The node's ``Attributes`` (mode, size, time_ns...), as ``stat(2)`` would show."""
        return self._call(self.fs.getattr, self.inode(path))

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
        settime = functools.partial(
            self.fs.setattr, self.inode(path), size=None, mtime_ns=mtime_ns, handle=None)
        self._call(settime)

    def rename(self, old: str, new: str, flags: int = 0) -> None:
        old_parent, _, old_name = old.rpartition("/")
        new_parent, _, new_name = new.rpartition("/")
        self._call(self.fs.rename, self.inode(old_parent), old_name, self.inode(new_parent),
                   new_name, flags)

    def open(self, path: str, flags: int) -> int:
        """A handle, as ``open(2)`` gives: created when ``O_CREAT`` and absent."""
        parent, _, name = path.rpartition("/")
        if flags & os.O_CREAT and not self.exists(path):
            handle, attributes = self._call(self.fs.create, self.inode(parent), name, flags)
            self._inodes[handle] = attributes.inode
            return int(handle)
        inode = self.inode(path)
        try:
            handle = int(self._call(self.fs.open, inode, flags, PID))
        except OSError as e:  # sent to a fresh inode: the kernel looks up again, once
            if e.errno != errno.ESTALE:
                raise
            inode = self.inode(path)
            handle = int(self._call(self.fs.open, inode, flags, PID))
        self._inodes[handle] = inode
        return handle

    def pread(self, handle: int, size: int, offset: int) -> bytes:
        out = bytearray(size)
        count = self._call(self.fs.read_into, handle, offset, memoryview(out))
        return bytes(out[:count])

    def pwrite(self, handle: int, data: bytes, offset: int) -> int:
        return int(self._call(self.fs.write, handle, offset, data))

    def ftruncate(self, handle: int, size: int) -> None:
        truncate = functools.partial(
            self.fs.setattr, self._inodes[handle], size=size, mtime_ns=None, handle=handle)
        self._call(truncate)

    def fsync(self, handle: int) -> None:
        """``fsync(2)``: a durable flush, which reports a refused commit as close does."""
        self._call(functools.partial(self.fs.flush, handle, durable=True))

    def close(self, handle: int) -> None:
        """``close(2)``: flush (which reports a refused commit), then release."""
        try:
            self._call(self.fs.flush, handle)
        finally:
            self._inodes.pop(handle, None)
            self._call(self.fs.release, handle)

    def read(self, path: str) -> bytes:
        handle = self.open(path, os.O_RDONLY)
        try:
            out, offset = [], 0
            while chunk := self.pread(handle, 1 << 20, offset):
                out.append(chunk)
                offset += len(chunk)
            return b"".join(out)
        finally:
            self.close(handle)

    def write(self, path: str, data: bytes) -> None:
        handle = self.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            self.pwrite(handle, data, 0)
        except BaseException:
            self._call(self.fs.release, handle)
            raise
        self.close(handle)

    def unlink(self, path: str) -> None:
        parent, _, name = path.rpartition("/")
        self._call(self.fs.unlink, self.inode(parent), name)


@contextmanager
def in_process(source: str, **options: Any) -> Iterator[InProcess]:
    """The filesystem ``zarrfuse mount SOURCE`` with ``options`` would serve, driven here."""
    config = MountConfig(source=str(source), mountpoint="/nonexistent", **options)
    started = threading.Event()
    box: dict[str, Any] = {}

    async def main() -> None:
        fs, _ = build_filesystem(config)
        box["driver"] = InProcess(fs, trio.lowlevel.current_trio_token())
        box["stop"] = trio.Event()
        started.set()
        await box["stop"].wait()

    def run() -> None:
        try:
            trio.run(main)
        except BaseException as e:  # noqa: BLE001  (handed to the test below)
            box["error"] = e
            started.set()

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
