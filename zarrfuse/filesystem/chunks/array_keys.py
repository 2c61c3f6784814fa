"""One array's store keys: a chunk's key, its parts' keys, and which chunk a key names (the
store watch and whole images learn of changes by key)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from zarrfuse.extensions.chunk_keys import RememberedKeys
from zarrfuse.extensions.transformers import ConcatParts
from zarrfuse.filesystem.chunks.part_opening import ChunkKeys
from zarrfuse.zarr_compat import ChunkKeyEncoding

__all__ = ["ArrayKeys"]


class ArrayKeys:
    """The keys of one array's chunks under its store prefix."""

    def __init__(
        self, encoding: ChunkKeyEncoding, prefix: str, parts: ConcatParts,
        decode: Callable[[Sequence[str]], tuple[int, ...] | None], grid: tuple[int, ...] = (),
    ) -> None:
        """``decode``: a chunk key's path parts (under the prefix) to grid coordinates, or
        None if they name no chunk of the grid; ``grid``: chunks along each dimension."""
        self._prefix = prefix
        self._parts = parts
        self._decode = decode
        self._grid = grid
        self.chunk_key = RememberedKeys(encoding, prefix)
        """The store key of a chunk (its main key; parts add their suffixes)."""

    def on_chunk_path(self, key: str) -> bool:
        """Whether ``key`` names a directory that chunk keys pass through (``c/3`` of
        ``c/3/0``): its names, completed with the last names of the first or the last
        chunk's key, name a chunk below it."""
        if not key.startswith(self._prefix):
            return False
        names = key[len(self._prefix) :].split("/")
        for tail in self._corner_names:
            if len(names) < len(tail):
                coords = self._decode([*names, *tail[len(names) :]])
                if coords is not None and self.chunk_key(coords).startswith(key + "/"):
                    return True
        return False

    @functools.cached_property
    def _corner_names(self) -> list[list[str]]:
        """The names of the first and the last chunk's keys (none for an empty grid)."""
        if not self._grid or not all(self._grid):
            return []
        corners = ((0,) * len(self._grid), tuple(n - 1 for n in self._grid))
        return [self.chunk_key(c)[len(self._prefix) :].split("/") for c in corners]

    def keys_of(self, coords: tuple[int, ...]) -> ChunkKeys:
        """The chunk's key and its parts' keys."""
        key = self.chunk_key(coords)
        return ChunkKeys(coords, key, [key + p.key_suffix for p in self._parts.parts])

    def part_keys(self, coords: tuple[int, ...]) -> list[str]:
        return self.keys_of(coords).parts

    def coords_of(self, key: str) -> tuple[int, ...] | None:
        """The chunk one of whose parts is stored at ``key``; None if ``key`` is no chunk's
        (a document, another array's key, a temporary file)."""
        if not key.startswith(self._prefix):
            return None
        rest = key[len(self._prefix) :]
        suffixes = sorted({p.key_suffix for p in self._parts.parts}, key=len, reverse=True)
        for suffix in suffixes:
            if suffix and not rest.endswith(suffix):
                continue
            stem = rest[: len(rest) - len(suffix)] if suffix else rest
            coords = self._decode(stem.split("/"))
            if coords is not None and self.chunk_key(coords) == self._prefix + stem:
                return coords
        return None
