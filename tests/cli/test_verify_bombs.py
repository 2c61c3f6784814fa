"""``zarrfuse verify`` measures every chunk, and every shard's inner chunk, before a codec
decodes it (issue 34, point 4): a decompression bomb is a finding with its reason, not
gigabytes allocated in the command."""

from __future__ import annotations

import zarr
from zarr.storage import LocalStore

from tests.hostile import _shard_holding, _zstd_stream
from zarrfuse.integrity import verify

BOMB = 128 << 20  # decodes to 128 MiB; a chunk holds 8 KiB


def test_a_bomb_in_a_plain_chunk_is_a_refused_finding(tmp_path):
    zarr.create_array(LocalStore(tmp_path / "a"), shape=(128, 64), chunks=(64, 64), dtype="u2",
                      fill_value=0, compressors=zarr.codecs.ZstdCodec())[...] = 1
    (tmp_path / "a" / "c" / "1" / "0").write_bytes(_zstd_stream(BOMB))
    report = verify(str(tmp_path / "a"))
    assert [f.where for f in report.failures] == ["c/1/0"]
    assert "refused before the codec allocated it" in report.failures[0].reason


def test_a_bomb_inside_a_shard_is_a_refused_finding(tmp_path):
    zarr.create_array(LocalStore(tmp_path / "s"), shape=(64, 64), chunks=(32, 32),
                      shards=(64, 64), dtype="u2", fill_value=0,
                      compressors=zarr.codecs.ZstdCodec())[...] = 1
    (tmp_path / "s" / "c" / "0" / "0").write_bytes(_shard_holding(_zstd_stream(BOMB), 4))
    report = verify(str(tmp_path / "s"))
    assert [f.where for f in report.failures] == ["c/0/0"]
    assert "refused before the codec allocated it" in report.failures[0].reason
