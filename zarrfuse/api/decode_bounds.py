"""Whether a compressed chunk decodes to more than its array's chunk can hold, known before
the codec allocates anything.

A decompression bomb is a small stored chunk that inflates far past what its array's chunk
can hold (32 KiB to 1 GiB). Codecs allocate what a header declares, or grow their output as
long as a stream goes on, so the stored bytes are measured first, and refused if they would
decode to more.

- Zstandard: one frame that declares its content size (what zarr-python, numcodecs,
  tensorstore and zarrs write) is checked from its header, and the codec itself refuses a
  frame that decodes to more than it declared. Anything else (no size declared, several or
  skippable frames) is decoded once into a buffer of the bound, which fails if it is short.
- Blosc and LZ4 (numcodecs) declare the decoded size in their header.
- gzip, zlib, bz2 and LZMA declare nothing to trust (gzip's ISIZE is modulo 4 GiB): the
  stream is decoded once in windows of 1 MiB and counted. That is one more decode of such
  chunks; memory stays at one window.
"""

from __future__ import annotations

import bz2
import functools
import lzma
import struct
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import imagecodecs
import numpy as np

__all__ = [
    "SLACK", "blosc_declared_size", "check_decoded_size", "decoded_bound", "zstd_declared_size",
    "zstd_single_frame_end"
]

SLACK = 4096
"""Bytes a decoded size may exceed the chunk's decoded size by (a checksum inside)."""


def decoded_bound(shape: Sequence[int], dtype: np.dtype[Any]) -> int | None:
    """The most bytes a chunk of ``shape`` and ``dtype`` may decode to; None for items of no
    fixed size (variable-length strings), which no bound fits."""
    if dtype.hasobject or dtype.itemsize == 0:
        return None
    return int(np.prod(shape, dtype=np.int64)) * dtype.itemsize + SLACK

_WINDOW = 1 << 20
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_DICT_ID_BYTES = (0, 1, 2, 4)
_FCS_BYTES = (0, 2, 4, 8)


def _zstd_header(view: memoryview) -> tuple[int, int | None] | None:
    """(where the first block starts, the declared content size or None); None if the
    bytes do not start with a Zstandard frame header."""
    if len(view) < 5 or bytes(view[:4]) != _ZSTD_MAGIC:
        return None
    descriptor = view[4]
    fcs_flag, single_segment, dict_flag = descriptor >> 6, (descriptor >> 5) & 1, descriptor & 3
    at = 5 + (0 if single_segment else 1) + _DICT_ID_BYTES[dict_flag]
    size_bytes = _FCS_BYTES[fcs_flag] or (1 if single_segment else 0)
    if len(view) < at + size_bytes:
        return None
    if size_bytes == 0:
        return at, None
    value = int.from_bytes(view[at : at + size_bytes], "little")
    return at + size_bytes, value + 256 if size_bytes == 2 else value


def zstd_declared_size(data: bytes | memoryview) -> int | None:
    """The content size the first Zstandard frame declares; None if it declares none (or the
    bytes are no Zstandard frame: the decoder then says why)."""
    header = _zstd_header(memoryview(data))
    return None if header is None else header[1]


def zstd_single_frame_end(data: bytes | memoryview) -> int | None:
    """Where the first Zstandard frame ends, walked block header by block header (a frame
    of 4 MiB has about 32); None if the bytes are no well-formed frame."""
    view = memoryview(data)
    header = _zstd_header(view)
    if header is None:
        return None
    at = header[0]
    while True:
        if len(view) < at + 3:
            return None
        word = int.from_bytes(view[at : at + 3], "little")
        last, kind, size = word & 1, (word >> 1) & 3, word >> 3
        if kind == 3:  # reserved: no valid frame has it
            return None
        at += 3 + (1 if kind == 1 else size)
        if last:
            break
    return at + (4 if view[4] & 4 else 0)  # the content checksum


