"""The lower levels of an OME-Zarr pyramid, brought up to date after a write to the top.

A microscopist edits the full resolution (``s0``/``0``) through a mount and looks at the
image in a viewer that shows a lower level when zoomed out: that level must show the edit
too. So after a chunk of level 0 is committed, the region it covers is downsampled again
into every lower level, each from the level above it (as pyramid writers build them), with
the method the ``multiscales`` metadata names (its ``type``)
where zarrfuse implements it: ``nearest`` (each block's first pixel) and the mean family
(``mean``, ``local_mean``, ``bin_shrink``...: each block's mean, rounded to the nearest
integer for integer types; edge blocks average the pixels they have). Any other method
(``gaussian``, a writer's own) is not guessed at: the write succeeds and one log line
names the levels that are now stale. Each level's factor along each axis is the ratio of
the level above's shape to its own (1 where they are equal).

Here: which stored objects (chunks, or shards) of each level a region reaches, and each
one's new bytes from its own and the level above's, through the arrays' codecs (blocking).
The mount stores them as any chunk file (``filesystem.writes.level_updates``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from zarr.storage import MemoryStore

from zarrfuse.api.chunk_encoding import ChunkEncoder
from zarrfuse.api.regions import chunk_region, overlap
from zarrfuse.api.shard_bounds import bound_all_chunks
from zarrfuse.zarr_compat import (
    ArrayConfig,
    ArrayV3Metadata,
    default_buffer_prototype,
    one_object_array,
    sync,
)

__all__ = ["MEAN_METHODS", "Level", "Pyramid", "downsample", "method_of"]

Coords = tuple[int, ...]
Region = tuple[slice, ...]
Reader = Callable[[Sequence[Coords]], Sequence[bytes | None]]
"""The stored bytes of objects of a level (None: not stored)."""
Step = tuple[Coords, list[Coords], Callable[[Reader, bytes | None], bytes]]

MEAN_METHODS = frozenset({"mean", "local_mean", "bin_shrink", "itk_bin_shrink",
                          "dask_bin_shrink", "average", "block_mean"})


def method_of(named: str | None) -> str | None:
    """``nearest`` or ``mean`` for a ``multiscales`` type this module implements; None."""
    name = (named or "").lower()
    if name == "nearest":
        return "nearest"
    return "mean" if name in MEAN_METHODS else None


def downsample(values: np.ndarray, factors: Sequence[int], method: str,
               shape: Sequence[int]) -> np.ndarray:
    """``values`` (a region of level 0 starting on a block boundary) reduced by
    ``factors``, cropped to ``shape``."""
    if method == "nearest":
        out = values[tuple(slice(0, None, f) for f in factors)]
    else:
        total = values.astype(np.float64)
        counts = np.ones(values.shape, np.float64)
        for axis, f in enumerate(factors):
            if f > 1:
                starts = np.arange(0, values.shape[axis], f)
                total = np.add.reduceat(total, starts, axis=axis)
                counts = np.add.reduceat(counts, starts, axis=axis)
        out = total / counts
        if np.issubdtype(values.dtype, np.integer):
            out = np.rint(out)
        out = out.astype(values.dtype)
    return out[tuple(slice(0, n) for n in shape)]




@dataclass(frozen=True)
class Level:
    """One level of the pyramid, as its stored objects are read and encoded."""

    path: str
    shape: tuple[int, ...]
    factors: tuple[int, ...]
    """Against the level above (all 1 for level 0)."""
    metadata: ArrayV3Metadata
    """With every chunk measured before it is decoded (``shard_bounds``)."""
    encoder: ChunkEncoder

    @classmethod
    def of(cls, path: str, metadata: ArrayV3Metadata, above: Level | None = None
           ) -> Level | None:
        """The level stored at ``path``; None if it cannot be one below ``above`` (another
        number of dimensions)."""
        shape = tuple(metadata.shape)
        if above is not None and len(shape) != len(above.shape):
            return None
        factors = (1,) * len(shape) if above is None else tuple(
            max(1, round(s / n)) if n else 1 for s, n in zip(above.shape, shape, strict=True))
        return cls(path, shape, factors, bound_all_chunks(metadata),
                   ChunkEncoder(metadata, ArrayConfig("C", False)))

    def below(self, region: Region) -> Region | None:
        """What ``region`` of the level above is downsampled into here; None: nothing."""
        out = tuple(slice(r.start // f, min(-(-r.stop // f), n))
                    for r, f, n in zip(region, self.factors, self.shape, strict=True))
        return None if any(d.start >= d.stop for d in out) else out

    def objects(self, region: Region) -> list[Coords]:
        """The stored objects ``region`` touches."""
        return list(itertools.product(*(
            range(r.start // c, (r.stop - 1) // c + 1)
            for r, c in zip(region, self.encoder.chunk_shape, strict=True))))

    def values(self, region: Region, read: Reader) -> np.ndarray:
        """``region``'s values from its objects' stored bytes (``read``), read as zarr
        reads part of an object (of a shard, only the inner chunks in the region)."""
        out = np.empty([r.stop - r.start for r in region], self.encoder.dtype)
        objects = self.objects(region)
        for coords, data in zip(objects, read(objects), strict=True):
            inside, within = overlap(region, chunk_region(coords, self.encoder.chunk_shape,
                                                          self.shape))
            array = one_object_array(self.metadata, store := MemoryStore())
            if data is not None:  # else: the fill value
                key = array.metadata.encode_chunk_key((0,) * len(self.shape))
                sync(store.set(key, default_buffer_prototype().buffer.from_bytes(data)))
            out[inside] = array[within]
        return out


@dataclass(eq=False)
class Pyramid:
    """Level 0 of one OME-Zarr image and the levels below it."""

    image: str
    levels: list[Level]
    """Level 0 first."""
    method: str | None
    named: str | None
    """The method as the metadata names it (for the message when it is not implemented)."""

    @property
    def lower(self) -> list[Level]:
        return self.levels[1:]

    def steps(self, above: Level, level: Level, region: Region) -> list[Step]:
        """The objects of ``level`` its ``region`` (``level.below`` a region of ``above``)
        touches: each one's coordinates, the objects of ``above`` its block is made from,
        and its new stored bytes from those (``read``) and its own (None: not stored)."""
        assert self.method is not None
        steps: list[Step] = []
        for coords in level.objects(region):
            inside, within = overlap(region, chunk_region(coords, level.encoder.chunk_shape,
                                                          level.shape))
            source = tuple(
                slice((r.start + i.start) * f, min((r.start + i.stop) * f, n))
                for r, i, f, n in zip(region, inside, level.factors, above.shape, strict=True))

            def made(read: Reader, current: bytes | None, within: Region = within,
                     source: Region = source) -> bytes:
                block = downsample(above.values(source, read), level.factors, str(self.method),
                                   [w.stop - w.start for w in within])
                return level.encoder.encode_over(current, within, block)

            steps.append((coords, above.objects(source), made))
        return steps
