"""The Zarr hierarchy as the mount shows it: one ``ArrayView`` or ``GroupView`` per array or
group, read from its stored documents, cached for the listing time."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass

import trio

from zarrfuse.api.nodes import V2_NAMES, V3_NAME, StoredNode, parse_node
from zarrfuse.api.ome_zarr import Multiscales, read_multiscales, read_well_field
from zarrfuse.errors import ZarrFuseError
from zarrfuse.filesystem.chunks.recently_used import RecentlyUsed, Trust
from zarrfuse.filesystem.images.formats import WHOLE_IMAGE_FORMATS
from zarrfuse.filesystem.images.image_builder import ImageBuilder
from zarrfuse.filesystem.images.image_names import image_file_name
from zarrfuse.filesystem.images.whole_image_file import WholeImage
from zarrfuse.filesystem.tree.array_builder import ArrayBuilder
from zarrfuse.filesystem.tree.documents import (
    Documents,
    Layout,
    array_documents,
    group_documents,
    member_paths,
)
from zarrfuse.filesystem.tree.mounted import ArrayView, GroupView
from zarrfuse.filesystem.tree.ome_levels import OmeLevel, find_ome_level
from zarrfuse.request_deadline import waited
from zarrfuse.storage.base import Document

__all__ = ["Catalog"]

log = logging.getLogger(__name__)


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
    ome: OmeLevel | None = None
    """The OME-Zarr level an array is: its axes' names (Zarr v2 arrays have no
    ``dimension_names``), the levels below it."""

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

    def __init__(self, arrays: ArrayBuilder) -> None:
        """``arrays``: builds the arrays, with the mount's options and its ``MountContext``.
        What the context trusts for the arrays' chunk listings and sizes, documents keep
        for its TTL alone (the store watch follows no document)."""
        context = arrays.context
        self.arrays = arrays
        self.context = context
        self.backend = context.backend
        self.layout: Layout = arrays.layout
        self.counters = context.counters
        self._rendering = rendering = arrays.rendering
        self._ttl = context.trust.ttl
        self._children: dict[str, _ChildView] = {}
        self._unlistable: set[str] = set()
        self._ancestors: RecentlyUsed[str, tuple[StoredNode, int] | None] = RecentlyUsed(
            256, trust=Trust(self._ttl, clock=context.trust.clock))
        """The groups above arrays (an OME-Zarr image's), as ``_ome_level`` read them: an
        image's levels share them, so they are read once per metadata TTL, not per array."""
        self.skipped: dict[str, ZarrFuseError] = {}
        """Group members left out of the view, and why (the last reason per path)."""
        self._images = (
            ImageBuilder(arrays.open_level, context, colour=rendering.colour)
            if rendering is not None and rendering.fmt in WHOLE_IMAGE_FORMATS
            else None
        )

    # --- reading nodes (blocking: run in worker threads, or before mounting) ------------

    def _read_documents(self, path: str) -> dict[str, Document | None]:
        """The node's stored documents: ``zarr.json``, else the v2 ones, asked at once (one
        round trip of a remote store, not four). Blocking."""
        v3 = self.backend.read_document(_join(path, V3_NAME))
        if v3 is not None:
            return {V3_NAME: v3}
        each = self.context.fetch_pool().map if self.backend.capabilities.remote else map
        return dict(zip(V2_NAMES, each(lambda name: self.backend.read_document(_join(path, name)),
                                       V2_NAMES), strict=True))

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
            return _Loaded(node, read[1], ome=self._ome_level(path, node))
        members: dict[str, StoredNode | None] = {}
        for member in paths:
            try:
                found = self.read_node(_join(path, member))
            except ZarrFuseError as e:
                log.warning("consolidated member %s left out: %s", _join(path, member), e)
                found = None
            members[member] = None if found is None else found[0]
        return _Loaded(node, read[1], members)

    def _ome_level(self, path: str, node: StoredNode) -> OmeLevel | None:
        """Where an array sits in an OME-Zarr image (for path names, colour and level
        updates); None where not needed or in none. Blocking."""
        if node.node_type != "array" or not (self._rendering or self.arrays.update_pyramid):
            return None
        return find_ome_level(path, node, self._read_ancestor,
                              with_lower=self.arrays.update_pyramid)

    def _read_ancestor(self, path: str) -> tuple[StoredNode, int] | None:
        """``read_node`` for ``_ome_level``, kept for the metadata TTL (errors are not kept:
        they are raised again on the next read). Blocking."""
        kept = self._ancestors.entry(path)
        if kept is not None:
            return kept[1]
        read = self.read_node(path)
        self._ancestors.put(path, read)
        return read

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

    def _member_names(self, path: str) -> list[str]:
        """A group's children on a store that cannot list: what its consolidated metadata
        or its OME-Zarr datasets name. Without either they cannot be found (logged once per
        group). Blocking."""
        read = self.read_node(path)
        if read is None or read[0].node_type != "group":
            return []
        named = member_paths(read[0])
        if named is None:  # v2 keeps consolidated metadata at the root only
            named = self._members_from_ancestors(path)
        multiscales = read_multiscales(read[0].attributes)
        if multiscales is not None:
            named = [*named, *multiscales.paths]
        if not named and path not in self._unlistable:
            self._unlistable.add(path)
            log.warning(
                "group %s: its members cannot be found: the store cannot list, and the group "
                "has no consolidated metadata (zarr.consolidate_metadata writes it)", path or "/"
            )
        return sorted({member.strip("/").split("/")[0] for member in named if member.strip("/")})

    def _members_from_ancestors(self, path: str) -> list[str]:
        """The members below ``path`` that the nearest ancestor's consolidated metadata
        names, relative to ``path``. Blocking."""
        parts = [p for p in path.split("/") if p]
        for depth in range(len(parts) - 1, -1, -1):
            ancestor = "/".join(parts[:depth])
            read = self.read_node(ancestor)
            named = None if read is None else member_paths(read[0])
            if named is not None:
                inside = "/".join(parts[depth:]) + "/"
                return [m[len(inside):] for m in named if m.startswith(inside)]
        return []

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
            return GroupView(path, {}, loaded.time_ns, read_well_field(node.attributes))
        if node.node_type == "array":
            ome = loaded.ome
            view = self.arrays.array_view(path, node, ome=ome)
            if ome is not None and ome.lower:
                view.pyramid = self.arrays.pyramid(path, node.metadata, ome)
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
            return array_documents(node, self.layout, self.arrays.shown_encoding(path, node))
        except ZarrFuseError as e:
            log.warning("consolidated member %s left out: %s", path, e)
            return None

    async def open_child(
        self, group_path: str, name: str
    ) -> ArrayView | GroupView | WholeImage | None:
        """The child node ``name`` of a group, or None if it is not a readable Zarr node.
        Its documents are trusted for the metadata TTL; after it the view is rebuilt only if
        they changed."""
        path = _join(group_path, name)
        cached = self._children.get(path)
        now = self.context.trust.clock()
        if cached is not None and (self._ttl is None or now - cached.read_at < self._ttl):
            return cached.view
        self.counters.store["read"] += 1
        try:
            loaded = await waited(trio.to_thread.run_sync(
                self.load, path, limiter=self.context.io, abandon_on_cancel=True
            ))
        except ZarrFuseError as e:
            log.warning("skipping %s: %s", path, e)
            self.skipped[path] = e
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
                self.skipped[path] = e
        if cached is not None and cached.view is not None:
            cached.view.release()  # the kernel may hold its inodes until it forgets them
        self._children[path] = _ChildView(raw, view, now)
        return view

    def cached_views(self) -> list[ArrayView | GroupView | WholeImage]:
        """The views of the group children opened so far."""
        return [child.view for child in self._children.values() if child.view is not None]

    async def child_names(self, group_path: str) -> list[str]:
        """Names of the group's children that are readable Zarr nodes, sorted."""
        self.counters.store["list"] += 1
        names = await waited(trio.to_thread.run_sync(
            self.backend.list_subdirs if self.backend.capabilities.can_list else self._member_names,
            group_path, limiter=self.context.io, abandon_on_cancel=True,
        ))
        children = []
        for name in sorted(names):
            if await self.open_child(group_path, name) is not None:
                children.append(name)
        return children
