"""Opening a chunk file on a writable mount by the page-cache rule (``page_cache``): which
inode a handle may join, sending an opener to a fresh inode of its name, and the writer's
or reader's record the handle gets. A part of
:class:`~zarrfuse.filesystem.reading.FileSystemBase`, whose state it uses."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from zarrfuse.errors import ZarrFuseError
from zarrfuse.filesystem.handles import ChunkReader, OpenFile
from zarrfuse.filesystem.tree.nodes import ChunkFile, Node
from zarrfuse.filesystem.writes.commits import ChunkWriter
from zarrfuse.filesystem.writes.write_buffer import WriteBuffer

if TYPE_CHECKING:
    from zarrfuse.filesystem.page_cache import PageCacheUsers
    from zarrfuse.filesystem.tree.namespace import Namespace
    from zarrfuse.filesystem.writes.commits import OpenWriters

__all__ = ["ChunkOpening"]


class ChunkOpening:
    """Chunk-file opens under the page-cache rule, over the filesystem it is part of."""

    namespace: Namespace
    writers: OpenWriters
    page_cache: PageCacheUsers
    _handles: Iterator[int]
    _files: dict[int, OpenFile]

    async def _committed_bytes(self, node: ChunkFile) -> bytes:
        raise NotImplementedError

    def _fresh(self, node: Node) -> int:
        self.namespace.retire(node)
        return self.namespace.inode_of(node)

    async def _open_chunk(
        self, inode: int, node: ChunkFile, flags: int, writing: bool, pid: int | None,
        retry: bool,
    ) -> int:
        if writing:  # sent away before its chunk is read; a reader is decided after its open
            self._check_sharing(inode, node, writing, pid, retry)
        opened: ChunkReader | ChunkWriter
        writer: ChunkWriter | None = None
        version: object = None
        size: int | None = None
        if writing:
            truncate = bool(flags & os.O_TRUNC)
            # Each writer starts from the committed chunk, never from another writer's
            # uncommitted bytes: committing those would store a mix of two writers.
            data = b"" if truncate else await self._committed_bytes(node)
            opened = writer = self.writers.open(node, WriteBuffer(data), emptied=truncate)
        else:
            current = await node.array.files.open_version(node.coords)
            opened, version, size = ChunkReader(node, current), current.version, current.size
        try:  # decided again after the awaits: others may have come meanwhile
            crowded = self._check_sharing(inode, node, writing, pid, retry, version)
        except ZarrFuseError:
            opened.discard()
            raise
        handle = self._admit_chunk(opened, inode, flags, writer=writer, version=version,
                                   size=size, crowded=crowded)
        if writing:  # a writer's inode is its own: new opens of the name go elsewhere
            self._retire_if_current(node, inode)
        return handle

    def _admit_chunk(
        self, opened: OpenFile, inode: int, flags: int, *, writer: ChunkWriter | None,
        version: object = None, size: int | None = None, crowded: bool = False,
    ) -> int:
        """A handle number for ``opened`` (which is ``writer``, if it writes) on ``inode``,
        recorded by the page-cache rule."""
        handle = next(self._handles)
        self._files[handle] = opened
        if writer is not None:
            writer.inode, writer.synced = inode, bool(flags & os.O_DSYNC)  # O_SYNC has it
        self.page_cache.admit(inode, handle, writer=writer is not None, version=version,
                              size=size, read_write=flags & os.O_ACCMODE == os.O_RDWR,
                              retry=crowded)
        return handle

    def _retire_if_current(self, node: ChunkFile, inode: int) -> None:
        if self.namespace.known_inode(node) == inode:
            self.namespace.retire(node)

    def _check_sharing(
        self, inode: int, node: ChunkFile, writing: bool, pid: int | None, retry: bool,
        version: object = None,
    ) -> bool:
        """See ``PageCacheUsers.check``: may send the opener to a fresh inode (ESTALE)."""
        current = inode in (self.namespace.known_inode(node),
                            self.page_cache.claimed(node, pid))
        return self.page_cache.check(
            inode, node, pid, writer=writing, current=current, retry=retry, version=version,
            retire=lambda: self.namespace.retire(node), label=lambda: f"chunk {node.coords}",
        )
