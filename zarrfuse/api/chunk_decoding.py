"""One stored chunk's bytes to its values, through the array's own zarr codecs, synchronously.

zarr-python decodes through an asyncio pipeline that costs about 0.7 ms per call on top of
the codec (measured: a 256 x 256 uint16 zstd chunk decodes at 100-125 MB/s per-chunk through
``Array.__getitem__``, 470 MB/s with numcodecs alone). Its codec objects also decode
synchronously (``_decode_sync``, what the pipeline runs in its threads); calling them in
reverse order with the chunk specs zarr itself resolves decodes the same bytes to the same
values at the codec's pace (600 MB/s in one thread, measured), on any worker thread.

``_decode_sync`` is zarr's, not a public API (``zarr_compat``): :meth:`SyncChunkDecoder.for_array`
returns None (callers then read through zarr) for any codec without it (sharding, numcodecs
wrappers such as LZ4), and the tests compare every result with zarr's own reading, so a zarr
release that changes it fails them rather than reading wrong values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import zarr

from zarrfuse.api.declared_sizes import SLACK, check_declared_size
from zarrfuse.zarr_compat import (
    ArraySpec,
    ArrayV3Metadata,
    Buffer,
    BufferPrototype,
    array_config,
    chunk_spec,
    decode_sync,
    default_buffer_prototype,
    sync_decodable,
)

__all__ = ["SyncChunkDecoder"]


class SyncChunkDecoder:
    """Decodes the stored bytes of any chunk of one (unsharded, v3-described) array."""

    def __init__(
        self, codecs: Sequence[Any], specs: Sequence[ArraySpec], prototype: BufferPrototype
    ) -> None:
        self._steps = list(reversed(list(zip(codecs, specs, strict=True))))
        self._names = [str(codec.to_dict().get("name", "")) for codec, _ in self._steps]
        self._prototype = prototype
        self.chunk_shape = tuple(specs[0].shape)
        native = specs[0].dtype.to_native_dtype()
        self._limit = (
            None if native.hasobject or native.itemsize == 0
            else int(np.prod(self.chunk_shape, dtype=np.int64)) * native.itemsize + SLACK
        )
        """The most bytes any step may decode to (a bomb declares more: refused first)."""

    @classmethod
    def for_array(cls, array: zarr.Array) -> SyncChunkDecoder | None:
        """The decoder of ``array``'s chunks; None if a codec cannot decode synchronously."""
        metadata = array.metadata
        if not isinstance(metadata, ArrayV3Metadata):
            return None
        codecs = list(metadata.codecs)
        if not codecs or not all(sync_decodable(c) for c in codecs):
            return None
        prototype = default_buffer_prototype()
        spec = chunk_spec(metadata, array_config(array), prototype)
        specs = []
        for codec in codecs:  # each codec decodes with the spec of what it encoded
            specs.append(spec)
            spec = codec.resolve_metadata(spec)
        return cls(codecs, specs, prototype)

    def decode(self, data: bytes) -> np.ndarray:
        """The chunk's values, full chunk shape (regular grids store edge chunks whole)."""
        value: Any = self._prototype.buffer.from_bytes(data)
        for (codec, spec), name in zip(self._steps, self._names, strict=True):
            if isinstance(value, Buffer):
                check_declared_size(value.to_bytes(), name, self._limit)
            value = decode_sync(codec, value, spec)
        decoded: np.ndarray = value.as_numpy_array()
        if decoded.shape != self.chunk_shape:  # bytes/transpose give the shape; be sure
            decoded = decoded.reshape(self.chunk_shape)
        return decoded
