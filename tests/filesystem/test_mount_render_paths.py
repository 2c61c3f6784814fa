"""Rendered views leave grid dimensions of extent 1 out of the path: one image row of tiles
shares a directory, in grid order, and a 5-D image with one t, c and z is a 2-D tree."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tifffile
import zarr
from PIL import Image

from tests.mounting import mounted

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]


def files(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_rgb_tiles_of_a_row_share_a_directory(tmp_path):
    data = np.random.default_rng(2).integers(0, 255, (40, 50, 3), dtype="u1")
    zarr.create_array(tmp_path / "rgb", shape=data.shape, chunks=(16, 16, 3), dtype="u1")[:] = data
    with mounted(tmp_path / "rgb", tmp_path / "mnt", "--read-only", "--format", "png") as mnt:
        assert files(mnt) == [f"c/0/00{y}/0/00{x}.png" for y in range(3) for x in range(4)]
        tile = np.asarray(Image.open(mnt / "c/0/002/0/003.png"))
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
        listed = files(mnt)
        assert listed[0] == "c/0/000/0/000.tiff" and len(listed) == 9
        assert all(name.count("/") == 4 for name in listed)  # c/N/YYY/N/XXX
        tile = tifffile.imread(mnt / "c/0/001/0/002.tiff")
        tifffile.imwrite(tmp_path / "new.tiff", np.full(tile.shape, 9, tile.dtype))
        (mnt / "c/0/001/0/002.tiff").write_bytes((tmp_path / "new.tiff").read_bytes())
    stored = zarr.open_array(source)[0, 0, 0]
    assert (stored[16:32, 32:40] == 9).all()
    assert stored[:16].max() == 3 and stored[32:].max() == 3


def test_a_single_tile_image_is_one_file_at_the_array_root(tmp_path):
    zarr.create_array(tmp_path / "one", shape=(1, 8, 8), chunks=(1, 8, 8), dtype="u1")[:] = 5
    with mounted(tmp_path / "one", tmp_path / "mnt", "--read-only", "--format", "npy") as mnt:
        assert files(mnt) == ["c.npy"]
        assert np.load(mnt / "c.npy").max() == 5
