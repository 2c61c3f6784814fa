"""Decompression bombs inside shards, refused before their codec allocates them.

A sharded array's stored object holds many inner chunks, each compressed on its own, and
zarr-python's sharding codec decodes them itself: the bound that :mod:`chunk_decoding`
puts before a plain array's codecs never sees them. So the sharding codec of an array
that a mount reads through zarr gets one more step in its inner chain, just before each
compressor in decode order: :class:`InnerChunkBound`, which measures the compressed inner
chunk against the inner chunk's size (:func:`decode_bounds.check_decoded_size`) and passes
the bytes on unchanged. It encodes nothing (bytes pass through), so writes store exactly
what zarr would.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from zarr.abc.codec import BytesBytesCodec
from zarr.codecs import ShardingCodec

from zarrfuse.api.decode_bounds import check_decoded_size, decoded_bound
from zarrfuse.zarr_compat import ArrayV3Metadata, Buffer, stored_chunk_shape

__all__ = ["InnerChunkBound", "bound_all_chunks", "bound_inner_chunks"]


@dataclasses.dataclass(frozen=True)
class InnerChunkBound(BytesBytesCodec):
    """Refuses (ValueError) an inner chunk the next codec would decode past ``limit``."""

    codec_name: str
    limit: int
    is_fixed_size = True

    def _check(self, chunk_bytes: Buffer) -> Buffer:
        check_decoded_size(chunk_bytes.to_bytes(), self.codec_name, self.limit)
        return chunk_bytes

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: Any) -> Buffer:
        return self._check(chunk_bytes)

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: Any) -> Buffer:
        return self._check(chunk_bytes)

    def _encode_sync(self, chunk_bytes: Buffer, chunk_spec: Any) -> Buffer:
        return chunk_bytes

    async def _encode_single(self, chunk_bytes: Buffer, chunk_spec: Any) -> Buffer:
        return chunk_bytes

    def compute_encoded_size(self, input_byte_length: int, _chunk_spec: Any) -> int:
        return input_byte_length

    def to_dict(self) -> dict[str, Any]:  # never written: the array's document is the store's
        return {"name": "zarrfuse.inner_chunk_bound"}


def _bounded_chain(codecs: Any, chunk_shape: tuple[int, ...], dtype: Any) -> tuple[Any, ...]:
    """``codecs`` (of chunks of ``chunk_shape``) with a bound before each compressor in
    decode order, and inside each sharding codec. After a sharding codec (rare) nothing is
    bounded: a shard's bytes also hold its index."""
    limit = decoded_bound(chunk_shape, dtype)
    assert limit is not None  # bound_all_chunks passes items of a fixed size only
    out: list[Any] = []
    sharded = False
    for codec in codecs:
        if isinstance(codec, ShardingCodec):  # nested shards: their own inner chunks
            inner = _bounded_chain(codec.codecs, tuple(codec.chunk_shape), dtype)
            out.append(dataclasses.replace(codec, codecs=inner))
            sharded = True
            continue
        out.append(codec)
        if isinstance(codec, BytesBytesCodec) and not isinstance(codec, InnerChunkBound) and (
            not sharded
        ):  # decoded after the step that follows it
            out.append(InnerChunkBound(str(codec.to_dict().get("name", "")), limit))
    return tuple(out)


def bound_all_chunks(metadata: ArrayV3Metadata) -> ArrayV3Metadata:
    """``metadata`` with its chunks and every shard's inner chunks bounded, for readers
    that decode everything through zarr (``zarrfuse verify``); unchanged when its items
    have no fixed size."""
    dtype = metadata.data_type.to_native_dtype()
    if decoded_bound((), dtype) is None:
        return metadata
    codecs = _bounded_chain(metadata.codecs, stored_chunk_shape(metadata), dtype)
    return dataclasses.replace(metadata, codecs=codecs)


def bound_inner_chunks(metadata: ArrayV3Metadata) -> ArrayV3Metadata:
    """``metadata`` with every sharding codec's inner chunks bounded; unchanged when the
    array is not sharded (the mount decodes plain chunks itself, bounded by
    ``chunk_decoding``)."""
    if not any(isinstance(c, ShardingCodec) for c in metadata.codecs):
        return metadata
    return bound_all_chunks(metadata)  # sharded, the two agree: only inner chunks bounded
