"""Each name ``zarrfuse.zarr_compat`` takes from zarr's internals, checked for what we use it for.

These run on both CI stacks (the oldest and the newest zarr that ``pyproject.toml`` allows): a
zarr release that renames or changes one of them fails here, by name, rather than somewhere
downstream with a wrong value.
"""

from __future__ import annotations

import numcodecs
import numpy as np
import pytest
import zarr
from zarr.codecs import ZstdCodec

from zarrfuse import zarr_compat as compat


def _array(tmp_path, **kwargs) -> zarr.Array:
    kwargs = {"shape": (40, 30), "chunks": (16, 16), "dtype": "uint16", **kwargs}
    array = zarr.create_array(tmp_path / "a.zarr", **kwargs)
    array[...] = np.arange(1200, dtype="uint16").reshape(40, 30)
    return array


def test_every_name_is_exported():
    missing = [n for n in compat.__all__ if not hasattr(compat, n)]
    assert not missing


def test_sync_runs_a_coroutine_on_zarrs_loop():
    async def answer() -> int:
        return 42

    assert compat.sync(answer()) == 42


def test_buffers_round_trip_bytes():
    prototype = compat.default_buffer_prototype()
    assert isinstance(prototype, compat.BufferPrototype)
    buffer = prototype.buffer.from_bytes(b"abc")
    assert isinstance(buffer, compat.Buffer) and buffer.to_bytes() == b"abc"


def test_chunk_key_encodings_encode_as_the_spec_says():
    assert compat.DefaultChunkKeyEncoding(separator="/").encode_chunk_key((1, 2)) == "c/1/2"
    assert compat.V2ChunkKeyEncoding(separator=".").encode_chunk_key((1, 2)) == "1.2"
    assert issubclass(compat.DefaultChunkKeyEncoding, compat.ChunkKeyEncoding)
    fanout = compat.parse_chunk_key_encoding({"name": "fanout", "configuration": {}})
    assert type(fanout).__name__ == "FanoutChunkKeyEncoding"  # our plugin, found by name


def test_async_array_from_parsed_metadata_reads_the_values(tmp_path):
    written = _array(tmp_path)
    parsed = compat.ArrayV3Metadata.from_dict(written.metadata.to_dict())
    store_path = compat.sync(compat.make_store_path(tmp_path / "a.zarr", mode="r"))
    array = zarr.Array(compat.AsyncArray(metadata=parsed, store_path=store_path))
    np.testing.assert_array_equal(array[...], written[...])


@pytest.mark.parametrize("sharded", [False, True])
def test_chunk_spec_is_the_stored_objects_shape(tmp_path, sharded):
    array = _array(tmp_path, shards=(32, 32) if sharded else None)
    config = compat.array_config(array)
    assert isinstance(config, compat.ArrayConfig) and config.order == "C"
    spec = compat.chunk_spec(array.metadata, config, compat.default_buffer_prototype())
    assert isinstance(spec, compat.ArraySpec)
    assert spec.shape == ((32, 32) if sharded else (16, 16))
    assert spec.fill_value == 0


def test_codec_pipeline_decodes_a_stored_chunk(tmp_path):
    array = _array(tmp_path, compressors=[ZstdCodec(level=1)])
    pipeline = compat.create_codec_pipeline(array.metadata)
    prototype = compat.default_buffer_prototype()
    spec = compat.chunk_spec(array.metadata, compat.ArrayConfig("C", True), prototype)
    stored = (tmp_path / "a.zarr" / "c" / "1" / "0").read_bytes()
    (decoded,) = compat.sync(pipeline.decode([(prototype.buffer.from_bytes(stored), spec)]))
    np.testing.assert_array_equal(decoded.as_numpy_array(), array[16:32, 0:16])


def test_codecs_from_list_gives_the_three_roles(tmp_path):
    array = _array(tmp_path, compressors=[ZstdCodec(level=1)])
    array_array, array_bytes, bytes_bytes = compat.codecs_from_list(array.metadata.codecs)
    assert array_array == () and type(array_bytes).__name__ == "BytesCodec"
    assert [type(c) for c in bytes_bytes] == [ZstdCodec]


