"""How many bytes a compressed chunk says it decodes to, read from its header alone.

A decompression bomb is a small stored chunk that inflates far past what its array's chunk
can hold (32 KiB to 1 GiB). The codecs allocate what the header declares before they decode,
so the declared size is checked against the chunk's decoded size first, and a chunk that
declares more is refused without allocating anything. Zstandard frames (zarr-python,
numcodecs, tensorstore and zarrs write the content size) and Blosc headers declare it; a
frame that does not is decoded as before.
"""

from __future__ import annotations

import struct

__all__ = ["SLACK", "blosc_declared_size", "check_declared_size", "zstd_declared_size"]

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_DICT_ID_BYTES = (0, 1, 2, 4)
_FCS_BYTES = (0, 2, 4, 8)


def zstd_declared_size(data: bytes | memoryview) -> int | None:
    """The content size the first Zstandard frame declares; None if it declares none (or the
    bytes are no Zstandard frame: the decoder then says why)."""
    view = memoryview(data)
    if len(view) < 5 or bytes(view[:4]) != _ZSTD_MAGIC:
        return None
    descriptor = view[4]
    fcs_flag, single_segment, dict_flag = descriptor >> 6, (descriptor >> 5) & 1, descriptor & 3
    at = 5 + (0 if single_segment else 1) + _DICT_ID_BYTES[dict_flag]
    size_bytes = _FCS_BYTES[fcs_flag] or (1 if single_segment else 0)
    if size_bytes == 0 or len(view) < at + size_bytes:
        return None
    value = int.from_bytes(view[at : at + size_bytes], "little")
    return value + 256 if size_bytes == 2 else value


def blosc_declared_size(data: bytes | memoryview) -> int | None:
    """The uncompressed size a Blosc header declares (bytes 4-8); None if too short."""
    view = memoryview(data)
    if len(view) < 16:
        return None
    return int(struct.unpack_from("<I", view, 4)[0])


SLACK = 4096
"""Bytes a declared size may exceed the chunk's decoded size by (a checksum inside)."""

_READERS = {
    "zstd": zstd_declared_size, "numcodecs.zstd": zstd_declared_size,
    "blosc": blosc_declared_size, "numcodecs.blosc": blosc_declared_size,
}


def check_declared_size(data: bytes | memoryview, codec_name: str, limit: int | None) -> None:
    """ValueError if ``data`` (the input of the codec named ``codec_name``) declares more
    than ``limit`` decoded bytes (None: no limit, variable-size data types)."""
    read = _READERS.get(codec_name)
    if read is None or limit is None:
        return
    declared = read(data)
    if declared is not None and declared > limit:
        raise ValueError(
            f"it declares {declared} decoded bytes, more than the chunk can hold ({limit}): "
            "refused before decoding"
        )
