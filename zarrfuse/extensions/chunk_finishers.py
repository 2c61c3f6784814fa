"""Chunk finishers: how layers above the extensions complete chunk values before storage.

``zarrfuse.tiff`` registers the one that gives dual-access shards their TIFF header (in its
``__init__``, so every user of the package gets it); the concat-parts store asks for an
array's. A registry, so the extensions know nothing of what builds on them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

__all__ = ["ChunkFinisher", "chunk_finisher_for", "register_chunk_finisher"]


class ChunkFinisher(Protocol):
    """Completes a chunk value before its parts are stored (a dual-access array's shard
    gets its TIFF header, which zarr does not write): the one way it is done, for the
    concat-parts store and the mount alike. Must be idempotent."""

    def shard_with_header(
        self, coords: Sequence[int], views: Sequence[memoryview]
    ) -> list[memoryview]:
        """The value ``views`` (laid end to end) as it is to be stored, as views."""
        ...


_FINISHERS: list[Callable[[dict[str, Any]], ChunkFinisher | None]] = []


def register_chunk_finisher(finisher_for: Callable[[dict[str, Any]], ChunkFinisher | None]) -> None:
    """Let a layer built on this one finish the chunks of the arrays it recognises:
    ``finisher_for(metadata)`` returns a finisher, or None for other arrays."""
    if finisher_for not in _FINISHERS:
        _FINISHERS.append(finisher_for)


def chunk_finisher_for(metadata: dict[str, Any]) -> ChunkFinisher | None:
    """The finisher of the first registered layer that recognises the array, else None."""
    for finisher_for in _FINISHERS:
        finisher = finisher_for(metadata)
        if finisher is not None:
            return finisher
    return None
