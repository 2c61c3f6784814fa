"""Desktop programs on a real mount (issue 23): GIMP's save of a chunk image lands in exactly
that chunk; the thumbnailer of file managers and image viewers (gdk-pixbuf: tumbler,
Nautilus, eog, ristretto) and exiftool read chunk files and the whole image right.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import zarr
from PIL import Image

from tests.mounting import mounted, run_with_timeout
from tests.picture_paths import tile_path

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(180)]

TILE = 32
GRID = (2, 3)


@pytest.fixture
def image(tmp_path) -> tuple[Path, np.ndarray]:
    """A 64 x 96 uint8 y,x image in 32 x 32 chunks (compressed, as zarr writes by default)."""
    data = np.random.default_rng(3).integers(0, 255, (GRID[0] * TILE, GRID[1] * TILE),
                                             dtype="u1")
    zarr.create_array(tmp_path / "img", data=data, chunks=(TILE, TILE),
                      dimension_names=("y", "x"))
    return tmp_path / "img", data


def _tile(data: np.ndarray, row: int, col: int) -> np.ndarray:
    return data[row * TILE : (row + 1) * TILE, col * TILE : (col + 1) * TILE]


def _chunk_file(mnt: Path, row: int, col: int, suffix: str) -> Path:
    return mnt / tile_path(row, col, suffix)


def _pixels(path: Path) -> np.ndarray:
    """The image's pixels, copied: Pillow maps an uncompressed TIFF, and the mapping (kept
    by the image object) would keep the mount busy at unmount, as on any filesystem."""
    with Image.open(path) as shown:
        return np.array(shown)


def _errors(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if " ERROR " in line]


GIMP_INVERT = """
(let* ((image (car (gimp-file-load RUN-NONINTERACTIVE "{0}" "{0}")))
       (drawable (car (gimp-image-get-active-drawable image))))
  (gimp-drawable-invert drawable FALSE)
  (gimp-file-save RUN-NONINTERACTIVE image drawable "{0}" "{0}"))
"""


def gimp_invert(path: Path, home: Path) -> None:
    """GIMP opens the image, inverts it and saves it over itself, as File > Overwrite does."""
    home.mkdir(exist_ok=True)
    result = run_with_timeout(
        ["gimp-console", "-i", "-d", "-f", "-n", "-b", GIMP_INVERT.format(path),
         "-b", "(gimp-quit 0)"],
        120, env={**os.environ, "HOME": str(home)},
    )
    # A failed batch command still exits 0: only its message tells.
    assert "batch command executed successfully" in result.stdout + result.stderr, result


@pytest.mark.parametrize("suffix", ["tiff", "png"])
def test_gimp_saves_exactly_the_chunk_it_edited(image, tmp_path, suffix):
    source, data = image
    log = tmp_path / "daemon.log"
    with mounted(source, tmp_path / "mnt", "--format", suffix, "--log-file", str(log)) as mnt:
        gimp_invert(_chunk_file(mnt, 1, 2, suffix), tmp_path / "home")
        np.testing.assert_array_equal(_pixels(_chunk_file(mnt, 1, 2, suffix)),
                                      255 - _tile(data, 1, 2))
    expected = data.copy()
    expected[TILE:, 2 * TILE :] = 255 - _tile(data, 1, 2)
    np.testing.assert_array_equal(zarr.open_array(source)[:], expected)
    assert _errors(log) == []


def _thumbnail(path: Path, size: int, out: Path) -> np.ndarray:
    """gdk-pixbuf's thumbnail at the image's own size (no scaling: exact pixels), gray."""
    run_with_timeout(["gdk-pixbuf-thumbnailer", "-s", str(size), path, out], 60)
    with Image.open(out) as thumbnail:
        rgb = np.asarray(thumbnail)[..., :3]
    assert (rgb == rgb[..., :1]).all()  # a gray image: the same value in R, G and B
    return rgb[..., 0]


def _exif(path: Path) -> dict[str, object]:
    out = run_with_timeout(["exiftool", "-j", "-ImageWidth", "-ImageHeight",
                            "-ImageDescription", path], 60).stdout
    (tags,) = json.loads(out)
    return tags


@pytest.mark.parametrize("suffix", ["tiff", "png"])
def test_thumbnailer_and_exiftool_read_chunk_files(image, tmp_path, suffix):
    source, data = image
    with mounted(source, tmp_path / "mnt", "--format", suffix, "--read-only") as mnt:
        for row, col in np.ndindex(*GRID):
            chunk = _chunk_file(mnt, row, col, suffix)
            np.testing.assert_array_equal(
                _thumbnail(chunk, TILE, tmp_path / "thumb.png"), _tile(data, row, col))
            tags = _exif(chunk)
            assert (tags["ImageWidth"], tags["ImageHeight"]) == (TILE, TILE), tags


def test_thumbnailer_and_exiftool_read_the_whole_image(image, tmp_path):
    source, data = image
    with mounted(source, tmp_path / "mnt", "--format", "ome-tiff", "--read-only") as mnt:
        whole = mnt / "img.ome.tif"
        np.testing.assert_array_equal(
            _thumbnail(whole, max(data.shape), tmp_path / "thumb.png"), data)
        tags = _exif(whole)
        assert (tags["ImageWidth"], tags["ImageHeight"]) == (data.shape[1], data.shape[0])
        assert "<OME" in str(tags["ImageDescription"]), tags


@pytest.mark.parametrize("names", [None, ("y", "x", "c")], ids=["unnamed", "named"])
def test_a_colour_chunk_is_one_colour_picture_and_writes_back_exactly(tmp_path, names):
    """Issue 31 point 1: a ``y, x, c`` uint8 array with 3 samples shows each ``--format tiff``
    chunk as one RGB picture: gdk-pixbuf's thumbnail (eog's, Thunar's) is the chunk in colour
    at full size, and a colour picture written back (Pillow's TIFF) is stored exactly."""
    data = np.random.default_rng(5).integers(0, 255, (2 * TILE, 3 * TILE, 3), dtype="u1")
    source = tmp_path / "rgb"
    zarr.create_array(source, data=data, chunks=(TILE, TILE, 3), dimension_names=names)
    edited = np.random.default_rng(6).integers(0, 255, (TILE, TILE, 3), dtype="u1")
    with mounted(source, tmp_path / "mnt", "--format", "tiff") as mnt:
        files = sorted(p for p in mnt.rglob("*.tiff"))
        assert len(files) == GRID[0] * GRID[1]
        chunk = files[-1]  # row 1, column 2
        out = tmp_path / "thumb.png"
        run_with_timeout(["gdk-pixbuf-thumbnailer", "-s", str(TILE), chunk, out], 60)
        with Image.open(out) as thumbnail:
            np.testing.assert_array_equal(np.asarray(thumbnail.convert("RGB")),
                                          data[TILE:, 2 * TILE :])
        picture = tmp_path / "edited.tiff"
        Image.fromarray(edited, "RGB").save(picture, format="TIFF")
        chunk.write_bytes(picture.read_bytes())
    expected = data.copy()
    expected[TILE:, 2 * TILE :] = edited
    np.testing.assert_array_equal(zarr.open_array(source)[:], expected)
