"""The synchronous decoder gives exactly zarr's values for every codec chain it accepts, and
declines (None) sharded arrays, so callers read those through zarr; every chain refuses a
decompression bomb before its codec allocates it."""

from __future__ import annotations

import warnings

import numcodecs
import numpy as np
import pytest
import zarr
from zarr.codecs import (
    BloscCodec,
    BytesCodec,
    Crc32cCodec,
    GzipCodec,
    TransposeCodec,
    ZstdCodec,
)

from zarrfuse.api.chunk_decoding import SyncChunkDecoder
from zarrfuse.api.nodes import parse_array_metadata, parse_node
from zarrfuse.api.regions import chunk_region

V3_CHAINS = {
    "bytes-le": {"serializer": BytesCodec(endian="little"), "compressors": None},
    "bytes-be": {"serializer": BytesCodec(endian="big"), "compressors": None},
    "transpose": {"filters": [TransposeCodec(order=(1, 0))], "compressors": None},
    "zstd": {"compressors": ZstdCodec(level=3)},
    "gzip": {"compressors": GzipCodec(level=5)},
    "blosc": {"compressors": BloscCodec(cname="lz4", shuffle="bitshuffle")},
    "crc32c": {"compressors": Crc32cCodec()},
    "zstd-crc32c": {"compressors": [ZstdCodec(level=1), Crc32cCodec()]},
    "transpose-zstd": {"filters": [TransposeCodec(order=(1, 0))], "compressors": ZstdCodec()},
}


def _values(dtype: str) -> np.ndarray:
    rng = np.random.default_rng(7)
    return (rng.normal(size=(37, 29)) * 100).astype(dtype)


def _check_every_chunk(array: zarr.Array, root, decoder: SyncChunkDecoder) -> None:
    grid = [-(-s // c) for s, c in zip(array.shape, array.chunks, strict=True)]
    for i in range(grid[0]):
        for j in range(grid[1]):
            key = array.metadata.encode_chunk_key((i, j))
            region = chunk_region((i, j), array.chunks, array.shape)
            value = decoder.decode((root / key).read_bytes())
            cropped = value[tuple(slice(0, r.stop - r.start) for r in region)]
            expected = np.asarray(array[region])
            assert cropped.dtype.newbyteorder("=") == expected.dtype.newbyteorder("=")
            np.testing.assert_array_equal(cropped, expected)


@pytest.mark.parametrize("dtype", ["<u2", "<f4", "<i8", "u1"])
@pytest.mark.parametrize("chain", sorted(V3_CHAINS))
def test_v3_chains_decode_to_zarrs_values(tmp_path, chain, dtype):
    data = _values(dtype)
    array = zarr.create_array(tmp_path / "a", shape=data.shape, chunks=(16, 8), dtype=data.dtype,
                              **V3_CHAINS[chain])
    array[...] = data
    decoder = SyncChunkDecoder.for_array(array)
    assert decoder is not None
    _check_every_chunk(array, tmp_path / "a", decoder)


@pytest.mark.parametrize("compressor", [numcodecs.Blosc(), numcodecs.Zstd(), numcodecs.GZip()])
@pytest.mark.parametrize("order", ["C", "F"])
def test_v2_arrays_as_the_mount_opens_them(tmp_path, compressor, order):
    """A v2 array is opened from its v3 equivalent (``api.nodes``), as the mount does."""
    data = _values(">i4")
    v2 = zarr.create_array(tmp_path / "a", shape=data.shape, chunks=(16, 8), dtype=data.dtype,
                           compressors=[compressor], zarr_format=2, order=order)
    v2[...] = data
    node = parse_node("a", {".zarray": (tmp_path / "a" / ".zarray").read_bytes()})
    parsed = parse_array_metadata("a", node.metadata)
    array = zarr.Array(zarr.core.array.AsyncArray(
        metadata=parsed, store_path=zarr.storage.StorePath(
            zarr.storage.LocalStore(tmp_path), "a")))
    decoder = SyncChunkDecoder.for_array(array)
    assert decoder is not None
    _check_every_chunk(array, tmp_path / "a", decoder)
    np.testing.assert_array_equal(array[...], data)


def test_sharded_arrays_are_declined_and_numcodecs_chains_decode_through_zarrs_pipeline(
    tmp_path,
):
    sharded = zarr.create_array(tmp_path / "s", shape=(32, 32), chunks=(8, 8), shards=(16, 16),
                                dtype="u2")
    assert SyncChunkDecoder.for_array(sharded) is None
    with warnings.catch_warnings():  # zarr < 3.4: numcodecs codecs are not in the v3 spec
        warnings.simplefilter("ignore", UserWarning)
        lz4 = zarr.create_array(tmp_path / "l", shape=(32, 32), chunks=(8, 8), dtype="u2",
                                compressors=zarr.codecs.numcodecs.LZ4())
    lz4[...] = np.arange(1024, dtype="u2").reshape(32, 32)
    decoder = SyncChunkDecoder.for_array(lz4)  # zarr 3.1's wrappers: through the pipeline
    assert decoder is not None
    _check_every_chunk(lz4, tmp_path / "l", decoder)
