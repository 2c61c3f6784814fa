"""Fluorescence as Fiji shows it, in every viewer (issue 54, points 1, 2 and 7), on a real
mount: each multichannel image shows as ``NAME.composite.tif`` (8-bit RGB, tiled, its
levels the array's) and every image as ``NAME.preview.png``; real programs (gdk-pixbuf,
the loader of eog and the file managers' thumbnailer; GIMP; feh's Imlib2; vips; GDAL) open
them in colour, pixel for pixel the composite computed here from the array by the formula
``docs/views.md`` gives; ``NAME.imagej.tif`` carries the channels' LUTs and ranges and
ImageJ 1.x opens it as a composite. Data: OME-Zarr 0.4 (Zarr v2) and 0.5 (Zarr v3) written
by hand as the spec shows it, 3 channels of uint16."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tifffile
import zarr
from PIL import Image

from tests.mounting import mounted, run_with_timeout

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(300)]

CYX = [{"name": "c", "type": "channel"}, {"name": "y", "type": "space"},
       {"name": "x", "type": "space"}]
HEX = {"red": "FF0000", "green": "00FF00", "blue": "0000FF", "magenta": "FF00FF",
       "cyan": "00FFFF", "yellow": "FFFF00"}
WINDOWS = [(1000, 30000), (0, 65535), (5000, 9000)]


def rgb_of(name: str) -> tuple[int, int, int]:
    text = HEX[name]
    return int(text[:2], 16), int(text[2:4], 16), int(text[4:], 16)


def composite(data: np.ndarray, colours: Sequence[tuple[int, int, int]],
              windows: Sequence[tuple[float, float]]) -> np.ndarray:
    """docs/views.md's formula for integer channels ``[C, Y, X]``, channel by channel."""
    total = np.zeros((*data.shape[1:], 3), dtype=np.int64)
    for values, colour, (start, end) in zip(data, colours, windows, strict=True):
        grey = np.floor((values.astype(np.float64) - start) * (256 / (end - start + 1)) + 0.5)
        grey = np.clip(grey, 0, 255).astype(np.int64)
        total += grey[..., None] * np.array(colour) // 255
    return np.minimum(total, 255).astype(np.uint8)


