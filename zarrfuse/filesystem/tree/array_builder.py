"""Building one mounted array (``ArrayView``) from its stored document: its chunk source,
its files' names, and for pictures the array as zarr describes it with a chunk decoder."""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import zarr
from zarr.abc.store import Store
from zarr.storage import StorePath

from zarrfuse.api.chunk_encoding import ChunkEncoder
from zarrfuse.api.nodes import StoredNode, parse_array_metadata
from zarrfuse.api.pyramid import Level, Pyramid, method_of
from zarrfuse.api.regions import chunk_grid_shape
from zarrfuse.api.shard_bounds import bound_inner_chunks
from zarrfuse.errors import ConfigurationError
from zarrfuse.extensions.chunk_keys import (
    FanoutChunkKeyEncoding,
    SuffixChunkKeyEncoding,
    keys_per_directory,
    parse_encoding,
)
from zarrfuse.extensions.transformers import parse_storage_transformers
from zarrfuse.filesystem.chunks.chunk_decoder import ChunkDecoder
from zarrfuse.filesystem.chunks.mount_context import MountContext
from zarrfuse.filesystem.chunks.stored_chunks import StoredChunks
from zarrfuse.filesystem.images.colour_axis import colour_axis
from zarrfuse.filesystem.images.image_builder import roles_of
from zarrfuse.filesystem.images.image_dims import ShownDims
from zarrfuse.filesystem.images.planes import picture_dims, plane_chunks
from zarrfuse.filesystem.images.render import FORMATS, check_renderable
from zarrfuse.filesystem.images.rendered_chunks import RenderedChunks
from zarrfuse.filesystem.images.suffix_check import suffix_mismatch
from zarrfuse.filesystem.images.whole_image_file import LevelChunks
from zarrfuse.filesystem.tree.documents import Layout, array_documents
from zarrfuse.filesystem.tree.fanout_tree import DEFAULT_MAX_CHILDREN, FanoutTree, view_encoding
from zarrfuse.filesystem.tree.mounted import ArrayView, Rendering
from zarrfuse.filesystem.tree.ome_levels import OmeLevel
from zarrfuse.filesystem.tree.source_keys import SourceKeys
from zarrfuse.tiff.metadata import shard_format_for
from zarrfuse.zarr_compat import ArrayV3Metadata, AsyncArray, stored_chunk_shape

__all__ = ["ArrayBuilder"]

log = logging.getLogger(__name__)


