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
    assert encoder.encode(values) == stored


def test_sharded_arrays_are_declined(tmp_path):
    array = zarr.create_array(LocalStore(tmp_path / "s"), shape=(8,), chunks=(2,),
                              shards=(4,), dtype="u1")
    assert ChunkEncoder.for_array(array) is None