def test_sync_decode_equals_zarrs_read(tmp_path):
    array = _array(tmp_path, compressors=[ZstdCodec(level=1)])
    codecs = list(array.metadata.codecs)
    assert all(compat.sync_decodable(c) for c in codecs)
    prototype = compat.default_buffer_prototype()
    spec = compat.chunk_spec(array.metadata, compat.array_config(array), prototype)
    value = prototype.buffer.from_bytes((tmp_path / "a.zarr" / "c" / "0" / "1").read_bytes())
    specs = []
    for codec in codecs:
        specs.append(spec)
        spec = codec.resolve_metadata(spec)
    for codec, codec_spec in reversed(list(zip(codecs, specs, strict=True))):
        value = compat.decode_sync(codec, value, codec_spec)
    np.testing.assert_array_equal(value.as_numpy_array().reshape(16, 16)[:, :14], array[:16, 16:])


def test_sharding_is_never_decoded_synchronously(tmp_path):
    array = _array(tmp_path, shards=(32, 32))
    assert not compat.sync_decodable(array.metadata.codecs[0])


def test_shard_geometry_says_what_zarr_reads_a_shard_with(tmp_path):
    array = _array(tmp_path, chunks=(8, 8), shards=(16, 16))
    sharding = array.metadata.codecs[0]
    spec = compat.chunk_spec(array.metadata, compat.array_config(array),
                             compat.default_buffer_prototype())
    per_shard, inner, index, index_size = compat.shard_geometry(sharding, spec)
    assert per_shard == (2, 2)
    assert tuple(inner.shape) == (8, 8)
    assert tuple(index.shape) == (2, 2, 2)
    assert index_size == 4 * 16 + 4  # (offset, length) as uint64 per chunk, then crc32c
    stored = (tmp_path / "a.zarr" / "c" / "0" / "0").read_bytes()
    assert len(stored) > index_size


def test_one_object_array_writes_one_shard_as_zarr_writes_it_in_the_array(tmp_path):
    array = _array(tmp_path, chunks=(8, 8), shards=(16, 16), compressors=ZstdCodec())
    store = zarr.storage.MemoryStore()
    one = compat.one_object_array(array.metadata, store)
    assert one.shape == (16, 16) and one.shards == (16, 16) and one.chunks == (8, 8)
    key = one.metadata.encode_chunk_key((0, 0))
    shard = tmp_path / "a.zarr" / "c" / "1" / "0"  # rows 16-31, columns 0-15
    prototype = compat.default_buffer_prototype()
    compat.sync(store.set(key, prototype.buffer.from_bytes(shard.read_bytes())))
    one[4:12, 8:16] = 7
    array[20:28, 8:16] = 7
    written = compat.sync(store.get(key, prototype=prototype))
    assert written is not None and written.to_bytes() == shard.read_bytes()


def test_v2_metadata_converts_with_the_same_codecs(tmp_path):
    v2 = zarr.create_array(tmp_path / "v2.zarr", shape=(8,), chunks=(4,), dtype=">i4",
                           zarr_format=2, compressors=None)
    parsed = compat.ArrayV2Metadata.from_dict(v2.metadata.to_dict())
    converted = compat.convert_v2_array_metadata(parsed)
    assert isinstance(converted, compat.ArrayV3Metadata)
    assert converted.shape == (8,)
    assert compat.convert_v2_filters(()) == []
    codec = compat.convert_v2_compressor(numcodecs.Zstd(level=1), parsed.dtype)
    assert type(codec).__name__ in {"ZstdCodec", "Zstd"}


def test_regular_grids_only(tmp_path):
    class Odd:
        chunk_grid = object()
        ndim = 1

    with pytest.raises(ValueError, match="regular only"):
        compat.chunk_spec(Odd(), compat.ArrayConfig("C", True), compat.default_buffer_prototype())
