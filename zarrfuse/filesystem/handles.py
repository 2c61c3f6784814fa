"""What an open file handle of the mount holds: one kind of record per kind of open file.

:class:`~zarrfuse.filesystem.fs.FileSystem` keeps one per handle number it gives the kernel;
writers are ``commits.ChunkWriter``, and :data:`OpenFile` is any of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from zarrfuse.filesystem.chunks.chunk_caches import OpenChunk
from zarrfuse.filesystem.tree.nodes import ChunkFile, ImageFile, MetadataFile, ScratchFile
from zarrfuse.filesystem.writes.commits import ChunkWriter
from zarrfuse.filesystem.writes.write_buffer import WriteBuffer

__all__ = [
    "READERS",
    "ChunkReader",
    "DocumentWriter",
    "MetadataReader",
    "OpenFile",
    "RenderedReader",
    "ScratchHandle",
]


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
class DocumentWriter:
    """A metadata document opened for writing: accepted at close only if the bytes are the
    document's own (see ``document_writes``)."""

    node: MetadataFile
    data: WriteBuffer


@dataclass
class RenderedReader:
    """A rendered chunk: its image file, rendered once at open."""

    node: ChunkFile
    data: bytes


@dataclass
class ImageReader:
    """A whole-image file (``--format ome-tiff``): bytes rendered as they are read."""

    node: ImageFile


@dataclass
class ScratchHandle:
    node: ScratchFile


OpenFile = (
    ChunkReader | MetadataReader | RenderedReader | ChunkWriter | ScratchHandle | DocumentWriter
    | ImageReader
)

READERS = (ChunkReader, MetadataReader, RenderedReader)
"""Handles that only read (whole images, read-only, are their own case)."""
