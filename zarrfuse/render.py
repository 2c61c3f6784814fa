"""Decoded chunks as image files, and back: TIFF (tifffile), NPY (numpy), PNG (Pillow).

Pure functions, no I/O. Every format is written uncompressed, so a file's size depends only on
the chunk's shape and data type: ``stat`` and ``ls -l`` know it without decoding the chunk.
"""

from __future__ import annotations

import functools
import io

import numpy as np
import tifffile
from PIL import Image

from zarrfuse.config import FORMATS
from zarrfuse.errors import ConfigurationError, InvalidArgument

__all__ = ["FORMATS", "check_renderable", "decode", "encode", "encoded_size"]



def _png_mode(dtype: np.dtype, shape: tuple[int, ...]) -> bool:
    if len(shape) == 2:
        return dtype in (np.dtype("uint8"), np.dtype("uint16"))
    return len(shape) == 3 and dtype == np.dtype("uint8") and shape[-1] in (3, 4)


def check_renderable(fmt: str, dtype: np.dtype, chunk_shape: tuple[int, ...]) -> None:
    """Refuse arrays a format cannot show (PNG: 2-D uint8/uint16, 8-bit RGB/RGBA)."""
    if fmt not in FORMATS:
        raise ConfigurationError(f"unknown format {fmt!r}; choose one of {sorted(FORMATS)}")
    if dtype.hasobject:
        raise ConfigurationError(f"{fmt}: variable-size data type {dtype} cannot be rendered")
    if fmt == "png" and not _png_mode(dtype, chunk_shape):
        raise ConfigurationError(
            f"png shows 2-D uint8/uint16 chunks and 8-bit RGB/RGBA chunks (last dimension 3 or "
            f"4, whole in each chunk); this array has {dtype} chunks of shape {chunk_shape}: "
            "use --format tiff or npy"
        )


def encode(fmt: str, data: np.ndarray) -> bytes:
    """The file showing ``data`` (one chunk, already cropped to the array bounds)."""
    out = io.BytesIO()
    if fmt == "tiff":
        # minisblack keeps a trailing 3 or 4 from being read as RGB; leading dimensions
        # become pages, and tifffile's shape description restores the exact shape.
        options = {"photometric": "minisblack"} if data.ndim >= 2 else {}
        tifffile.imwrite(out, data, **options)
    elif fmt == "npy":
        np.save(out, data, allow_pickle=False)
    elif fmt == "png":
        Image.fromarray(data).save(out, format="PNG", compress_level=0)
    else:
        raise ConfigurationError(f"unknown format {fmt!r}")
    return out.getvalue()


def decode(fmt: str, data: bytes, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """The chunk a written file holds; InvalidArgument (EINVAL) unless it has exactly
    ``shape`` and ``dtype``."""
    try:
        if fmt == "tiff":
            value = tifffile.imread(io.BytesIO(data))
        elif fmt == "npy":
            value = np.load(io.BytesIO(data), allow_pickle=False)
        else:
            with Image.open(io.BytesIO(data)) as image:
                value = np.asarray(image)
    except Exception as e:  # every decoder has its own error types
        raise InvalidArgument(f"not a readable {fmt} file: {type(e).__name__}: {e}") from e
    if value.shape != shape or value.dtype != dtype:
        raise InvalidArgument(
            f"the {fmt} file holds {value.dtype} of shape {value.shape}; this chunk is {dtype} "
            f"of shape {shape}"
        )
    return value


@functools.lru_cache(maxsize=4096)
def encoded_size(fmt: str, shape: tuple[int, ...], dtype: str) -> int:
    """Size of the file for any chunk of ``shape`` and ``dtype``: the same for every value."""
    return len(encode(fmt, np.zeros(shape, dtype=np.dtype(dtype))))
