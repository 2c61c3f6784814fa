"""Which tiles and sample types a whole-image TIFF can have: tile sides from chunk lengths
(TIFF's multiple-of-16 rule, OpenSlide's 1024-byte tiles) and the dtypes TIFF can carry."""

from __future__ import annotations

from typing import Any

import numpy as np

from zarrfuse.errors import ConfigurationError

__all__ = ["MAX_TILE_SIDE", "TILE_MULTIPLE", "image_dtype_check", "tile_size_for"]

TILE_MULTIPLE = 16  # the TIFF spec: tile width and length are multiples of 16
CHOSEN_MULTIPLE = 32  # tile sides zarrfuse chooses: tiles of a multiple of 1024 bytes
MAX_TILE_SIDE = 4096
"""Cap of :func:`tile_size_for`: a tile is what every reader buffers whole (and an
unchunked 100k x 100k array would otherwise be one 20 GB tile, over TIFF's 32-bit byte
counts); 4096 keeps a tile at most 4096**2 pixels (32 MiB of uint16, 512 MiB of RGBA
float64)."""
_ITEMSIZES = {"u": (1, 2, 4, 8), "i": (1, 2, 4, 8), "f": (2, 4, 8)}


def tile_size_for(chunk_len: int) -> int:
    """The TIFF tile side for chunks ``chunk_len`` long: the chunk's own length when it is a
    multiple of 16 (TIFF's rule), else rounded up to a multiple of 32; at most
    :data:`MAX_TILE_SIDE`.

    A tile then need not match a chunk: whoever renders it assembles it from every chunk it
    overlaps (the tile's :meth:`WholeImagePlan.tile_region`). Chunks longer than the image
    give tiles longer than the image; pass ``min(chunk_len, image_len)`` to avoid that.

    Why 32 and not 16 for chunks off TIFF's grid: OpenSlide (libtiff read without mmap)
    refuses uncompressed tiles whose byte size is not a multiple of 1024 ("Invalid tile byte
    count"). Sides that are multiples of 32 always give such tiles, so a tile size zarrfuse
    chooses never shuts OpenSlide out; a chunk already on the 16 grid keeps its size (one
    chunk per tile), even where that size is not a multiple of 32.
    """
    if chunk_len < 1:
        raise ConfigurationError(f"chunk length {chunk_len}: must be at least 1")
    if chunk_len % TILE_MULTIPLE == 0:
        return min(chunk_len, MAX_TILE_SIDE)
    return min(-(-chunk_len // CHOSEN_MULTIPLE) * CHOSEN_MULTIPLE, MAX_TILE_SIDE)


def image_dtype_check(dtype: Any) -> None:
    """ConfigurationError unless a whole-image TIFF can store ``dtype``: unsigned and
    signed integers of 8 to 64 bits, floats of 16, 32 and 64 bits."""
    dt = np.dtype(dtype)
    if dt.fields is not None or dt.kind not in _ITEMSIZES or dt.itemsize not in _ITEMSIZES[
        dt.kind
    ]:
        raise ConfigurationError(
            f"data type {dt} cannot be shown as TIFF: only uint8/16/32/64, int8/16/32/64 and "
            "float16/32/64 have a TIFF sample format (bool, complex, strings and structured "
            "types do not)"
        )
