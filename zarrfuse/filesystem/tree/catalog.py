"""The Zarr hierarchy as the mount shows it: one view per array or group, built from its
stored metadata documents (v3 ``zarr.json`` or v2 ``.zarray``/``.zgroup``...).

An ``ArrayView`` holds what the mount needs to present an array: its directory tree (the
fanout view's, or in the source layout the array's own keys), the view's file suffix, the
metadata documents it shows (``documents``) and the chunk source that reads its chunks.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import trio
import zarr
from zarr.abc.store import Store
from zarr.storage import StorePath

from zarrfuse.api.arrays import wrap_array
from zarrfuse.api.nodes import V2_NAMES, V3_NAME, StoredNode, parse_node
from zarrfuse.api.regions import chunk_grid_shape
from zarrfuse.errors import ConfigurationError, ZarrFuseError
from zarrfuse.extensions.chunk_keys import (
    FanoutChunkKeyEncoding,
    SuffixChunkKeyEncoding,
    keys_per_directory,
    parse_encoding,
)
from zarrfuse.extensions.transformers import parse_storage_transformers
from zarrfuse.filesystem.chunks.byte_cache import DecodedChunks, RenderCache
from zarrfuse.filesystem.chunks.chunk_decoder import ChunkDecoder
from zarrfuse.filesystem.chunks.chunk_source import ChunkSource
from zarrfuse.filesystem.chunks.counters import Counters
from zarrfuse.filesystem.chunks.verify import ChunkCheck, checker_for_document
from zarrfuse.filesystem.images.formats import WHOLE_IMAGE_FORMATS
from zarrfuse.filesystem.images.image_builder import ImageBuilder
from zarrfuse.filesystem.images.image_dims import ShownDims
from zarrfuse.filesystem.images.image_names import image_file_name
from zarrfuse.filesystem.images.render import FORMATS, check_renderable
from zarrfuse.filesystem.images.rendered_source import RenderedSource
from zarrfuse.filesystem.images.suffix_check import suffix_mismatch
from zarrfuse.filesystem.images.whole_image_file import ImageLevelSource, WholeImage
from zarrfuse.filesystem.tree.documents import (
    Documents,
    Layout,
    array_documents,
    group_documents,
    member_paths,
)
from zarrfuse.filesystem.tree.fanout_tree import DEFAULT_MAX_CHILDREN, FanoutTree, view_encoding
from zarrfuse.filesystem.tree.source_keys import SourceKeys
from zarrfuse.storage.base import Backend, Document
from zarrfuse.tiff.metadata import layout_for
from zarrfuse.tiff.ome_zarr import Multiscales, read_multiscales
from zarrfuse.zarr_compat import ArrayV3Metadata, AsyncArray, stored_chunk_shape

__all__ = ["ArrayView", "Catalog", "GroupView", "Rendering"]

log = logging.getLogger(__name__)


@dataclass(eq=False)
class ArrayView:
    """One array as mounted. Compared by identity: one view per array per mount."""

    path: str
    tree: FanoutTree
    suffix: str
    documents: Documents
    source: ChunkSource
    metadata: dict[str, Any]
    """The array's v3-shaped document as zarr reads it (no storage transformers)."""
    decoded_chunk_bytes: int | None
    """Bytes of one decoded chunk (shard, for sharded arrays); None for variable-size types."""
    rendered: RenderedSource | None = None
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

    @functools.cached_property
    def checker(self) -> ChunkCheck:
        """How a written chunk is checked before it is stored; built on the first commit."""
        return checker_for_document(self.metadata)


@dataclass(frozen=True)
class Rendering:
    """How a rendered view draws its arrays: format, the store zarr reads, CPU bound, cache."""

    fmt: str
    store: Store
    read_only: bool
    limiter: trio.CapacityLimiter
    cache: RenderCache


@dataclass(eq=False)
class GroupView:
    """One group as mounted, with the documents it shows."""

    path: str
    documents: Documents
    metadata_time_ns: int = 0
    """The time of the stored metadata (the newest document), which the group shows."""


