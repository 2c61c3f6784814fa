"""The tile compressions of a dual-access array (docs/dual-access.md): each a Zarr codec
whose output is, byte for byte, a tile as TIFF stores it under one Compression value; the
one table mapping names, ``zarr.json`` codecs and TIFF values. ``deflate`` is
``numcodecs.zlib``, not zarr's ``gzip``: TIFF's Compression 8 is a zlib stream.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal, get_args

from numcodecs import Zlib, Zstd
from zarr.codecs import ZstdCodec
from zarr.codecs.numcodecs import Zlib as ZlibCodec
from zarr.errors import ZarrUserWarning

__all__ = [
    "CODEC_NAMES",
    "COMPRESSIONS",
    "DEFAULT_COMPRESSION",
    "TIFF_COMPRESSION",
    "Compression",
    "compressors",
    "encode_tile",
]

Compression = Literal["deflate", "zstd", "none"]
COMPRESSIONS: tuple[Compression, ...] = get_args(Compression)
DEFAULT_COMPRESSION: Compression = "deflate"

DEFLATE_LEVEL = 6  # zlib's and GDAL's default: a fair trade of speed for size
TIFF_COMPRESSION: dict[Compression, int] = {"none": 1, "deflate": 8, "zstd": 50000}
"""TIFF Compression tag values (8 is Adobe Deflate; 50000 is Zstandard as libtiff, tifffile
and GDAL number it)."""
CODEC_NAMES: dict[str, Compression] = {"numcodecs.zlib": "deflate", "zstd": "zstd"}
"""Inner codec names after ``bytes`` in ``zarr.json``, and the compression each means."""


def compressors(compression: Compression) -> list[Any] | None:
    """The ``compressors`` argument of ``zarr.create_array`` for ``compression``."""
    if compression == "none":
        return None
    if compression == "zstd":
        return [ZstdCodec()]
    with warnings.catch_warnings():  # "numcodecs codecs are not in the v3 specification"
        warnings.simplefilter("ignore", ZarrUserWarning)
        return [ZlibCodec(level=DEFLATE_LEVEL)]


def encode_tile(compression: Compression, raw: bytes) -> bytes:
    """``raw`` tile bytes as the array's codec stores them (any level decodes the same)."""
    if compression == "none":
        return raw
    codec = Zstd() if compression == "zstd" else Zlib(DEFLATE_LEVEL)
    return bytes(codec.encode(raw))
