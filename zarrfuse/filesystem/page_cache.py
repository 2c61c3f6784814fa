"""Which open handles of a file may share the kernel's page cache of it.

The kernel keeps one page cache per inode, shared by every handle that does not use direct
I/O. Writers keep private buffers (two writers of one chunk never mix), so a writer may use
the page cache only while it is the sole user of that cache: then the pages are its buffer,
and the kernel's writeback of a shared writable mapping can only reach that writer's handle.
That is what makes ``mmap(MAP_SHARED, PROT_WRITE)`` of a chunk file work, so only handles
opened read-write (a mapping needs read access too) are given the page cache as writers.

The rules, per inode:

- a read-write writer gets the page cache if no other handle of the file holds it;
- while such a writer is open, every other handle of the file gets direct I/O (it cannot be
  mapped; ``mmap`` fails with ENODEV);
- other writers (write-only, or not the sole user) get direct I/O, as do scratch files;
- on a read-only mount, readers share the page cache with each other;
- on a writable mount, readers get direct I/O (so they never hold the page cache);
- when a writer comes to own the pages, and when it goes, the kernel forgets the file's
  size: it reads cached pages only up to the size it holds, which may be another handle's
  (an unwritten writer's, or one closed after O_TRUNC), and the new owner's reads of its
  chunk would end there (the FUSE layer does this, it knows the inode).

Why the last rule: a reader keeps reading the version it opened until it closes, and the
kernel cannot keep that promise for a reader that uses the page cache. When another process
opens the file with O_TRUNC (``cp`` does), the kernel itself sets the file's size to 0
(FUSE's atomic O_TRUNC, which libfuse turns on) and every cached read past that size ends at
EOF without asking the daemon; asking for the size again races with the truncating writer's
own writes, which move the size to where they end. Measured with 32 readers and 2 writers:
9 in 10 reads came back short with readers in the page cache, 1 to 16 in 4,000 still with
the size pushed back before every write (FUSE_NOTIFY_STORE), none with direct I/O. Direct
reads always reach the daemon, which serves each from the reader's own open version.
The cost: no page cache for readers of writable mounts, and ``mmap(MAP_SHARED)`` of a
read-only open fails there with ENODEV (``MAP_PRIVATE`` works; read-only mounts and
read-write opens map as before).
"""

from __future__ import annotations

from collections.abc import Hashable

__all__ = ["PageCacheUsers"]


class PageCacheUsers:
    """The handles of each file that use its page cache, and whether one is a writer."""

    def __init__(self) -> None:
        self._by_file: dict[Hashable, dict[int, bool]] = {}

    def admit(self, file: Hashable, handle: int, *, writer: bool, read_write: bool) -> bool:
        """Whether ``handle`` (just opened on ``file``) may use the page cache; if so it is
        recorded until :meth:`release`. False means: open it with direct I/O."""
        users = self._by_file.get(file, {})
        if any(users.values()):  # a writer owns the pages: nobody else may see them
            return False
        if writer and (users or not read_write):
            return False
        self._by_file.setdefault(file, {})[handle] = writer
        return True

    def release(self, file: Hashable, handle: int) -> None:
        users = self._by_file.get(file)
        if users is not None:
            users.pop(handle, None)
            if not users:
                del self._by_file[file]

    def writer(self, file: Hashable) -> int | None:
        """The handle of the writer that owns ``file``'s pages, if one does."""
        return next((h for h, w in self._by_file.get(file, {}).items() if w), None)
