"""One stored chunk's bytes to its values, through the array's own zarr codecs, synchronously.

zarr-python's asyncio pipeline costs about 0.7 ms per call on top of the codec (a 256 x 256
uint16 zstd chunk: 100-125 MB/s through ``Array.__getitem__``, 470 MB/s with numcodecs
alone). Calling its codecs' own synchronous decoders (``_decode_sync``, ``zarr_compat``) in
reverse order, with the specs zarr resolves, gives the same values at the codec's pace
(600 MB/s in one thread, measured), on any worker thread. Chains with a codec without one
(zarr 3.1's numcodecs wrappers, which v2 arrays read through) decode batches through zarr's
pipeline instead. ``for_stored_objects`` is the one answer to "does this stored value
decode?" (the write check, ``zarrfuse verify``, a rendered write's read of its chunk). The
tests compare every result with zarr's own reading, so a zarr release that changes either
fails them. Every stored chunk is measured before a codec sees it (``decode_bounds``): a
decompression bomb is refused, never allocated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import zarr

from zarrfuse.api.decode_bounds import check_decoded_size, decoded_bound
from zarrfuse.api.shard_bounds import bound_all_chunks
from zarrfuse.zarr_compat import (
    ArrayConfig,
    ArraySpec,
    ArrayV2Metadata,
    ArrayV3Metadata,
    Buffer,
    BufferPrototype,
    array_config,
    chunk_spec,
    create_codec_pipeline,
    decode_sync,
    default_buffer_prototype,
    sync,
    sync_decodable,
)

__all__ = ["SyncChunkDecoder"]


class SyncChunkDecoder:
    """Decodes the stored bytes of any chunk of one (unsharded, v3-described) array."""

    def __init__(
        self, codecs: Sequence[Any], spec: ArraySpec, prototype: BufferPrototype,
        pipeline: Any = None, outer: str = "",
    ) -> None:
        """``codecs`` in encode order, ``spec`` the spec of what the first one encodes;
        ``pipeline``: zarr's, for chains with a codec that has no synchronous decoder
        (``codecs`` may then be empty: ``outer`` names the codec that decodes the stored
        bytes first, whose declared size is checked)."""
        self._spec = spec
        self._steps: list[tuple[Any, ArraySpec]] = []  # in decode order
        for codec in codecs:  # each codec decodes with the spec of what it encoded
            self._steps.insert(0, (codec, spec))
            spec = codec.resolve_metadata(spec)
        self._names = [str(codec.to_dict().get("name", "")) for codec, _ in self._steps] or [
            outer]
        self._pipeline = pipeline
        self._prototype = prototype
        self.chunk_shape = tuple(self._spec.shape)
        self._limit = decoded_bound(self.chunk_shape, self._spec.dtype.to_native_dtype())
        """The most bytes any step may decode to (a bomb would make more: refused first)."""

    @classmethod
    def for_array(cls, array: zarr.Array) -> SyncChunkDecoder | None:
        """The decoder of ``array``'s chunks; None for sharded (or v2-described) arrays."""
        metadata = array.metadata
        if not isinstance(metadata, ArrayV3Metadata) or array.shards is not None:
            return None
        prototype = default_buffer_prototype()
        codecs = list(metadata.codecs)
        synchronous = all(sync_decodable(c) for c in codecs)
        pipeline = None if synchronous else create_codec_pipeline(metadata)
        return cls(codecs, chunk_spec(metadata, array_config(array), prototype), prototype,
                   pipeline)

    @classmethod
    def for_stored_objects(
        cls, metadata: ArrayV2Metadata | ArrayV3Metadata
    ) -> SyncChunkDecoder:
        """The decoder of any array's whole stored objects (a chunk, or a whole shard): what
        a stored value must pass to count as decodable. Chains zarr must run (sharding, v2
        filters and compressors) go through its pipeline, every inner chunk of a shard
        measured first (``shard_bounds``)."""
        prototype = default_buffer_prototype()
        order = metadata.order if isinstance(metadata, ArrayV2Metadata) else "C"
        spec = chunk_spec(metadata, ArrayConfig(order, True), prototype)
        if isinstance(metadata, ArrayV2Metadata):
            outer = "" if metadata.compressor is None else str(metadata.compressor.codec_id)
            return cls([], spec, prototype, create_codec_pipeline(metadata), outer)
        codecs = list(metadata.codecs)
        if all(sync_decodable(c) for c in codecs):
            return cls(codecs, spec, prototype)
        outer = str(codecs[-1].to_dict().get("name", ""))
        return cls([], spec, prototype, create_codec_pipeline(bound_all_chunks(metadata)),
                   outer)

    @classmethod
    def for_codecs(
        cls, codecs: Sequence[Any], spec: ArraySpec, prototype: BufferPrototype
    ) -> SyncChunkDecoder | None:
        """The decoder of chunks ``codecs`` encode (a shard's inner chunks, its index); None
        if one of them has no synchronous decoder."""
        if not all(sync_decodable(c) for c in codecs):
            return None
        return cls(codecs, spec, prototype)

    def decode(self, data: bytes | memoryview) -> np.ndarray:
        """The chunk's values, full chunk shape (regular grids store edge chunks whole)."""
        if self._pipeline is not None:
            return self.decode_batch([data])[0]
        value: Any = self._prototype.buffer.from_bytes(data)
        for (codec, spec), name in zip(self._steps, self._names, strict=True):
            if isinstance(value, Buffer):  # a view: only a codec that is measured copies it
                check_decoded_size(memoryview(value.as_numpy_array()), name, self._limit)
            value = decode_sync(codec, value, spec)
        return value.as_numpy_array().reshape(self.chunk_shape)

    def decode_batch(self, stored: Sequence[bytes | memoryview]) -> list[np.ndarray]:
        """Many chunks' values: one call of zarr's pipeline where a codec has no synchronous
        decoder (each call costs about 0.7 ms on top of the codecs)."""
        if self._pipeline is None:
            return [self.decode(data) for data in stored]
        for data in stored:  # the outer codec's input: the stored bytes
            check_decoded_size(data, self._names[0], self._limit)
        buffers = [self._prototype.buffer.from_bytes(data) for data in stored]
        decoded = sync(self._pipeline.decode([(b, self._spec) for b in buffers]))
        out = []
        for value in decoded:
            if value is None:  # zarr's "missing chunk": never for bytes given to it
                raise ValueError("zarr's codec pipeline decoded no value")
            out.append(value.as_numpy_array().reshape(self.chunk_shape))
        return out
