"""Stacks of planes are shown plane by plane (issue 23 point 5): under ``--format png`` and
``tiff`` an OME-Zarr ``t, c, z, y, x`` or ``c, y, x`` array shows each 2-D plane as an image
file, in folders named after the axes, and the file's own name says where it is
(``planes/t001/c002/z003/y000/t001-c002-z003-y000-x001.png``, issue 31 point 3), and a plane
written back lands in exactly that plane."""

from __future__ import annotations

import io
import itertools
import os
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr
from PIL import Image

from tests.mounting import mounted

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]

AXES = ("t", "c", "z", "y", "x")


def _path(axes: tuple[str, ...], shown: dict[str, int], suffix: str) -> str:
    """A plane's path: a folder per shown axis but the last (its name and value, under
    1000), then a file named by every coordinate."""
    names = [f"{axis}{value:03d}" for axis, value in shown.items()]
    return "/".join(["planes", *names[:-1], "-".join(names)]) + suffix


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
        for name in ("planes/t001/c002/z003/y001/t001-c002-z003-y001-x002.png",
                     "planes/t000/c000/z000/y000/t000-c000-z000-y000-x000.png"):
            stem = name.rpartition("/")[2].removesuffix(".png")
            t, c, z, y, x = (int(part[1:4]) for part in stem.split("-"))
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
        Image.fromarray(new).save(
            mnt / "planes/t001/c002/z003/y001/t001-c002-z003-y001-x001.png")
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
        file = mnt / "planes/d0_001/y001/d0_001-y001-x000.tiff"
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


NGFF_TREE_START = "<!-- the tree of ngff-zarr's image: tests/filesystem/test_mount_planes.py -->"


@pytest.mark.timeout(180)
def test_ome_zarr_04_and_05_images_written_by_ngff_zarr_show_the_documented_tree(tmp_path):
    """Issue 31 point 3: OME-Zarr 0.4 (Zarr v2: the axes only in ``multiscales``) and 0.5
    images written by ngff-zarr show the same readable tree, the one docs/views.md shows;
    each file's name says where it is; the pixels are right."""
    import ngff_zarr  # noqa: PLC0415  (slow to import; only this test needs it)

    data = np.random.default_rng(11).integers(0, 65535, (2, 37, 53), dtype="u2")
    trees = []
    for version in ("0.4", "0.5"):
        image = ngff_zarr.to_ngff_image(data, dims=["c", "y", "x"])
        multiscales = ngff_zarr.to_multiscales(
            image, scale_factors=[2], chunks=16, method=ngff_zarr.Methods.DASK_BIN_SHRINK)
        root = tmp_path / f"cells-{version}.ome.zarr"
        ngff_zarr.to_ngff_zarr(root, multiscales, version=version)
        with mounted(root, tmp_path / f"mnt-{version}", "--format", "tiff") as mnt:
            trees.append(sorted(str(p.relative_to(mnt)) for p in mnt.rglob("*.tiff")))
            tile = mnt / "scale0/image/planes/c001/y002/c001-y002-x003.tiff"
            np.testing.assert_array_equal(tifffile.imread(tile), data[1, 32:37, 48:53])
    assert trees[0] == trees[1]
    documented = (Path(__file__).parents[2] / "docs" / "views.md").read_text()
    block = documented.split(NGFF_TREE_START)[1].split("```")[1].strip("\n").splitlines()
    listed = [line.split()[0] for line in block if line and not line.startswith("...")]
    assert set(listed) <= set(trees[0]) and len(listed) > 4
    assert listed == [name for name in trees[0] if name in set(listed)]  # in the tree's order
    assert len(trees[0]) == 2 * 3 * 4 + 2 * 2 * 2
