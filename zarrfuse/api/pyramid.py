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
the level above's shape to its own (1 where they are equal). The arrays are zarr's, over
the mount's store. Blocking: call in a worker thread.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import zarr

__all__ = ["MEAN_METHODS", "LowerLevel", "Pyramid", "downsample", "method_of"]

MEAN_METHODS = frozenset({"mean", "local_mean", "bin_shrink", "itk_bin_shrink",
                          "dask_bin_shrink", "average", "block_mean"})


def method_of(named: str | None) -> str | None:
    """``nearest`` or ``mean`` for a ``multiscales`` type this module implements; None."""
    name = (named or "").lower()
    if name == "nearest":
        return "nearest"
    return "mean" if name in MEAN_METHODS else None


@dataclass(frozen=True)
class LowerLevel:
    path: str
    array: zarr.Array
    factors: tuple[int, ...]


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


@dataclass(eq=False)
class Pyramid:
    """Level 0 of one OME-Zarr image and the levels below it."""

    image: str
    source: zarr.Array
    lower: list[LowerLevel]
    method: str | None
    named: str | None
    """The method as the metadata names it (for the message when it is not implemented)."""

    def update(self, region: Sequence[slice]) -> list[tuple[str, list[str]]]:
        """Downsample ``region`` of level 0 into every lower level, each from the one
        above; per level, the store keys (relative to the level) of the chunks written."""
        assert self.method is not None
        written = []
        above = self.source
        for level in self.lower:
            shape = level.array.shape
            dst = tuple(slice(r.start // f, min(-(-r.stop // f), n))
                        for r, f, n in zip(region, level.factors, shape, strict=True))
            if any(d.start >= d.stop for d in dst):
                break
            src = tuple(slice(d.start * f, min(d.stop * f, n)) for d, f, n in zip(
                dst, level.factors, above.shape, strict=True))
            values = downsample(np.asarray(above[src]), level.factors, self.method,
                                [d.stop - d.start for d in dst])
            level.array[dst] = values
            written.append((level.path, _keys(level.array, dst)))
            above, region = level.array, dst
        return written


def _keys(array: zarr.Array, region: Sequence[slice]) -> list[str]:
    """The store keys of the stored chunks (shards) ``region`` of ``array`` touches."""
    stored = tuple(array.shards or array.chunks)
    ranges = [range(r.start // c, (r.stop - 1) // c + 1)
              for r, c in zip(region, stored, strict=True)]
    return [array.metadata.encode_chunk_key(coords) for coords in itertools.product(*ranges)]
