"""An OME-Zarr pyramid's lower levels after a commit to its full resolution, each object
written under its chunk lock while those it is made from hold theirs (docs/views.md,
'Writing the full resolution of a pyramid')."""

from __future__ import annotations

import functools
import itertools
import logging
import weakref
from collections.abc import Awaitable, Callable

from zarrfuse.api.pyramid import Pyramid
from zarrfuse.errors import ZarrFuseError
from zarrfuse.filesystem.tree.mounted import ArrayView
from zarrfuse.filesystem.tree.namespace import Namespace
from zarrfuse.filesystem.tree.nodes import ChunkFile

__all__ = ["LevelUpdates"]

log = logging.getLogger(__name__)


class LevelUpdates:
    """The lower levels' updates of one mount's commits (``drop_cache``: the committer's)."""

    def __init__(self, namespace: Namespace,
                 drop_cache: Callable[[ChunkFile], Awaitable[None]]) -> None:
        self._namespace = namespace
        self._drop_cache = drop_cache
        self._stale_told: weakref.WeakSet[Pyramid] = weakref.WeakSet()

    async def update(self, top: ArrayView, region: tuple[slice, ...], *, durable: bool
                     ) -> None:
        """After a write to ``region`` of an OME-Zarr image's full resolution: that region
        downsampled again in every level below; where it cannot be, the write stands and one
        line per image names the stale levels. ``durable``: as the write's own commit."""
        pyramid = top.pyramid
        assert pyramid is not None
        why = None
        if pyramid.method is None:
            why = (f"its multiscales type {pyramid.named!r} is not one zarrfuse recomputes "
                   "(nearest, mean)")
        else:
            try:
                await self._downsample(top, pyramid, region, durable)
            except Exception as e:  # noqa: BLE001  (the write itself is stored)
                why = f"updating them failed: {type(e).__name__}: {e}"
            else:
                return
        if pyramid not in self._stale_told:
            self._stale_told.add(pyramid)
            log.warning("%s: pyramid levels %s are now stale after a write to %s: %s",
                        pyramid.image or "/", ", ".join(level.path for level in pyramid.lower),
                        top.path or "/", why)

    async def _downsample(self, view: ArrayView, pyramid: Pyramid,
                          region: tuple[slice, ...], durable: bool) -> None:
        """Level by level, each from the one above (``view``, where ``region`` changed), as
        the mount shows it: its writers take the same locks."""
        for above, level in itertools.pairwise(pyramid.levels):
            below = pyramid.below(above, level, region)
            if below is None:
                return
            parent, _, name = level.path.rpartition("/")
            lower = await self._namespace.catalog.open_child(parent, name)
            if not isinstance(lower, ArrayView):
                raise ZarrFuseError(f"level {level.path} is not an array the mount shows")
            for coords, sources, made in pyramid.steps(above, level, below):
                async with view.stored.reading(sources) as read:
                    await lower.stored.writes.update(coords, functools.partial(made, read),
                                              limit=level.encoder.stored_limit,
                                              durable=durable)
                for shown in lower.files.changed(coords):
                    await self._drop_cache(ChunkFile(lower, shown))
            view, region = lower, below