class ArrayBuilder:
    """Builds the mounted arrays of one mount, with the mount's options."""

    def __init__(
        self,
        context: MountContext,
        *,
        suffix: str | None = None,
        max_children: int | None = None,
        rendering: Rendering | None = None,
        layout: Layout = "fanout",
        update_pyramid: bool = False,
    ) -> None:
        """``update_pyramid``: a write to an OME-Zarr image's full resolution updates the
        levels below it (writable mounts, ``api.pyramid``)."""
        self.context = context
        self.update_pyramid = update_pyramid
        self.layout: Layout = layout
        self.rendering = rendering
        self._suffix = suffix
        self._max_children = max_children

    def shown_encoding(self, path: str, node: StoredNode) -> dict[str, Any]:
        own = parse_encoding(node.metadata.get("chunk_key_encoding", "default"))
        suffix = self._suffix
        if self.rendering is not None and suffix is None:
            suffix = FORMATS[self.rendering.fmt]
        if self.layout == "source":
            return own.to_dict()
        return view_encoding(own, suffix, self._max_children).to_dict()

    def array_view(
        self, path: str, node: StoredNode, *, ome: OmeLevel | None = None
    ) -> ArrayView:
        """``ome``: the OME-Zarr level the array is, if it is one: its axes name a plane
        view's path levels where the array names none (OME-Zarr 0.4), and say (with
        ``omero``) whether its channels are one colour picture."""
        axis_names = None if ome is None else ome.axis_names
        metadata = node.metadata
        parts = parse_storage_transformers(metadata.get("storage_transformers"))
        shown = {k: v for k, v in metadata.items() if k != "storage_transformers"}
        parsed = parse_array_metadata(path, metadata)
        native = parsed.dtype.to_native_dtype()
        decoded = (
            None
            if native.hasobject or native.itemsize == 0
            else math.prod(stored_chunk_shape(parsed)) * native.itemsize
        )
        unwritable = None
        if parts is not None:
            try:
                parts.check_writable()
            except ConfigurationError as e:
                unwritable = str(e)
        source = self.chunk_source(path, metadata)
        rendered = (
            self._rendered(path, metadata, parsed, source, writable=unwritable is None, ome=ome)
            if self.rendering
            else None
        )
        shown_encoding = parse_encoding(self.shown_encoding(path, node))
        if isinstance(shown_encoding, SuffixChunkKeyEncoding):
            fanout, suffix = shown_encoding.base_encoding, shown_encoding.suffix
        else:
            fanout, suffix = shown_encoding, ""
        stored_grid = chunk_grid_shape(metadata)
        keys = None
        if not isinstance(fanout, FanoutChunkKeyEncoding):  # source layout, default/v2 keys
            keys = SourceKeys(stored_grid, shown_encoding)
            fanout, suffix = FanoutChunkKeyEncoding(DEFAULT_MAX_CHILDREN), ""
        mismatch = suffix_mismatch(
            self._suffix, self.rendering.fmt if self.rendering else "raw", metadata
        )
        if mismatch is not None:
            log.warning("--suffix %s on %s: %s", self._suffix, path or "/", mismatch)
        grid = rendered.grid if rendered is not None else stored_grid
        # Browsing: a rendered view's grid dimensions of extent 1 make no level of the path.
        shown_dims = ShownDims.for_browsing(grid) if rendered is not None else None
        if shown_dims is not None:
            grid = shown_dims.shown_grid
        documents = (
            {} if rendered is not None
            else array_documents(node, self.layout, shown_encoding.to_dict())
        )
        return ArrayView(
            path=path,
            tree=FanoutTree(grid, fanout,
                            _plane_axes(metadata, rendered, shown_dims, axis_names)),
            suffix=suffix,
            documents=documents,
            stored=source,
            metadata=shown,
            decoded_chunk_bytes=decoded,
            rendered=rendered,
            keys=keys,
            unwritable=unwritable,
            shown_dims=shown_dims,
        )

    def chunk_source(self, path: str, metadata: dict[str, Any]) -> StoredChunks:
        """The stored chunks of the array at ``path`` whose v3-shaped document is
        ``metadata``."""
        encoding = parse_encoding(metadata.get("chunk_key_encoding", "default"))
        stored_grid = chunk_grid_shape(metadata)
        return StoredChunks(
            self.context,
            array_path=path,
            encoding=encoding,
            keys_per_directory=keys_per_directory(encoding, stored_grid),
            parts=parse_storage_transformers(metadata.get("storage_transformers")),
            shard_format=shard_format_for(metadata),
            grid=stored_grid,
        )

    def zarr_array(self, path: str, parsed: ArrayV3Metadata) -> zarr.Array:
        """The array as zarr describes it, over a store that refuses every read (``NoReads``):
        its chunks are read through the mount's backend (``chunk_decoder``), never by zarr."""
        return zarr.Array(AsyncArray(metadata=bound_inner_chunks(parsed),
                                     store_path=StorePath(NO_READS, path)))

    def pyramid(self, path: str, metadata: dict[str, Any], ome: OmeLevel) -> Pyramid:
        """Level 0 at ``path`` with the levels below it, to update them after a write."""
        top = Level.of(path, parse_array_metadata(path, metadata))
        assert top is not None  # level 0 is below nothing
        levels = [top]
        for level_path, level_metadata in ome.lower:
            level = Level.of(level_path, parse_array_metadata(level_path, level_metadata),
                             levels[-1])
            if level is None:
                break
            levels.append(level)
        named = ome.multiscales.method
        return Pyramid(ome.image, levels, method_of(named), named)

    def open_level(self, path: str, metadata: dict[str, Any]) -> LevelChunks:
        """An array of a whole image: its geometry and the source of its decoded chunks."""
        array = self.zarr_array(path, parse_array_metadata(path, metadata))
        decoder = ChunkDecoder(array, self.chunk_source(path, metadata))
        return LevelChunks(
            tuple(array.shape), tuple(array.chunks), np.dtype(array.dtype), decoder.decode,
            decoder.stored, decoder.stored_coords,
        )

    def _rendered(
        self,
        path: str,
        metadata: dict[str, Any],
        parsed: ArrayV3Metadata,
        source: StoredChunks,
        *,
        writable: bool,
        ome: OmeLevel | None = None,
    ) -> RenderedChunks:
        """The array rendered in the mount's format."""
        rendering = self.rendering
        assert rendering is not None
        array = self.zarr_array(path, parsed)
        colour = self._colour(metadata, np.dtype(array.dtype), ome)
        planes = plane_chunks(rendering.fmt, tuple(array.shape), tuple(array.chunks),
                              getattr(array.metadata, "dimension_names", None), colour)
        image = tuple(array.chunks) if planes is None else planes[-2:]
        if planes is not None and colour is not None:
            image = (*planes[-2:], planes[colour])
        check_renderable(rendering.fmt, np.dtype(array.dtype), image)
        chunk_bytes = math.prod(array.chunks) * np.dtype(array.dtype).itemsize
        if chunk_bytes > rendering.max_chunk_bytes:
            raise ConfigurationError(
                f"{path or '/'}: chunks of {chunk_bytes} bytes decoded are too large to render "
                f"(over --max-chunk-bytes {rendering.max_chunk_bytes}); mount it raw"
            )
        return RenderedChunks(
            array, rendering.fmt, decoder=ChunkDecoder(array, source),
            encoder=ChunkEncoder.for_array(array) if writable else None, colour=colour,
        )

    def _colour(self, metadata: dict[str, Any], dtype: np.dtype,
                ome: OmeLevel | None) -> int | None:
        """The axis a rendered view shows as each tile's colours (``colour_axis``): by the
        OME-Zarr axes and ``omero``, or ``dimension_names`` with ``--colour always``. PNG
        holds 8-bit colour only."""
        rendering = self.rendering
        assert rendering is not None
        shape = tuple(metadata["shape"])
        if ome is not None and len(ome.multiscales.axes) == len(shape):
            roles = [axis.role for axis in ome.multiscales.axes[:-2]]
        else:
            names = metadata.get("dimension_names") or [None] * len(shape)
            roles = roles_of(names[:-2])
        found = colour_axis(roles, shape, dtype, policy=rendering.colour,
                            means_colour=ome is not None and ome.multiscales.means_colour)
        if found is None or (rendering.fmt == "png" and dtype != np.dtype("u1")):
            return None
        return found.axis