def cells(shape: tuple[int, int] = (96, 160), seed: int = 5) -> np.ndarray:
    """Three uint16 channels with structure at every scale (a gradient, spots, noise)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[: shape[0], : shape[1]]
    return np.stack([(y * 300 + x * 50).astype(np.uint16),
                     rng.integers(0, 65535, shape, dtype=np.uint16),
                     (4000 + (x % 17) * 400 + rng.integers(0, 500, shape)).astype(np.uint16)])


def ome_zarr(root: Path, levels: list[np.ndarray], omero: dict[str, Any] | None, *,
             version: str, chunks: tuple[int, ...] = (1, 32, 32)) -> None:
    """An OME-Zarr image as the spec shows it: 0.4 on Zarr v2 (metadata at the top of
    .zattrs), 0.5 on Zarr v3 (under "ome")."""
    fmt = 2 if version == "0.4" else 3
    group = zarr.open_group(root, mode="w", zarr_format=fmt)
    for i, level in enumerate(levels):
        zarr.create_array(root / str(i), data=level, chunks=chunks, zarr_format=fmt)
    multiscales = [{"axes": CYX, "datasets": [
        {"path": str(i), "coordinateTransformations": [
            {"type": "scale", "scale": [1.0, 2.0**i, 2.0**i]}]} for i in range(len(levels))]}]
    ome: dict[str, Any] = {"multiscales": multiscales, **({"omero": omero} if omero else {})}
    if fmt == 2:
        multiscales[0]["version"] = "0.4"
        group.attrs.update(ome)
    else:
        group.attrs.update({"ome": {"version": "0.5", **ome}})


def omero(names: Sequence[str], windows: Sequence[tuple[int, int]] = WINDOWS) -> dict:
    return {"channels": [
        {"label": n, "color": HEX[n], "active": True,
         "window": {"min": 0, "max": 65535, "start": s, "end": e}}
        for n, (s, e) in zip(names, windows, strict=True)]}


def _png(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"))


def gdk_pixbuf(path: Path, size: int, work: Path) -> np.ndarray:
    """gdk-pixbuf (eog's loader) through the file managers' thumbnailer; at the image's
    own size it is not scaled."""
    run_with_timeout(["gdk-pixbuf-thumbnailer", "-s", str(size), path, work / "gdk.png"], 60)
    return _png(work / "gdk.png")


GIMP_EXPORT = """
(let* ((image (car (gimp-file-load RUN-NONINTERACTIVE "{0}" "{0}")))
       (drawable (car (gimp-image-get-active-drawable image))))
  (gimp-file-save RUN-NONINTERACTIVE image drawable "{1}" "{1}"))
"""


def gimp(path: Path, _size: int, work: Path) -> np.ndarray:
    (work / "home").mkdir(exist_ok=True)
    out = work / "gimp.png"
    result = run_with_timeout(
        ["gimp-console", "-i", "-d", "-f", "-n", "-b", GIMP_EXPORT.format(path, out),
         "-b", "(gimp-quit 0)"], 180, env={**os.environ, "HOME": str(work / "home")})
    assert "batch command executed successfully" in result.stdout + result.stderr, result
    return _png(out)


def feh(path: Path, size: int, work: Path) -> np.ndarray:
    """feh's montage of one image, thumbnail the image's own size (not scaled), written
    without a display: the pixels Imlib2 loaded."""
    with Image.open(path) as image:
        width, height = image.size
    run_with_timeout(["feh", "-m", "-O", work / "feh.png", "-W", str(width), "-E",
                      str(height), "-y", str(width), path], 60)
    return _png(work / "feh.png")[:height, :width]


def vips(path: Path, _size: int, work: Path) -> np.ndarray:
    run_with_timeout(["vips", "copy", path, work / "vips.png"], 60)
    return _png(work / "vips.png")


def gdal(path: Path, _size: int, work: Path) -> np.ndarray:
    run_with_timeout(["gdal_translate", "-q", "-of", "PNG", path, work / "gdal.png"], 60)
    return _png(work / "gdal.png")


PROGRAMS = {"gdk-pixbuf": gdk_pixbuf, "GIMP": gimp, "feh": feh, "vips": vips, "GDAL": gdal}


@pytest.fixture(scope="module", params=[("0.4", ("red", "green", "blue")),
                                        ("0.5", ("magenta", "cyan", "yellow"))],
                ids=["rgb-v0.4", "mcy-v0.5"])
def mount(request, tmp_path_factory):
    """A 3-channel uint16 image with two levels, mounted as whole images."""
    version, names = request.param
    work = tmp_path_factory.mktemp("composite")
    full = cells()
    half = np.ascontiguousarray(full[:, ::2, ::2])
    ome_zarr(work / "cells.ome.zarr", [full, half], omero(names), version=version)
    with mounted(work / "cells.ome.zarr", work / "mnt", "--format", "ome-tiff") as mnt:
        expected = [composite(level, [rgb_of(n) for n in names], WINDOWS)
                    for level in (full, half)]
        yield mnt, expected, names, work


def test_the_composite_and_preview_are_listed_and_tifffile_reads_every_level(mount):
    mnt, expected, _, _ = mount
    assert sorted(p.name for p in mnt.iterdir()) == [
        "cells.composite.tif", "cells.imagej.tif", "cells.ome.tif", "cells.preview.png"]
    with tifffile.TiffFile(mnt / "cells.composite.tif") as tif:
        page = tif.pages[0]
        assert page.is_tiled and page.photometric == tifffile.PHOTOMETRIC.RGB
        assert page.dtype == np.uint8 and len(tif.pages) == 1
        series = tif.series[0]
        assert len(series.levels) == 2
        for level, want in zip(series.levels, expected, strict=True):
            np.testing.assert_array_equal(level.asarray(), want)
    preview = _png(mnt / "cells.preview.png")
    np.testing.assert_array_equal(preview, expected[0])  # 160 wide: level 0, every pixel
    assert (mnt / "cells.preview.png").stat().st_size < 2_000_000


@pytest.mark.parametrize("program", list(PROGRAMS))
def test_real_programs_open_the_composite_in_colour(mount, program, tmp_path):
    mnt, expected, _, _ = mount
    if shutil.which({"gdk-pixbuf": "gdk-pixbuf-thumbnailer", "GIMP": "gimp-console",
                     "GDAL": "gdal_translate"}.get(program, program.lower())) is None:
        pytest.fail(f"{program} is not installed: scripts/dev installs it")
    pixels = PROGRAMS[program](mnt / "cells.composite.tif", 160, tmp_path)
    np.testing.assert_array_equal(pixels, expected[0])


def test_the_thumbnailer_thumbnails_the_preview_in_colour(mount, tmp_path):
    mnt, expected, _, _ = mount
    np.testing.assert_array_equal(gdk_pixbuf(mnt / "cells.preview.png", 160, tmp_path),
                                  expected[0])


def test_the_imagej_file_carries_the_luts_and_ranges_in_composite_mode(mount, tmp_path):
    mnt, _, names, _ = mount
    with tifffile.TiffFile(mnt / "cells.imagej.tif") as tif:
        meta = tif.imagej_metadata
        assert meta is not None
        if names[0] != "red":  # red, green, blue uint16 is one RGB48 picture, no channels
            assert meta["mode"] == "composite" and meta["channels"] == 3
        assert meta["Ranges"] == tuple(float(v) for w in WINDOWS for v in w)
        ramp = np.arange(256)
        for lut, name in zip(meta["LUTs"], names, strict=True):
            np.testing.assert_array_equal(
                lut, np.array([ramp * k // 255 for k in rgb_of(name)], dtype=np.uint8))
    if shutil.which("imagej") is None:
        pytest.fail("imagej is not installed: scripts/dev installs it")
    macro = tmp_path / "look.ijm"
    macro.write_text(LOOK)
    result = run_with_timeout(["xvfb-run", "-a", "imagej", "-b", macro,
                               str(mnt / "cells.imagej.tif")], 120, check=False,
                              env={**os.environ, "HOME": str(tmp_path)})
    lines = re.findall(r"^channel .*$", result.stdout + result.stderr, re.M)
    assert lines == [f"channel {c + 1} composite {s} {e} {' '.join(map(str, rgb_of(n)))}"
                     for c, (n, (s, e)) in enumerate(zip(names, WINDOWS, strict=True))], (
        result.stdout + result.stderr)


LOOK = """
open(getArgument());
for (c = 1; c <= nSlices; c++) {
  Stack.setChannel(c);
  Stack.getDisplayMode(mode);
  getMinAndMax(lo, hi);
  getLut(r, g, b);
  print("channel " + c + " " + mode + " " + lo + " " + hi + " " + r[255] + " " + g[255]
        + " " + b[255]);
}
"""


def test_without_omero_fiji_defaults_colour_and_window_the_channels(tmp_path):
    """No ``omero``: ImageJ's colours by index (red, green, blue) and each channel's own
    minimum and maximum, measured on the smallest level (here the only one)."""
    data = cells(seed=9)
    ome_zarr(tmp_path / "plain.ome.zarr", [data], None, version="0.5")
    windows = [(float(c.min()), float(c.max())) for c in data]
    expected = composite(data, [(255, 0, 0), (0, 255, 0), (0, 0, 255)], windows)
    with mounted(tmp_path / "plain.ome.zarr", tmp_path / "mnt", "--format", "ome-tiff") as mnt:
        np.testing.assert_array_equal(tifffile.imread(mnt / "plain.composite.tif"), expected)
        np.testing.assert_array_equal(_png(mnt / "plain.preview.png"), expected)


def test_a_large_image_previews_its_smallest_level_that_fits(tmp_path):
    """A 2048 x 1536 image with levels 1024 x 768 and 512 x 384: the preview is the largest
    level that fits in 768 x 768 (the third), under 2 MB."""
    full = cells((1536, 2048), seed=3)
    levels = [full, np.ascontiguousarray(full[:, ::2, ::2]),
              np.ascontiguousarray(full[:, ::4, ::4])]
    ome_zarr(tmp_path / "big.ome.zarr", levels, omero(["red", "green", "blue"]),
             version="0.4", chunks=(1, 256, 256))
    with mounted(tmp_path / "big.ome.zarr", tmp_path / "mnt", "--format", "ome-tiff") as mnt:
        preview = mnt / "big.preview.png"
        assert preview.stat().st_size < 2_000_000
        np.testing.assert_array_equal(
            gdk_pixbuf(preview, 512, tmp_path),
            composite(levels[2], [rgb_of(n) for n in ("red", "green", "blue")], WINDOWS))


def test_every_well_of_a_plate_has_a_preview_the_thumbnailer_shows_in_colour(tmp_path):
    """An HCS plate (OME-Zarr 0.4) of two wells, two fields each: field 0 of A/1 stained in
    its first channel (red), of B/2 in its second (green), every field 1 in blue; each field
    0's preview is thumbnailed in its colour, pixel for pixel the composite; so is each
    well's own picture beside its folder (``A/1.preview.png``: its first field's preview)."""
    root = tmp_path / "plate.ome.zarr"
    plate = zarr.open_group(root, mode="w", zarr_format=2)
    wells = {"A/1": 0, "B/2": 1}
    plate.attrs.update({"plate": {"version": "0.4", "field_count": 2,
                                  "rows": [{"name": "A"}, {"name": "B"}],
                                  "columns": [{"name": "1"}, {"name": "2"}],
                                  "wells": [{"path": p, "rowIndex": i, "columnIndex": i}
                                            for i, p in enumerate(wells)]}})
    expected = {}
    names = ("red", "green", "blue")
    for path, stained in wells.items():
        zarr.open_group(root / path.split("/")[0], mode="w", zarr_format=2)  # the row
        zarr.open_group(root / path, mode="w", zarr_format=2).attrs.update(
            {"well": {"version": "0.4", "images": [{"path": "0"}, {"path": "1"}]}})
        data = cells((64, 80), seed=stained).copy()
        data[[c for c in range(3) if c != stained]] //= 64  # dim: under the windows
        ome_zarr(root / path / "0", [data], omero(names), version="0.4")
        other = cells((64, 80), seed=2).copy()
        other[:2] //= 64  # field 1: blue, so the well's picture shows which field it is
        ome_zarr(root / path / "1", [other], omero(names), version="0.4")
        expected[path] = composite(data, [rgb_of(n) for n in names], WINDOWS)
    with mounted(root, tmp_path / "mnt", "--format", "ome-tiff") as mnt:
        for path, stained in wells.items():
            thumbnail = gdk_pixbuf(mnt / path / "0.preview.png", 80, tmp_path)
            np.testing.assert_array_equal(thumbnail, expected[path])
            means = thumbnail.reshape(-1, 3).mean(axis=0)
            assert means.argmax() == stained  # the well's own colour dominates
            row, column = path.split("/")
            assert f"{column}.preview.png" in os.listdir(mnt / row)
            well = gdk_pixbuf(mnt / row / f"{column}.preview.png", 80, tmp_path)
            np.testing.assert_array_equal(well, expected[path])
