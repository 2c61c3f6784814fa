"""Caches bounded in bytes: rendered files (``RenderCache``) and decoded chunks of whole
images (``DecodedChunks``)."""

from __future__ import annotations

import numpy as np

from zarrfuse.filesystem.chunks.recently_used import RecentlyUsed

__all__ = ["DecodedChunks", "RenderCache"]


class RenderCache(RecentlyUsed[object, bytes]):
    """Rendered files of rendered views, at most ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit, weigh=len)


class DecodedChunks(RecentlyUsed[object, np.ndarray]):
    """Decoded chunks of whole images, at most ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit, weigh=lambda value: int(value.nbytes))
