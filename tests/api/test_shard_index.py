"""A shard's index read as zarr writes it, its inner chunks decoded from their byte ranges
to zarr's own values, and indexes no shard could have refused (issue 32, point 2)."""

from __future__ import annotations

import google_crc32c
import numpy as np
import pytest
import zarr
from zarr.codecs import BytesCodec, ShardingCodec, ZstdCodec

from zarrfuse.api.shard_index import EMPTY, ShardGeometry, merge_ranges
from zarrfuse.errors import CorruptChunk


def _sharded(tmp_path, *, index_location: str = "end", data: np.ndarray | None = None):
    if data is None:
        data = (np.arange(96 * 80, dtype=np.uint32) * 2654435761 % 65521).astype("u2")
        data = data.reshape(96, 80)
    sharding = ShardingCodec(chunk_shape=(16, 16), codecs=[BytesCodec(), ZstdCodec()],
                             index_location=index_location)
    array = zarr.create_array(tmp_path / "a", shape=data.shape, dtype=data.dtype,
                              chunks=(64, 64), serializer=sharding, compressors=None,
                              fill_value=0)
    array[...] = data
    return zarr.open_array(tmp_path / "a", mode="r"), data


def _shard_bytes(tmp_path, key: str) -> bytes:
    return (tmp_path / "a" / key).read_bytes()


@pytest.mark.parametrize("where", ["end", "start"])
def test_every_inner_chunk_decodes_from_its_range_to_zarrs_values(tmp_path, where):
    array, data = _sharded(tmp_path, index_location=where)
    geometry = ShardGeometry.for_array(array)
    assert geometry is not None and geometry.per_shard == (4, 4)
    assert geometry.index_at_end == (where == "end")
    for shard in [(0, 0), (0, 1), (1, 0), (1, 1)]:  # the right and bottom shards are cut
        shard_bytes = _shard_bytes(tmp_path, f"c/{shard[0]}/{shard[1]}")
        table = geometry.index_from_shard(shard_bytes)
        for local in np.ndindex(geometry.per_shard):
            row = geometry.flat(local)
            top = shard[0] * 64 + local[0] * 16
            left = shard[1] * 64 + local[1] * 16
            if top >= data.shape[0] or left >= data.shape[1]:
                assert table[row, 0] == EMPTY  # outside the array: never stored
                continue
            [(_, start, stop)] = geometry.ranges(table, [row])
            value = geometry.inner.decode(shard_bytes[start:stop])
            expected = data[top : top + 16, left : left + 16]
            np.testing.assert_array_equal(value[: expected.shape[0], : expected.shape[1]],
                                          expected)


def test_an_inner_chunk_of_the_fill_value_is_not_stored_and_has_no_range(tmp_path):
    data = np.zeros((64, 64), dtype="u2")
    data[:16, :16] = 5
    array, _ = _sharded(tmp_path, data=data)
    geometry = ShardGeometry.for_array(array)
    assert geometry is not None
    table = geometry.index_from_shard(_shard_bytes(tmp_path, "c/0/0"))
    assert [row for row, _, _ in geometry.ranges(table, range(16))] == [0]
    assert geometry.stored_rows(table) == {0}


@pytest.mark.filterwarnings("ignore:Combining a `sharding_indexed` codec")
def test_arrays_zarr_must_read_have_no_geometry(tmp_path):
    plain = zarr.create_array(tmp_path / "p", shape=(8, 8), chunks=(4, 4), dtype="u1")
    assert ShardGeometry.for_array(plain) is None
    compressed = zarr.create_array(  # shards compressed whole, index and all
        tmp_path / "c", shape=(8, 8), chunks=(8, 8), dtype="u1", compressors=[ZstdCodec()],
        serializer=ShardingCodec(chunk_shape=(4, 4)))
    assert ShardGeometry.for_array(compressed) is None  # a codec around the sharding codec


def _index_with(table: np.ndarray) -> bytes:
    """An index as zarr's default index codecs write it: little-endian uint64 pairs, then
    their crc32c (little-endian uint32)."""
    raw = table.astype("<u8").tobytes()
    return raw + np.uint32(google_crc32c.value(raw)).astype("<u4").tobytes()


def test_an_index_naming_more_than_a_chunk_can_hold_is_refused_not_allocated(tmp_path):
    array, _ = _sharded(tmp_path)
    geometry = ShardGeometry.for_array(array)
    assert geometry is not None
    table = np.full((16, 2), EMPTY, dtype=np.uint64)
    table[0] = (0, 1 << 40)  # a terabyte for a 16 x 16 chunk
    with pytest.raises(CorruptChunk, match="over the"):
        geometry.parse_index(_index_with(table))


def test_an_index_naming_bytes_past_the_shards_end_is_refused(tmp_path):
    array, _ = _sharded(tmp_path)
    geometry = ShardGeometry.for_array(array)
    assert geometry is not None
    table = np.full((16, 2), EMPTY, dtype=np.uint64)
    table[3] = (1000, 100)
    with pytest.raises(CorruptChunk, match="past the shard's end"):
        geometry.parse_index(_index_with(table), shard_size=1050)
    table[3] = (EMPTY - 10, 100)  # an offset that wraps around when the length is added
    with pytest.raises(CorruptChunk, match="past the shard's end"):
        geometry.parse_index(_index_with(table), shard_size=1050)


def test_an_index_whose_checksum_fails_is_refused(tmp_path):
    array, _ = _sharded(tmp_path)
    geometry = ShardGeometry.for_array(array)
    assert geometry is not None
    index = bytearray(_shard_bytes(tmp_path, "c/0/0")[-geometry.index_size :])
    index[5] ^= 0xFF
    with pytest.raises(CorruptChunk, match="does not decode"):
        geometry.parse_index(bytes(index))


def test_ranges_merge_when_they_touch_or_lie_close_and_not_otherwise():
    runs = merge_ranges([(2, 200, 300), (0, 0, 100), (1, 100, 150), (3, 5000, 5100)], gap=1000)
    assert [(r.start, r.stop) for r in runs] == [(0, 300), (5000, 5100)]
    assert [m[0] for m in runs[0].members] == [0, 1, 2]
    assert [(r.start, r.stop) for r in merge_ranges([(0, 0, 10), (1, 20, 30)], gap=5)] == [
        (0, 10), (20, 30)]
    assert merge_ranges([]) == []