def _plane_axes(
    metadata: dict[str, Any], rendered: RenderedChunks | None, shown: ShownDims | None,
    axis_names: tuple[str, ...] | None = None,
) -> tuple[str, ...] | None:
    """The names that label a picture view's path levels (docs/views.md, 'Planes of
    multi-axis images'); None where files are no pictures (NPY, 1-D)."""
    if rendered is None:
        return None
    ndim = len(rendered.grid)
    picture = picture_dims(rendered.fmt, ndim, rendered.planes)
    if picture is None:
        return None
    dims = range(ndim) if shown is None else shown.dims
    given = metadata.get("dimension_names") or axis_names or [None] * ndim
    unnamed = {picture[0]: "y", picture[1]: "x"}
    names = [  # "t005" for a named axis; "d0_005" for an unnamed one
        name if isinstance(name, str) and name.isidentifier() and len(name) <= 16
        else unnamed.get(d, f"d{d}_")
        for d, name in enumerate(given)
    ]
    return tuple(names[d] for d in dims)


class NoReads(Store):
    """The store a mounted array's ``zarr.Array`` names: zarr gives the array its shape,
    grid and codecs and reads nothing. Chunks are read through the mount's backend; a read
    through zarr would pass its disk cache and request bound, so it fails loudly."""

    def __init__(self) -> None:
        super().__init__(read_only=True)

    def __eq__(self, other: object) -> bool:
        return other is self

    @property
    def supports_writes(self) -> bool:
        return False

    @property
    def supports_deletes(self) -> bool:
        return False

    @property
    def supports_listing(self) -> bool:
        return False

    async def get(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a mounted array read through zarr: reads go through its backend")

    get_partial_values = exists = set = delete = get

    def list(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a mounted array listed through zarr: listings use its backend")

    list_prefix = list_dir = list


NO_READS = NoReads()
