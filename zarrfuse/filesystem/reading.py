"""FUSE semantics without FUSE, the half that changes nothing stored: attributes and
lookups, directory listings, opening, reading and releasing files.

:class:`FileSystemBase` holds all of a mount's state (open handles, times, writers, the
scratch area); :class:`~zarrfuse.filesystem.fs.FileSystem` builds on it with the requests
that change the tree. ``open`` hands out writers too (the kernel opens files for writing
through the same call). Errors are raised as ``ZarrFuseError``, with the errno to answer.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import stat
import time
from collections.abc import Awaitable, Callable

from zarrfuse.errors import (
    BadHandle,
    NotAChunk,
    NotADirectory,
    NotFound,
    NotShownNow,
    ReadOnlyError,
    Stale,
    ZarrFuseError,
)
from zarrfuse.filesystem.attributes import Attributes, Ownership, StatFs, check_name
from zarrfuse.filesystem.chunk_opening import ChunkOpening
from zarrfuse.filesystem.handles import (
    DocumentWriter,
    ImageReader,
    MetadataReader,
    OpenFile,
    ScratchHandle,
)
from zarrfuse.filesystem.listing import Listing
from zarrfuse.filesystem.page_cache import PageCacheUsers
from zarrfuse.filesystem.store_changes import StoreChanges
from zarrfuse.filesystem.tree.namespace import Namespace
from zarrfuse.filesystem.tree.nodes import (
    DIRECTORY_NODES,
    ChunkFile,
    Entry,
    FanoutDir,
    ImageDir,
    ImageFile,
    MetadataFile,
    Node,
    ScratchFile,
    array_of,
)
from zarrfuse.filesystem.writes.commits import Committer, OpenWriters, WriteOptions
from zarrfuse.filesystem.writes.document_writes import Replacements
from zarrfuse.filesystem.writes.scratch import ScratchArea, ScratchData
from zarrfuse.filesystem.writes.write_buffer import WriteBuffer
from zarrfuse.storage.base import Stat
from zarrfuse.storage.store_watch import WatchState

__all__ = ["FileSystemBase"]

log = logging.getLogger(__name__)

BLOCK_SIZE = 4096


class FileSystemBase(Listing, ChunkOpening):
    """The mounted tree's state (namespace, open handles of every kind, writers and their
    commits at release, scratch files), attributes, lookups, opening and reading; every
    stored answer comes from the namespace. :class:`~zarrfuse.filesystem.fs.FileSystem`
    adds what changes the tree (writes, create, rename, unlink, setattr)."""

    def __init__(
        self,
        namespace: Namespace,
        *,
        read_only: bool = True,
        write_options: WriteOptions | None = None,
        ownership: Ownership | None = None,
        following: WatchState | None = None,
    ) -> None:
        """``following``: the store watch's state, where one runs."""
        self.namespace = namespace
        self.following = following
        if following is not None:
            following.when_ended(self._unfollowed)
        self.read_only = read_only
        self.options = write_options or WriteOptions()
        self.committer = Committer(namespace, self.options, unused=self._unused,
                                   committed=self._time_ends)
        self.writers = OpenWriters(self.committer)
        self.ownership = ownership or Ownership.of_process()
        self._handles = itertools.count(1)
        self._dirs: dict[int, tuple[Node, list[Entry] | None]] = {}
        self._files: dict[int, OpenFile] = {}
        self._times: dict[Node, tuple[int, int]] = {}
        """Times set on nodes whose store cannot keep them: the time set, and the node's own
        time it was set over (a change of that, a commit or a refreshed listing, ends it)."""
        self.scratch = ScratchArea(0 if read_only else self.options.scratch_bytes)
        self.page_cache = PageCacheUsers()
        self.replacements = Replacements()

    async def apply_store_changes(self, keys: set[str]) -> None:
        """Store keys changed another way (another program, seen by ``storage.store_watch``):
        the files that show them are read anew (``store_changes``)."""
        await StoreChanges(self.namespace, self.committer.drop_cache).apply(keys)

    @property
    def drops(self) -> int:
        """Nodes whose kernel caches were dropped so far (``Committer.drop_cache``)."""
        return self.committer.drops

    async def _unfollowed(self) -> None:
        """The store watch stopped: the kernel kept chunk files for long, trusting it to say
        what changed; now each it holds is read anew, as after a change."""
        for node in self.namespace.known_nodes(ChunkFile):
            await self.committer.drop_cache(node)

    def set_invalidators(
        self,
        inode: Callable[[int, bool], Awaitable[None]],
        entry: Callable[[int, str], Awaitable[None]],
    ) -> None:
        """How to drop the kernel's cache of an inode (its attributes only, or its pages
        too), or of a name (from the FUSE adapter)."""
        self.committer.set_invalidators(inode, entry)

    def _time_ends(self, node: Node) -> None:
        """A commit stores the node anew: a time set on it is shown no longer."""
        self._times.pop(node, None)

    def _unused(self, inode: int) -> bool:
        """Whether no handle is open on ``inode`` and no version's pages are kept for it."""
        return self.page_cache.users(inode) is None

    # --- attributes ----------------------------------------------------------------------

    def _shown_time(self, node: Node, mtime_ns: int | None) -> int:
        """The node's own time (stored, or its ``zarr.json``'s), unless a time set on it
        since holds."""
        own = self.namespace.fixed_time(node) if mtime_ns is None else mtime_ns
        set_time = self._times.get(node)
        if set_time is None:
            return own
        if set_time[1] != own:
            del self._times[node]
            return own
        return set_time[0]

    def _attributes(self, node: Node, size: int, mtime_ns: int | None) -> Attributes:
        array = array_of(node)
        read_only = (
            self.read_only
            or isinstance(node, MetadataFile | ImageFile | ImageDir)
            or (array is not None and array.unwritable is not None)
        )
        if isinstance(node, DIRECTORY_NODES):
            kind, bits = stat.S_IFDIR, 0o777
        else:
            kind, bits = stat.S_IFREG, 0o666
        bits &= ~self.ownership.umask
        if read_only:
            bits &= ~0o222
        return Attributes(
            inode=self.namespace.inode_of(node),
            mode=kind | bits,
            size=size,
            uid=self.ownership.uid,
            gid=self.ownership.gid,
            time_ns=self._shown_time(node, mtime_ns),
            followed=self._followed(node),
        )

    def _followed(self, node: Node) -> bool:
        """Whether every change to the node reaches the kernel as it happens (the store
        watch runs): chunk files (but while a writer has one open, whose size the kernel
        holds and changes itself) and their directories."""
        if self.following is None or not self.following.live:
            return False
        if isinstance(node, ChunkFile):
            return self.writers.count(node) == 0
        return isinstance(node, FanoutDir)

    async def _stat(self, node: Node, inode: int | None = None) -> Stat:
        """The node's size and time as inode ``inode`` (default: the name's) shows them."""
        if isinstance(node, ScratchFile):
            scratch = self._scratch(node)
            return Stat(len(scratch.data), scratch.mtime_ns)
        if not isinstance(node, ChunkFile):
            return await self.namespace.stat(node)
        size = self._inode_size(self.namespace.known_inode(node) if inode is None else inode)
        try:
            stored = await self.namespace.stat(node)
        except NotFound:  # a new chunk being written shows its newest writer's size
            size = self.writers.size(node) if size is None else size
            if size is None:
                raise
            return Stat(size, time.time_ns())
        return stored if size is None else Stat(size, stored.mtime_ns)

    def _inode_size(self, inode: int | None) -> int | None:
        """The size an inode with open handles shows: its writer's, or its readers'
        version's (the kernel holds one size per inode, and cuts or pads their reads at
        it). None: the stored size. A writer closed unwritten after O_TRUNC has no size:
        its 0 would cut the next opener's reads to nothing."""
        users = self.page_cache.users(inode) if inode is not None else None
        if users is None:
            return None
        if users.writer is not None:
            opened = self._files.get(users.writer)
            return None if opened is None else opened.shown_size()
        return users.size if users.readers else None

    async def _entry_of(self, name: str, node: Node) -> Entry:
        stat = await self._stat(node)
        return Entry(name, node, stat.size, stat.mtime_ns)

    async def _entry(self, parent: Node, name: str, pid: int | None = None) -> Entry:
        """The entry ``name`` in ``parent``, including scratch files and unstored new chunks;
        as process ``pid`` sees it (a document it unlinked is absent for it a moment)."""
        check_name(name)
        if not isinstance(parent, DIRECTORY_NODES):
            raise NotADirectory("not a directory")
        scratch_node = ScratchFile(parent, name)
        if self.scratch.get(scratch_node) is not None:
            return await self._entry_of(name, scratch_node)
        try:
            entry = await self.namespace.lookup(parent, name)
            if isinstance(entry.node, MetadataFile) and self.replacements.hides(entry.node, pid):
                raise NotShownNow(f"{name!r} is being replaced by process {pid}")
            return entry
        except NotShownNow:
            raise
        except NotFound:
            chunk = self._chunk_named(parent, name)
            if chunk is not None and self.writers.size(chunk) is not None:
                return await self._entry_of(name, chunk)
            raise

    def _chunk_named(self, parent: Node, name: str) -> ChunkFile | None:
        try:
            return self.namespace.chunk_named(parent, name)
        except NotAChunk:
            return None

    async def lookup(self, parent_inode: int, name: str, pid: int | None = None) -> Attributes:
        entry = await self._entry(self.namespace.node(parent_inode), name, pid)
        attributes = self._attributes(entry.node, entry.size, entry.mtime_ns)
        if isinstance(entry.node, ChunkFile):  # an opener sent away gets its own inode
            claimed = self.page_cache.claim(entry.node, pid, lambda: self._fresh(entry.node),
                                            lambda inode: self.namespace.known(inode) is not None)
            if claimed is not None:
                attributes = dataclasses.replace(attributes, inode=claimed)
        self.namespace.remember(attributes.inode)
        return attributes

    async def getattr(self, inode: int) -> Attributes:
        node = self.namespace.node(inode)
        try:
            stat = await self._stat(node, inode)
        except NotFound as e:
            raise _stale(node, e) from e
        return self._attributes(node, stat.size, stat.mtime_ns)

    def forget(self, inode: int, count: int) -> None:
        self.namespace.forget(inode, count)
        if self.namespace.known(inode) is None:
            self.page_cache.forget(inode)

    def remember(self, inode: int) -> None:
        """A readdir entry was accepted by the kernel: it now counts as looked up."""
        self.namespace.remember(inode)

    # --- opening, reading, releasing -----------------------------------------------------

    def _check_writable(self, node: Node | None = None) -> None:
        """EROFS on a read-only mount, and for the files and directories of an array that
        cannot be written: refused when a file is opened for writing, never at close()."""
        if self.read_only:
            raise ReadOnlyError("the mount is read-only")
        array = None if node is None else array_of(node)
        if array is not None and array.unwritable is not None:
            raise ReadOnlyError(
                f"array {array.path or '/'} cannot be written: {array.unwritable}"
            )

    def _scratch(self, node: ScratchFile) -> ScratchData:
        scratch = self.scratch.get(node)
        if scratch is None:
            raise NotFound(f"scratch file {node.name!r} is gone")
        return scratch

    def _register(self, opened: OpenFile, *, direct: bool) -> int:
        """A handle number for ``opened``, a file outside the page-cache rule."""
        handle = next(self._handles)
        self._files[handle] = opened
        if direct:
            self.page_cache.admit_direct(handle)
        elif self.read_only:
            self.page_cache.admit_kept(handle)
        return handle

    async def open(self, inode: int, flags: int, pid: int | None = None) -> int:
        """A handle of the file; readers read the version they opened until they close.
        ``pid``: the opener (see ``page_cache``: an open may be sent to a fresh inode)."""
        node = self.namespace.node(inode)
        try:
            return await self._open_node(inode, node, flags, pid)
        except NotFound as e:
            raise _stale(node, e) from e

    async def _open_node(self, inode: int, node: Node, flags: int, pid: int | None) -> int:
        writing = bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND))
        if writing:
            self._check_writable(node)
        if isinstance(node, ScratchFile):
            scratch = self._scratch(node)
            if flags & os.O_TRUNC:
                scratch.data.truncate(0)
            return self._register(ScratchHandle(node, self.scratch), direct=True)
        if isinstance(node, MetadataFile):
            if writing:  # checked at close: only the same bytes are accepted
                data = b"" if flags & os.O_TRUNC else node.data
                return self._register(DocumentWriter(node, WriteBuffer(data)), direct=True)
            return self._register(MetadataReader(node), direct=not self.read_only)
        if isinstance(node, ImageFile):
            if writing:
                raise ReadOnlyError(f"{node.image.name}: whole-image files are read-only")
            # Whole images keep the page cache to be mapped (READ_AHEAD_GAP spares the tiles).
            return self._register(ImageReader(node), direct=False)
        if not isinstance(node, ChunkFile):
            raise ZarrFuseError(f"inode {inode} is a directory")  # the kernel never asks this
        retry = await self.page_cache.arrive(node, pid)
        try:
            return await self._open_chunk(inode, node, flags, writing, pid, retry)
        finally:
            if retry:
                self.page_cache.settled(node, pid)

    async def _committed_bytes(self, node: ChunkFile) -> bytes:
        return await node.array.files.committed_bytes(node.coords)

    def _opened(self, handle: int) -> OpenFile:
        try:
            return self._files[handle]
        except KeyError:
            raise BadHandle(f"file handle {handle} is not open") from None

    async def read_into(self, handle: int, offset: int, out: memoryview) -> int:
        """Fill ``out`` with the file's bytes from ``offset``; returns how many there were."""
        return await self._opened(handle).read_into(offset, out)

    def direct_io(self, handle: int) -> bool:
        """Whether the kernel must bypass its page cache for ``handle`` (``page_cache``)."""
        return self.page_cache.direct(handle)

    def keep_cache(self, handle: int) -> bool:
        """Whether the kernel may keep the pages it holds: they are this handle's version."""
        return self.page_cache.keep_cache(handle)

    def owns_pages(self, handle: int) -> bool:
        """Whether ``handle`` is a writer whose buffer the file's page cache shows."""
        return self.page_cache.owns_pages(handle)

    async def release(self, handle: int) -> None:
        """Forget a handle; it lets go of what it holds (a writer commits what reached it
        after its last close, or drops a refused commit's changes: ``ChunkWriter``)."""
        opened = self._files.pop(handle, None)
        if opened is None:
            return
        self.page_cache.release(handle)
        await opened.release()

    def statfs(self) -> StatFs:
        return StatFs(block_size=BLOCK_SIZE, blocks=0, files=self.namespace.inode_count)


def _stale(node: Node, gone: NotFound) -> ZarrFuseError:
    """A file the kernel still holds an inode of, gone since it looked the name up (another
    writer removed it, a refused new file was released): ESTALE makes the kernel look the
    name up again, and then say ENOENT or create it (``open(O_CREAT)``)."""
    if isinstance(node, (ChunkFile, ScratchFile)):
        return Stale(f"{gone}: the name is looked up again")
    return gone
