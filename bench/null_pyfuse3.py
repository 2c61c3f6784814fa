#!/usr/bin/env python3
"""A pyfuse3 filesystem that accepts new files and drops their bytes: the cost of pyfuse3 alone.

One flat directory. ``create`` makes a name, ``write`` counts bytes and keeps none, every other
request answers from a dict, with the same options zarrfuse uses for writers (direct I/O,
``default_permissions``, negative entries cached). The ``mount-write`` scenario copies into
it to show what the FUSE round trips and pyfuse3's request handling cost before any store
is touched; nothing here is product code.

    python bench/null_pyfuse3.py MOUNTPOINT     (runs in the foreground until unmounted)
"""

from __future__ import annotations

import stat
import sys

import pyfuse3
import trio

TIMEOUT = 1.0


class NullFileSystem(pyfuse3.Operations):
    def __init__(self) -> None:
        super().__init__()
        self.sizes: dict[int, int] = {}
        self.inodes: dict[bytes, int] = {}

    def _entry(self, inode: int) -> pyfuse3.EntryAttributes:
        entry = pyfuse3.EntryAttributes()
        entry.st_ino = inode
        entry.entry_timeout = entry.attr_timeout = TIMEOUT
        entry.st_blksize = 1 << 20
        if inode == pyfuse3.ROOT_INODE:
            entry.st_mode, entry.st_nlink = stat.S_IFDIR | 0o755, 2
        else:
            entry.st_mode, entry.st_nlink = stat.S_IFREG | 0o644, 1
            entry.st_size = self.sizes[inode]
        return entry

    async def getattr(self, inode, ctx=None):
        return self._entry(inode)

    async def lookup(self, parent_inode, name, ctx=None):
        inode = self.inodes.get(name)
        if inode is None:
            absent = pyfuse3.EntryAttributes()
            absent.st_ino, absent.entry_timeout = 0, TIMEOUT
            return absent
        return self._entry(inode)

    async def create(self, parent_inode, name, mode, flags, ctx):
        inode = self.inodes.setdefault(name, len(self.inodes) + 2)
        self.sizes[inode] = 0
        return pyfuse3.FileInfo(fh=inode, direct_io=True), self._entry(inode)

    async def write(self, fh, off, buf):
        self.sizes[fh] = max(self.sizes[fh], off + len(buf))
        return len(buf)

    async def flush(self, fh):
        pass

    async def release(self, fh):
        pass

    async def opendir(self, inode, ctx):
        return inode

    async def releasedir(self, fh):
        pass


def main() -> None:
    options = set(pyfuse3.default_options) | {"fsname=null_pyfuse3", "default_permissions"}
    pyfuse3.init(NullFileSystem(), sys.argv[1], options)
    try:
        trio.run(pyfuse3.main)
    finally:
        pyfuse3.close()


if __name__ == "__main__":
    main()
