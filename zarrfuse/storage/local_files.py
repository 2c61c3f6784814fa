"""Reading a local store's files: a chunk's parts held open by descriptor, and small
files read whole. Every open is a regular file beneath the store root (``beneath``)."""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence

from zarrfuse.storage.beneath import NotRegular, Root

__all__ = ["LocalPartReader", "open_regular_or_eio", "read_to_end"]


def read_to_end(fd: int, size: int, limit: int) -> bytes | None:
    """The file's bytes to its end; None past ``limit`` bytes. ``size`` (its fstat) sizes
    the first read: a buffer of ``limit`` bytes per read cost 0.1 ms a chunk (an mmap and a
    munmap of 256 MiB), five times the read. A file that grew or shrank since is read to
    its real end, never cut at ``size``."""
    if size > limit:
        return None
    pieces: list[bytes] = []
    total, want = 0, size + 1  # one byte more: a file that grew says so at once
    while piece := os.read(fd, want):
        pieces.append(piece)
        total += len(piece)
        if total > limit:
            return None
        want = min(1 << 20, limit + 1 - total)
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


class LocalPartReader:
    """Open file descriptors: a reader keeps the versions it opened, even across renames."""

    def __init__(self, root: Root, keys: Sequence[str], *, cached_only: bool = False) -> None:
        """``cached_only``: BlockingIOError unless every part opens from the kernel's caches."""
        self.keys = list(keys)
        self._fds: list[int | None] = []
        sizes: list[int | None] = []
        versions: list[tuple[int, int] | None] = []
        try:
            for key in self.keys:
                fd = open_regular_or_eio(root, key, cached_only=cached_only)
                self._fds.append(fd)
                found = None if fd is None else os.fstat(fd)
                sizes.append(None if found is None else found.st_size)
                versions.append(None if found is None else (found.st_ino, found.st_mtime_ns))
        except BaseException:
            self.close()
            raise
        self.sizes = tuple(sizes)
        self.version = tuple(versions)
        """Which files these are: a commit renames new files over the parts."""

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


def open_regular_or_eio(root: Root, key: str, *, cached_only: bool = False) -> int | None:
    """A read-only descriptor of the regular file ``key`` (None if absent); a special file
    or a path leading out of the root is an I/O error for the reader, with one log line."""
    try:
        return root.open_regular(key, cached_only=cached_only)
    except NotRegular as e:
        raise OSError(errno.EIO, f"{key}: {e.strerror}") from None
