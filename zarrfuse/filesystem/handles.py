"""What an open file handle of the mount holds: one kind of handle per kind of open file.

:class:`~zarrfuse.filesystem.fs.FileSystem` keeps one per handle number it gives the kernel;
writers are ``commits.ChunkWriter``, and :data:`OpenFile` is any of them. Every handle reads
its own bytes (``read_into``) and lets go of what it holds (``close``): the filesystem asks
the handle, never which kind it is, to read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from zarrfuse.filesystem.tree.chunk_files import OpenedVersion
from zarrfuse.filesystem.tree.nodes import ChunkFile, ImageFile, MetadataFile, ScratchFile
from zarrfuse.filesystem.writes.commits import ChunkWriter
from zarrfuse.filesystem.writes.scratch import ScratchData
from zarrfuse.filesystem.writes.write_buffer import WriteBuffer

__all__ = [
    "READERS",
    "ChunkReader",
    "DocumentWriter",
    "MetadataReader",
    "OpenFile",
    "ScratchHandle",
]


def _copy_into(piece: bytes | memoryview, out: memoryview) -> int:
    out[: len(piece)] = piece
    return len(piece)


class _HoldsNothing:
    def close(self) -> None:
        """Nothing to let go of: the bytes are the handle's own."""


@dataclass
class ChunkReader:
    """A chunk file opened to read, raw or rendered alike: the version it was opened at
    (``chunk_files``)."""

    node: ChunkFile
    chunk: OpenedVersion

    async def read_into(self, offset: int, out: memoryview) -> int:
        return await self.chunk.read_into(offset, out)

    def close(self) -> None:
        self.chunk.close()


@dataclass
class MetadataReader(_HoldsNothing):
    node: MetadataFile

    @property
    def data(self) -> bytes:
        return self.node.data

    async def read_into(self, offset: int, out: memoryview) -> int:
        return _copy_into(self.data[offset : offset + len(out)], out)


@dataclass
class DocumentWriter(_HoldsNothing):
    """A metadata document opened for writing: accepted at close only if the bytes are the
    document's own (see ``document_writes``)."""

    node: MetadataFile
    data: WriteBuffer

    async def read_into(self, offset: int, out: memoryview) -> int:
        return self.data.read_into(offset, out)


@dataclass
class ImageReader(_HoldsNothing):
    """A whole-image file (``--format ome-tiff``): bytes rendered as they are read."""

    node: ImageFile

    async def read_into(self, offset: int, out: memoryview) -> int:
        return await self.node.image.read_into(offset, out)


@dataclass
class ScratchHandle(_HoldsNothing):
    """A scratch file (a tool's temp name): its bytes are looked up at each call, so a
    scratch file renamed onto a chunk or removed is no longer read through it."""

    node: ScratchFile
    area: Callable[[ScratchFile], ScratchData]

    async def read_into(self, offset: int, out: memoryview) -> int:
        return self.area(self.node).data.read_into(offset, out)


OpenFile = (
    ChunkReader | MetadataReader | ChunkWriter | ScratchHandle | DocumentWriter | ImageReader
)

READERS = (ChunkReader, MetadataReader)
"""Handles that only read (whole images, read-only, are their own case)."""
