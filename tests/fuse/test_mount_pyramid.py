"""Edits reach every level (issue 31, point 5): a plane saved into an OME-Zarr image's
full resolution through a ``--format tiff`` mount is downsampled again into every lower
level, by the method the ``multiscales`` metadata names (nearest, mean); an unknown method
leaves the levels stale and the log says so in one line; ``--no-update-pyramid`` leaves
them alone. Images written by hand as the OME-Zarr 0.4 spec shows them (Zarr v2), and by
ome-zarr-py, whose writer names no method (issue 54, point 3): its levels are made again
as its default (``resize``) makes them."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr
from ome_zarr.writer import write_image

from tests.mounting import mounted
from tests.picture_paths import tile_path

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]

SIDE, CHUNK = 128, 32


def _halve(image: np.ndarray, method: str) -> np.ndarray:
    """The level below ``image``, as pyramid writers build it: from the level above."""
    if method == "nearest":
        return image[::2, ::2]
    y, x = image.shape
    return np.rint(image.reshape(y // 2, 2, x // 2, 2).mean(axis=(1, 3))).astype(image.dtype)


def _pyramid(root: Path, method: str | None) -> list[np.ndarray]:
    """Levels 0..2 (128, 64, 32 pixels a side), each from the one above."""
    full = np.random.default_rng(4).integers(0, 255, (SIDE, SIDE), dtype="u1")
    levels = [full]
    for _ in range(2):
        levels.append(_halve(levels[-1], method or "mean"))
    group = zarr.open_group(root, mode="w", zarr_format=2)
    for i, level in enumerate(levels):
        zarr.create_array(root / str(i), data=level, chunks=(CHUNK, CHUNK), zarr_format=2)
    multiscale = {"version": "0.4", "axes": [{"name": "y", "type": "space"},
                                             {"name": "x", "type": "space"}],
                  "datasets": [{"path": str(i), "coordinateTransformations": [
                      {"type": "scale", "scale": [2.0**i, 2.0**i]}]} for i in range(3)]}
    if method is not None:
        multiscale["type"] = method
    group.attrs.update({"multiscales": [multiscale]})
    return levels


def _save_plane(mnt: Path, value: np.ndarray) -> None:
    out = io.BytesIO()
    tifffile.imwrite(out, value)
    (mnt / "0" / tile_path(1, 2, "tiff")).write_bytes(out.getvalue())  # rows 32-63, cols 64-95


@pytest.mark.parametrize("method", ["mean", "nearest"])
def test_a_saved_plane_reaches_every_lower_level(tmp_path, method):
    root = tmp_path / "img.ome.zarr"
    levels = _pyramid(root, method)
    edited = np.arange(CHUNK * CHUNK, dtype="u1").reshape(CHUNK, CHUNK)
    with mounted(root, tmp_path / "mnt", "--format", "tiff") as mnt:
        _save_plane(mnt, edited)
        shown = tifffile.imread(mnt / "1" / tile_path(0, 1, "tiff"))  # level 1: 0-31, 32-63
    full = levels[0].copy()
    full[32:64, 64:96] = edited
    np.testing.assert_array_equal(zarr.open_array(root / "0")[:], full)
    expected = full
    for level in (1, 2):
        expected = _halve(expected, method)  # the whole level, as a writer would make it
        np.testing.assert_array_equal(zarr.open_array(root / str(level))[:], expected)
    np.testing.assert_array_equal(shown, zarr.open_array(root / "1")[0:32, 32:64])


def test_an_unknown_method_leaves_the_levels_stale_and_says_so(tmp_path):
    root = tmp_path / "img.ome.zarr"
    levels = _pyramid(root, "gaussian")
    log = tmp_path / "mount.log"
    with mounted(root, tmp_path / "mnt", "--format", "tiff", "--log-file", log) as mnt:
        _save_plane(mnt, np.zeros((CHUNK, CHUNK), "u1"))
        _save_plane(mnt, np.ones((CHUNK, CHUNK), "u1"))
    for level in (1, 2):
        np.testing.assert_array_equal(zarr.open_array(root / str(level))[:], levels[level])
    stale = [line for line in log.read_text().splitlines() if "now stale" in line]
    assert len(stale) == 1 and "1, 2" in stale[0] and "gaussian" in stale[0], stale


def test_no_update_pyramid_leaves_the_levels_alone(tmp_path):
    root = tmp_path / "img.ome.zarr"
    levels = _pyramid(root, "mean")
    with mounted(root, tmp_path / "mnt", "--format", "tiff", "--no-update-pyramid") as mnt:
        _save_plane(mnt, np.zeros((CHUNK, CHUNK), "u1"))
    for level in (1, 2):
        np.testing.assert_array_equal(zarr.open_array(root / str(level))[:], levels[level])


def _ome_zarr_py_image(root: Path, data: np.ndarray) -> None:
    """ome-zarr-py's image of ``data``, its pyramid made by its defaults."""
    write_image(data, zarr.open_group(root, mode="w"), axes="cyx",
                storage_options={"chunks": (1, 64, 64)})


def test_a_save_into_an_ome_zarr_py_image_reaches_every_level_as_ome_zarr_py_makes_them(
        tmp_path):
    data = np.random.default_rng(6).integers(0, 4000, (2, 250, 190), dtype="u2")
    data[0, 0, 0] = 0  # the lowest value 0: ome-zarr-py clips to it, zarrfuse need not
    root = tmp_path / "img.ome.zarr"
    _ome_zarr_py_image(root, data)
    tile = "s0/planes/c001/y003/c001-y003-x002.tiff"  # the corner: rows 192-249, cols 128-189
    with mounted(root, tmp_path / "mnt", "--format", "tiff") as mnt:
        plane = tifffile.imread(mnt / tile)
        plane[10:40, 5:50] = 65535
        plane[45:, 40:] = 0
        out = io.BytesIO()
        tifffile.imwrite(out, plane)
        (mnt / tile).write_bytes(out.getvalue())
        shown = tifffile.imread(mnt / "s3/planes/c001.tiff")
    data[1, 192:, 128:] = plane
    _ome_zarr_py_image(tmp_path / "expected.ome.zarr", data)  # ome-zarr-py's own levels
    for level in ("s0", "s1", "s2", "s3", "s4"):
        np.testing.assert_array_equal(zarr.open_array(root / level)[:],
                                      zarr.open_array(tmp_path / "expected.ome.zarr" / level)[:],
                                      err_msg=level)
    np.testing.assert_array_equal(shown, zarr.open_array(root / "s3")[1])
