"""FUSE semantics without FUSE: attributes, directories, open files, reads and writes.

Everything here is testable without a kernel in the loop; ``fuse_ops`` only translates
pyfuse3's calls and types to these methods. Errors are raised as ``ZarrFuseError`` with the
errno the caller should see. How written chunks are stored is ``commits``' job; commit errors
are returned by ``close()``/``fsync()``, and ``release`` only cleans up.
"""

from __future__ import annotations

import itertools
import logging
import os
import stat
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from zarrfuse.errors import (
    BadHandle,
    Exists,
    InvalidArgument,
    NotAChunk,
    NotADirectory,
    NotFound,
    NotPermitted,
    ReadOnlyError,
    ZarrFuseError,
)
from zarrfuse.filesystem.chunk_source import OpenChunk
from zarrfuse.filesystem.commits import ChunkWriter, Committer, OpenWriters, WriteOptions
from zarrfuse.filesystem.namespace import (
    DIRECTORY_NODES,
    ChunkFile,
    Entry,
    MetadataFile,
    Namespace,
    Node,
    ScratchFile,
)
from zarrfuse.filesystem.scratch import ScratchArea, ScratchData, is_scratch_name
from zarrfuse.filesystem.write_buffer import WriteBuffer

__all__ = ["Attributes", "FileSystem", "Ownership", "StatFs", "WriteOptions"]

log = logging.getLogger(__name__)

BLOCK_SIZE = 4096
NAME_MAX = 255
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2


@dataclass(frozen=True)
class Ownership:
    """Who owns everything in the mount, and which permission bits are withheld."""

    uid: int
    gid: int
    umask: int = 0o022

    @classmethod
    def of_process(cls) -> Ownership:
        return cls(os.getuid(), os.getgid())


@dataclass(frozen=True)
class Attributes:
    """What ``stat`` shows for a node."""

    inode: int
    mode: int
    size: int
    uid: int
    gid: int
    time_ns: int

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)


@dataclass(frozen=True)
class StatFs:
    block_size: int
    blocks: int
    files: int
    name_max: int = NAME_MAX


@dataclass
class ChunkReader:
    node: ChunkFile
    chunk: OpenChunk


@dataclass
class MetadataReader:
    node: MetadataFile

    @property
    def data(self) -> bytes:
        return self.node.data


@dataclass
class RenderedReader:
    """A rendered chunk: its image file, rendered once at open."""

    node: ChunkFile
    data: bytes


@dataclass
class ScratchHandle:
    node: ScratchFile


OpenFile = ChunkReader | MetadataReader | RenderedReader | ChunkWriter | ScratchHandle


