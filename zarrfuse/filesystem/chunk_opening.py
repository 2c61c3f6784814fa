"""Opening a chunk file by the page-cache rule (``page_cache``): which inode a handle may
join, or an opener sent to a fresh inode of its name."""

from __future__ import annotations

import os
from dataclasses import dataclass

from zarrfuse.errors import ZarrFuseError
from zarrfuse.filesystem.handles import ChunkReader, OpenHandles
from zarrfuse.filesystem.page_cache import PageCacheUsers
from zarrfuse.filesystem.tree.namespace import Namespace
from zarrfuse.filesystem.tree.nodes import ChunkFile, Node
from zarrfuse.filesystem.writes.commits import ChunkWriter, OpenWriters
from zarrfuse.filesystem.writes.write_buffer import WriteBuffer

__all__ = ["ChunkOpening", "writing"]


def writing(flags: int) -> bool:
    """Whether an open with ``flags`` may change the file."""
    return bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND))


@dataclass
class ChunkOpening:
    """Chunk-file opens and creates under the page-cache rule."""

    namespace: Namespace
    writers: OpenWriters
    page_cache: PageCacheUsers
    handles: OpenHandles

    def fresh(self, node: Node) -> int:
        """A fresh inode for ``node``'s name."""
        self.namespace.retire(node)
        return self.namespace.inode_of(node)

    async def open(self, inode: int, node: ChunkFile, flags: int, pid: int | None) -> int:
        retry = await self.page_cache.arrive(node, pid)
        try:
            return await self._open(inode, node, flags, pid, retry)
        finally:
            if retry:
                self.page_cache.settled(node, pid)

    async def _open(
        self, inode: int, node: ChunkFile, flags: int, pid: int | None, retry: bool
    ) -> int:
        opened: ChunkReader | ChunkWriter
        writer: ChunkWriter | None = None
        version: object = None
        size: int | None = None
        if writing(flags):  # sent away before its chunk is read; a reader after its open
            self._check_sharing(inode, node, True, pid, retry)
            truncate = bool(flags & os.O_TRUNC)
            # Each writer starts from the committed chunk, never from another writer's
            # uncommitted bytes: committing those would store a mix of two writers.
            data = b"" if truncate else await node.array.files.committed_bytes(node.coords)
            opened = writer = self.writers.open(node, WriteBuffer(data), emptied=truncate)
        else:
            current = await node.array.files.open_version(node.coords)
            opened, version, size = ChunkReader(node, current), current.version, current.size
        try:  # decided again after the awaits: others may have come meanwhile
            crowded = self._check_sharing(inode, node, writer is not None, pid, retry, version)
        except ZarrFuseError:
            opened.discard()
            raise
        handle = self._admit(opened, writer, inode, flags, version=version, size=size,
                             crowded=crowded)
        if writer is not None:  # a writer's inode is its own: new opens of the name go elsewhere
            self.retire_if_current(node, inode)
        return handle

    def create(self, chunk: ChunkFile, flags: int) -> int:
        """A writer of a new chunk file, alone on its inode (a fresh one if the name's has
        handles: see ``page_cache``)."""
        inode = self.namespace.known_inode(chunk)
        users = self.page_cache.users(inode) if inode is not None else None
        if users is not None and not users.empty():
            self.namespace.retire(chunk)
        writer = self.writers.open(chunk, WriteBuffer(), emptied=True)
        return self._admit(writer, writer, self.namespace.inode_of(chunk), flags)

    def _admit(
        self, opened: ChunkReader | ChunkWriter, writer: ChunkWriter | None, inode: int,
        flags: int, *, version: object = None, size: int | None = None, crowded: bool = False,
    ) -> int:
        if writer is not None:
            writer.inode, writer.synced = inode, bool(flags & os.O_DSYNC)  # O_SYNC has it
        handle = self.handles.add(opened)
        self.page_cache.admit(inode, handle, writer=writer is not None, version=version,
                              size=size, read_write=flags & os.O_ACCMODE == os.O_RDWR,
                              retry=crowded)
        return handle

    def retire_if_current(self, node: ChunkFile, inode: int) -> None:
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
