"""The Zarr hierarchy as the mount shows it: one view per array or group, built from zarr.json.

An ``ArrayView`` holds what the mount needs to present an array: its directory tree, the
view's file suffix, the ``zarr.json`` it shows (view encoding, no storage transformers: the
mount has applied them) and the chunk source that reads its stored chunks.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import trio
import zarr
from zarr.abc.store import Store
from zarr.core.array import AsyncArray
from zarr.core.metadata.v3 import ArrayV3Metadata
from zarr.storage import StorePath

from zarrfuse.api.arrays import wrap_array
from zarrfuse.api.regions import chunk_grid_shape
from zarrfuse.errors import ConfigurationError, ZarrFuseError
from zarrfuse.extensions.chunk_keys import (
    FanoutChunkKeyEncoding,
    SuffixChunkKeyEncoding,
    keys_per_directory,
    parse_encoding,
)
from zarrfuse.extensions.transformers import parse_storage_transformers
from zarrfuse.filesystem.chunk_source import ChunkSource
from zarrfuse.filesystem.counters import Counters
from zarrfuse.filesystem.render import FORMATS, check_renderable
from zarrfuse.filesystem.rendered_source import RenderCache, RenderedSource
from zarrfuse.filesystem.view import FanoutTree, view_encoding
from zarrfuse.storage.base import Backend
from zarrfuse.tiff.metadata import layout_for

__all__ = ["ArrayView", "Catalog", "GroupView", "Rendering"]

log = logging.getLogger(__name__)


@dataclass(eq=False)
class ArrayView:
    """One array as mounted. Compared by identity: one view per array per mount."""

    path: str
    tree: FanoutTree
    suffix: str
    metadata_json: bytes
    source: ChunkSource
    metadata: dict[str, Any]
    decoded_chunk_bytes: int | None
    """Bytes of one decoded chunk (shard, for sharded arrays); None for variable-size types."""
    rendered: RenderedSource | None = None
    """For rendered views (tiff, npy, png): the array's chunks as image files."""


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
    """One group as mounted: its own zarr.json, shown unchanged."""

    path: str
    metadata_json: bytes


def _join(*parts: str) -> str:
    return "/".join(p.strip("/") for p in parts if p.strip("/"))