def parse_array_metadata(path: str, metadata: dict[str, Any]) -> ArrayV3Metadata:
    """zarr's reading of a v3-shaped array document (storage transformers left out: zarr
    does not know them), validated by zarr itself."""
    shown = {k: v for k, v in metadata.items() if k != "storage_transformers"}
    try:
        parsed = ArrayV3Metadata.from_dict(shown)
        stored_chunk_shape(parsed)  # regular grids only (zarr 3.4 reads rectilinear ones)
        return parsed
    except (ValueError, TypeError, KeyError) as e:
        raise ConfigurationError(f"{path or '/'}: invalid array metadata: {e}") from e


def _join(*parts: str) -> str:
    return "/".join(p.strip("/") for p in parts if p.strip("/"))


@dataclass(frozen=True)
class _ChildView:
    """A group child's stored documents as read at ``read_at`` (monotonic), and its view
    (None: no readable node there)."""

    raw: tuple[Mapping[str, bytes] | None, ...]
    view: ArrayView | GroupView | WholeImage | None
    read_at: float


@dataclass(frozen=True)
class _Loaded:
    """A node read from the store, with its consolidated members (groups that have them)."""

    node: StoredNode
    time_ns: int
    """The newest of the node's stored documents."""
    members: dict[str, StoredNode | None] | None = None
    levels: tuple[StoredNode | None, ...] = ()
    """Whole-image mounts: the datasets of an OME-Zarr image group, full resolution first."""

    @property
    def raw(self) -> tuple[Mapping[str, bytes] | None, ...]:
        """Everything read, to tell whether anything changed since."""
        members = self.members or {}
        return (
            self.node.raw,
            *(m.raw if m else None for _, m in sorted(members.items())),
            *(level.raw if level else None for level in self.levels),
        )


