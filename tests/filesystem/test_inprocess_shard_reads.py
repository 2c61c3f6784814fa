"""Inner chunks of sharded arrays read by byte ranges, in process (issue 32, point 2): a
shard's index is asked for once and kept, the chunks a read wants come in few requests, and
a write of the shard forgets the kept index, so a read never takes bytes at an old offset."""

from __future__ import annotations

import io
import os

import numpy as np
import tifffile
import zarr

from tests.inprocess import in_process

SHAPE, CHUNK, SHARD = (256, 256), (32, 32), (128, 128)  # 4 shards of 16 inner chunks


def _sharded(path, seed: int = 0) -> np.ndarray:
    data = np.random.default_rng(seed).integers(0, 60000, SHAPE).astype("u2")
    zarr.create_array(path, data=data, chunks=CHUNK, shards=SHARD)
    return data


def _tile(fs, y: int, x: int) -> np.ndarray:
    return tifffile.imread(io.BytesIO(fs.read(f"planes/y{y:03}/y{y:03}-x{x:03}.tiff")))


def test_a_shards_index_is_asked_for_once_for_all_its_tiles(tmp_path):
    data = _sharded(tmp_path / "a")
    with in_process(str(tmp_path / "a"), format="tiff", read_only=True) as fs:
        before = fs.ops.counters.store["read"]
        for y in range(4):  # the 16 tiles of the first shard, one file at a time
            for x in range(4):
                np.testing.assert_array_equal(
                    _tile(fs, y, x), data[y * 32 : (y + 1) * 32, x * 32 : (x + 1) * 32])
        asked = fs.ops.counters.store["read"] - before
    # The index once, then at most one range per tile (the view decodes some tiles ahead,
    # in one range); with the index asked again per tile it was 32. (The web server's log
    # tells which request was which: tests/storage/test_http_requests.py.)
    assert 1 <= asked <= 1 + 16, asked


def test_the_whole_image_of_a_sharded_array_is_read_in_few_requests(tmp_path):
    data = _sharded(tmp_path / "a")
    with in_process(str(tmp_path / "a"), format="ome-tiff", read_only=True) as fs:
        before = fs.ops.counters.store["read"]
        image = tifffile.imread(io.BytesIO(fs.read("a.ome.tif")))
        asked = fs.ops.counters.store["read"] - before
    np.testing.assert_array_equal(image, data)
    assert 1 <= asked <= 2 * 4, asked  # zarr-python: a request per shard


def test_a_write_of_a_shard_forgets_its_kept_index(tmp_path):
    data = _sharded(tmp_path / "a")
    with in_process(str(tmp_path / "a"), format="tiff") as fs:
        np.testing.assert_array_equal(_tile(fs, 0, 1), data[:32, 32:64])  # index kept
        # A tile that compresses to a different size: every later inner chunk moves.
        new = np.zeros(CHUNK, dtype="u2")
        out = io.BytesIO()
        tifffile.imwrite(out, new)
        fh = fs.open("planes/y000/y000-x000.tiff", os.O_WRONLY | os.O_TRUNC)
        fs.pwrite(fh, out.getvalue(), 0)
        fs.close(fh)
        np.testing.assert_array_equal(_tile(fs, 0, 0), new)
        for x in range(1, 4):
            np.testing.assert_array_equal(_tile(fs, 0, x), data[:32, x * 32 : (x + 1) * 32])
        for y in range(1, 4):
            np.testing.assert_array_equal(_tile(fs, y, 3), data[y * 32 : (y + 1) * 32, 96:128])
    stored = zarr.open_array(tmp_path / "a", mode="r")[...]
    np.testing.assert_array_equal(stored[:32, :32], new)


def test_a_shard_not_stored_and_inner_chunks_not_stored_are_the_fill_value(tmp_path):
    array = zarr.create_array(tmp_path / "a", shape=SHAPE, chunks=CHUNK, shards=SHARD,
                              dtype="u2", fill_value=7)
    array[:32, :32] = 3  # one inner chunk of the first shard; the other shards never written
    expected = np.full(SHAPE, 7, dtype="u2")
    expected[:32, :32] = 3
    with in_process(str(tmp_path / "a"), format="ome-tiff", read_only=True) as fs:
        image = tifffile.imread(io.BytesIO(fs.read("a.ome.tif")))
    np.testing.assert_array_equal(image, expected)
