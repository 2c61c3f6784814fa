"""Arrays and groups as the mount shows them (what the catalog hands the tree): directory
tree, suffix, documents shown and the stored chunks.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from zarrfuse.api.pyramid import Pyramid
from zarrfuse.filesystem.chunks.stored_chunks import StoredChunks
from zarrfuse.filesystem.chunks.write_check import ChunkCheck, checker_for_document
from zarrfuse.filesystem.images.image_dims import ShownDims
from zarrfuse.filesystem.images.rendered_chunks import RenderedChunks
from zarrfuse.filesystem.tree.chunk_files import ChunkFiles, RawChunkFiles, RenderedChunkFiles
from zarrfuse.filesystem.tree.documents import Documents
from zarrfuse.filesystem.tree.fanout_tree import FanoutTree
from zarrfuse.filesystem.tree.source_keys import SourceKeys

__all__ = ["ArrayView", "GroupView", "Rendering"]


@dataclass(eq=False)
class ArrayView:
    """One array as mounted. Compared by identity: one view per array per mount."""

    path: str
    tree: FanoutTree
    suffix: str
    documents: Documents
    stored: StoredChunks
    metadata: dict[str, Any]
    """The array's v3-shaped document as zarr reads it (no storage transformers)."""
    decoded_chunk_bytes: int | None
    """Bytes of one decoded chunk (shard, for sharded arrays); None for variable-size types."""
    rendered: RenderedChunks | None = None
    """For rendered views (tiff, npy, png): the array's chunks as image files."""
    shown_dims: ShownDims | None = None
    """Rendered views: the grid dimensions paths name (those of extent other than 1; ``tree``
    is over them alone); None: all of them."""
    keys: SourceKeys | None = None
    """Source layout of a ``default``/``v2`` encoded array: files at its own keys, not
    ``tree`` (which then only knows the grid)."""
    metadata_time_ns: int = 0
    """The time of the stored metadata (the newest document): the array's documents and
    directories show it, and so do the chunks of a rendered view that are not stored."""
    unwritable: str | None = None
    """Why the array cannot be written (concat-parts that cannot be split), None if it can:
    its files then show no write bits and opening one for writing is EROFS."""
    pyramid: Pyramid | None = None
    """The full resolution of an OME-Zarr image on a writable mount: the levels below it,
    updated after each write (``api.pyramid``)."""

    @functools.cached_property
    def files(self) -> ChunkFiles:
        """What its chunk files are, raw or rendered: chosen here, once (``chunk_files``)."""
        if self.rendered is not None:
            return RenderedChunkFiles(self, self.rendered)
        return RawChunkFiles(self)

    @functools.cached_property
    def checker(self) -> ChunkCheck:
        """How a written chunk is checked before it is stored; built on the first commit."""
        return checker_for_document(self.metadata)

    def release(self) -> None:
        """Replaced by a rebuilt view: the chunks it keeps open are closed, what it learnt
        and rendered is dropped (handles open on it keep reading what they opened)."""
        self.stored.drop_listed()
        if self.rendered is not None:
            self.rendered.drop_where(lambda _: True)


@dataclass(frozen=True)
class Rendering:
    """How a rendered view draws its arrays (in the mount's CPU threads, into its caches:
    ``MountContext``; its chunks are read through the mount's backend, as the raw view's
    are)."""

    fmt: str
    max_chunk_bytes: int = 2 << 30
    """Arrays whose decoded chunks are larger are left out (one log line): a rendered file
    is a chunk in memory (``--max-chunk-bytes``, default 2 GiB)."""
    colour: str = "auto"
    """When a channel axis is shown as colour (``--colour``, ``images.colour_axis``)."""


@dataclass(eq=False)
class GroupView:
    """One group as mounted, with the documents it shows."""

    path: str
    documents: Documents
    metadata_time_ns: int = 0
    """The time of the stored metadata (the newest document), which the group shows."""
    field: str | None = None
    """Whole-image mounts: an HCS well's first field, whose preview shows the well."""

    def release(self) -> None:
        """Replaced by a rebuilt view: a group holds nothing to let go of."""
