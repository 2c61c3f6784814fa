"""Stacks of planes are shown plane by plane (issue 23 point 5): under ``--format png`` and
``tiff`` an OME-Zarr ``t, c, z, y, x`` or ``c, y, x`` array shows each 2-D plane as an image
file, in folders named after the axes (``t/t001/c/c002/z/z003/y/y000/x/x001.png``), and a
plane written back lands in exactly that plane."""

from __future__ import annotations

import io
import itertools
import os

import numpy as np
import pytest
import tifffile
import zarr
from PIL import Image

from tests.mounting import mounted

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]

AXES = ("t", "c", "z", "y", "x")


def _path(axes: tuple[str, ...], shown: dict[str, int], suffix: str) -> str:
    """A plane's path: each shown axis as its name, then its name and value (under 1000)."""
    names = [part for axis, value in shown.items() for part in (axis, f"{axis}{value:03d}")]
    return "/".join(["c", *names]) + suffix


@pytest.fixture
def tczyx(tmp_path):
    """5-D uint16 as OME-Zarr 0.5 writes it (dimension names = axes); chunks of 2 z planes."""
    data = np.random.default_rng(5).integers(0, 65535, (2, 3, 4, 100, 130), dtype="u2")
    zarr.create_array(tmp_path / "img", data=data, chunks=(1, 1, 2, 64, 64),
                      dimension_names=AXES)
    return tmp_path / "img", data


def test_every_plane_is_a_png_named_by_its_axes(tczyx, tmp_path):
    source, data = tczyx
    with mounted(source, tmp_path / "mnt", "--format", "png", "--read-only") as mnt:
        found = sorted(str(p.relative_to(mnt)) for p in mnt.rglob("*.png"))
        expected = sorted(
            _path(AXES, dict(zip(AXES, (t, c, z, y, x), strict=True)), ".png")
            for t, c, z, y, x in itertools.product(range(2), range(3), range(4), range(2),
                                                   range(3)))
        assert found == expected
        for name in ("c/t/t001/c/c002/z/z003/y/y001/x/x002.png",
                     "c/t/t000/c/c000/z/z000/y/y000/x/x000.png"):
            t, c, z, y, x = (int(part[1:4]) for part in name.split("/")[2::2])
            file = mnt / name
            with Image.open(file) as image:
                shown = np.asarray(image)
            np.testing.assert_array_equal(
                shown, data[t, c, z, y * 64 : (y + 1) * 64, x * 64 : (x + 1) * 64])
            assert os.stat(file).st_size == len(file.read_bytes())


def test_a_plane_saved_by_pillow_lands_in_that_plane_only(tczyx, tmp_path):
    source, data = tczyx
    new = np.full((36, 64), 4242, dtype="u2")  # the edge tile of row 1 (100 - 64 rows)
    with mounted(source, tmp_path / "mnt", "--format", "png") as mnt:
        Image.fromarray(new).save(mnt / "c/t/t001/c/c002/z/z003/y/y001/x/x001.png")
    stored = zarr.open_array(source)[...]
    np.testing.assert_array_equal(stored[1, 2, 3, 64:100, 64:128], new)
    expected = data.copy()
    expected[1, 2, 3, 64:100, 64:128] = new
    np.testing.assert_array_equal(stored, expected)  # z=2, the plane beside it in the chunk


def test_unnamed_axes_of_a_v2_array_show_as_tiff_planes(tmp_path):
    data = np.random.default_rng(6).integers(0, 255, (3, 100, 70), dtype="u1")
    zarr.create_array(tmp_path / "v2", data=data, chunks=(3, 64, 64), zarr_format=2)
    with mounted(tmp_path / "v2", tmp_path / "mnt", "--format", "tiff") as mnt:
        assert len(list(mnt.rglob("*.tiff"))) == 3 * 2 * 2
        file = mnt / "c/d0_/d0_001/d1_/d1_001/d2_/d2_000.tiff"
        np.testing.assert_array_equal(tifffile.imread(file), data[1, 64:100, 0:64])
        plane = np.arange(36 * 64, dtype="u1").reshape(36, 64)
        out = io.BytesIO()
        tifffile.imwrite(out, plane)
        file.write_bytes(out.getvalue())
    stored = zarr.open_array(tmp_path / "v2")[...]
    expected = data.copy()
    expected[1, 64:100, 0:64] = plane
    np.testing.assert_array_equal(stored, expected)


def test_a_named_last_dimension_must_name_samples_to_make_a_colour_picture():
    from zarrfuse.filesystem.images.planes import plane_chunks  # noqa: PLC0415

    shape, chunks = (64, 64, 3), (16, 16, 3)
    assert plane_chunks("tiff", shape, chunks) is None  # unnamed: by shape, one picture
    assert plane_chunks("tiff", shape, chunks, ["y", "x", "c"]) is None
    assert plane_chunks("tiff", shape, chunks, ["y", "x", None]) is None
    assert plane_chunks("tiff", shape, chunks, ["z", "y", "x"]) == (1, 16, 3)  # planes
