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
- readers share the page cache with each other, as before.
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

    def has_writer(self, file: Hashable) -> bool:
        """Whether a writer owns ``file``'s pages (its mapping may hold unwritten changes)."""
        return any(self._by_file.get(file, {}).values())
