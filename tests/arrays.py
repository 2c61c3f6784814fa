"""Arrays the write tests share, in process and on a real mount, and the snapshot that tells
whether a store was touched."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import zarr
from zarr.codecs import BytesCodec, Crc32cCodec

import zarrfuse

__all__ = ["CRC_PARTS", "HEADER_PARTS", "HEAD_PARTS", "encoded_chunk", "make_crc_array",
           "make_plain_array", "make_rows_array", "snapshot"]

CRC_PARTS = [{"name": "concat-parts", "configuration": {"parts": [
    {"key_suffix": ""}, {"key_suffix": ".crc32c", "size": 4}]}}]
"""A suffix part: the data, then its 4-byte checksum under ``KEY.crc32c``."""
HEADER_PARTS = [{"name": "concat-parts", "configuration": {"parts": [
    {"key_suffix": ".header", "size": 8}, {"key_suffix": ""}]}}]
"""A prefix part: the first 8 bytes under ``KEY.header``, the rest under ``KEY``."""
HEAD_PARTS = [{"name": "concat-parts", "configuration": {"parts": [
    {"key_suffix": ".head", "size": 2}, {"key_suffix": ""}]}}]
"""A 2-byte prefix part, for arrays of 4-byte chunks (the times tests)."""


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes: equal before and after means untouched."""
    return {str(p.relative_to(root)): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def encoded_chunk(value: np.ndarray) -> bytes:
    """The stored bytes of a chunk of the raw uint8 + crc32c array: data then checksum."""
    store = zarr.storage.MemoryStore()
    a = zarr.create_array(store, shape=value.shape, chunks=value.shape, dtype=value.dtype,
                          serializer=BytesCodec(), compressors=[Crc32cCodec()])
    a[...] = value
    return zarr.core.sync.sync(store.get("c/" + "/".join("0" * value.ndim),
                                         zarr.core.buffer.default_buffer_prototype())).to_bytes()


def make_crc_array(path: Path) -> Path:
    """8x8 uint8 in 4x4 chunks, stored as data + 4-byte crc32c parts; chunk (1, 1) unwritten."""
    a = zarrfuse.create_array(path, shape=(8, 8), chunks=(4, 4), dtype="u1", fill_value=0,
                              serializer=BytesCodec(), compressors=[Crc32cCodec()],
                              storage_transformers=CRC_PARTS)
    data = np.arange(64, dtype="u1").reshape(8, 8)
    data[4:, 4:] = 0
    a[:] = data
    return path


def make_plain_array(path: Path) -> Path:
    """1x128 uint8, uncompressed, two chunks of 64 bytes: the length check."""
    zarr.create_array(path, shape=(1, 128), chunks=(1, 64), dtype="u1", compressors=None,
                      fill_value=0)[:] = np.arange(128, dtype="u1").reshape(1, 128)
    return path


def make_rows_array(path: Path) -> Path:
    """4x16 uint8 in 1x16 chunks, uncompressed; rows 0-1 stored, rows 2-3 not."""
    a = zarr.create_array(path, shape=(4, 16), chunks=(1, 16), dtype="u1", compressors=None,
                          fill_value=0)
    a[:2] = np.arange(32, dtype="u1").reshape(2, 16)
    return path
