"""Real readers on a whole-image (OME-)TIFF: plain functions of a file path and the expected
arrays, so the same checks run on a file materialised on disk and on one a mount shows.

``levels`` is the list of level arrays (level 0 first), each ``[..., Y, X]`` or
``[..., Y, X, S]``; pages run in C order over the leading dims. :func:`materialise` writes a
file from a :class:`WholeImagePlan` and the arrays, the way the filesystem renders it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tifffile
import zarr

from tests.mounting import run_with_timeout
from tests.tiff.shards import pillow_pixels, tiffinfo_problems
from zarrfuse.tiff.whole_image import WholeImagePlan, tile_array


def materialise(layout: WholeImagePlan, levels: list[np.ndarray], path: Path) -> None:
    """Write the whole file: the header, then every tile in offset order, each checked to be
    where :meth:`~WholeImagePlan.tile_offset` and :meth:`~WholeImagePlan.spans` say."""
    tiles = []
    for page in range(layout.pages):
        for level in range(len(levels)):
            down, across = layout.tile_grid(level)
            tiles += [(layout.tile_offset(level, page, r, c), level, page, r, c)
                      for r in range(down) for c in range(across)]
    tiles.sort()
    with open(path, "wb") as f:
        f.write(layout.header_bytes(0, layout.data_start))
        for offset, level, page, row, col in tiles:
            assert f.tell() == offset, (level, page, row, col)
            nbytes = layout.tile_nbytes(level)
            spans = layout.spans(offset, offset + nbytes)
            assert [(s.level, s.page, s.row, s.col, s.start, s.stop) for s in spans] == [
                (level, page, row, col, 0, nbytes)
            ]
            data = levels[level][layout.tile_region(level, page, row, col)]
            f.write(tile_array(data, layout, level).tobytes())
        assert f.tell() == layout.size


def _pages(array: np.ndarray, samples: int) -> np.ndarray:
    """The array as (pages, Y, X[, S])."""
    plane = 2 if samples == 1 else 3
    return array.reshape(-1, *array.shape[array.ndim - plane:])


def _run(command: list[str | Path]) -> str:
    return run_with_timeout(command, timeout=120).stdout


# --- tifffile --------------------------------------------------------------------------


def check_tifffile(path: Path, levels: list[np.ndarray], *, axes: str | None,
                   shape: tuple[int, ...] | None = None, ome: bool = True) -> None:
    """OME flag, series shape and axes (as tifffile reports them: ``axes``), every level's
    pixels, and regions through ``aszarr`` opened with zarr."""
    with tifffile.TiffFile(path) as tif:
        assert tif.is_ome == ome
        series = tif.series[0]
        if axes is not None:
            assert series.axes == axes
        assert series.shape == (shape or levels[0].shape)
        assert len(series.levels) == len(levels)
        for level, expected in zip(series.levels, levels, strict=True):
            np.testing.assert_array_equal(level.asarray().reshape(expected.shape), expected)
    store = tifffile.imread(path, aszarr=True)
    try:
        group = zarr.open(store, mode="r")
        arrays = [group] if isinstance(group, zarr.Array) else [group[str(i)]
                                                                 for i in range(len(levels))]
        for array, expected in zip(arrays, levels, strict=True):
            # the series' (maybe squeezed) shape; a region in the middle of every axis
            region = tuple(slice(n // 3, n // 3 + max(1, n // 2)) for n in array.shape)
            want = expected.reshape(array.shape)[region]
            np.testing.assert_array_equal(np.asarray(array[region]), want)
    finally:
        store.close()


# --- libtiff ---------------------------------------------------------------------------


def check_libtiff(path: Path, levels: list[np.ndarray], work: Path, *, samples: int) -> None:
    """``tiffinfo -D`` reads every tile without a complaint; ``tiffcp`` copies the main pages
    (libtiff decoding them), whose pixels are level 0's pages."""
    assert tiffinfo_problems(path) == ""
    copy = work / "tiffcp.tif"
    _run(["tiffcp", "-c", "none", path, copy])
    with tifffile.TiffFile(copy) as tif:
        got = np.stack([page.asarray() for page in tif.pages])
    np.testing.assert_array_equal(got, _pages(levels[0], samples))


# --- vips ------------------------------------------------------------------------------