class Catalog:
    """Builds and caches views; reads ``zarr.json`` documents through the backend."""

    def __init__(
        self,
        backend: Backend,
        *,
        suffix: str | None,
        max_children: int | None,
        limiter: trio.CapacityLimiter,
        listing_ttl: float | None,
        counters: Counters | None = None,
        rendering: Rendering | None = None,
        keep_open: bool = False,
        layout: Layout = "fanout",
    ) -> None:
        self.backend = backend
        self.layout: Layout = layout
        self.counters = counters or Counters()
        self._rendering = rendering
        self._keep_open = keep_open
        self._suffix = suffix
        self._max_children = max_children
        self._limiter = limiter
        self._ttl = listing_ttl
        self._children: dict[str, _ChildView] = {}
        self._images = (
            ImageBuilder(self._open_level, DecodedChunks(rendering.cache.limit_bytes))
            if rendering is not None and rendering.fmt in WHOLE_IMAGE_FORMATS
            else None
        )

    # --- reading nodes (blocking: run in worker threads, or before mounting) ------------

    def _read_documents(self, path: str) -> dict[str, Document | None]:
        """The node's stored documents: ``zarr.json``, else the v2 ones. Blocking."""
        v3 = self.backend.read_document(_join(path, V3_NAME))
        if v3 is not None:
            return {V3_NAME: v3}
        return {name: self.backend.read_document(_join(path, name)) for name in V2_NAMES}

    def read_node(self, path: str) -> tuple[StoredNode, int] | None:
        """The node stored at ``path`` and its time (the newest document's); None if there
        is none. Blocking. Raises ZarrFuseError for documents that are malformed or
        unsupported."""
        documents = self._read_documents(path)
        if not any(documents.get(name) for name in (V3_NAME, ".zarray", ".zgroup")):
            return None
        node = parse_node(path or "/", {n: d.data if d else None for n, d in documents.items()})
        return node, max(d.mtime_ns for d in documents.values() if d is not None)

    def load(self, path: str) -> _Loaded | None:
        """The node at ``path`` and, for a group with consolidated metadata, each member's
        node (None where unreadable); None if there is no node. Blocking."""
        read = self.read_node(path)
        if read is None:
            return None
        node = read[0]
        multiscales = self._multiscales(node)
        if multiscales is not None:
            return _Loaded(node, read[1], levels=tuple(
                self._read_level(_join(path, dataset)) for dataset in multiscales.paths
            ))
        paths = member_paths(node) if node.node_type == "group" else None
        if paths is None:
            return _Loaded(node, read[1])
        members: dict[str, StoredNode | None] = {}
        for member in paths:
            try:
                found = self.read_node(_join(path, member))
            except ZarrFuseError as e:
                log.warning("consolidated member %s left out: %s", _join(path, member), e)
                found = None
            members[member] = None if found is None else found[0]
        return _Loaded(node, read[1], members)

    def _read_level(self, path: str) -> StoredNode | None:
        """An OME-Zarr dataset's array node; None (logged) if it is absent or unreadable."""
        try:
            found = self.read_node(path)
        except ZarrFuseError as e:
            log.warning("OME-Zarr level %s left out: %s", path, e)
            return None
        if found is None or found[0].node_type != "array":
            log.warning("OME-Zarr level %s left out: no array there", path)
            return None
        return found[0]

    # --- building views (no I/O) ---------------------------------------------------------

    @property
    def whole_images(self) -> bool:
        """Whether arrays show as whole-image files (``--format ome-tiff``)."""
        return self._images is not None

    def _multiscales(self, node: StoredNode) -> Multiscales | None:
        """The OME-Zarr image a group is, on whole-image mounts (None otherwise)."""
        if self._images is None or node.node_type != "group":
            return None
        return read_multiscales(node.attributes)

    def view_for(
        self, path: str, loaded: _Loaded, *, name: str | None = None
    ) -> ArrayView | GroupView | WholeImage:
        """The view of a node read by :meth:`load`. ``name``: the node's own name (default:
        the last component of ``path``), which whole images are named after."""
        node = loaded.node
        if self._images is not None:
            file_name = image_file_name(name if name is not None else path)
            multiscales = self._multiscales(node)
            if multiscales is not None:
                levels = [level.metadata if level else None for level in loaded.levels]
                return self._images.from_multiscales(
                    path, file_name, multiscales, levels, loaded.time_ns
                )
            if node.node_type == "array":
                return self._images.from_array(path, file_name, node.metadata, loaded.time_ns)
            return GroupView(path, {}, loaded.time_ns)
        if node.node_type == "array":
            view = self._array_view(path, node)
            view.metadata_time_ns = loaded.time_ns
            return view
        members = None
        if loaded.members is not None:
            members = {
                member: self._documents_of(_join(path, member), stored)
                for member, stored in loaded.members.items()
            }
        documents = {} if self._rendering else group_documents(node, self.layout, members)
        return GroupView(path, documents, loaded.time_ns)

    def _documents_of(self, path: str, node: StoredNode | None) -> Documents | None:
        """What a consolidated member shows (None: it is not shown)."""
        if node is None:
            return None
        if node.node_type == "group":
            return group_documents(node, self.layout, None)
        try:
            return array_documents(node, self.layout, self._shown_encoding(path, node))
        except ZarrFuseError as e:
            log.warning("consolidated member %s left out: %s", path, e)
            return None

    def _shown_encoding(self, path: str, node: StoredNode) -> dict[str, Any]:
        own = parse_encoding(node.metadata.get("chunk_key_encoding", "default"))
        suffix = self._suffix
        if self._rendering is not None and suffix is None:
            suffix = FORMATS[self._rendering.fmt]
        if self.layout == "source":
            return own.to_dict()
        return view_encoding(own, suffix, self._max_children).to_dict()

    def _array_view(self, path: str, node: StoredNode) -> ArrayView:
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
            self._rendered(path, metadata, parsed, source, writable=unwritable is None)
            if self._rendering
            else None
        )
        shown_encoding = parse_encoding(self._shown_encoding(path, node))
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
            self._suffix, self._rendering.fmt if self._rendering else "raw", metadata
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
            tree=FanoutTree(grid, fanout),
            suffix=suffix,
            documents=documents,
            source=source,
            metadata=shown,
            decoded_chunk_bytes=decoded,
            rendered=rendered,
            keys=keys,
            unwritable=unwritable,
            shown_dims=shown_dims,
        )

    def chunk_source(self, path: str, metadata: dict[str, Any]) -> ChunkSource:
        """The stored chunks of the array at ``path`` whose v3-shaped document is
        ``metadata``."""
        encoding = parse_encoding(metadata.get("chunk_key_encoding", "default"))
        stored_grid = chunk_grid_shape(metadata)
        return ChunkSource(
            self.backend,
            array_path=path,
            encoding=encoding,
            keys_per_directory=keys_per_directory(encoding, stored_grid),
            parts=parse_storage_transformers(metadata.get("storage_transformers")),
            limiter=self._limiter,
            listing_ttl=self._ttl,
            counters=self.counters,
            keep_open=self._keep_open,
            shard_layout=layout_for(metadata),
            grid=stored_grid,
        )

    def zarr_array(
        self, path: str, metadata: dict[str, Any], parsed: ArrayV3Metadata, *, writable: bool
    ) -> zarr.Array:
        """The array as zarr sees it (storage transformers applied), for rendered views."""
        rendering = self._rendering
        assert rendering is not None
        store_path = wrap_array(
            StorePath(rendering.store, path), metadata,
            writable=writable and not rendering.read_only,
        )
        return zarr.Array(AsyncArray(metadata=parsed, store_path=store_path))

    def _open_level(self, path: str, metadata: dict[str, Any]) -> ImageLevelSource:
        """An array of a whole image: its geometry and the source of its decoded chunks."""
        rendering = self._rendering
        assert rendering is not None
        array = self.zarr_array(
            path, metadata, parse_array_metadata(path, metadata), writable=False
        )
        decoder = ChunkDecoder(
            array, self.chunk_source(path, metadata),
            limiter=rendering.limiter, counters=self.counters,
        )
        return ImageLevelSource(
            tuple(array.shape), tuple(array.chunks), np.dtype(array.dtype), decoder.decode
        )

    def _rendered(
        self,
        path: str,
        metadata: dict[str, Any],
        parsed: ArrayV3Metadata,
        source: ChunkSource,
        *,
        writable: bool,
    ) -> RenderedSource:
        """The array rendered in the mount's format."""
        rendering = self._rendering
        assert rendering is not None
        array = self.zarr_array(path, metadata, parsed, writable=writable)
        check_renderable(rendering.fmt, np.dtype(array.dtype), tuple(array.chunks))
        decoder = ChunkDecoder(
            array, source, limiter=rendering.limiter, counters=self.counters
        )
        return RenderedSource(
            array, rendering.fmt, limiter=rendering.limiter, cache=rendering.cache,
            decoder=decoder,
        )

    async def open_child(
        self, group_path: str, name: str
    ) -> ArrayView | GroupView | WholeImage | None:
        """The child node ``name`` of a group, or None if it is not a readable Zarr node.

        What a child's documents said is trusted for the metadata TTL (forever on read-only
        mounts without ``--metadata-ttl``); after it they are read again, and the view is
        rebuilt only if they changed: arrays added to a group, resized or rewritten behind
        the mount show in the mount.
        """
        path = _join(group_path, name)
        cached = self._children.get(path)
        now = time.monotonic()
        if cached is not None and (self._ttl is None or now - cached.read_at < self._ttl):
            return cached.view
        self.counters.store["read"] += 1
        try:
            loaded = await trio.to_thread.run_sync(self.load, path, limiter=self._limiter)
        except ZarrFuseError as e:
            log.warning("skipping %s: %s", path, e)
            loaded = None
        raw = loaded.raw if loaded is not None else (None,)
        if cached is not None and raw == cached.raw:
            if cached.view is not None and loaded is not None:  # rewritten, same bytes
                cached.view.metadata_time_ns = loaded.time_ns
            self._children[path] = dataclasses.replace(cached, read_at=now)
            return cached.view
        view = None
        if loaded is not None:
            try:
                view = self.view_for(path, loaded)
            except ZarrFuseError as e:
                log.warning("skipping %s: %s", path, e)
        self._children[path] = _ChildView(raw, view, now)
        return view

    async def child_names(self, group_path: str) -> list[str]:
        """Names of the group's children that are readable Zarr nodes, sorted."""
        self.counters.store["list"] += 1
        names = await trio.to_thread.run_sync(
            self.backend.list_subdirs, group_path, limiter=self._limiter
        )
        children = []
        for name in sorted(names):
            if await self.open_child(group_path, name) is not None:
                children.append(name)
        return children
