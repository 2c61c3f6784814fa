"""Which open handles of a file may share the kernel's page cache of it.

The kernel keeps one page cache per inode, shared by every handle that does not use direct
I/O. Writers keep private buffers (two writers of one chunk never mix), so a writer may use
the page cache only while it is the sole user of that cache: then the pages are its buffer,
and the kernel's writeback of a shared writable mapping can only reach that writer's handle.
That is what makes ``mmap(MAP_SHARED, PROT_WRITE)`` of a chunk file work, so only handles
opened read-write (a mapping needs read access too) are given the page cache as writers.

The rules, per inode:

- a read-write writer gets the page cache if no other handle of the file holds it and no
  other writer of it is open;
- while such a writer is open, other handles of the file are readers only, with direct I/O
  (they cannot be mapped shared; ``mmap`` fails with ENODEV); a writer's open waits a
  moment for the owner's RELEASE (no new owner is admitted while one waits), then fails
  with EBUSY. The kernel keeps one size per file, and another writer changes it behind the
  owner: an ``O_TRUNC`` open sets it to 0, a direct write past the end raises it, and the
  owner's cached reads then end early or show zeros (measured: a third of a read-write
  holder's reads came back empty beside two ``cp`` loops). The daemon cannot put the size
  back reliably: its answer is dropped whenever another change raced it;
- other writers (write-only, or not alone) get direct I/O, as do scratch files;
- on a read-only mount, readers share the page cache with each other;
- on a writable mount, readers get direct I/O (so they never hold the page cache);
- when a writer comes to own the pages, and when it goes, the kernel forgets the file's
  size: it reads cached pages only up to the size it holds, which may be another handle's
  (an unwritten writer's, or one closed after O_TRUNC), and the new owner's reads of its
  chunk would end there (the FUSE layer does this, it knows the inode).

Why readers of a writable mount use direct I/O: a reader keeps reading the version it
opened until it closes, and the kernel cannot keep that promise for a reader that uses the
page cache. When another process opens the file with O_TRUNC (``cp`` does), the kernel
itself sets the file's size to 0 (FUSE's atomic O_TRUNC, which libfuse turns on) and every
cached read past that size ends at EOF without asking the daemon; asking for the size again
races with the truncating writer's own writes, which move the size to where they end.
Measured with 32 readers and 2 writers: 9 in 10 reads came back short with readers in the
page cache, 1 to 16 in 4,000 still with the size pushed back before every write
(FUSE_NOTIFY_STORE), none with direct I/O. Direct reads always reach the daemon, which
serves each from the reader's own open version. The cost: no page cache for readers of
writable mounts, and ``mmap(MAP_SHARED)`` of a read-only open fails there with ENODEV
(``MAP_PRIVATE`` works; read-only mounts and read-write opens map as before).
"""

from __future__ import annotations

from collections.abc import Hashable

import trio

__all__ = ["OWNER_RELEASE_WAIT", "PageCacheUsers"]

OWNER_RELEASE_WAIT = 1.0
"""Seconds a writer's open waits for a read-write owner closed a moment ago to go."""


class PageCacheUsers:
    """The handles of each file that use its page cache (and whether one is a writer), and
    the handles that use direct I/O."""

    def __init__(self, release_wait: float = OWNER_RELEASE_WAIT) -> None:
        self._by_file: dict[Hashable, dict[int, bool]] = {}
        self._direct: set[int] = set()
        self._waiting: dict[Hashable, int] = {}
        """Writers' opens waiting for each file's owner to go: no new owner meanwhile."""
        self.release_wait = release_wait
        """See :meth:`without_owner` (0 in process, where release is part of close)."""

    def admit(
        self, file: Hashable, handle: int, *, writer: bool, read_write: bool, alone: bool,
        direct: bool = False,
    ) -> bool:
        """Whether ``handle`` (just opened on ``file``; ``alone``: no other writer of it is
        open; ``direct``: it must not use the page cache) may use the page cache. Either
        way it is recorded until :meth:`release`; False means: open it with direct I/O."""
        users = self._by_file.get(file, {})
        # Direct I/O: handles that must, every handle while a writer owns the pages (nobody
        # else may see them), and writers that may not own them (write-only, beside another
        # writer, or while another writer's open waits for the owner to go).
        if direct or any(users.values()) or (
            writer and (users or not read_write or not alone or file in self._waiting)
        ):
            self._direct.add(handle)
            return False
        self._by_file.setdefault(file, {})[handle] = writer
        return True

    def direct(self, handle: int) -> bool:
        return handle in self._direct

    def release(self, file: Hashable, handle: int) -> None:
        self._direct.discard(handle)
        users = self._by_file.get(file)
        if users is not None:
            users.pop(handle, None)
            if not users:
                del self._by_file[file]

    def writer(self, file: Hashable) -> int | None:
        """The handle of the writer that owns ``file``'s pages, if one does."""
        return next((h for h, w in self._by_file.get(file, {}).items() if w), None)

    async def without_owner(self, file: Hashable) -> bool:
        """Whether no writer owns ``file``'s pages, waiting up to ``release_wait`` seconds for
        one closed a moment ago: the kernel sends its RELEASE after ``close()`` returns."""
        if self.writer(file) is None:
            return True
        self._waiting[file] = self._waiting.get(file, 0) + 1
        try:
            with trio.move_on_after(self.release_wait):
                while self.writer(file) is not None:
                    await trio.sleep(0.005)
                return True
            return False
        finally:
            self._waiting[file] -= 1
            if not self._waiting[file]:
                del self._waiting[file]
