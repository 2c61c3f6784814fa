"""A whole chunk's values to the bytes zarr stores for them, synchronously.

Rendered views decode a written picture to values; encoding those with the array's own
codecs here, rather than assigning them through ``zarr.Array``, lets the mount store the
bytes the way it stores any chunk file (parts, journal, chunk lock, caches), and nothing
else. zarr's codec pipeline does the encoding, so the bytes are zarr's. The unit is the
stored object: a chunk, or a whole shard of a sharded array (zarr's sharding codec encodes
every inner chunk and the index). A write of part of one (a plane, one tile of a shard)
decodes what is stored (``api.chunk_decoding``), puts the values in and encodes the whole;
the caller holds the object's lock from the read to the write.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import zarr

from zarrfuse.api.chunk_decoding import SyncChunkDecoder
from zarrfuse.errors import WriteRefusedError
from zarrfuse.limits import MAX_VERIFIED_DECODE
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
    """Encodes whole stored objects (chunks, or shards) of one v3-described array."""

    def __init__(self, metadata: ArrayV3Metadata, config: Any) -> None:
        self._prototype = default_buffer_prototype()
        self._spec = chunk_spec(metadata, config, self._prototype)
        self._pipeline = create_codec_pipeline(metadata)
        self._decoder = SyncChunkDecoder.for_stored_objects(metadata)
        self.chunk_shape = tuple(self._spec.shape)
        """The shape of a stored object: a chunk, or a shard."""
        self.dtype = self._spec.dtype.to_native_dtype()
        self._decoded_bytes = int(np.prod(self.chunk_shape, dtype=np.int64)) * self.dtype.itemsize

    @classmethod
    def for_array(cls, array: zarr.Array) -> ChunkEncoder | None:
        """The encoder of ``array``'s stored objects; None for v2-described arrays (the
        mount reads v2 arrays as their v3 equivalent, so it never asks for those)."""
        metadata = array.metadata
        if not isinstance(metadata, ArrayV3Metadata):
            return None
        return cls(metadata, array_config(array))

    def encode_over(
        self, current: bytes | None, within: tuple[slice, ...], values: np.ndarray
    ) -> bytes:
        """The stored bytes of an object holding ``values`` at ``within`` and, elsewhere,
        what ``current`` (the object as stored; None: not stored, the fill value) holds.
        Refused (WriteRefusedError) where the whole object would not fit the bound of what
        a write decodes."""
        if self._decoded_bytes > MAX_VERIFIED_DECODE:
            raise WriteRefusedError(
                f"a stored object of this array decodes to {self._decoded_bytes} bytes, more "
                f"than a write of part of one decodes ({MAX_VERIFIED_DECODE}); nothing was "
                "written")
        if current is None:
            whole = np.full(self.chunk_shape, self._spec.fill_value, dtype=self.dtype)
        else:
            whole = np.array(self._decoder.decode(current), dtype=self.dtype, copy=True)
        whole[within] = values
        return self.encode(whole)

    def encode(self, values: np.ndarray) -> bytes:
        """The stored bytes of a chunk holding ``values`` (its full chunk shape)."""
        if values.shape != self.chunk_shape:
            raise ValueError(f"a chunk is {self.chunk_shape}, not {values.shape}")
        buffer = self._prototype.nd_buffer.from_numpy_array(np.ascontiguousarray(values))
        (encoded,) = sync(self._pipeline.encode([(buffer, self._spec)]))
        if encoded is None:
            raise ValueError("zarr's codec pipeline encoded nothing")
        return bytes(encoded.to_bytes())
