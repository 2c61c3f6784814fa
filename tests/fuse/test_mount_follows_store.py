"""Edits reach every view (issue 31, point 5): a mount of a local store shows chunks other
programs change (zarr-python, another mount) within about a second, whatever its view,
the read-only whole image included; ``--no-watch`` keeps the old caching."""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr

from tests.mounting import mounted
from tests.picture_paths import tile_path

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(180)]

BOUND = 3.0
"""Seconds within which a change must show (documented: about one second)."""


def _within(check: Callable[[], bool], seconds: float = BOUND) -> float | None:
    """How long until ``check()`` held (None: not within ``seconds``)."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if check():
            return time.monotonic() - start
        time.sleep(0.05)
    return None


def _image(path: Path) -> np.ndarray:
    with tifffile.TiffFile(path) as tif:
        return tif.series[0].asarray()


def test_a_plane_saved_through_one_mount_shows_in_the_whole_image_of_another(tmp_path):
    """GIMP's save through a ``--format tiff`` mount, then the read-only ``--format
    ome-tiff`` mount of the same store: its whole image and the ImageJ strip file show the
    new pixels, without remounting."""
    data = np.random.default_rng(1).integers(0, 255, (64, 96), dtype="u1")
    zarr.create_array(tmp_path / "img", data=data, chunks=(32, 32),
                      dimension_names=("y", "x"))
    edited = np.full((32, 32), 7, dtype="u1")
    expected = data.copy()
    expected[32:, 64:] = edited
    with (mounted(tmp_path / "img", tmp_path / "whole", "--format", "ome-tiff") as whole,
          mounted(tmp_path / "img", tmp_path / "tiles", "--format", "tiff") as tiles):
        np.testing.assert_array_equal(_image(whole / "img.ome.tif"), data)  # cached now
        out = io.BytesIO()
        tifffile.imwrite(out, edited)
        (tiles / tile_path(1, 2, "tiff")).write_bytes(out.getvalue())
        for name in ("img.ome.tif", "img.imagej.tif"):
            took = _within(lambda n=name: np.array_equal(_image(whole / n), expected))
            assert took is not None, f"{name} still shows the old pixels after {BOUND} s"


def test_a_chunk_zarr_python_rewrites_shows_in_a_read_only_raw_mount(tmp_path):
    """A read-only raw mount keeps chunk pages and open chunks for its life; a chunk
    zarr-python rewrites (in place) shows all the same."""
    zarr.create_array(tmp_path / "a", data=np.ones((8, 8), "u1"), chunks=(4, 4),
                      compressors=None)
    with mounted(tmp_path / "a", tmp_path / "mnt", "--read-only") as mnt:
        chunk = mnt / "c/0/000/0/001"
        assert chunk.read_bytes() == bytes([1]) * 16
        zarr.open_array(tmp_path / "a", mode="r+")[:4, 4:] = 9  # in place, same inode
        assert _within(lambda: chunk.read_bytes() == bytes([9]) * 16) is not None
        assert (mnt / "c/0/000/0/000").read_bytes() == bytes([1]) * 16


def test_without_watching_a_read_only_mount_keeps_what_it_read(tmp_path):
    zarr.create_array(tmp_path / "a", data=np.ones((8, 8), "u1"), chunks=(4, 4),
                      compressors=None)
    with mounted(tmp_path / "a", tmp_path / "mnt", "--read-only", "--no-watch") as mnt:
        chunk = mnt / "c/0/000/0/001"
        assert chunk.read_bytes() == bytes([1]) * 16
        zarr.open_array(tmp_path / "a", mode="r+")[:4, 4:] = 9
        time.sleep(1.5)
        assert chunk.read_bytes() == bytes([1]) * 16
