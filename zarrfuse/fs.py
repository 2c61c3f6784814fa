"""FUSE semantics without FUSE: attributes, directory handles, open files, reads.

Everything here is testable without a kernel in the loop; ``fuse_ops`` only translates
pyfuse3's calls and types to these methods. Errors are raised as ``ZarrFuseError`` with the
errno the caller should see.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import stat
import time
from dataclasses import dataclass

from zarrfuse.chunk_source import OpenChunk
from zarrfuse.errors import ZarrFuseError
from zarrfuse.namespace import (
    DIRECTORY_NODES,
    ChunkFile,
    Entry,
    MetadataFile,
    Namespace,
    Node,
    NotFound,
)

__all__ = ["Attributes", "FileSystem", "StatFs"]

log = logging.getLogger(__name__)

BLOCK_SIZE = 4096
NAME_MAX = 255


class ReadOnlyError(ZarrFuseError):
    errno = errno.EROFS


class NotADirectory(ZarrFuseError):
    errno = errno.ENOTDIR


class BadHandle(ZarrFuseError):
    errno = errno.EBADF


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
class OpenChunkFile:
    node: ChunkFile
    chunk: OpenChunk


@dataclass
class OpenMetadata:
    node: MetadataFile


class FileSystem:
    """The mounted tree's behaviour: read-only for now, every answer from the namespace."""

    def __init__(self, namespace: Namespace, *, read_only: bool = True) -> None:
        self.namespace = namespace
        self.read_only = read_only
        self.uid = os.getuid()
        self.gid = os.getgid()
        self.mount_time_ns = time.time_ns()
        self._handles = itertools.count(1)
        self._dirs: dict[int, tuple[Node, list[Entry] | None]] = {}
        self._files: dict[int, OpenChunkFile | OpenMetadata] = {}

    # --- attributes ----------------------------------------------------------------------

    def _attributes(self, node: Node, size: int) -> Attributes:
        write = 0 if self.read_only else 0o200
        if isinstance(node, DIRECTORY_NODES):
            mode = stat.S_IFDIR | 0o555 | write
        else:
            mode = stat.S_IFREG | 0o444 | write
        return Attributes(
            inode=self.namespace.inode_of(node),
            mode=mode,
            size=size,
            uid=self.uid,
            gid=self.gid,
            time_ns=self.mount_time_ns,
        )

    def _entry_attributes(self, entry: Entry) -> Attributes:
        return self._attributes(entry.node, entry.size)

    async def lookup(self, parent_inode: int, name: str) -> Attributes:
        parent = self.namespace.node(parent_inode)
        if not isinstance(parent, DIRECTORY_NODES):
            raise NotADirectory(f"inode {parent_inode} is not a directory")
        entry = await self.namespace.lookup(parent, name)
        attributes = self._entry_attributes(entry)
        self.namespace.remember(attributes.inode)
        return attributes

    async def getattr(self, inode: int) -> Attributes:
        node = self.namespace.node(inode)
        return self._attributes(node, await self.namespace.size(node))

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

    async def readdir(self, handle: int, start_id: int) -> list[tuple[str, Attributes, int]]:
        """Entries after ``start_id``; each entry's id is its position + 1 (stable per handle)."""
        try:
            node, entries = self._dirs[handle]
        except KeyError:
            raise BadHandle(f"directory handle {handle} is not open") from None
        if entries is None or start_id == 0:
            entries = await self.namespace.list(node)
            self._dirs[handle] = (node, entries)
        return [
            (entry.name, self._entry_attributes(entry), index + 1)
            for index, entry in enumerate(entries)
            if index >= start_id
        ]

    def releasedir(self, handle: int) -> None:
        self._dirs.pop(handle, None)

    # --- files ---------------------------------------------------------------------------

    async def open(self, inode: int, flags: int) -> int:
        node = self.namespace.node(inode)
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND):
            raise ReadOnlyError(f"inode {inode}: writing is not supported on this mount")
        handle = next(self._handles)
        if isinstance(node, ChunkFile):
            chunk = await node.array.source.open(node.coords)
            if chunk is None:
                raise NotFound(f"chunk {node.coords} is no longer stored")
            self._files[handle] = OpenChunkFile(node, chunk)
        elif isinstance(node, MetadataFile):
            self._files[handle] = OpenMetadata(node)
        else:
            raise ZarrFuseError(f"inode {inode} is a directory")  # kernel never asks this
        return handle

    async def read_into(self, handle: int, offset: int, out: memoryview) -> int:
        """Fill ``out`` with the file's bytes from ``offset``; returns how many there were."""
        try:
            opened = self._files[handle]
        except KeyError:
            raise BadHandle(f"file handle {handle} is not open") from None
        if isinstance(opened, OpenMetadata):
            data = opened.node.data[offset : offset + len(out)]
            out[: len(data)] = data
            return len(data)
        return await opened.node.array.source.read_into(opened.chunk, offset, out)

    def release(self, handle: int) -> None:
        opened = self._files.pop(handle, None)
        if isinstance(opened, OpenChunkFile):
            opened.chunk.close()

    def statfs(self) -> StatFs:
        return StatFs(block_size=BLOCK_SIZE, blocks=0, files=self.namespace.inode_count)
