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
    """Apply changed store keys to the views the mount has opened. ``committer`` drops a
    chunk's kernel caches as after a commit (a used chunk inode is retired: its readers keep
    their version), and its name (``by_another``: the kernel may remember it absent); and a
    whole image's version's pages."""
    views: list[ArrayView | WholeImage] = [
        view for view in namespace.catalog.cached_views()
        if isinstance(view, ArrayView | WholeImage)]
    shown = namespace.node(ROOT_INODE).view()
    for view in views if shown is None else [*views, shown]:
        if isinstance(view, WholeImage):
            lost = [s for s in view.sources() if await _went(s, keys)]
            for source in lost:
                source.forget_listed()
            if lost:
                view.forget_decoded()
            if view.changed(keys) or lost:
                for image in (view, *view.siblings):
                    await image.settle(_dropper(committer, image))
            continue
        appeared = [key for key in keys if key.endswith(WHOLE_DIRECTORY)]
        went = [key + "/" for key in await _went(view.stored, keys)]
        if appeared or went:
            await _forget_below(namespace, committer, view, (*appeared, *went))
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


async def _forget_below(namespace: Namespace, committer: Committer, view: ArrayView,
                        directories: tuple[str, ...]) -> None:
    """Store ``directories`` (each ending in ``/``) appeared holding more files than the
    watch names one by one (the rest were stored before the watch saw it and are reported
    by nothing), or went away: the array's listings are asked anew, its chunks opened anew,
    the renderings of the chunks below them dropped, and the kernel drops the chunk files
    it holds of those (a shown absent chunk's size, a gone chunk's). Smaller directories
    that appear cost only their files' keys."""
    view.files.forget_below(directories)
    key = view.stored.chunk_key
    for node in namespace.known_nodes(ChunkFile):
        if node.array is view and key(view.files.stored_of(node.coords)).startswith(
            directories
        ):
            await committer.drop_cache(node, by_another=True)
