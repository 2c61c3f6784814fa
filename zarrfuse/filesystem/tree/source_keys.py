"""The source layout's tree for ``default`` and ``v2`` keys: chunk files at the array's own
keys, so any Zarr implementation reads the mount. Which paths *can* be a directory or chunk
of the grid, strictly (``01`` is not ``1``); which exist is the listings'. Pure code.
"""

from __future__ import annotations

from dataclasses import dataclass

from zarrfuse.errors import ChunkKeyError, NotAChunk
from zarrfuse.extensions.chunk_keys import (
    SuffixChunkKeyEncoding,
    canonical_coordinate,
    decode_chunk_key,
    encode_chunk_key,
)
from zarrfuse.zarr_compat import ChunkKeyEncoding, V2ChunkKeyEncoding

__all__ = ["SourceKeys"]


@dataclass(frozen=True)
class SourceKeys:
    """Paths of one array's own chunk keys, relative to the array, as tuples of names."""

    grid: tuple[int, ...]
    encoding: ChunkKeyEncoding
    """The array's own encoding: ``default`` or ``v2``, possibly under ``suffix``."""

    @property
    def _base(self) -> ChunkKeyEncoding:
        base = self.encoding
        while isinstance(base, SuffixChunkKeyEncoding):
            base = base.base_encoding
        return base

    @property
    def _root(self) -> tuple[str, ...]:
        """The names before the first coordinate: ``c`` for ``default``, none for ``v2``."""
        return () if isinstance(self._base, V2ChunkKeyEncoding) else ("c",)

    @property
    def has_chunks(self) -> bool:
        return all(n > 0 for n in self.grid)

    def path(self, coords: tuple[int, ...]) -> tuple[str, ...]:
        """The names leading to chunk ``coords``, the file name last."""
        return tuple(encode_chunk_key(self.encoding, coords).split("/"))

    def is_directory(self, names: tuple[str, ...]) -> bool:
        """Whether ``names`` (below the array) is a directory some chunk key of the grid
        passes through; the array's own directory (``()``) is not asked here."""
        nested = getattr(self._base, "separator", "/") == "/"
        if not nested or not self.has_chunks or not names:
            return False
        root = self._root
        if names[: len(root)] != root:
            return False
        indices = names[len(root) :]
        if len(indices) > len(self.grid) - 1:
            return False
        for dim, name in enumerate(indices):
            value = canonical_coordinate(name)
            if value is None or value >= self.grid[dim]:
                return False
        return True

    def chunk_at(self, names: tuple[str, ...]) -> tuple[int, ...] | None:
        """The chunk whose key is ``names``; None if it is not a canonical key of this
        encoding; NotAChunk if it is one but lies outside the grid."""
        key = "/".join(names)
        try:
            coords = decode_chunk_key(self.encoding, key, len(self.grid))
        except ChunkKeyError:
            return None
        if encode_chunk_key(self.encoding, coords) != key:
            return None
        if any(c >= n for c, n in zip(coords, self.grid, strict=True)):
            raise NotAChunk(f"{key!r} is a chunk key outside the grid {self.grid}")
        return coords
