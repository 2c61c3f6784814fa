"""A rendered file's write takes the path every chunk write takes (issue 30, points 1 and 6):
zarr's codecs encode the chunk, and the chunk source stores it (parts, journal, chunk lock),
instead of zarr writing through the store behind the mount's back."""

from __future__ import annotations

import errno
import io
import threading

import numpy as np
import pytest
import tifffile
import zarr

import zarrfuse
from tests.arrays import CRC_PARTS, make_crc_array, snapshot
from tests.inprocess import in_process


def _tiff(value: np.ndarray) -> bytes:
    out = io.BytesIO()
    tifffile.imwrite(out, value)
    return out.getvalue()


def test_planes_of_one_chunk_written_at_once_are_both_kept(tmp_path):
    """Two planes of one chunk written together: each write reads the chunk, changes its
    plane and stores the chunk; one at a time per chunk, so neither undoes the other."""
    path = tmp_path / "zyx"
    zarr.create_array(path, shape=(2, 32, 32), chunks=(2, 32, 32), dtype="u1", fill_value=0,
                      dimension_names=("z", "y", "x"), compressors=zarr.codecs.ZstdCodec())
    with in_process(path, format="tiff") as fs:
        planes = sorted(fs.walk())
        planes = [p for p in planes if p.endswith(".tiff")]
        assert len(planes) == 2
        for round_ in range(25):
            values = [np.full((32, 32), 10 * z + round_ % 10, "u1") for z in (0, 1)]
            writers = [threading.Thread(target=fs.write, args=(name, _tiff(value)))
                       for name, value in zip(planes, values, strict=True)]
            for writer in writers:
                writer.start()
            for writer in writers:
                writer.join(30)
            stored = zarr.open_array(path)[...]
            np.testing.assert_array_equal(stored, np.stack(values), f"round {round_}")


def test_a_rendered_write_of_a_concat_parts_array_stores_its_parts(tmp_path):
    path = make_crc_array(tmp_path / "crc")
    before = snapshot(path)
    value = np.full((4, 4), 200, "u1")
    with in_process(path, format="tiff") as fs:
        name = next(p for p in sorted(fs.walk()) if p.endswith(".tiff"))
        fs.write(name, _tiff(value))
    changed = {k for k, v in snapshot(path).items() if before.get(k) != v}
    assert changed == {"c/0/0", "c/0/0.crc32c"}, changed  # both parts, nothing left beside
    np.testing.assert_array_equal(zarrfuse.open_array(path)[:4, :4], value)


def test_tiles_of_one_shard_written_at_once_are_all_kept(tmp_path):
    """Each tile of a shard is its own file, but they share one stored object: a write
    reads the shard, changes its tile and stores the shard under the shard's lock, so
    none undoes another."""
    path = tmp_path / "sharded"
    zarr.create_array(path, shape=(64, 64), chunks=(16, 16), shards=(64, 64), dtype="u1",
                      fill_value=0, compressors=zarr.codecs.ZstdCodec())
    with in_process(path, format="tiff") as fs:
        tiles = sorted(p for p in fs.walk() if p.endswith(".tiff"))
        assert len(tiles) == 16
        for round_ in range(4):
            values = {name: np.full((16, 16), 10 * i + round_ + 1, "u1")
                      for i, name in enumerate(tiles)}
            writers = [threading.Thread(target=fs.write, args=(name, _tiff(value)))
                       for name, value in values.items()]
            for writer in writers:
                writer.start()
            for writer in writers:
                writer.join(30)
            stored = zarr.open_array(path)[...]
            for i, value in enumerate(values.values()):
                row, col = divmod(i, 4)
                np.testing.assert_array_equal(
                    stored[16 * row: 16 * row + 16, 16 * col: 16 * col + 16], value,
                    f"round {round_}, tile {i}")


def test_a_rendered_write_of_a_sharded_array_is_one_commit_of_its_shard(tmp_path):
    """The shard is stored as a chunk file's commit is (parts, journal, chunk lock), so the
    mount's counters see the write; zarr writing behind the mount's back would not."""
    path = tmp_path / "sharded"
    data = np.arange(64 * 64, dtype="u2").reshape(64, 64)
    zarr.create_array(path, data=data, chunks=(16, 16), shards=(32, 64),
                      compressors=zarr.codecs.ZstdCodec())
    with in_process(path, format="tiff") as fs:
        name = sorted(p for p in fs.walk() if p.endswith(".tiff"))[5]  # row 1, column 1
        before = fs.ops.counters.store["write"]
        fs.write(name, _tiff(np.full((16, 16), 7, "u2")))
        assert fs.ops.counters.store["write"] == before + 1
    expected = data.copy()
    expected[16:32, 16:32] = 7
    np.testing.assert_array_equal(zarr.open_array(path)[...], expected)


def test_a_tile_of_a_split_shard_is_stored_as_its_parts(tmp_path):
    """A shard of a concat-parts array (its index checksum a part of its own): a rendered
    write of one tile stores the shard's parts as one commit, and nothing else."""
    path = tmp_path / "split"
    data = np.arange(64, dtype="u1").reshape(8, 8)
    a = zarrfuse.create_array(path, shape=(8, 8), chunks=(4, 4), shards=(8, 8), dtype="u1",
                              fill_value=0, storage_transformers=CRC_PARTS)
    a[:] = data
    before = snapshot(path)
    with in_process(path, format="tiff") as fs:
        tiles = sorted(p for p in fs.walk() if p.endswith(".tiff"))
        assert len(tiles) == 4
        writes = fs.ops.counters.store["write"]
        fs.write(tiles[3], _tiff(np.full((4, 4), 200, "u1")))
        assert fs.ops.counters.store["write"] == writes + 2  # one commit: both parts
    changed = {k for k, v in snapshot(path).items() if before.get(k) != v}
    assert changed == {"c/0/0", "c/0/0.crc32c"}, changed
    expected = data.copy()
    expected[4:, 4:] = 200
    np.testing.assert_array_equal(zarrfuse.open_array(path)[...], expected)


@pytest.mark.expect_log(r"refused to store chunk|more than its codecs make")
def test_a_shard_larger_than_its_codecs_make_is_refused_unread(tmp_path):
    """A tile's save reads its whole shard: a stored object far larger than any the array's
    codecs write (a hostile or broken store) is refused before it is read, and stays."""
    path = tmp_path / "sharded"
    zarr.create_array(path, shape=(64, 64), chunks=(16, 16), shards=(64, 64), dtype="u1",
                      fill_value=0)
    shard = path / "c" / "0" / "0"
    shard.parent.mkdir(parents=True)
    with open(shard, "wb") as f:  # sparse: 64 MiB of nothing, for a 4 KiB shard
        f.truncate(64 << 20)
    with in_process(path, format="tiff") as fs:
        tiles = sorted(p for p in fs.walk() if p.endswith(".tiff"))
        with pytest.raises(OSError) as refused:
            fs.write(tiles[0], _tiff(np.full((16, 16), 5, "u1")))
        assert refused.value.errno == errno.EIO
        assert "more than its codecs make" in str(refused.value)
    assert shard.stat().st_size == 64 << 20
