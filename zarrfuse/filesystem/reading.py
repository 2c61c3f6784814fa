"""FUSE semantics without FUSE, the half that changes nothing stored: attributes and
lookups, directory listings, opening, reading and releasing files.

:class:`ReadingFileSystem` holds all of a mount's state (open handles, times, writers, the
scratch area); :class:`~zarrfuse.filesystem.fs.FileSystem` builds on it with the requests
that change the tree. ``open`` hands out writers too (the kernel opens files for writing
through the same call). Errors are raised as ``ZarrFuseError``, with the errno to answer.
"""

from __future__ import annotations

import itertools
import logging
import os
import stat
import time
from collections.abc import Awaitable, Callable

from zarrfuse.errors import (
    BadHandle,
    Busy,
    NotAChunk,
    NotADirectory,
    NotFound,
    NotShownNow,
    ReadOnlyError,
    ZarrFuseError,
)
from zarrfuse.filesystem.attributes import Attributes, Ownership, StatFs, check_name
from zarrfuse.filesystem.handles import (
    READERS,
    ChunkReader,
    DocumentWriter,
    ImageReader,
    MetadataReader,
    OpenFile,
    RenderedReader,
    ScratchHandle,
)
from zarrfuse.filesystem.page_cache import PageCacheUsers
from zarrfuse.filesystem.tree.namespace import Namespace
from zarrfuse.filesystem.tree.nodes import (
    DIRECTORY_NODES,
    ChunkFile,
    Entry,
    ImageDir,
    ImageFile,
    MetadataFile,
    Node,
    ScratchFile,
    array_of,
)
from zarrfuse.filesystem.writes.commits import ChunkWriter, Committer, OpenWriters, WriteOptions
from zarrfuse.filesystem.writes.document_writes import Replacements
from zarrfuse.filesystem.writes.scratch import ScratchArea, ScratchData
from zarrfuse.filesystem.writes.write_buffer import WriteBuffer
from zarrfuse.storage.base import Stat

__all__ = ["ReadingFileSystem"]

log = logging.getLogger(__name__)

BLOCK_SIZE = 4096


