"""What a test can and cannot make the kernel forget on the filesystem its files are on:
tmpfs keeps every dentry and page whatever is dropped."""

from __future__ import annotations

from pathlib import Path

from zarrfuse.storage.beneath import _filesystem_type

__all__ = ["on_tmpfs"]


def on_tmpfs(path: Path) -> bool:
    """Whether ``path`` is on a memory filesystem (read from mountinfo, as the store root
    reads its own)."""
    return _filesystem_type(str(path)) in ("tmpfs", "ramfs")
