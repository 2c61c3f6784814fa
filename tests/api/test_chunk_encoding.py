"""Chunks encoded for rendered writes are the bytes zarr itself stores for the same values,
for the codecs arrays are written with (v3 and v2 documents alike)."""

from __future__ import annotations

import json

import numcodecs
import numpy as np
import pytest
import zarr
from zarr.storage import LocalStore

from zarrfuse.api.chunk_encoding import ChunkEncoder
from zarrfuse.api.nodes import parse_array_metadata, v2_array_as_v3
from zarrfuse.zarr_compat import AsyncArray

CASES = {
    "raw": {"compressors": None},
    "zstd": {"compressors": zarr.codecs.ZstdCodec(level=3)},
    "blosc": {"compressors": zarr.codecs.BloscCodec(cname="lz4", shuffle="bitshuffle")},
    "gzip-v2": {"compressors": numcodecs.GZip(4), "zarr_format": 2},
    "big-endian": {"compressors": None, "serializer": zarr.codecs.BytesCodec(endian="big")},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_encoded_bytes_are_zarrs(tmp_path, case):
    values = np.random.default_rng(1).integers(0, 60000, (8, 6), dtype="u2")
    array = zarr.create_array(LocalStore(tmp_path / "a"), shape=(8, 6), chunks=(8, 6),
                              dtype="u2", fill_value=0, **CASES[case])
    array[...] = values
    stored = (tmp_path / "a" / ("0.0" if case.endswith("v2") else "c/0/0")).read_bytes()
    opened = zarr.open_array(LocalStore(tmp_path / "a"))
    if case.endswith("v2"):  # the mount reads v2 arrays as their v3 equivalent
        zarray = json.loads((tmp_path / "a" / ".zarray").read_text())
        metadata = parse_array_metadata("", v2_array_as_v3("", zarray, {}))
        opened = zarr.Array(AsyncArray(metadata=metadata, store_path=opened.store_path))
    encoder = ChunkEncoder.for_array(opened)
    assert encoder is not None
    encoded = encoder.encode(values)
    if case.startswith("gzip"):  # a gzip header holds the second it was written: not data
        encoded, stored = encoded[:4] + encoded[8:], stored[:4] + stored[8:]
    assert encoded == stored


def test_a_shard_is_encoded_whole_as_zarr_stores_it(tmp_path):
    values = np.random.default_rng(2).integers(0, 250, (8, 8), dtype="u1")
    array = zarr.create_array(LocalStore(tmp_path / "s"), shape=(8, 8), chunks=(2, 4),
                              shards=(4, 8), dtype="u1", fill_value=0,
                              compressors=zarr.codecs.ZstdCodec(level=3))
    array[...] = values
    encoder = ChunkEncoder.for_array(array)
    assert encoder is not None and encoder.chunk_shape == (4, 8)
    for shard in (0, 1):
        stored = (tmp_path / "s" / f"c/{shard}/0").read_bytes()
        assert encoder.encode(values[4 * shard : 4 * shard + 4]) == stored


def test_part_of_a_shard_written_over_what_is_stored_keeps_the_rest(tmp_path):
    """``encode_over`` is a read-modify-write of one stored object: the other inner chunks
    keep their values, and an object not stored starts from the fill value."""
    values = np.arange(64, dtype="u1").reshape(8, 8)
    array = zarr.create_array(LocalStore(tmp_path / "s"), shape=(8, 8), chunks=(2, 4),
                              shards=(4, 8), dtype="u1", fill_value=9)
    array[:4] = values[:4]
    encoder = ChunkEncoder.for_array(array)
    assert encoder is not None
    shard = tmp_path / "s" / "c/0/0"
    tile = np.full((2, 4), 200, "u1")
    shard.write_bytes(encoder.encode_over(shard.read_bytes(), (slice(2, 4), slice(4, 8)), tile))
    expected = values[:4].copy()
    expected[2:4, 4:8] = 200
    np.testing.assert_array_equal(zarr.open_array(LocalStore(tmp_path / "s"))[:4], expected)
    absent = tmp_path / "s" / "c/1/0"
    absent.parent.mkdir()
    absent.write_bytes(encoder.encode_over(None, (slice(0, 2), slice(0, 4)), tile))
    expected = np.full((4, 8), 9, "u1")
    expected[0:2, 0:4] = 200
    np.testing.assert_array_equal(zarr.open_array(LocalStore(tmp_path / "s"))[4:], expected)
