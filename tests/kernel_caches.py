"""What a test can and cannot make the kernel forget on the filesystem its files are on:
tmpfs keeps every dentry and page whatever is dropped, a disk's clean pages can be evicted
one file at a time."""

from __future__ import annotations

import os
from pathlib import Path

from zarrfuse.storage.beneath import _filesystem_type

__all__ = ["evict_pages", "on_tmpfs"]


def on_tmpfs(path: Path) -> bool:
    """Whether ``path`` is on a memory filesystem (read from mountinfo, as the store root
    reads its own)."""
    return _filesystem_type(str(path)) in ("tmpfs", "ramfs")


def evict_pages(path: Path) -> None:
    """Write the file's pages back and drop them from the page cache: its next read waits
    on the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