class FileSystem:
    """The mounted tree's behaviour; every stored answer comes from the namespace."""

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
        self.mount_time_ns = time.time_ns()
        self._handles = itertools.count(1)
        self._dirs: dict[int, tuple[Node, list[Entry] | None]] = {}
        self._files: dict[int, OpenFile] = {}
        self._times: dict[Node, int] = {}
        self.scratch = ScratchArea(0 if read_only else self.options.scratch_bytes)

    def set_invalidators(
        self,
        inode: Callable[[int], Awaitable[None]],
        entry: Callable[[int, str], Awaitable[None]],
    ) -> None:
        """How to drop the kernel's cache of an inode, or of a name (from the FUSE adapter)."""
        self.committer.set_invalidators(inode, entry)

    # --- attributes ----------------------------------------------------------------------

    def _attributes(self, node: Node, size: int) -> Attributes:
        read_only = self.read_only or isinstance(node, MetadataFile)
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
            time_ns=self._times.get(node, self.mount_time_ns),
        )

    async def _size(self, node: Node) -> int:
        if isinstance(node, ScratchFile):
            return len(self._scratch(node).data)
        if isinstance(node, ChunkFile):
            pending = self.writers.size(node)
            if pending is not None:
                return pending
        return await self.namespace.size(node)

    async def _entry(self, parent: Node, name: str) -> Entry:
        """The entry ``name`` in ``parent``, including scratch files and unstored new chunks."""
        if not isinstance(parent, DIRECTORY_NODES):
            raise NotADirectory("not a directory")
        scratch_node = ScratchFile(parent, name)
        if self.scratch.get(scratch_node) is not None:
            return Entry(name, scratch_node, await self._size(scratch_node))
        try:
            return await self.namespace.lookup(parent, name)
        except NotFound:
            chunk = self._chunk_named(parent, name)
            if chunk is not None and self.writers.size(chunk) is not None:
                return Entry(name, chunk, await self._size(chunk))
            raise

    def _chunk_named(self, parent: Node, name: str) -> ChunkFile | None:
        try:
            return self.namespace.chunk_named(parent, name)
        except NotAChunk:
            return None

    async def lookup(self, parent_inode: int, name: str) -> Attributes:
        entry = await self._entry(self.namespace.node(parent_inode), name)
        attributes = self._attributes(entry.node, entry.size)
        self.namespace.remember(attributes.inode)
        return attributes

    async def getattr(self, inode: int) -> Attributes:
        node = self.namespace.node(inode)
        return self._attributes(node, await self._size(node))

    def forget(self, inode: int, count: int) -> None:
        self.namespace.forget(inode, count)

    def remember(self, inode: int) -> None:
        """A readdir entry was accepted by the kernel: it now counts as looked up."""
        self.namespace.remember(inode)

    async def setattr(
        self, inode: int, *, size: int | None, mtime_ns: int | None, handle: int | None
    ) -> Attributes:
        """Truncate (``size``) and set times; modes and owners are accepted and ignored, as
        tools like ``rsync -a`` and ``cp -p`` set them and must not fail."""
        node = self.namespace.node(inode)
        if size is not None:
            self._check_writable()
            await self._truncate(node, size, handle)
        if mtime_ns is not None and not self.read_only:
            self._times[node] = mtime_ns
        return await self.getattr(inode)

    async def _truncate(self, node: Node, size: int, handle: int | None) -> None:
        if isinstance(node, ScratchFile):
            scratch = self._scratch(node)
            self.scratch.reserve(len(scratch.data), size)
            scratch.data.truncate(size)
            return
        if not isinstance(node, ChunkFile):
            raise NotPermitted("only chunk files and scratch files can be truncated")
        self.committer.check_size(node, size)
        opened = self._files.get(handle) if handle is not None else None
        if isinstance(opened, ChunkWriter):
            await opened.settled()
            opened.data.truncate(size)
            self.writers.changed(opened)
            return
        # truncate(2) on a path: takes effect at once, like on any filesystem.
        data = WriteBuffer(await self._committed_bytes(node))
        data.truncate(size)
        await self._commit(node, data, durable=False)

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
        for chunk in self.writers.chunks():
            parent, name = self.namespace.parent_of(chunk)
            if parent == directory and name not in known:
                entries.append(Entry(name, chunk, self.writers.size(chunk) or 0))
        for key in self.scratch.names():
            if isinstance(key, ScratchFile) and key.directory == directory:
                entries.append(Entry(key.name, key, await self._size(key)))
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
            (entry.name, self._attributes(entry.node, entry.size), index + 1)
            for index, entry in enumerate(entries)
            if index >= start_id
        ]

    def releasedir(self, handle: int) -> None:
        self._dirs.pop(handle, None)

    async def mkdir(self, parent_inode: int, name: str) -> Attributes:
        """Grid directories always exist (EEXIST); nothing else can be made (EPERM)."""
        self._check_writable()
        parent = self.namespace.node(parent_inode)
        try:
            entry = await self._entry(parent, name)
        except NotFound:
            raise NotPermitted(f"{name!r}: only the chunk grid's directories exist") from None
        raise Exists(f"{name!r} exists" if isinstance(entry.node, DIRECTORY_NODES) else name)

    async def rmdir(self, parent_inode: int, name: str) -> None:
        self._check_writable()
        entry = await self._entry(self.namespace.node(parent_inode), name)
        if not isinstance(entry.node, DIRECTORY_NODES):
            raise NotADirectory(f"{name!r} is not a directory")
        raise NotPermitted(f"{name!r}: the chunk grid's directories cannot be removed")

    # --- opening, reading ----------------------------------------------------------------

    def _check_writable(self) -> None:
        if self.read_only:
            raise ReadOnlyError("the mount is read-only")

    def _scratch(self, node: ScratchFile) -> ScratchData:
        scratch = self.scratch.get(node)
        if scratch is None:
            raise NotFound(f"scratch file {node.name!r} is gone")
        return scratch

    def _register(self, opened: OpenFile) -> int:
        handle = next(self._handles)
        self._files[handle] = opened
        return handle

    async def open(self, inode: int, flags: int) -> int:
        node = self.namespace.node(inode)
        writing = bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND))
        if writing:
            self._check_writable()
        if isinstance(node, ScratchFile):
            scratch = self._scratch(node)
            if flags & os.O_TRUNC:
                scratch.data.truncate(0)
            return self._register(ScratchHandle(node))
        if isinstance(node, MetadataFile):
            if writing:
                raise NotPermitted("zarr.json is shown by the mount and cannot be written")
            return self._register(MetadataReader(node))
        if not isinstance(node, ChunkFile):
            raise ZarrFuseError(f"inode {inode} is a directory")  # the kernel never asks this
        if writing:
            truncate = bool(flags & os.O_TRUNC)
            # Each writer starts from the committed chunk, never from another writer's
            # uncommitted bytes: committing those would store a mix of two writers.
            data = b"" if truncate else await self._committed_bytes(node)
            return self._register(self.writers.open(node, WriteBuffer(data), dirty=truncate))
        if node.array.rendered is not None:
            return self._register(
                RenderedReader(node, await node.array.rendered.render(node.coords))
            )
        chunk = await node.array.source.open(node.coords)
        if chunk is None:
            raise NotFound(f"chunk {node.coords} is no longer stored")
        return self._register(ChunkReader(node, chunk))

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
        if isinstance(opened, MetadataReader | RenderedReader):
            piece = opened.data[offset : offset + len(out)]
        elif isinstance(opened, ChunkWriter):
            piece = opened.data.read(offset, len(out))
        else:
            piece = self._scratch(opened.node).data.read(offset, len(out))
        out[: len(piece)] = piece
        return len(piece)

    # --- writing -------------------------------------------------------------------------

    async def write(self, handle: int, offset: int, data: bytes) -> int:
        opened = self._opened(handle)
        end = offset + len(data)
        if isinstance(opened, ScratchHandle):
            scratch = self._scratch(opened.node)
            self.scratch.reserve(len(scratch.data), max(end, len(scratch.data)))
            scratch.data.write(offset, data)
            return len(data)
        if not isinstance(opened, ChunkWriter):
            raise BadHandle("file is not open for writing")
        self.committer.check_size(opened.node, end)
        await opened.settled()
        opened.data.write(offset, data)
        self.writers.changed(opened)
        return len(data)

    async def _commit(self, node: ChunkFile, data: WriteBuffer, *, durable: bool) -> None:
        await self.committer.commit(node, data, durable=durable)
        self._times.pop(node, None)  # a time set on the file is shown until the next commit

    async def flush(self, handle: int, *, durable: bool = False) -> None:
        """Commit a written chunk (close and fsync). Errors reach the caller's close()."""
        opened = self._files.get(handle)
        if not isinstance(opened, ChunkWriter) or not (opened.dirty or durable):
            return
        await self.committer.commit_writer(opened, durable=durable)
        self._times.pop(opened.node, None)

    def is_writer(self, handle: int) -> bool:
        """Writers keep private buffers, so the kernel must not share one page cache and size
        between them (the adapter opens them with direct I/O)."""
        return isinstance(self._files.get(handle), ChunkWriter | ScratchHandle)

    async def release(self, handle: int) -> None:
        opened = self._files.pop(handle, None)
        if isinstance(opened, ChunkReader):
            opened.chunk.close()
        elif isinstance(opened, ChunkWriter):
            self.writers.close(opened)
            if opened.dirty:
                log.warning("discarding uncommitted writes to chunk %s", opened.node.coords)
                await self.committer.show_stored_state(opened.node)

    async def create(self, parent_inode: int, name: str, flags: int) -> tuple[int, Attributes]:
        """A new chunk file at a grid position, or a scratch file with a temp-file name."""
        self._check_writable()
        parent = self.namespace.node(parent_inode)
        if not isinstance(parent, DIRECTORY_NODES):
            raise NotADirectory("not a directory")
        chunk = self.namespace.chunk_named(parent, name)  # NotAChunk: EPERM, outside grid
        if chunk is not None:
            handle = self._register(self.writers.open(chunk, WriteBuffer(), dirty=True))
        elif is_scratch_name(name) and self.scratch.enabled:
            node = ScratchFile(parent, name)
            self.scratch.create(node, time.time_ns())
            handle = self._register(ScratchHandle(node))
        else:
            raise NotPermitted(
                f"{name!r} is not a chunk of the grid here, nor a temporary file name"
            )
        attributes = await self.getattr(self.namespace.inode_of(self._files[handle].node))
        self.namespace.remember(attributes.inode)
        return handle, attributes

    async def unlink(self, parent_inode: int, name: str) -> None:
        self._check_writable()
        parent = self.namespace.node(parent_inode)
        entry = await self._entry(parent, name)
        if isinstance(entry.node, ScratchFile):
            self.scratch.remove(entry.node)
        elif isinstance(entry.node, ChunkFile) and entry.node.array.rendered is not None:
            raise NotPermitted(f"{name!r}: chunks of a rendered view cannot be removed")
        elif isinstance(entry.node, ChunkFile):
            await entry.node.array.source.delete(entry.node.coords)
            self._times.pop(entry.node, None)
        elif isinstance(entry.node, DIRECTORY_NODES):
            raise NotPermitted(f"{name!r} is a directory")
        else:
            raise NotPermitted(f"{name!r} is shown by the mount and cannot be removed")

    async def rename(
        self, old_parent: int, old_name: str, new_parent: int, new_name: str, flags: int
    ) -> None:
        """Scratch files may be renamed; onto a chunk name that commits them as the chunk."""
        self._check_writable()
        if flags & RENAME_EXCHANGE:
            raise InvalidArgument("RENAME_EXCHANGE is not supported")
        source_dir = self.namespace.node(old_parent)
        target_dir = self.namespace.node(new_parent)
        entry = await self._entry(source_dir, old_name)
        if not isinstance(entry.node, ScratchFile):
            raise NotPermitted(f"{old_name!r}: only temporary files can be renamed")
        if flags & RENAME_NOREPLACE:
            try:
                await self._entry(target_dir, new_name)
            except NotFound:
                pass
            else:
                raise Exists(f"{new_name!r} exists")
        inode = self.namespace.inode_of(entry.node)
        chunk = self.namespace.chunk_named(target_dir, new_name)
        if chunk is not None:
            await self._commit(chunk, self._scratch(entry.node).data, durable=False)
            self.scratch.remove(entry.node)
            self.namespace.rebind(inode, chunk)
            return
        if not is_scratch_name(new_name) or not isinstance(target_dir, DIRECTORY_NODES):
            raise NotPermitted(f"{new_name!r} is not a chunk of the grid nor a temp file name")
        target = ScratchFile(target_dir, new_name)
        self.scratch.remove(target)
        self.scratch.move(entry.node, target)
        self.namespace.rebind(inode, target)

    def statfs(self) -> StatFs:
        return StatFs(block_size=BLOCK_SIZE, blocks=0, files=self.namespace.inode_count)