@dataclass(frozen=True)
class _ChildView:
    """A group child's ``zarr.json`` as read at ``read_at`` (monotonic), and its view (None:
    no readable v3 node there)."""

    raw: bytes | None
    view: ArrayView | GroupView | None
    read_at: float


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
    ) -> None:
        self.backend = backend
        self.counters = counters or Counters()
        self._rendering = rendering
        self._keep_open = keep_open
        self._suffix = suffix
        self._max_children = max_children
        self._limiter = limiter
        self._ttl = listing_ttl
        self._children: dict[str, _ChildView] = {}

    def view_for(self, path: str, metadata: dict[str, Any]) -> ArrayView | GroupView:
        """A view of the node at ``path`` with parsed ``zarr.json`` ``metadata``; no I/O."""
        if metadata.get("node_type") == "group":
            view: ArrayView | GroupView = GroupView(path, json.dumps(metadata, indent=2).encode())
        else:
            view = self._array_view(path, metadata)
        return view

    def _array_view(self, path: str, metadata: dict[str, Any]) -> ArrayView:
        encoding = parse_encoding(metadata.get("chunk_key_encoding", "default"))
        parts = parse_storage_transformers(metadata.get("storage_transformers"))
        shown = {k: v for k, v in metadata.items() if k != "storage_transformers"}
        try:
            parsed = ArrayV3Metadata.from_dict(dict(shown))  # zarr's own validation
        except (ValueError, TypeError, KeyError) as e:
            raise ConfigurationError(f"{path or '/'}: invalid array metadata: {e}") from e
        native = parsed.dtype.to_native_dtype()
        decoded = (
            None
            if native.hasobject or native.itemsize == 0
            else math.prod(parsed.chunk_grid.chunk_shape) * native.itemsize  # type: ignore[attr-defined]
        )
        rendered = self._rendered(path, metadata, parsed) if self._rendering else None
        suffix = self._suffix
        if rendered is not None and suffix is None:
            suffix = FORMATS[rendered.fmt]
        encoded = view_encoding(encoding, suffix, self._max_children)
        if isinstance(encoded, SuffixChunkKeyEncoding):
            fanout, suffix = encoded.base_encoding, encoded.suffix
        else:
            fanout, suffix = encoded, ""
        assert isinstance(fanout, FanoutChunkKeyEncoding)
        shown["chunk_key_encoding"] = encoded.to_dict()
        stored_grid = chunk_grid_shape(metadata)
        source = ChunkSource(
            self.backend,
            array_path=path,
            encoding=encoding,
            keys_per_directory=keys_per_directory(encoding, stored_grid),
            parts=parts,
            limiter=self._limiter,
            listing_ttl=self._ttl,
            counters=self.counters,
            keep_open=self._keep_open,
            shard_layout=layout_for(metadata),
            grid=stored_grid,
        )
        grid = rendered.grid if rendered is not None else stored_grid
        return ArrayView(
            path=path,
            tree=FanoutTree(grid, fanout),
            suffix=suffix,
            metadata_json=json.dumps(shown, indent=2).encode(),
            source=source,
            metadata=shown,
            decoded_chunk_bytes=decoded,
            rendered=rendered,
        )

    def _rendered(
        self, path: str, metadata: dict[str, Any], parsed: ArrayV3Metadata
    ) -> RenderedSource:
        """The array as zarr sees it (transformers applied), rendered in the mount's format."""
        rendering = self._rendering
        assert rendering is not None
        store_path = wrap_array(
            StorePath(rendering.store, path), metadata, writable=not rendering.read_only
        )
        array = zarr.Array(AsyncArray(metadata=parsed, store_path=store_path))
        check_renderable(rendering.fmt, np.dtype(array.dtype), tuple(array.chunks))
        return RenderedSource(
            array, rendering.fmt, limiter=rendering.limiter, cache=rendering.cache
        )

    async def open_child(self, group_path: str, name: str) -> ArrayView | GroupView | None:
        """The child node ``name`` of a group, or None if it is not a readable v3 node.

        What a child's ``zarr.json`` said is trusted for the metadata TTL (forever on
        read-only mounts without ``--metadata-ttl``); after it the document is read again, and
        the view is rebuilt only if the document changed: arrays added to a group, resized
        or rewritten behind the mount show in the mount.
        """
        path = _join(group_path, name)
        cached = self._children.get(path)
        now = time.monotonic()
        if cached is not None and (self._ttl is None or now - cached.read_at < self._ttl):
            return cached.view
        self.counters.store["read"] += 1
        raw = await trio.to_thread.run_sync(
            self.backend.read_all, _join(path, "zarr.json"), limiter=self._limiter
        )
        if cached is not None and raw == cached.raw:
            self._children[path] = dataclasses.replace(cached, read_at=now)
            return cached.view
        view = None
        if raw is not None:
            try:
                metadata = json.loads(raw)
                if not isinstance(metadata, dict) or metadata.get("zarr_format") != 3:
                    raise ConfigurationError("not a Zarr v3 node")
                view = self.view_for(path, metadata)
            except (ValueError, ZarrFuseError) as e:
                log.warning("skipping %s: %s", path, e)
        self._children[path] = _ChildView(raw, view, now)
        return view

    async def child_names(self, group_path: str) -> list[str]:
        """Names of the group's children that are readable Zarr v3 nodes, sorted."""
        self.counters.store["list"] += 1
        names = await trio.to_thread.run_sync(
            self.backend.list_subdirs, group_path, limiter=self._limiter
        )
        children = []
        for name in sorted(names):
            if await self.open_child(group_path, name) is not None:
                children.append(name)
        return children
