"""A decompression bomb inside a shard is refused before zarr's sharding codec decodes it
(issue 34, point 4): the inner chunks get the bound plain chunks have."""

from __future__ import annotations

import gzip
import types
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.storage import LocalStore, StorePath

from tests.hostile import _shard_holding, _zstd_stream
from zarrfuse.api.shard_bounds import InnerChunkBound, bound_inner_chunks
from zarrfuse.zarr_compat import AsyncArray

BOMB = 64 << 20  # decodes to 64 MiB; an inner chunk holds 2 KiB


def _sharded(path: Path, **kwargs) -> zarr.Array:
    array = zarr.create_array(LocalStore(path), shape=(64, 64), shards=(64, 64),
                              chunks=(32, 32), dtype="u2", fill_value=0, **kwargs)
    array[...] = np.arange(64 * 64, dtype="u2").reshape(64, 64)
    return array


def _bounded(array: zarr.Array, path: Path) -> zarr.Array:
    metadata = bound_inner_chunks(array.metadata)
    return zarr.Array(AsyncArray(metadata=metadata, store_path=StorePath(LocalStore(path))))


@pytest.mark.parametrize("compressors", [
    zarr.codecs.ZstdCodec(level=1), zarr.codecs.GzipCodec(level=1),
    zarr.codecs.BloscCodec(cname="lz4"),
])
def test_bounded_arrays_read_and_write_what_zarr_does(tmp_path, compressors, monkeypatch):
    # numcodecs before 0.15 (the floor stack) writes the time of compression into each gzip
    # member: two writes a second apart store different bytes, bound or not. The clock gzip
    # reads is held still, so equal bytes mean the same encoding.
    monkeypatch.setattr(gzip, "time", types.SimpleNamespace(time=lambda: 1_700_000_000.0))
    plain = _sharded(tmp_path / "a", compressors=compressors)
    bounded = _bounded(plain, tmp_path / "a")
    assert any(isinstance(c, InnerChunkBound) for c in bounded.metadata.codecs[0].codecs)
    np.testing.assert_array_equal(bounded[...], plain[...])
    before = (tmp_path / "a" / "c" / "0" / "0").read_bytes()
    bounded[...] = plain[...]  # the same values again: the same bytes stored
    assert (tmp_path / "a" / "c" / "0" / "0").read_bytes() == before
    assert "zarrfuse" not in (tmp_path / "a" / "zarr.json").read_text()


def test_unsharded_and_variable_size_arrays_are_left_as_they_are(tmp_path):
    plain = zarr.create_array(LocalStore(tmp_path / "p"), shape=(4,), chunks=(2,), dtype="u1")
    assert bound_inner_chunks(plain.metadata) is plain.metadata
    text = zarr.create_array(LocalStore(tmp_path / "t"), shape=(4,), chunks=(2,), shards=(4,),
                             dtype=str)
    assert bound_inner_chunks(text.metadata) is text.metadata


def test_a_stream_bomb_inside_a_shard_is_refused_before_decoding(tmp_path):
    plain = _sharded(tmp_path / "a", compressors=zarr.codecs.ZstdCodec(level=1))
    (tmp_path / "a" / "c" / "0" / "0").write_bytes(_shard_holding(_zstd_stream(BOMB), 4))
    with pytest.raises(ValueError, match="refused before the codec allocated it"):
        _bounded(plain, tmp_path / "a")[:32, :32]
    # zarr alone decodes all of it before finding it does not fit (the bug this fixes;
    # numcodecs before 0.15 decodes no frame without a size at all)
    with pytest.raises((ValueError, RuntimeError), match=r"cannot reshape|invalid input"):
        zarr.open_array(LocalStore(tmp_path / "a"))[:32, :32]
