"""Every reader issue 14 names, on ``--format ome-tiff`` files of a real mount: tifffile,
libtiff (``tiffinfo -D``, ``tiffcp``), vips, GDAL, OpenSlide and Pillow.

One read-only mount of a group that holds every case: a 2-D uint16 image whose edge tiles
are cut, an RGB image, a 3-D stack, an image with chunks off TIFF's 16 grid, and an
OME-Zarr 0.5 pyramid written by ngff-zarr. The checks are those that
``tests/tiff/test_whole_image.py`` runs on files written to disk, so a difference between
the two is the mount's. Where a reader refuses a case, the test asserts how.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.mounting import mounted, run_with_timeout
from tests.tiff import whole_image_readers as readers

pytestmark = pytest.mark.timeout(600)


@dataclass(frozen=True)
class Case:
    file: str
    levels: list[np.ndarray]
    samples: int
    tile: tuple[int, int]
    axes: str
    openslide: str | None = None
    """What OpenSlide says when it refuses the file (None: it opens it)."""


def _write(root: Path) -> dict[str, Case]:
    from tests.conformance.writers import ome_image  # noqa: PLC0415  (ngff-zarr is slow)

    rng = np.random.default_rng(14)
    zarr.open_group(root, mode="w")
    gray = rng.integers(0, 65535, (300, 250), dtype="u2")
    rgb = rng.integers(0, 255, (100, 90, 3), dtype="u1")
    stack = rng.normal(size=(3, 70, 60)).astype("f4")
    odd = rng.integers(0, 255, (100, 110, 3), dtype="u1")
    for name, data, chunks in (
        ("gray", gray, (64, 64)),
        ("rgb", rgb, (32, 32, 3)),
        ("stack", stack, (1, 32, 32)),
        ("odd", odd, (20, 45, 3)),
    ):
        array = zarr.create_array(root / name, shape=data.shape, chunks=chunks, dtype=data.dtype,
                                  compressors=zarr.codecs.ZstdCodec(level=3))
        array[...] = data
    image = ome_image(root / "cells.ome.zarr", "0.5")
    return {
        "gray": Case("gray.ome.tif", [gray], 1, (64, 64), "YX"),
        "rgb": Case("rgb.ome.tif", [rgb], 3, (32, 32), "YXS"),
        "stack": Case("stack.ome.tif", [stack], 1, (32, 32), "ZYX"),
        "odd": Case("odd.ome.tif", [odd], 3, (32, 64), "YXS"),
        "pyramid": Case(
            "cells.ome.tif", [image.arrays[p] for p in image.ome_levels], 1, (16, 16), "YX",
            openslide="Invalid tile byte count",  # 16 x 16 uint8 tiles: 256 bytes
        ),
    }


@pytest.fixture(scope="module")
def mount(tmp_path_factory) -> Iterator[tuple[Path, dict[str, Case]]]:
    root = tmp_path_factory.mktemp("images") / "group.zarr"
    cases = _write(root)
    with mounted(root, root.parent / "mnt", "--format", "ome-tiff") as mnt:
        yield mnt, cases


@pytest.mark.parametrize("name", ["gray", "rgb", "stack", "odd", "pyramid"])
def test_tifffile(mount, name):
    mnt, cases = mount
    case = cases[name]
    readers.check_tifffile(mnt / case.file, case.levels, axes=case.axes)


@pytest.mark.parametrize("name", ["gray", "rgb", "stack", "odd", "pyramid"])
def test_libtiff(mount, name, tmp_path):
    mnt, cases = mount
    case = cases[name]
    readers.check_libtiff(mnt / case.file, case.levels, tmp_path, samples=case.samples)


@pytest.mark.expect_log(r"OME series")
@pytest.mark.parametrize("name", ["gray", "rgb", "stack", "odd", "pyramid"])
def test_vips(mount, name, tmp_path):
    mnt, cases = mount
    case = cases[name]
    readers.check_vips(mnt / case.file, case.levels, tmp_path, samples=case.samples)


@pytest.mark.parametrize("name", ["gray", "rgb", "odd", "pyramid"])
def test_gdal_checksums_equal_a_real_file(mount, name, tmp_path):
    mnt, cases = mount
    case = cases[name]
    readers.check_gdal(mnt / case.file, case.levels, tmp_path, samples=case.samples,
                       tile=case.tile)


@pytest.mark.parametrize("name", ["gray", "rgb", "odd", "pyramid"])
def test_openslide(mount, name):
    import openslide  # noqa: PLC0415  (slow to load)

    mnt, cases = mount
    case = cases[name]
    if case.openslide is None:
        readers.check_openslide(mnt / case.file, case.levels, samples=case.samples,
                                tile_width=case.tile[1])
    else:
        with pytest.raises((openslide.OpenSlideError, AssertionError), match=case.openslide):
            readers.openslide_pixels(mnt / case.file)


@pytest.mark.parametrize("name", ["gray", "rgb"])
def test_pillow(mount, name):
    mnt, cases = mount
    case = cases[name]
    readers.check_pillow(mnt / case.file, case.levels)


@pytest.mark.parametrize("name", ["gray", "rgb", "odd"])
def test_feh_imlib2_which_maps_the_file(mount, name):
    """feh's Imlib2 maps the file (``MAP_SHARED``, ``PROT_READ``) to load it: with direct I/O
    that mapping failed and feh said "No Imlib2 loader for that file format"."""
    mnt, cases = mount
    case = cases[name]
    listed = run_with_timeout(["feh", "--list", mnt / case.file], timeout=60)
    row = listed.stdout.splitlines()[1].split("\t")
    height, width = case.levels[0].shape[:2]
    assert row[1:4] == ["tiff", str(width), str(height)], listed.stdout
