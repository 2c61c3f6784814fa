"""Every zarr-python name zarrfuse uses beyond zarr's public API, in one place, with why.

``zarr.core`` and underscored names change between minor releases (3.4 removed
``ArrayV3Metadata.get_chunk_spec``). zarrfuse supports zarr 3.1.3 to 3.4 (``pyproject.toml``)
and CI runs the suite on the oldest and the newest. Each name below has a test in
``tests/test_zarr_compat.py``; a missing name fails at import with one line naming it,
never later with wrong data.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import zarr
from zarr.storage import StorePath

__all__ = [
    "ArrayConfig", "ArraySpec", "ArrayV2Metadata", "ArrayV3Metadata", "AsyncArray", "Buffer",
    "BufferPrototype", "ChunkKeyEncoding", "DefaultChunkKeyEncoding", "V2ChunkKeyEncoding",
    "array_config", "chunk_spec", "codecs_from_list", "convert_v2_array_metadata",
    "convert_v2_compressor", "convert_v2_filters", "create_codec_pipeline", "decode_sync",
    "default_buffer_prototype", "make_store_path", "one_object_array", "parse_chunk_key_encoding",
    "shard_geometry", "stored_chunk_shape", "sync", "sync_decodable"
]


try:
    # Blocking on zarr's own event loop from a worker thread (the mount, the CLI). No public
    # equivalent: zarr's synchronous API is per object (Array, Group), not per coroutine.
    # Arrays from documents already read (no second metadata fetch), codec pipelines for
    # verifying a chunk before it is stored, chunk specs, and the metadata classes.
    from zarr.core.array import AsyncArray, create_codec_pipeline
    from zarr.core.array_spec import ArrayConfig, ArraySpec

    # Buffers, what every Store method takes and returns: zarr.buffer re-exports only the
    # prototype in 3.1, so the classes come from zarr.core.buffer.
    from zarr.core.buffer import Buffer, BufferPrototype, default_buffer_prototype

    # Chunk key encodings: fanout and suffix subclass ChunkKeyEncoding to register as
    # plugins (entry-point group zarr.chunk_key_encoding) and wrap default and v2 ones.
    from zarr.core.chunk_key_encodings import (
        ChunkKeyEncoding,
        DefaultChunkKeyEncoding,
        V2ChunkKeyEncoding,
        parse_chunk_key_encoding,
    )
    from zarr.core.codec_pipeline import codecs_from_list
    from zarr.core.metadata.v2 import ArrayV2Metadata
    from zarr.core.metadata.v3 import ArrayV3Metadata
    from zarr.core.sync import sync

    # zarr's own v2 -> v3 metadata conversion, so a v2 array reads with the same codecs.
    from zarr.metadata.migrate_v3 import _convert_array_metadata as convert_v2_array_metadata
    from zarr.metadata.migrate_v3 import _convert_compressor as convert_v2_compressor
    from zarr.metadata.migrate_v3 import _convert_filters as convert_v2_filters

    # Store paths from what users pass (paths, URLs, stores), exactly as zarr.open makes them.
    from zarr.storage._common import make_store_path
except ImportError as missing:  # one line that says which name and which zarr
    raise ImportError(f"zarrfuse cannot use zarr {zarr.__version__}: {missing}; "
                      f"install a zarr that zarrfuse's pyproject.toml allows") from missing

from zarr.codecs import ShardingCodec


def array_config(array: Any) -> Any:
    """The ArrayConfig (order, write_empty_chunks) an opened ``zarr.Array`` decodes with."""
    return array._async_array.config


def stored_chunk_shape(metadata: Any) -> tuple[int, ...]:
    """The shape of every stored object of a regular grid (the shard, if sharded). zarr 3.4
    also has rectilinear grids, whose objects differ in shape: refused (ValueError)."""
    shape = getattr(metadata.chunk_grid, "chunk_shape", None)
    if shape is None:
        raise ValueError(
            f"chunk grid {type(metadata.chunk_grid).__name__} is not supported: regular only"
        )
    return tuple(shape)


def chunk_spec(metadata: Any, config: Any, prototype: Any) -> Any:
    """The spec zarr decodes a stored object of a regular grid with (the shard, if sharded).

    zarr 3.1-3.3 and v2 metadata have ``get_chunk_spec``; zarr 3.4 dropped it from v3
    metadata (specs come from its per-array ChunkGrid). On a regular grid every stored object
    has the grid's chunk shape, so both give the same spec.
    """
    if isinstance(metadata, ArrayV2Metadata) or hasattr(metadata, "get_chunk_spec"):
        return metadata.get_chunk_spec((0,) * metadata.ndim, config, prototype)
    return ArraySpec(
        shape=stored_chunk_shape(metadata), dtype=metadata.dtype, fill_value=metadata.fill_value,
        config=config, prototype=prototype,
    )


def sync_decodable(codec: Any) -> bool:
    """Whether a codec decodes one chunk synchronously (``_decode_sync``, zarr's own).

    Sharding is left out on every zarr (3.4 gave it ``_decode_sync``, 3.1 had none): a whole
    shard decodes through zarr's pipeline on every stack alike. ``_sync_capable`` is zarr
    3.4's opt-out.
    """
    return (
        not isinstance(codec, ShardingCodec)
        and callable(getattr(codec, "_decode_sync", None))
        and getattr(codec, "_sync_capable", True)
    )


def decode_sync(codec: Any, value: Any, spec: Any) -> Any:
    """One codec's synchronous decode (what zarr's pipeline runs in its own threads)."""
    return codec._decode_sync(value, spec)


def one_object_array(metadata: Any, store: Any) -> Any:
    """A ``zarr.Array`` over ``store`` with ``metadata``'s codecs and grid but the shape of
    one stored object (a shard), no storage transformers, and empty chunks written: zarr's
    own read-modify-write of one shard, run in memory (``api.chunk_encoding``). The metadata
    is a frozen dataclass whose ``shape`` and ``storage_transformers`` fields zarr 3.1-3.4
    share; replacing them re-runs its own checks."""
    one = dataclasses.replace(metadata, shape=stored_chunk_shape(metadata),
                              storage_transformers=())
    return zarr.Array(AsyncArray(metadata=one, store_path=StorePath(store),
                                 config=ArrayConfig("C", True)))


def shard_geometry(sharding: Any, shard_spec: Any) -> tuple[tuple[int, ...], Any, Any, int]:
    """What a sharding codec says of one shard of ``shard_spec``: inner chunks per shard
    along each dimension, the inner chunks' spec, the index's spec (``chunks_per_shard +
    (2,)`` uint64: offset and length of each) and the index's stored size in bytes. zarr
    reads shards with these same private methods (3.1 to 3.4)."""
    per_shard = tuple(sharding._get_chunks_per_shard(shard_spec))
    return (
        per_shard,
        sharding._get_chunk_spec(shard_spec),
        sharding._get_index_chunk_spec(per_shard),
        int(sharding._shard_index_size(per_shard)),
    )