def blosc_declared_size(data: bytes | memoryview) -> int | None:
    """The uncompressed size a Blosc header declares (bytes 4-8); None if too short."""
    view = memoryview(data)
    if len(view) < 16:
        return None
    return int(struct.unpack_from("<I", view, 4)[0])


def _lz4_declared_size(data: bytes | memoryview) -> int | None:
    """numcodecs' LZ4 writes the decoded size as 4 little-endian bytes before the block."""
    view = memoryview(data)
    return int(struct.unpack_from("<i", view, 0)[0]) if len(view) >= 4 else None


def _stream_size(data: bytes | memoryview, make: Callable[[], Any], limit: int) -> int | None:
    """The decoded size of every stream in ``data`` one after another (gzip members, zlib,
    bz2 or LZMA streams), counted in windows and given up once past ``limit``; None if the
    bytes do not decode (the codec itself then says why)."""
    total, rest = 0, data
    try:
        while rest:
            stream, pending = make(), rest
            while not stream.eof:
                out = stream.decompress(pending, _WINDOW)
                total += len(out)
                if total > limit:
                    return total
                # zlib hands back the input it has not taken; bz2 and lzma keep it inside
                pending = getattr(stream, "unconsumed_tail", b"")
                if getattr(stream, "needs_input", not out and not pending):
                    return None  # truncated
            rest = stream.unused_data
    except (zlib.error, OSError, EOFError, lzma.LZMAError):
        return None
    return total


def _zstd_size(data: bytes | memoryview, limit: int) -> int | None:
    declared = zstd_declared_size(data)
    if declared is not None and zstd_single_frame_end(data) == len(data):
        return declared
    if _zstd_header(memoryview(data)) is None and not _skippable(data):
        return None  # no frame at all: the codec says why
    try:
        imagecodecs.zstd_decode(data, out=limit)
    except imagecodecs.ZstdError as e:
        return limit + 1 if "too small" in str(e) else None
    return None


def _skippable(data: bytes | memoryview) -> bool:
    return len(data) >= 4 and (int.from_bytes(data[:4], "little") & 0xFFFFFFF0) == 0x184D2A50


_GZIP_OR_ZLIB = functools.partial(zlib.decompressobj, 47)  # wbits 47: either header
_DECLARING = {"zstd", "blosc", "lz4"}
_MEASURES: dict[str, Callable[[bytes | memoryview, int], int | None]] = {
    "zstd": _zstd_size,
    "blosc": lambda data, limit: blosc_declared_size(data),
    "lz4": lambda data, limit: _lz4_declared_size(data),
    "gzip": lambda data, limit: _stream_size(data, _GZIP_OR_ZLIB, limit),
    "zlib": lambda data, limit: _stream_size(data, _GZIP_OR_ZLIB, limit),
    "bz2": lambda data, limit: _stream_size(data, bz2.BZ2Decompressor, limit),
    "lzma": lambda data, limit: _stream_size(data, lzma.LZMADecompressor, limit),
}


def check_decoded_size(data: bytes | memoryview, codec_name: str, limit: int | None) -> None:
    """ValueError if ``data`` (the input of the codec named ``codec_name``, with or without
    the ``numcodecs.`` prefix of v2 codecs in v3 documents) would decode to more than
    ``limit`` bytes (None: no limit, variable-size data types)."""
    name = codec_name.removeprefix("numcodecs.")
    measure = _MEASURES.get(name)
    if measure is None or limit is None:
        return
    raw = data if isinstance(data, bytes) else memoryview(data).cast("B")  # never copied:
    size = measure(raw, limit)  # 128 KiB a chunk copied was 10-20 us of every decode
    if size is None or size <= limit:
        return
    if name in _DECLARING and (name != "zstd" or zstd_declared_size(raw) == size):
        raise ValueError(
            f"it declares {size} decoded bytes, more than the chunk can hold ({limit}): "
            "refused before decoding"
        )
    raise ValueError(f"it decodes to more than the chunk can hold ({limit} bytes): refused before "
                     "the codec allocated it")