def check_vips(path: Path, levels: list[np.ndarray], work: Path, *, samples: int) -> None:
    """``vipsheader`` gives width, height and bands of page 0; ``vips crop`` of a region
    equals that region of page 0."""
    page0 = _pages(levels[0], samples)[0]
    height, width = page0.shape[:2]
    header = _run(["vipsheader", path])
    assert f"{width}x{height}" in header and (f"{samples} band" in header), header
    top, left = height // 3, width // 4
    h, w = max(1, height // 2), max(1, width // 2)
    out = work / "vips-crop.tif"
    _run(["vips", "crop", path, out, str(left), str(top), str(w), str(h)])
    np.testing.assert_array_equal(tifffile.imread(out), page0[top : top + h, left : left + w])


# --- GDAL ------------------------------------------------------------------------------


def gdal_checksums(path: Path) -> list[str]:
    """The checksum lines of ``gdalinfo -checksum`` (bands and overviews)."""
    out = _run(["gdalinfo", "-checksum", path])
    assert "ERROR" not in out
    return [
        line.strip() for line in out.splitlines()
        if line.strip().startswith(("Checksum=", "Overviews checksum"))  # not the file name
    ]


def check_gdal(path: Path, levels: list[np.ndarray], work: Path, *, samples: int,
               tile: tuple[int, int]) -> None:
    """GDAL's checksums equal those of a real file with the same pixels written by tifffile
    (page 0 of level 0, and the reduced levels as SubIFDs, which GDAL shows as overviews)."""
    reference = work / "reference.tif"
    photometric = "rgb" if samples > 1 else "minisblack"
    extra = {"extrasamples": [2]} if samples == 4 else {}
    with tifffile.TiffWriter(reference) as writer:
        writer.write(_pages(levels[0], samples)[0], tile=tile, photometric=photometric,
                     subifds=len(levels) - 1, **extra)
        for level in levels[1:]:
            writer.write(_pages(level, samples)[0], tile=(16, 16), photometric=photometric,
                         subfiletype=1, **extra)
    ours = gdal_checksums(path)
    assert ours and ours == gdal_checksums(reference)


# --- OpenSlide -------------------------------------------------------------------------


def openslide_pixels(path: Path) -> np.ndarray:
    """OpenSlide's RGBA reading of the whole of level 0 (page 0); raises what it raises.
    ``openslide-show-properties`` must open the file first."""
    import openslide  # noqa: PLC0415  (its C library loads slowly; only these checks use it)

    _run(["openslide-show-properties", path])
    with openslide.OpenSlide(str(path)) as slide:
        assert slide.properties.get("openslide.vendor") == "generic-tiff"
        return np.asarray(slide.read_region((0, 0), 0, slide.dimensions))


def check_openslide(path: Path, levels: list[np.ndarray], *, samples: int,
                    tile_width: int) -> None:
    """OpenSlide (generic-tiff, libtiff's RGBA interface) shows page 0: RGB(A) as is, gray
    as R=G=B, 16-bit gray as its high byte. It does not follow SubIFDs (one level).

    16-bit: OpenSlide shows the last tile column (when the image edge cuts it) as zeros
    after its first row, on tifffile's own files too; only whole-tile columns are compared,
    and the edge column must still be wrong (so a fixed OpenSlide shows up here).
    """
    page0 = _pages(levels[0], samples)[0]
    rgba = openslide_pixels(path)
    if samples == 1:
        gray = page0 if page0.itemsize == 1 else page0.view(f"u{page0.itemsize}") >> 8
        expected = np.stack([gray.astype(np.uint8)] * 3, axis=-1)
    else:
        expected = page0[..., :3]
    opaque = np.ones(page0.shape[:2], bool) if samples != 4 else page0[..., 3] == 255
    width = page0.shape[1]
    if page0.itemsize == 2 and width % tile_width:
        full = width // tile_width * tile_width
        assert np.any(rgba[1:, full:, :3] != expected[1:, full:]), "OpenSlide edge tiles fixed"
        opaque[:, full:] = False
    np.testing.assert_array_equal(rgba[..., :3][opaque], expected[opaque])
    if samples == 4:  # colours of translucent pixels are premultiplied by alpha
        np.testing.assert_array_equal(rgba[..., 3], page0[..., 3])


# --- Pillow ----------------------------------------------------------------------------


def check_pillow(path: Path, levels: list[np.ndarray]) -> None:
    """Pillow opens a one-page 8/16-bit gray or RGB classic TIFF and shows its pixels."""
    np.testing.assert_array_equal(pillow_pixels(path), levels[0])
