"""Changes another program made to the store (``storage.store_watch``), applied to the
chunk files and whole images that show each key, as after the mount's own commit (docs/
views.md, 'When another program changes the store'). A changed ``zarr.json`` is seen after
``--metadata-ttl``, not here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from zarrfuse.filesystem.chunks.stored_chunks import StoredChunks
from zarrfuse.filesystem.images.whole_image_file import WholeImage
from zarrfuse.filesystem.tree.mounted import ArrayView
from zarrfuse.filesystem.tree.namespace import ROOT_INODE, Namespace
from zarrfuse.filesystem.tree.nodes import ChunkFile, ImageFile
from zarrfuse.filesystem.writes.commits import Committer
from zarrfuse.storage.store_watch import WHOLE_DIRECTORY

__all__ = ["apply_store_changes"]


async def apply_store_changes(namespace: Namespace, committer: Committer, keys: set[str]
                              ) -> None:
    """Apply changed store keys to the views the mount has opened, dropping kernel caches
    as after a commit (a used chunk inode is retired: its readers keep their version)."""
    views: list[ArrayView | WholeImage] = [
        view for view in namespace.catalog.cached_views()
        if isinstance(view, ArrayView | WholeImage)]
    shown = namespace.node(ROOT_INODE).view()
    for view in views if shown is None else [*views, shown]:
        if isinstance(view, WholeImage):
            lost = [s for s in view.sources() if await _went(s, keys)]
            for source in lost:
                source.drop_listed()
            if lost:
                view.drop_decoded()
            if view.changed(keys) or lost:
                for image in (view, *view.siblings):
                    await image.settle(_dropper(committer, image))
            continue
        appeared = [key for key in keys if key.endswith(WHOLE_DIRECTORY)]
        went = [key + "/" for key in await _went(view.stored, keys)]
        if appeared or went:
            await _drop_below(namespace, committer, view, (*appeared, *went))
        stored = {coords for key in keys
                  if (coords := view.stored.coords_of(key)) is not None}
        for chunk in sorted(stored):
            for coords in view.files.changed(chunk):
                await committer.drop_cache(ChunkFile(view, coords), by_another=True)


def _dropper(committer: Committer, image: WholeImage) -> Callable[[int], Awaitable[None]]:
    """Drops the kernel's pages of a version of ``image``."""
    return lambda version: committer.drop_pages(ImageFile(image, version))


async def _went(stored: StoredChunks, keys: set[str]) -> list[str]:
    """The directories of the array's chunks among ``keys`` that went away (``mv c/3
    elsewhere``): the watch reports one as that directory alone, not as its chunks."""
    return [key for key in keys
            if stored.on_chunk_path(key) and await stored.directory_gone(key)]


async def _drop_below(namespace: Namespace, committer: Committer, view: ArrayView,
                        directories: tuple[str, ...]) -> None:
    """Store ``directories`` (each ending in ``/``) appeared with files the watch does not
    name one by one, or went away: the array's listings and chunks are asked anew, the
    renderings below dropped, and the kernel drops the chunk files it holds of them."""
    view.files.drop_below(directories)
    key = view.stored.chunk_key
    for node in namespace.known_nodes(ChunkFile):
        if node.array is view and key(view.files.stored_of(node.coords)).startswith(
            directories
        ):
            await committer.drop_cache(node, by_another=True)
