"""Changes another program made to the store, applied to what the mount shows.

``storage.store_watch`` says which keys changed; here each key becomes the chunk files and
whole images that show it. Each forgets what it learnt of that chunk (sizes, listing, open
handle, renderings, decoded tiles) and the kernel forgets their attributes and pages, as
after the mount's own commit: a file's next open reads the new chunk (a handle opened before
is no snapshot of a file the writer overwrote in place, as on a local filesystem). Metadata
documents are not followed here: a changed
``zarr.json`` (a resized array, a new member) is seen after ``--metadata-ttl``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from zarrfuse.filesystem.images.whole_image_file import WholeImage
from zarrfuse.filesystem.tree.inodes import ROOT_INODE
from zarrfuse.filesystem.tree.mounted import ArrayView
from zarrfuse.filesystem.tree.namespace import Namespace
from zarrfuse.filesystem.tree.nodes import ArrayRoot, ChunkFile, ImageDir, ImageFile, Node
from zarrfuse.storage.store_watch import WHOLE_DIRECTORY

__all__ = ["StoreChanges"]


class StoreChanges:
    """Applies changed store keys to the views the mount has opened."""

    def __init__(self, namespace: Namespace, drop_cache: Callable[[Node], Awaitable[None]]):
        """``drop_cache``: the committer's, which drops a node's kernel caches as after a
        commit (a used chunk inode is retired: its readers keep their version)."""
        self._namespace = namespace
        self._drop_cache = drop_cache

    def _views(self) -> list[ArrayView | WholeImage]:
        root = self._namespace.node(ROOT_INODE)
        views = [view for view in self._namespace.catalog.cached_views()
                 if isinstance(view, ArrayView | WholeImage)]
        if isinstance(root, ArrayRoot):
            views.append(root.array)
        elif isinstance(root, ImageDir):
            views.append(root.image)
        return views

    async def apply(self, keys: set[str]) -> None:
        for view in self._views():
            if isinstance(view, WholeImage):
                if view.changed(keys):
                    for image in (view, view.sibling):
                        if image is not None:
                            await self._drop_cache(ImageFile(image))
                continue
            if any(key.endswith(WHOLE_DIRECTORY) for key in keys):
                await self._forget_listed(view)
            stored = {coords for key in keys
                      if (coords := view.stored.coords_of(key)) is not None}
            for chunk in sorted(stored):
                for coords in view.files.changed(chunk):
                    await self._drop_cache(ChunkFile(view, coords))

    async def _forget_listed(self, view: ArrayView) -> None:
        """A store directory appeared holding more files than the watch names one by one:
        the rest were stored before the watch saw it and are reported by nothing, so the
        array's listings are asked anew and the kernel drops the chunk files it holds of it
        (a shown absent chunk's size). Smaller directories cost only their files' keys."""
        view.stored.forget_listed()
        for node in self._namespace.known_nodes(ChunkFile):
            if node.array is view:
                await self._drop_cache(node)
