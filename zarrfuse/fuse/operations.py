"""The pyfuse3 adapter: decode names, call ``fs``, build pyfuse3 types; every handler is
wrapped by ``request_errors.fuse_errors``."""

from __future__ import annotations

import errno
import logging
import os
import weakref
from typing import Any, ParamSpec, TypeVar

import pyfuse3
import trio

from zarrfuse.errors import NotFound, NotShownNow
from zarrfuse.filesystem.attributes import Attributes
from zarrfuse.filesystem.chunks.counters import Counters
from zarrfuse.filesystem.fs import FileSystem
from zarrfuse.fuse.request_errors import fuse_errors

__all__ = ["FuseOperations"]

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

DOTS = (b".", b"..")


class FuseOperations(pyfuse3.Operations):
    """Translates pyfuse3 requests into ``FileSystem`` calls."""

    supports_dot_lookup = False
    enable_writeback_cache = False

    def __init__(
        self,
        fs: FileSystem,
        *,
        entry_timeout: float,
        attr_timeout: float,
        counters: Counters | None = None,
        keep_cache: bool | None = None,
        store_timeout: float | None = None,
        followed_timeout: float | None = None,
    ) -> None:
        """``keep_cache``: pages kept across opens (default: read-only mounts).
        ``store_timeout``: seconds a request that reads may wait; None: no bound.
        ``followed_timeout``: the timeout of ``Attributes.followed`` nodes; None: the others'."""
        super().__init__()
        self.fs = fs
        self.store_timeout = store_timeout
        self.stalled_until = 0.0
        """Until when the store counts as stalled (see ``STALLED_WAIT``)."""
        self._dir_inodes: dict[int, int] = {}
        """The directory each open directory handle lists (for its ``.`` entry)."""
        self._page_owners: dict[int, int] = {}
        """Writer handles that own their file's page cache, and the file's inode."""
        self.counters = counters or Counters()
        fs.set_invalidators(self.invalidate, self.invalidate_entry)
        self.entry_timeout = entry_timeout
        self.attr_timeout = attr_timeout
        self.followed_timeout = followed_timeout
        self.keep_cache = fs.read_only if keep_cache is None else keep_cache
        self._buffers: weakref.WeakKeyDictionary[trio.lowlevel.Task, bytearray] = (
            weakref.WeakKeyDictionary()
        )

    def _entry(self, a: Attributes, *, settled: bool = True) -> pyfuse3.EntryAttributes:
        """``settled``: no node's kernel caches were dropped while ``a`` was computed (see
        ``_settled``); else the kernel uses it for this request only."""
        entry = pyfuse3.EntryAttributes()  # generation and st_rdev: 0 from the start
        entry.st_ino = a.inode
        if not settled:
            entry.entry_timeout = entry.attr_timeout = 0
        elif a.followed and self.followed_timeout is not None:
            entry.entry_timeout = entry.attr_timeout = self.followed_timeout
        else:
            entry.entry_timeout = 0 if a.renamed_by_changes else self.entry_timeout
            entry.attr_timeout = self.attr_timeout
        entry.st_mode = a.mode
        entry.st_nlink = 2 if a.is_dir else 1
        entry.st_uid = a.uid
        entry.st_gid = a.gid
        entry.st_size = a.size
        entry.st_blksize = 1 << 20
        entry.st_blocks = -(-a.size // 512)
        entry.st_atime_ns = entry.st_mtime_ns = entry.st_ctime_ns = a.time_ns
        return entry

    @fuse_errors
    async def lookup(
        self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        drops = self.fs.drops
        try:
            attributes = await self.fs.lookup(parent_inode, os.fsdecode(name), ctx.pid)
        except NotShownNow:  # absent for this process only: the kernel must not remember it
            return self._negative_entry(remember=False)
        except NotFound:
            return self._negative_entry(remember=self._settled(drops))
        return self._entry(attributes, settled=self._settled(drops))

    def _settled(self, drops: int) -> bool:
        """Whether no node's kernel caches were dropped since ``drops``: an answer asked before
        such a change may show the store as it was, so the kernel must not keep it."""
        return self.fs.drops == drops

    def _negative_entry(self, *, remember: bool = True) -> pyfuse3.EntryAttributes:
        """"No such name", remembered by the kernel for the entry timeout (ENOENT never is:
        ``cp`` asks three times per new file); a create or rename here drops it."""
        self.counters.cache["negative_entry"] += 1
        entry = pyfuse3.EntryAttributes()
        entry.st_ino = 0
        entry.entry_timeout = self.entry_timeout if remember else 0
        return entry

    @fuse_errors
    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        drops = self.fs.drops
        attributes = await self.fs.getattr(inode)
        return self._entry(attributes, settled=self._settled(drops))

    async def forget(self, inode_list: Any) -> None:
        for inode, count in inode_list:
            try:
                self.fs.forget(inode, count)
            except Exception:  # forget must never raise
                log.exception("forget(%d, %d) failed", inode, count)

    @fuse_errors
    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> int:
        handle = await self.fs.listings.opendir(inode)
        self._dir_inodes[handle] = inode
        return handle

    @fuse_errors
    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        """``.`` and ``..`` first (``ls -a`` shows them; the kernel takes no reference on
        them, so they are not remembered), then the directory's entries, their ids shifted
        past the two."""
        drops = self.fs.drops
        if start_id < len(DOTS):
            here = self._entry(await self.fs.getattr(self._dir_inodes[fh]))
            for index in range(start_id, len(DOTS)):
                if not pyfuse3.readdir_reply(token, DOTS[index], here, index + 1):
                    return
        listed = await self.fs.listings.readdir(fh, max(0, start_id - len(DOTS)))
        settled = self._settled(drops)
        for name, attributes, next_id in listed:
            entry = self._entry(attributes, settled=settled)
            if not pyfuse3.readdir_reply(token, os.fsencode(name), entry, next_id + len(DOTS)):
                break
            self.fs.remember(attributes.inode)

    @fuse_errors
    async def releasedir(self, fh: int) -> None:
        self._dir_inodes.pop(fh, None)
        self.fs.listings.releasedir(fh)

    def _file_info(self, handle: int) -> pyfuse3.FileInfo:
        if self.fs.page_cache.direct(handle):
            return pyfuse3.FileInfo(fh=handle, direct_io=True, keep_cache=False)
        # Read-only mounts keep pages across opens unless told not to (--metadata-ttl).
        keep = self.fs.page_cache.keep_cache(handle) and (self.keep_cache or not self.fs.read_only)
        return pyfuse3.FileInfo(fh=handle, keep_cache=keep)

    @fuse_errors
    async def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        handle = await self.fs.open(inode, flags, ctx.pid)
        if self.fs.page_cache.owns_pages(handle):
            # The kernel reads the owner's pages up to the size it holds, which may be another
            # handle's (an unwritten writer's, kept for the attribute timeout): cut short, the
            # new owner would read part of its chunk. Forgotten before the open returns, the
            # size is asked for again at the first read past it.
            self._page_owners[handle] = inode
            await self.invalidate(inode, attributes_only=True)
        return self._file_info(handle)

    async def invalidate(self, inode: int, attributes_only: bool = False) -> None:
        """Drop the kernel's cached attributes of ``inode`` and, unless ``attributes_only``,
        its pages. In a worker thread: the kernel may first write dirty pages back to us."""
        try:
            await trio.to_thread.run_sync(pyfuse3.invalidate_inode, inode, attributes_only)
        except OSError as e:
            if e.errno != errno.ENOENT:  # ENOENT: the kernel holds nothing for it
                log.warning("invalidating inode %d: %s", inode, e)

    async def invalidate_entry(self, parent_inode: int, name: str) -> None:
        """Drop the kernel's cached entry ``name`` in ``parent_inode``, in a worker thread:
        the call blocks until related requests, which the trio thread serves, finish."""
        try:
            await trio.to_thread.run_sync(
                pyfuse3.invalidate_entry, parent_inode, os.fsencode(name)
            )
        except OSError as e:
            if e.errno != errno.ENOENT:
                log.warning("invalidating entry %r in inode %d: %s", name, parent_inode, e)

    def _reply_buffer(self, size: int) -> memoryview:
        """A buffer owned by the current pyfuse3 worker task, reused for all its reads:
        pyfuse3 copies the answer to the kernel before the task takes another request."""
        task = trio.lowlevel.current_task()
        buffer = self._buffers.get(task)
        if buffer is None or len(buffer) < size:
            buffer = self._buffers[task] = bytearray(size)
        return memoryview(buffer)[:size]

    @fuse_errors
    # pyfuse3 replies with any buffer; a memoryview of the reply buffer spares a copy per read.
    async def read(self, fh: int, off: int, size: int) -> memoryview:  # type: ignore[override]
        out = self._reply_buffer(size)
        count = await self.fs.read_into(fh, off, out)
        self.counters.bytes_read += count
        return out[:count]

    @fuse_errors
    async def release(self, fh: int) -> None:
        inode = self._page_owners.pop(fh, None)
        try:
            await self.fs.release(fh)
        finally:
            if inode is not None:  # the size the kernel holds was this handle's
                await self.invalidate(inode, attributes_only=True)

    @fuse_errors
    async def write(self, fh: int, off: int, buf: bytes) -> int:
        count = await self.fs.write(fh, off, buf)
        self.counters.bytes_written += count
        return count

    @fuse_errors
    async def flush(self, fh: int) -> None:
        if self.fs.read_only:
            # Nothing is stored through a read-only mount, so no close() waits for anything:
            # ENOSYS makes the kernel stop sending FLUSH for the mount's life, saving a round
            # trip per closed file (0.15-0.2 ms on a 2-core VM).
            raise pyfuse3.FUSEError(errno.ENOSYS)
        await self.fs.flush(fh)

    @fuse_errors
    async def fsync(self, fh: int, datasync: bool) -> None:
        await self.fs.flush(fh, durable=True)

    @fuse_errors
    async def setattr(
        self,
        inode: int,
        attr: pyfuse3.EntryAttributes,
        fields: pyfuse3.SetattrFields,
        fh: int | None,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        return self._entry(
            await self.fs.setattr(
                inode,
                size=attr.st_size if fields.update_size else None,
                mtime_ns=attr.st_mtime_ns if fields.update_mtime else None,
                handle=fh,
            )
        )

    @fuse_errors
    async def create(
        self, parent_inode: int, name: bytes, mode: int, flags: int, ctx: pyfuse3.RequestContext
    ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        handle, attributes = await self.fs.create(parent_inode, os.fsdecode(name), flags)
        return self._file_info(handle), self._entry(attributes)

    @fuse_errors
    async def unlink(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        await self.fs.unlink(parent_inode, os.fsdecode(name), ctx.pid)

    @fuse_errors
    async def mkdir(
        self, parent_inode: int, name: bytes, mode: int, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        return self._entry(await self.fs.mkdir(parent_inode, os.fsdecode(name)))

    @fuse_errors
    async def rmdir(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        await self.fs.rmdir(parent_inode, os.fsdecode(name))

    @fuse_errors
    async def rename(
        self,
        parent_inode_old: int,
        name_old: bytes,
        parent_inode_new: int,
        name_new: bytes,
        flags: int,
        ctx: pyfuse3.RequestContext,
    ) -> None:
        await self.fs.rename(
            parent_inode_old,
            os.fsdecode(name_old),
            parent_inode_new,
            os.fsdecode(name_new),
            flags,
        )

    # Links, symlinks and special files have no place in a chunk grid.
    @fuse_errors
    async def symlink(
        self, parent_inode: int, name: bytes, target: bytes, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        await self.fs.refuse_link(parent_inode, os.fsdecode(name), "symlinks")

    @fuse_errors
    async def link(
        self, inode: int, new_parent_inode: int, new_name: bytes, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        await self.fs.refuse_link(new_parent_inode, os.fsdecode(new_name), "hard links")

    @fuse_errors
    async def mknod(
        self, parent_inode: int, name: bytes, mode: int, rdev: int, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        await self.fs.refuse_link(parent_inode, os.fsdecode(name), "special files")

    @fuse_errors
    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        info = self.fs.statfs()
        data = pyfuse3.StatvfsData()
        data.f_bsize = data.f_frsize = info.block_size
        data.f_blocks = data.f_bfree = data.f_bavail = info.blocks
        data.f_files = info.files
        data.f_ffree = data.f_favail = 0
        data.f_namemax = info.name_max
        return data

    async def getxattr(self, inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> bytes:
        # ENOSYS makes the kernel stop asking for the rest of the mount's life: without it,
        # `ls -l` sends one getxattr per entry.
        raise pyfuse3.FUSEError(errno.ENOSYS)

    async def listxattr(self, inode: int, ctx: pyfuse3.RequestContext) -> list[bytes]:
        raise pyfuse3.FUSEError(errno.ENOSYS)
