"""Open file handles, one kind per kind of open (a chunk writer is ``writes.commits``'s),
and their table. Each kind answers every request itself; those that do not write refuse
``write`` with EBADF, as a file opened read-only does.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Protocol

from zarrfuse.errors import BadHandle
from zarrfuse.filesystem.page_cache import PageCacheUsers
from zarrfuse.filesystem.tree.chunk_files import OpenedVersion
from zarrfuse.filesystem.tree.nodes import ChunkFile, ImageFile, MetadataFile, Node, ScratchFile
from zarrfuse.filesystem.writes.document_writes import check_fits, check_identical
from zarrfuse.filesystem.writes.scratch import ScratchArea
from zarrfuse.filesystem.writes.write_buffer import WriteBuffer

__all__ = [
    "ChunkReader",
    "DocumentWriter",
    "ImageReader",
    "MetadataReader",
    "OpenFile",
    "OpenHandles",
    "ScratchHandle",
]


class OpenFile(Protocol):
    """What every open handle answers."""

    @property
    def node(self) -> Node: ...
    async def read_into(self, offset: int, out: memoryview) -> int: ...
    async def write(self, offset: int, data: bytes) -> int: ...

    async def truncate(self, size: int) -> bool:
        """Truncate what the handle holds; False: it holds nothing of its own (the path's
        file is truncated instead)."""

    async def flush(self, *, durable: bool) -> None:
        """close() and fsync(): what must be stored or checked now; errors reach close()."""

    async def release(self) -> None:
        """The kernel let go of the handle: what it held is let go of too."""

    def shown_size(self) -> int | None:
        """The size the kernel must hold for the handle's inode; None: the stored one."""


class _ReadsOnly:
    """The requests a handle that writes nothing answers alike."""

    async def write(self, offset: int, data: bytes) -> int:
        raise BadHandle("file is not open for writing")

    async def truncate(self, size: int) -> bool:
        return False

    async def flush(self, *, durable: bool) -> None:
        """Nothing to store."""

    async def release(self) -> None:
        """Nothing held outside the handle: its bytes are its own, or the node's."""

    def shown_size(self) -> int | None:
        return None


@dataclass
class ChunkReader(_ReadsOnly):
    """A chunk file opened to read, raw or rendered alike: the version it was opened at
    (``chunk_files``)."""

    node: ChunkFile
    chunk: OpenedVersion

    async def read_into(self, offset: int, out: memoryview) -> int:
        return await self.chunk.read_into(offset, out)

    async def release(self) -> None:
        self.chunk.close()

    def discard(self) -> None:
        """Opened, but refused before the kernel got it."""
        self.chunk.close()


@dataclass
class MetadataReader(_ReadsOnly):
    node: MetadataFile

    async def read_into(self, offset: int, out: memoryview) -> int:
        piece = self.node.data[offset : offset + len(out)]
        out[: len(piece)] = piece
        return len(piece)


@dataclass
class DocumentWriter(_ReadsOnly):
    """A metadata document opened for writing: accepted at close only if the bytes are the
    document's own (see ``document_writes``)."""

    node: MetadataFile
    data: WriteBuffer

    async def read_into(self, offset: int, out: memoryview) -> int:
        return self.data.read_into(offset, out)

    async def write(self, offset: int, data: bytes) -> int:
        check_fits(self.node, offset + len(data))
        self.data.write(offset, data)
        return len(data)

    async def truncate(self, size: int) -> bool:
        self.data.truncate(size)
        return True

    async def flush(self, *, durable: bool) -> None:
        check_identical(self.node, self.data.read(0, len(self.data)))


@dataclass
class ImageReader(_ReadsOnly):
    """A whole-image file (``--format ome-tiff``): bytes rendered as they are read."""

    node: ImageFile

    def __post_init__(self) -> None:
        self.node.image.versions.opened(self.node.version)  # ESTALE for an older version's inode

    async def read_into(self, offset: int, out: memoryview) -> int:
        return await self.node.image.read_into(offset, out, self.node.version)

    async def release(self) -> None:
        self.node.image.versions.closed(self.node.version)


@dataclass
class ScratchHandle(_ReadsOnly):
    """A scratch file (a tool's temp name): its bytes are looked up at each call, so a
    scratch file renamed onto a chunk or removed is no longer read through it."""

    node: ScratchFile
    area: ScratchArea

    async def read_into(self, offset: int, out: memoryview) -> int:
        return self.area.held(self.node).data.read_into(offset, out)

    async def write(self, offset: int, data: bytes) -> int:
        scratch = self.area.held(self.node)
        end = offset + len(data)
        self.area.reserve(len(scratch.data), max(end, len(scratch.data)))
        scratch.data.write(offset, data)
        scratch.mtime_ns, scratch.time_set = time.time_ns(), False  # as a file's would
        return len(data)


class OpenHandles:
    """The handle numbers given to the kernel, and the open file behind each."""

    def __init__(self, page_cache: PageCacheUsers, *, read_only: bool) -> None:
        self.page_cache = page_cache
        self.read_only = read_only
        self._numbers = itertools.count(1)
        self._files: dict[int, OpenFile] = {}

    def number(self) -> int:
        """A new handle number (directory handles draw from the same numbers)."""
        return next(self._numbers)

    def add(self, opened: OpenFile) -> int:
        """A handle number for ``opened`` (a chunk file's is then given to the page-cache
        rule: ``chunk_opening``)."""
        handle = self.number()
        self._files[handle] = opened
        return handle

    def register(self, opened: OpenFile, *, direct: bool) -> int:
        """A handle number for ``opened``, a file outside the page-cache rule."""
        handle = self.add(opened)
        if direct or self.read_only:
            self.page_cache.admit_outside(handle, direct=direct)
        return handle

    def get(self, handle: int | None) -> OpenFile | None:
        return None if handle is None else self._files.get(handle)

    def opened(self, handle: int) -> OpenFile:
        try:
            return self._files[handle]
        except KeyError:
            raise BadHandle(f"file handle {handle} is not open") from None

    def all(self) -> list[OpenFile]:
        return list(self._files.values())

    async def release(self, handle: int) -> None:
        """Forget a handle; it lets go of what it holds (``ChunkWriter.release``)."""
        opened = self._files.pop(handle, None)
        if opened is None:
            return
        self.page_cache.release(handle)
        await opened.release()

    def shown_size(self, inode: int | None) -> int | None:
        """The size an inode with open handles shows (the kernel holds one per inode, and
        cuts or pads reads at it): its writer's, or its readers' version's; None: the
        stored size."""
        users = self.page_cache.users(inode) if inode is not None else None
        if users is None:
            return None
        if users.writer is not None:
            opened = self._files.get(users.writer)
            return None if opened is None else opened.shown_size()
        return users.size if users.readers else None
