"""Rendered views leave grid dimensions of extent 1 out of the path: one image row of tiles
shares a directory, in grid order, and a 5-D image with one t, c and z is a 2-D tree
(``planes/y001/y001-x002``: pictures are named by position)."""

from __future__ import annotations

import io
import json
import os

import numpy as np
import pytest
import tifffile
import zarr
from PIL import Image

from tests.mounting import mounted
from tests.picture_paths import tile_path

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]


def files(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_rgb_tiles_of_a_row_share_a_directory(tmp_path):
    data = np.random.default_rng(2).integers(0, 255, (40, 50, 3), dtype="u1")
    zarr.create_array(tmp_path / "rgb", shape=data.shape, chunks=(16, 16, 3), dtype="u1")[:] = data
    with mounted(tmp_path / "rgb", tmp_path / "mnt", "--read-only", "--format", "png") as mnt:
        assert files(mnt) == [tile_path(y, x, "png") for y in range(3) for x in range(4)]
        tile = np.asarray(Image.open(mnt / "planes/y002/y002-x003.png"))
        np.testing.assert_array_equal(tile, data[32:40, 48:50])
        # The raw view keeps the full key: it is still a Zarr array.
    with mounted(tmp_path / "rgb", tmp_path / "raw", "--read-only") as raw:
        assert "c/0/000/0/000/0/000" in files(raw)
        assert json.loads((raw / "zarr.json").read_text())["shape"] == [40, 50, 3]


def test_a_5d_image_with_one_t_c_z_is_a_2d_tree_and_takes_writes(tmp_path):
    source = tmp_path / "vol"
    zarr.create_array(source, shape=(1, 1, 1, 40, 40), chunks=(1, 1, 1, 16, 16),
                      dtype="u2", fill_value=0)[:] = 3
    with mounted(source, tmp_path / "mnt", "--format", "tiff") as mnt:
        assert files(mnt) == [tile_path(y, x, "tiff") for y in range(3) for x in range(3)]
        tile = tifffile.imread(mnt / tile_path(1, 2, "tiff"))
        tifffile.imwrite(tmp_path / "new.tiff", np.full(tile.shape, 9, tile.dtype))
        (mnt / tile_path(1, 2, "tiff")).write_bytes((tmp_path / "new.tiff").read_bytes())
    stored = zarr.open_array(source)[0, 0, 0]
    assert (stored[16:32, 32:40] == 9).all()
    assert stored[:16].max() == 3 and stored[32:].max() == 3


def test_an_rgb_row_lists_in_grid_order_timed_by_its_shards_and_takes_a_png(tmp_path):
    """Sharded (2 x 2 tiles a shard), only the top-left shard stored: the row's listing is in
    grid order; each tile shows its shard's time, or the metadata's if it is not stored."""
    source = tmp_path / "rgb"
    array = zarr.create_array(source, shape=(40, 50, 3), chunks=(16, 16, 3),
                              shards=(32, 32, 3), dtype="u1", fill_value=0)
    array[:32, :32] = 7
    with mounted(source, tmp_path / "mnt", "--format", "png") as mnt:
        row = mnt / "planes/y000"
        assert os.listdir(row) == [f"y000-x00{x}.png" for x in range(4)]
        times = [(row / name).stat().st_mtime_ns for name in os.listdir(row)]
        assert times[0] == times[1] == (source / "c/0/0/0").stat().st_mtime_ns
        assert times[2] == times[3] == (source / "zarr.json").stat().st_mtime_ns
        assert all((row / n).stat().st_size == len((row / n).read_bytes()) for n in os.listdir(row))
        tile = np.arange(16 * 16 * 3, dtype="u1").reshape(16, 16, 3)
        png = io.BytesIO()
        Image.fromarray(tile).save(png, format="PNG")
        (mnt / tile_path(1, 2, "png")).write_bytes(png.getvalue())
    stored = zarr.open_array(source)
    np.testing.assert_array_equal(stored[16:32, 32:48], tile)
    assert stored[:32, :32].min() == 7 and stored[32:].max() == 0 and stored[:16, 32:].max() == 0


def test_a_single_tile_image_is_one_file_at_the_array_root(tmp_path):
    zarr.create_array(tmp_path / "one", shape=(1, 8, 8), chunks=(1, 8, 8), dtype="u1")[:] = 5
    with mounted(tmp_path / "one", tmp_path / "mnt", "--read-only", "--format", "npy") as mnt:
        assert files(mnt) == ["c.npy"]
        assert np.load(mnt / "c.npy").max() == 5