class ReadingFileSystem:
    """The mounted tree's state and its read side; every stored answer comes from the
    namespace. :class:`~zarrfuse.filesystem.fs.FileSystem` adds the writes."""

    def __init__(
        self,
        namespace: Namespace,
        *,
        read_only: bool = True,
        write_options: WriteOptions | None = None,
        ownership: Ownership | None = None,
    ) -> None:
        self.namespace = namespace
        self.read_only = read_only
        self.options = write_options or WriteOptions()
        self.committer = Committer(namespace, self.options)
        self.writers = OpenWriters()
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

    def set_invalidators(
        self,
        inode: Callable[[int], Awaitable[None]],
        entry: Callable[[int, str], Awaitable[None]],
    ) -> None:
        """How to drop the kernel's cache of an inode, or of a name (from the FUSE adapter)."""
        self.committer.set_invalidators(inode, entry)

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
        )

    async def _stat(self, node: Node) -> Stat:
        if isinstance(node, ScratchFile):
            scratch = self._scratch(node)
            return Stat(len(scratch.data), scratch.mtime_ns)
        if isinstance(node, ChunkFile):
            pending = self._pending_size(node)
            if pending is not None:  # being written: the stored chunk's time, or now if new
                try:
                    return Stat(pending, (await self.namespace.stat(node)).mtime_ns)
                except NotFound:
                    return Stat(pending, time.time_ns())
        return await self.namespace.stat(node)

    def _pending_size(self, node: ChunkFile) -> int | None:
        """The size a chunk being written shows: that of the writer owning the kernel's
        pages (the kernel takes it as the size of those pages, so another writer's would cut
        or pad its reads), else the newest writer's. An owner closed unwritten after O_TRUNC
        has no value: its size 0 would cut the next opener's reads to nothing."""
        owner = self.page_cache.writer(node)
        opened = self._files.get(owner) if owner is not None else None
        if isinstance(opened, ChunkWriter) and not opened.closed_empty:
            return len(opened.data)
        return self.writers.size(node)

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
        self.namespace.remember(attributes.inode)
        return attributes

    async def getattr(self, inode: int) -> Attributes:
        node = self.namespace.node(inode)
        stat = await self._stat(node)
        return self._attributes(node, stat.size, stat.mtime_ns)

    def forget(self, inode: int, count: int) -> None:
        self.namespace.forget(inode, count)

    def remember(self, inode: int) -> None:
        """A readdir entry was accepted by the kernel: it now counts as looked up."""
        self.namespace.remember(inode)

    # --- directories ---------------------------------------------------------------------

    async def opendir(self, inode: int) -> int:
        node = self.namespace.node(inode)
        if not isinstance(node, DIRECTORY_NODES):
            raise NotADirectory(f"inode {inode} is not a directory")
        handle = next(self._handles)
        self._dirs[handle] = (node, None)
        return handle

    async def _list(self, directory: Node) -> list[Entry]:
        entries = await self.namespace.list(directory)
        known = {e.name for e in entries}
        for chunk in self.writers.chunks():  # a new chunk shows, and the directories to it
            for parent, name, node in self.namespace.path_of(chunk):
                if parent == directory and name not in known:
                    entry = await self._entry_of(name, chunk) if node == chunk else None
                    entries.append(entry or Entry(name, node))
                    known.add(name)
        for key in self.scratch.names():
            if isinstance(key, ScratchFile) and key.directory == directory:
                entries.append(await self._entry_of(key.name, key))
        return entries

    async def readdir(self, handle: int, start_id: int) -> list[tuple[str, Attributes, int]]:
        """Entries after ``start_id``; each entry's id is its position + 1 (stable per handle)."""
        try:
            node, entries = self._dirs[handle]
        except KeyError:
            raise BadHandle(f"directory handle {handle} is not open") from None
        if entries is None or start_id == 0:
            entries = await self._list(node)
            self._dirs[handle] = (node, entries)
        return [
            (entry.name, self._attributes(entry.node, entry.size, entry.mtime_ns), index + 1)
            for index, entry in enumerate(entries)
            if index >= start_id
        ]

    def releasedir(self, handle: int) -> None:
        self._dirs.pop(handle, None)

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

    def _register(self, opened: OpenFile, flags: int) -> int:
        """A handle number for ``opened``, and whether it may use the page cache."""
        handle = next(self._handles)
        self._files[handle] = opened
        # Readers on a writable mount use direct I/O (they keep their version: page_cache).
        # Whole images keep the page cache to be mapped (READ_AHEAD_GAP spares the tiles).
        direct = isinstance(opened, ScratchHandle | DocumentWriter) or (
            not self.read_only and isinstance(opened, READERS)
        )
        writer = opened if isinstance(opened, ChunkWriter) else None
        self.page_cache.admit(opened.node, handle, writer=writer is not None, direct=direct,
                              read_write=flags & os.O_ACCMODE == os.O_RDWR,
                              alone=writer is None or self.writers.count(writer.node) == 1)
        return handle

    async def open(self, inode: int, flags: int) -> int:
        """A handle of the file; readers read the version they opened until they close."""
        node = self.namespace.node(inode)
        writing = bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND))
        if writing:
            self._check_writable(node)
        if isinstance(node, ScratchFile):
            scratch = self._scratch(node)
            if flags & os.O_TRUNC:
                scratch.data.truncate(0)
            return self._register(ScratchHandle(node), flags)
        if isinstance(node, MetadataFile):
            if writing:  # checked at close: only the same bytes are accepted
                data = b"" if flags & os.O_TRUNC else node.data
                return self._register(DocumentWriter(node, WriteBuffer(data)), flags)
            return self._register(MetadataReader(node), flags)
        if isinstance(node, ImageFile):
            if writing:
                raise ReadOnlyError(f"{node.image.name}: whole-image files are read-only")
            return self._register(ImageReader(node), flags)
        if not isinstance(node, ChunkFile):
            raise ZarrFuseError(f"inode {inode} is a directory")  # the kernel never asks this
        if writing:
            if not await self.page_cache.without_owner(node):
                raise Busy(f"chunk {node.coords} is open read-write elsewhere (it may be "
                           "mapped): another writer would change its size under it")
            truncate = bool(flags & os.O_TRUNC)
            # Each writer starts from the committed chunk, never from another writer's
            # uncommitted bytes: committing those would store a mix of two writers.
            data = b"" if truncate else await self._committed_bytes(node)
            writer = self.writers.open(node, WriteBuffer(data), emptied=truncate)
            return self._register(writer, flags)
        if node.array.rendered is not None:
            return self._register(
                RenderedReader(node, await node.array.rendered.render(node.coords)), flags
            )
        chunk = await node.array.source.open(node.coords)
        if chunk is None:
            raise NotFound(f"chunk {node.coords} is no longer stored")
        return self._register(ChunkReader(node, chunk), flags)

    async def _committed_bytes(self, node: ChunkFile) -> bytes:
        if node.array.rendered is not None:
            return await node.array.rendered.render(node.coords)
        return await node.array.source.read_all(node.coords) or b""

    def _opened(self, handle: int) -> OpenFile:
        try:
            return self._files[handle]
        except KeyError:
            raise BadHandle(f"file handle {handle} is not open") from None

    async def read_into(self, handle: int, offset: int, out: memoryview) -> int:
        """Fill ``out`` with the file's bytes from ``offset``; returns how many there were."""
        opened = self._opened(handle)
        if isinstance(opened, ChunkReader):
            return await opened.node.array.source.read_into(opened.chunk, offset, out)
        if isinstance(opened, ImageReader):
            piece = await opened.node.image.read(offset, len(out))
            out[: len(piece)] = piece
            return len(piece)
        if isinstance(opened, MetadataReader | RenderedReader):
            piece = opened.data[offset : offset + len(out)]
        elif isinstance(opened, ChunkWriter | DocumentWriter):
            piece = opened.data.read(offset, len(out))
        else:
            piece = self._scratch(opened.node).data.read(offset, len(out))
        out[: len(piece)] = piece
        return len(piece)

    def direct_io(self, handle: int) -> bool:
        """Whether the kernel must bypass its page cache for ``handle``: writers keep private
        buffers, so only one of them may own a file's pages (see ``page_cache``)."""
        return self.page_cache.direct(handle)

    def owns_pages(self, handle: int) -> bool:
        """Whether ``handle`` is a writer whose buffer the file's page cache shows: the
        kernel must drop any pages it kept from before."""
        opened = self._files.get(handle)
        return isinstance(opened, ChunkWriter) and not self.page_cache.direct(handle)

    async def release(self, handle: int) -> None:
        """Forget a handle. A writer with changes that reached it after its last close (the
        pages of a shared mapping, written back at munmap) commits them now; one whose
        commit was refused drops them."""
        opened = self._files.pop(handle, None)
        if opened is None:
            return
        self.page_cache.release(opened.node, handle)
        if isinstance(opened, ChunkReader):
            opened.chunk.close()
        elif isinstance(opened, ChunkWriter):
            try:
                if opened.dirty and not opened.refused:
                    await self.committer.commit_writer(opened, durable=False)
                    self._times.pop(opened.node, None)
            except ZarrFuseError as e:
                log.error("writes to chunk %s reached after close were not stored: %s",
                          opened.node.coords, e)
            finally:
                self.writers.close(opened)
            if opened.dirty:
                if opened.refused is not None:  # the last close's refusal: final
                    log.error("refused to store chunk %s: %s", opened.node.coords, opened.refused)
                else:
                    log.warning("discarding uncommitted writes to chunk %s", opened.node.coords)
                await self.committer.show_stored_state(opened.node)
            elif opened.emptied:  # opened with O_TRUNC, never written nor closed: unchanged
                await self.committer.show_stored_state(opened.node)

    def statfs(self) -> StatFs:
        return StatFs(block_size=BLOCK_SIZE, blocks=0, files=self.namespace.inode_count)
