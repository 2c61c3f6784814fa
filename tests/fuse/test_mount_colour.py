"""Colour as the data means it (issue 31, point 2): an OME-Zarr image whose channels are the
red, green and blue of one picture is one colour whole image; fluorescence channels stay
grey; ``--colour`` overrides. Read by tifffile and by gdk-pixbuf (the thumbnailer of eog,
Thunar, Nautilus) on a real mount, from data written as other writers write it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tifffile
import zarr
from PIL import Image

from tests.mounting import mounted, run_with_timeout

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(180)]

RGB = [{"label": "red", "color": "FF0000"}, {"label": "green", "color": "00FF00"},
       {"label": "blue", "color": "0000FF"}]


def _picture(shape: tuple[int, ...], seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 255, shape, dtype="u1")


def _ome_zarr_v04(root: Path, levels: list[np.ndarray], axes: list[dict[str, str]],
                  chunks: tuple[int, ...], omero: dict[str, Any]) -> None:
    """An OME-Zarr 0.4 image as the spec shows it (Zarr v2, metadata in .zattrs)."""
    group = zarr.open_group(root, mode="w", zarr_format=2)
    for i, level in enumerate(levels):
        zarr.create_array(root / str(i), data=level, chunks=chunks, zarr_format=2)
    group.attrs.update({
        "multiscales": [{"version": "0.4", "axes": axes, "datasets": [
            {"path": str(i), "coordinateTransformations": [
                {"type": "scale", "scale": [1.0] * (len(axes) - 2) + [2.0**i, 2.0**i]}]}
            for i in range(len(levels))]}],
        "omero": omero,
    })


CYX = [{"name": "c", "type": "channel"}, {"name": "y", "type": "space"},
       {"name": "x", "type": "space"}]


def _thumbnail(path: Path, size: int, out: Path) -> np.ndarray:
    run_with_timeout(["gdk-pixbuf-thumbnailer", "-s", str(size), path, out], 60)
    with Image.open(out) as image:
        return np.asarray(image.convert("RGB"))


def test_an_rgb_ome_zarr_image_is_one_colour_whole_image_at_every_level(tmp_path):
    full = _picture((3, 96, 128))
    half = np.ascontiguousarray(full[:, ::2, ::2])
    root = tmp_path / "photo.ome.zarr"
    _ome_zarr_v04(root, [full, half], CYX, (1, 32, 32), {"channels": RGB})
    with mounted(root, tmp_path / "mnt", "--format", "ome-tiff") as mnt:
        image = mnt / "photo.ome.tif"
        with tifffile.TiffFile(image) as tif:
            series = tif.series[0]
            assert series.axes == "YXS"
            assert tif.pages[0].photometric == tifffile.PHOTOMETRIC.RGB
            np.testing.assert_array_equal(series.asarray(), np.moveaxis(full, 0, -1))
            np.testing.assert_array_equal(series.levels[1].asarray(), np.moveaxis(half, 0, -1))
            assert 'SamplesPerPixel="3"' in tif.ome_metadata
        # eog's and the file managers' thumbnail: the picture, in colour, at full size.
        np.testing.assert_array_equal(_thumbnail(image, 128, tmp_path / "t.png"),
                                      np.moveaxis(full, 0, -1))


def test_a_five_axis_image_whose_rendering_model_is_colour_has_colour_pages(tmp_path):
    """OME-Zarr 0.5 (Zarr v3), t, c, z, y, x with the ``color`` model and no channel
    colours: one colour page per time point and plane."""
    data = _picture((2, 3, 2, 40, 48), seed=2)
    root = tmp_path / "movie.ome.zarr"
    group = zarr.open_group(root, mode="w", zarr_format=3)
    zarr.create_array(root / "0", data=data, chunks=(1, 1, 1, 32, 32),
                      dimension_names=("t", "c", "z", "y", "x"))
    axes = [{"name": "t", "type": "time"}, *CYX[:1], {"name": "z", "type": "space"},
            *CYX[1:]]
    group.attrs.update({"ome": {"version": "0.5", "multiscales": [{"axes": axes, "datasets": [
        {"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1.0] * 5}]}]}],
        "omero": {"rdefs": {"model": "color"}, "channels": [{"label": n} for n in "RGB"]}}})
    with (mounted(root, tmp_path / "mnt", "--format", "ome-tiff") as mnt,
          tifffile.TiffFile(mnt / "movie.ome.tif") as tif):
        series = tif.series[0]
        assert series.axes == "TZYXS"
        np.testing.assert_array_equal(series.asarray(), np.moveaxis(data, 1, -1))


def test_fluorescence_channels_stay_grey_and_colour_never_and_always_decide(tmp_path):
    """Three stains coloured blue, green, red are channels, not a picture; ``--colour
    never`` keeps even a photograph grey; ``--colour always`` makes a plain ``c, y, x``
    array with three uint8 channels colour."""
    stains = _picture((3, 64, 64), seed=3)
    cells = tmp_path / "cells.ome.zarr"
    _ome_zarr_v04(cells, [stains], CYX, (1, 32, 32), {"channels": [
        {"label": "DAPI", "color": "0000FF"}, {"label": "GFP", "color": "00FF00"},
        {"label": "mCherry", "color": "FF0000"}]})
    with (mounted(cells, tmp_path / "m1", "--format", "ome-tiff") as mnt,
          tifffile.TiffFile(mnt / "cells.ome.tif") as tif):
        assert tif.series[0].axes == "CYX"
        np.testing.assert_array_equal(tif.series[0].asarray(), stains)
    photo = tmp_path / "photo.ome.zarr"
    _ome_zarr_v04(photo, [stains], CYX, (3, 32, 32), {"channels": RGB})
    with (mounted(photo, tmp_path / "m2", "--format", "ome-tiff", "--colour", "never") as mnt,
          tifffile.TiffFile(mnt / "photo.ome.tif") as tif):
        assert tif.series[0].axes == "CYX"
    plain = tmp_path / "plain"
    zarr.create_array(plain, data=stains, chunks=(3, 32, 32), dimension_names=("c", "y", "x"))
    with (mounted(plain, tmp_path / "m3", "--format", "ome-tiff", "--colour", "always") as mnt,
          tifffile.TiffFile(mnt / "plain.ome.tif") as tif):
        assert tif.series[0].axes == "YXS"
        np.testing.assert_array_equal(tif.series[0].asarray(), np.moveaxis(stains, 0, -1))


@pytest.mark.parametrize(("fmt", "channels_per_chunk"),
                         [("tiff", 3), ("png", 3), ("tiff", 1), ("png", 1)])
def test_the_tiles_of_an_rgb_ome_zarr_image_are_colour_pictures_and_write_back(
    tmp_path, fmt, channels_per_chunk
):
    """Issue 31 point 2, the chunk views: each tile is one colour picture, whether a chunk
    holds all three channels or one (the tile is then made from three chunks); gdk-pixbuf's
    thumbnail is the tile in colour; a colour picture written back stores each channel's
    plane exactly, and nothing else."""
    full = _picture((3, 64, 96), seed=12)
    root = tmp_path / "photo.ome.zarr"
    _ome_zarr_v04(root, [full], CYX, (channels_per_chunk, 32, 32), {"channels": RGB})
    edited = _picture((32, 32, 3), seed=13)
    with mounted(root, tmp_path / "mnt", "--format", fmt) as mnt:
        files = sorted(p.relative_to(mnt).as_posix() for p in mnt.rglob(f"*.{fmt}"))
        assert files == [f"0/planes/y{r:03d}/y{r:03d}-x{c:03d}.{fmt}"
                         for r in range(2) for c in range(3)]
        tile = mnt / f"0/planes/y001/y001-x002.{fmt}"
        with Image.open(tile) as image:
            assert image.mode == "RGB"
            np.testing.assert_array_equal(np.asarray(image),
                                          np.moveaxis(full[:, 32:, 64:], 0, -1))
        np.testing.assert_array_equal(_thumbnail(tile, 32, tmp_path / "t.png"),
                                      np.moveaxis(full[:, 32:, 64:], 0, -1))
        out = tmp_path / f"edited.{fmt}"
        Image.fromarray(edited, "RGB").save(out)
        tile.write_bytes(out.read_bytes())
    expected = full.copy()
    expected[:, 32:, 64:] = np.moveaxis(edited, -1, 0)
    np.testing.assert_array_equal(zarr.open_array(root / "0")[:], expected)


def test_colour_never_keeps_grey_channel_planes_in_the_chunk_view(tmp_path):
    full = _picture((3, 64, 64), seed=14)
    root = tmp_path / "photo.ome.zarr"
    _ome_zarr_v04(root, [full], CYX, (1, 32, 32), {"channels": RGB})
    with mounted(root, tmp_path / "mnt", "--format", "tiff", "--colour", "never") as mnt:
        plane = mnt / "0/planes/c002/y001/c002-y001-x000.tiff"
        np.testing.assert_array_equal(tifffile.imread(plane), full[2, 32:, :32])


def test_vips_and_gdal_read_the_colour_whole_image_in_colour(tmp_path):
    """The colour whole image of an image chunked one channel per chunk (each tile made from
    three chunks), as vips (``vips copy``) and GDAL (``gdal_translate``, its bands' colour
    interpretation) read it: red, green and blue, every pixel."""
    full = _picture((3, 96, 128), seed=15)
    root = tmp_path / "photo.ome.zarr"
    _ome_zarr_v04(root, [full], CYX, (1, 32, 32), {"channels": RGB})
    with mounted(root, tmp_path / "mnt", "--format", "ome-tiff") as mnt:
        image = mnt / "photo.ome.tif"
        info = run_with_timeout(["gdalinfo", image], 60).stdout
        assert [line.split("ColorInterp=")[1] for line in info.splitlines()
                if "ColorInterp=" in line] == ["Red", "Green", "Blue"]
        run_with_timeout(["vips", "copy", image, tmp_path / "vips.png"], 60)
        run_with_timeout(["gdal_translate", "-q", "-of", "PNG", image, tmp_path / "gdal.png"],
                         60)
    for out in ("vips.png", "gdal.png"):
        with Image.open(tmp_path / out) as picture:
            assert picture.mode == "RGB", out
            np.testing.assert_array_equal(np.asarray(picture), np.moveaxis(full, 0, -1))


GIMP_EXPORT = """
(let* ((image (car (gimp-file-load RUN-NONINTERACTIVE "{0}" "{0}")))
       (drawable (car (gimp-image-get-active-drawable image))))
  (file-png-save RUN-NONINTERACTIVE image drawable "{1}" "{1}" 0 9 0 0 0 0 0))
"""


def test_gimp_opens_the_colour_whole_image_in_colour(tmp_path):
    """GIMP (its batch console) loads the colour whole image and exports what it shows:
    red, green and blue, every pixel."""
    full = _picture((3, 96, 128), seed=16)
    root = tmp_path / "photo.ome.zarr"
    _ome_zarr_v04(root, [full], CYX, (1, 32, 32), {"channels": RGB})
    out, home = tmp_path / "gimp.png", tmp_path / "home"
    home.mkdir()
    with mounted(root, tmp_path / "mnt", "--format", "ome-tiff") as mnt:
        result = run_with_timeout(
            ["gimp-console", "-i", "-d", "-f", "-n", "-b",
             GIMP_EXPORT.format(mnt / "photo.ome.tif", out), "-b", "(gimp-quit 0)"],
            120, env={**os.environ, "HOME": str(home)})
    assert "batch command executed successfully" in result.stdout + result.stderr, result
    with Image.open(out) as picture:
        assert picture.mode == "RGB"
        np.testing.assert_array_equal(np.asarray(picture), np.moveaxis(full, 0, -1))
