"""Regular chunk grid arithmetic: how many chunks, and which array region one covers.

Pure functions on a ``zarr.json`` document or shapes; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from zarrfuse.errors import ConfigurationError

__all__ = ["chunk_grid_shape", "chunk_region", "overlap"]


def chunk_region(
    coords: Sequence[int], chunk_shape: Sequence[int], shape: Sequence[int]
) -> tuple[slice, ...]:
    """The part of an array of ``shape`` that chunk ``coords`` covers, clipped at its edge."""
    return tuple(
        slice(c * n, min((c + 1) * n, size))
        for c, n, size in zip(coords, chunk_shape, shape, strict=True)
    )


def overlap(region: Sequence[slice], at: Sequence[slice]
            ) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
    """Where two regions of one array overlap: the slices within ``region``, and within
    ``at`` (a chunk's, say)."""
    lo = [max(r.start, a.start) for r, a in zip(region, at, strict=True)]
    hi = [min(r.stop, a.stop) for r, a in zip(region, at, strict=True)]
    return (tuple(slice(a - r.start, b - r.start) for a, b, r in zip(lo, hi, region, strict=True)),
            tuple(slice(a - o.start, b - o.start) for a, b, o in zip(lo, hi, at, strict=True)))


def chunk_grid_shape(metadata: dict[str, Any]) -> tuple[int, ...]:
    """Number of stored objects along each dimension (shards, for sharded arrays)."""
    grid = metadata.get("chunk_grid", {})
    if not isinstance(grid, dict) or grid.get("name") != "regular":
        raise ConfigurationError(f"only regular chunk grids are supported, got {grid!r}")
    chunk_shape = tuple(grid.get("configuration", {}).get("chunk_shape", ()))
    shape = tuple(metadata.get("shape", ()))
    if len(chunk_shape) != len(shape) or any(c <= 0 for c in chunk_shape):
        raise ConfigurationError(f"chunk shape {chunk_shape} does not fit array shape {shape}")
    return tuple(math.ceil(s / c) for s, c in zip(shape, chunk_shape, strict=True))
