"""A whole chunk's values to the bytes zarr stores for them, synchronously.

Rendered views decode a written picture to values; encoding those with the array's own
codecs here, rather than assigning them through ``zarr.Array``, lets the mount store the
bytes the way it stores any chunk file (parts, journal, chunk lock, caches), and nothing
else. zarr's codec pipeline does the encoding, so the bytes are zarr's. Sharded arrays are
declined (:meth:`ChunkEncoder.for_array` returns None): a shard's inner chunk is written by
zarr's read-modify-write of the shard.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import zarr

from zarrfuse.zarr_compat import (
    ArrayV3Metadata,
    array_config,
    chunk_spec,
    create_codec_pipeline,
    default_buffer_prototype,
    sync,
)

__all__ = ["ChunkEncoder"]


class ChunkEncoder:
    """Encodes whole chunks of one (unsharded, v3-described) array."""

    def __init__(self, metadata: ArrayV3Metadata, config: Any) -> None:
        self._prototype = default_buffer_prototype()
        self._spec = chunk_spec(metadata, config, self._prototype)
        self._pipeline = create_codec_pipeline(metadata)
        self.chunk_shape = tuple(self._spec.shape)

    @classmethod
    def for_array(cls, array: zarr.Array) -> ChunkEncoder | None:
        """The encoder of ``array``'s chunks; None for sharded (or v2-described) arrays."""
        metadata = array.metadata
        if not isinstance(metadata, ArrayV3Metadata) or array.shards is not None:
            return None
        return cls(metadata, array_config(array))

    def encode(self, values: np.ndarray) -> bytes:
        """The stored bytes of a chunk holding ``values`` (its full chunk shape)."""
        if values.shape != self.chunk_shape:
            raise ValueError(f"a chunk is {self.chunk_shape}, not {values.shape}")
        buffer = self._prototype.nd_buffer.from_numpy_array(np.ascontiguousarray(values))
        (encoded,) = sync(self._pipeline.encode([(buffer, self._spec)]))
        if encoded is None:
            raise ValueError("zarr's codec pipeline encoded nothing")
        return bytes(encoded.to_bytes())
