"""The lower levels of an OME-Zarr pyramid, brought up to date after a write to the top.

A viewer zoomed out shows a lower level, which must show an edit of level 0 too. So after a
chunk of level 0 is committed, the region it covers is downsampled again into every lower
level, each from the level above (as pyramid writers build them), by the ``multiscales``
``type``: ``nearest`` (each block's first pixel), the mean family (``mean``,
``local_mean``, ``bin_shrink``...: each block's mean, rounded for integer types; edge
blocks average the pixels they have), or, where no method is named (ome-zarr-py's writer
names none), its default ``resize``, computed as scikit-image does (``_resized``). Any
other method is not guessed at: the write succeeds and one log line names the stale
levels. A level's factor along an axis is the level above's size over its own.

Here: which stored objects (chunks, or shards) of each level a region reaches, and each
one's new bytes, through the arrays' codecs (blocking); the mount stores them as any chunk
file (``filesystem.writes.level_updates``).
"""

from __future__ import annotations

import functools
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

__all__ = ["MEAN_METHODS", "RESIZE", "Level", "Pyramid", "downsample", "method_of"]

Coords = tuple[int, ...]
Region = tuple[slice, ...]
Reader = Callable[[Sequence[Coords]], Sequence[bytes | None]]
"""The stored bytes of objects of a level (None: not stored)."""
Step = tuple[Coords, list[Coords], Callable[[Reader, bytes | None], bytes]]

MEAN_METHODS = frozenset({"mean", "local_mean", "bin_shrink", "itk_bin_shrink",
                          "dask_bin_shrink", "average", "block_mean"})
RESIZE = "resize"
"""ome-zarr-py's default since 0.14 (``write_image``'s ``Methods.RESIZE``: scikit-image's
``resize``, linear, anti-aliased, mode ``reflect``, the result cast to the array's type)."""


def method_of(named: str | None) -> str | None:
    """``nearest``, ``mean`` or ``resize`` (no method named) for a ``multiscales`` type
    this module implements; None."""
    name = (named or "").lower()
    if not name:
        return RESIZE
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


@functools.cache
def _resize_axis(n: int, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, int]:
    """How ``resize`` makes ``m`` values of ``n`` along an axis (scipy's ``zoom``, grid
    mode): each output's input and the next one (the same where its weight is 0), the next
    one's weight, and the sigma and radius of the Gaussian that smooths the input first."""
    at = (np.arange(m) + 0.5) * (n / m) - 0.5
    first = np.floor(at).astype(np.int64)
    weight = at - first
    sigma = max(0.0, (n / m - 1) / 2)
    return first, first + (weight > 0), weight, sigma, int(4 * sigma + 0.5) * (sigma > 1e-15)


def _mirror(i: np.ndarray, n: int) -> np.ndarray:
    period = max(1, 2 * n - 2)
    i = np.abs(i) % period
    return np.where(i >= n, period - i, i)


def _resized(values: np.ndarray, source: Region, out: Region, above: Sequence[int],
             shape: Sequence[int]) -> np.ndarray:
    """``out`` of a level of ``shape`` made by ``resize`` from ``values``, the region
    ``source`` of the level above (of shape ``above``), with scipy's arithmetic in scipy's
    order, so that it equals ome-zarr-py's to the bit. Unlike it, no clip to the level's
    range: a flat area at the level's lowest value (above 0) comes out 1 lower, as one at
    any other value does in both."""
    work = np.float32 if values.dtype.kind == "f" and values.itemsize <= 4 else np.float64
    a = values.astype(work)
    picks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for axis, (s, o, n, m) in enumerate(zip(source, out, above, shape, strict=True)):
        first, second, weight, sigma, radius = _resize_axis(n, m)
        start, stop = int(first[o.start]), int(second[o.stop - 1]) + 1
        if radius:  # scipy's gaussian_filter1d, truncate 4, mode mirror
            x = np.arange(-radius, radius + 1)
            kernel = np.exp(-0.5 / (sigma * sigma) * x ** 2)
            kernel = kernel / kernel.sum()
            at = np.arange(start, stop)
            smooth = a.take(at - s.start, axis).astype(np.float64) * kernel[radius]
            for j in range(radius, 0, -1):
                smooth = smooth + (a.take(_mirror(at - j, n) - s.start, axis).astype(np.float64)
                                   + a.take(_mirror(at + j, n) - s.start, axis)
                                   ) * kernel[radius - j]
            a = smooth.astype(work)
        else:
            a = a.take(np.arange(start, stop) - s.start, axis)
        picks.append((first[o] - start, second[o] - start, weight[o]))
    total: np.ndarray = np.zeros((), np.float64)
    moving = [axis for axis, (n, m) in enumerate(zip(above, shape, strict=True)) if n != m]
    for corner in itertools.product((0, 1), repeat=len(moving)):
        term: np.ndarray = a
        for axis, (first, second, _) in enumerate(picks):
            term = term.take(second if axis in moving and corner[moving.index(axis)]
                             else first, axis)
        term = term.astype(np.float64)
        for axis, side in zip(moving, corner, strict=True):
            weight = picks[axis][2]
            term = term * (weight if side else 1.0 - weight).reshape(
                [-1 if d == axis else 1 for d in range(a.ndim)])
        total = total + term
    return total.astype(work).astype(values.dtype)


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

    def below(self, above: Level, level: Level, region: Region) -> Region | None:
        """What ``region`` of ``above`` is downsampled into in ``level``; None: nothing."""
        if self.method != RESIZE:
            return level.below(region)
        out = []
        for r, n, m in zip(region, above.shape, level.shape, strict=True):
            first, second, _, _, radius = _resize_axis(n, m)
            out.append(slice(int(np.searchsorted(second + radius, r.start)),
                             int(np.searchsorted(first - radius, r.stop - 1, "right"))))
        return None if any(d.start >= d.stop for d in out) else tuple(out)

    def _source(self, above: Level, level: Level, out: Region) -> Region:
        """The region of ``above`` that ``out`` of ``level`` is made from."""
        if self.method != RESIZE:
            return tuple(slice(o.start * f, min(o.stop * f, n))
                         for o, f, n in zip(out, level.factors, above.shape, strict=True))
        source = []
        for o, n, m in zip(out, above.shape, level.shape, strict=True):
            first, second, _, _, radius = _resize_axis(n, m)
            source.append(slice(max(0, int(first[o.start]) - radius),
                                min(n, int(second[o.stop - 1]) + 1 + radius)))
        return tuple(source)

    def steps(self, above: Level, level: Level, region: Region) -> list[Step]:
        """The objects of ``level`` its ``region`` (``below`` a region of ``above``)
        touches: each one's coordinates, the objects of ``above`` its block is made from,
        and its new stored bytes from those (``read``) and its own (None: not stored)."""
        assert self.method is not None
        steps: list[Step] = []
        for coords in level.objects(region):
            inside, within = overlap(region, chunk_region(coords, level.encoder.chunk_shape,
                                                          level.shape))
            out = tuple(slice(r.start + i.start, r.start + i.stop)
                        for r, i in zip(region, inside, strict=True))
            source = self._source(above, level, out)

            def made(read: Reader, current: bytes | None, within: Region = within,
                     source: Region = source, out: Region = out) -> bytes:
                values = above.values(source, read)
                block = (_resized(values, source, out, above.shape, level.shape)
                         if self.method == RESIZE else
                         downsample(values, level.factors, str(self.method),
                                    [w.stop - w.start for w in within]))
                return level.encoder.encode_over(current, within, block)

            steps.append((coords, above.objects(source), made))
        return steps
