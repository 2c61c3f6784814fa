#!/usr/bin/env python3
"""A read-only pyfuse3 passthrough of a directory: the cost of pyfuse3 alone, the ceiling a
Python FUSE filesystem can reach.

Every request is answered from the directory tree under SOURCE_DIR with the least work a
pyfuse3 daemon can do: inodes are the source files' own ``st_ino`` (mapped to their paths),
``os.pread`` runs directly in the trio thread (no worker threads), files open with
``keep_cache`` and entries and attributes are cached for an hour. The ``per-file``,
``listing`` and ``copies`` scenarios read through it beside ``bindfs`` (a C passthrough)
and zarrfuse, to tell what FUSE round trips through pyfuse3 cost from what zarrfuse adds;
nothing here is product code.

    python bench/passthrough_pyfuse3.py [--flush] SOURCE_DIR MOUNTPOINT   (foreground)

``--flush`` answers every FLUSH (each close(2)) instead of ENOSYS, after which the kernel sends
none: the ceiling of a filesystem that must see each close to report an error there, as a
writable zarrfuse mount does (pyfuse3 cannot mark an open as needing no flush).
"""

from __future__ import annotations

import errno
import os
import sys

import pyfuse3
import trio

TIMEOUT = 3600.0


class PassthroughFileSystem(pyfuse3.Operations):
    def __init__(self, source: str, *, flush: bool = False) -> None:
        super().__init__()
        self.answers_flush = flush
        self.root_ino = os.lstat(source).st_ino
        self.paths: dict[int, str] = {pyfuse3.ROOT_INODE: source}
        self.listings: dict[int, tuple[str, list[str]]] = {}
        self.next_fh = 0

    def _entry(self, path: str) -> pyfuse3.EntryAttributes:
        st = os.lstat(path)
        inode = pyfuse3.ROOT_INODE if st.st_ino == self.root_ino else st.st_ino
        self.paths.setdefault(inode, path)
        entry = pyfuse3.EntryAttributes()
        entry.st_ino = inode
        entry.entry_timeout = entry.attr_timeout = TIMEOUT
        entry.st_mode, entry.st_nlink, entry.st_size = st.st_mode, st.st_nlink, st.st_size
        entry.st_uid, entry.st_gid, entry.st_blksize = st.st_uid, st.st_gid, st.st_blksize
        entry.st_blocks = st.st_blocks
        entry.st_atime_ns, entry.st_mtime_ns = st.st_atime_ns, st.st_mtime_ns
        entry.st_ctime_ns = st.st_ctime_ns
        return entry

    async def getattr(self, inode, ctx=None):
        return self._entry(self.paths[inode])

    async def lookup(self, parent_inode, name, ctx=None):
        try:
            return self._entry(os.path.join(self.paths[parent_inode], os.fsdecode(name)))
        except FileNotFoundError:
            absent = pyfuse3.EntryAttributes()
            absent.st_ino, absent.entry_timeout = 0, TIMEOUT
            return absent

    async def opendir(self, inode, ctx):
        # listed once per open directory: the kernel reads a big one in many readdir calls
        self.next_fh += 1
        path = self.paths[inode]
        self.listings[self.next_fh] = (path, sorted(os.listdir(path)))
        return self.next_fh

    async def readdir(self, fh, start_id, token):
        path, names = self.listings[fh]
        for i in range(start_id, len(names)):
            entry = self._entry(os.path.join(path, names[i]))
            if not pyfuse3.readdir_reply(token, os.fsencode(names[i]), entry, i + 1):
                break

    async def releasedir(self, fh):
        self.listings.pop(fh, None)

    async def open(self, inode, flags, ctx):
        if flags & os.O_ACCMODE != os.O_RDONLY:
            raise pyfuse3.FUSEError(errno.EROFS)
        return pyfuse3.FileInfo(fh=os.open(self.paths[inode], os.O_RDONLY), keep_cache=True)

    async def read(self, fh, off, size):
        return os.pread(fh, size, off)

    async def flush(self, fh):
        if not self.answers_flush:
            raise pyfuse3.FUSEError(errno.ENOSYS)  # what pyfuse3's default answers

    async def release(self, fh):
        os.close(fh)


def main() -> None:
    args = sys.argv[1:]
    flush = "--flush" in args
    source, mountpoint = (a for a in args if a != "--flush")
    options = set(pyfuse3.default_options) | {"fsname=passthrough_pyfuse3", "ro"}
    pyfuse3.init(PassthroughFileSystem(os.path.abspath(source), flush=flush), mountpoint,
                 options)
    try:
        trio.run(pyfuse3.main)
    finally:
        pyfuse3.close()


if __name__ == "__main__":
    main()
