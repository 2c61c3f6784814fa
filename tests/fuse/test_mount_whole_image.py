"""``--format ome-tiff``: every array as one tiled OME-TIFF file, on real mounts.

What the file shows is compared with the array through tifffile; which chunks a read costs is
read from ``zarrfuse stats``; the view refuses every change with EROFS. The third-party
readers (libtiff, vips, GDAL, OpenSlide, Pillow) run in ``test_mount_whole_image_readers``.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr

from tests.cli.operating import stats
from tests.mounting import ZARRFUSE, mounted, run_with_timeout

pytestmark = pytest.mark.timeout(300)


def _array(root: Path, data: np.ndarray, chunks: tuple[int, ...], **kwargs) -> zarr.Array:
    array = zarr.create_array(root, shape=data.shape, chunks=chunks, dtype=data.dtype,
                              compressors=zarr.codecs.ZstdCodec(level=3), **kwargs)
    array[...] = data
    return array


def _files(mnt: Path) -> list[str]:
    return sorted(str(p.relative_to(mnt)) for p in mnt.rglob("*"))


def _decoded(snapshot: dict) -> dict[str, int]:
    return snapshot["counters"].get("decoded", {})


def test_an_array_is_one_ome_tiff_equal_to_it(tmp_path):
    data = np.arange(300 * 250, dtype="u2").reshape(300, 250) * 3
    _array(tmp_path / "plane.zarr", data, (64, 64))
    with mounted(tmp_path / "plane.zarr", tmp_path / "mnt", "--format", "ome-tiff") as mnt:
        assert _files(mnt) == ["plane.imagej.tif", "plane.ome.tif", "plane.preview.png"]
        path = mnt / "plane.ome.tif"
        with tifffile.TiffFile(path) as tif:
            assert tif.is_ome
            page = tif.pages[0]
            assert (page.tilelength, page.tilewidth) == (64, 64)
            assert page.compression == 1  # uncompressed: offsets known from the shape
            np.testing.assert_array_equal(tif.series[0].asarray(), data)
        assert path.stat().st_size == len(path.read_bytes())  # ls -l is exact


def test_regions_through_tifffile_aszarr_equal_the_array(tmp_path):
    data = np.random.default_rng(1).normal(size=(4, 3, 90, 70)).astype("f4")
    _array(tmp_path / "stack", data, (2, 1, 32, 32), dimension_names=["t", "c", "y", "x"])
    with mounted(tmp_path / "stack", tmp_path / "mnt", "--format", "ome-tiff") as mnt:
        path = mnt / "stack.ome.tif"
        with tifffile.TiffFile(path) as tif:
            series = tif.series[0]
            assert series.shape == data.shape
            assert series.axes == "TCYX"
        store = tifffile.imread(path, aszarr=True)
        try:
            region = zarr.open_array(store, mode="r")[1:3, 2, 10:75, 5:40]
        finally:
            store.close()
        np.testing.assert_array_equal(region, data[1:3, 2, 10:75, 5:40])


def test_rgb_and_chunks_off_the_16_grid(tmp_path):
    rgb = np.random.default_rng(2).integers(0, 255, (100, 90, 3), dtype="u1")
    _array(tmp_path / "rgb", rgb, (32, 32, 3))
    odd = np.random.default_rng(3).integers(0, 255, (100, 110), dtype="u1")
    _array(tmp_path / "odd", odd, (20, 30))
    with (mounted(tmp_path / "rgb", tmp_path / "m1", "--format", "ome-tiff") as mnt,
          tifffile.TiffFile(mnt / "rgb.ome.tif") as tif):
        assert tif.pages[0].photometric == tifffile.PHOTOMETRIC.RGB
        np.testing.assert_array_equal(tif.series[0].asarray(), rgb)
    with (mounted(tmp_path / "odd", tmp_path / "m2", "--format", "ome-tiff") as mnt,
          tifffile.TiffFile(mnt / "odd.ome.tif") as tif):
        page = tif.pages[0]
        assert (page.tilelength, page.tilewidth) == (32, 32)  # 20, 30 rounded up to 32s
        np.testing.assert_array_equal(tif.series[0].asarray(), odd)


def test_a_group_shows_a_file_per_array_and_one_per_ome_image(tmp_path):
    from tests.conformance.writers import ome_image  # noqa: PLC0415  (ngff-zarr is slow)

    root = tmp_path / "group.zarr"
    group = zarr.open_group(root, mode="w")
    group.create_group("sub")
    plane = np.arange(40 * 50, dtype="i2").reshape(40, 50)
    zarr.create_array(root / "sub" / "plane", data=plane, chunks=(16, 16))
    line = zarr.create_array(root / "line", shape=(10,), dtype="u1")  # not an image
    line[:] = 1
    image = ome_image(root / "cells.ome.zarr", "0.5")
    with mounted(root, tmp_path / "mnt", "--format", "ome-tiff") as mnt:
        assert _files(mnt) == ["cells.imagej.tif", "cells.ome.tif", "cells.preview.png",
                               "sub", "sub/plane.imagej.tif", "sub/plane.ome.tif",
                               "sub/plane.preview.png"]
        np.testing.assert_array_equal(tifffile.imread(mnt / "sub" / "plane.ome.tif"), plane)
        with tifffile.TiffFile(mnt / "cells.ome.tif") as tif:
            levels = tif.series[0].levels
            assert len(levels) == len(image.ome_levels)
            for level, path in zip(levels, image.ome_levels, strict=True):
                np.testing.assert_array_equal(level.asarray(), image.arrays[path])


@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_an_ome_zarr_image_is_one_pyramidal_file(tmp_path, version):
    from tests.conformance.writers import ome_image  # noqa: PLC0415  (ngff-zarr is slow)

    image = ome_image(tmp_path / "img.ome.zarr", version)
    with mounted(image.root, tmp_path / "mnt", "--format", "ome-tiff") as mnt:
        assert _files(mnt) == ["img.imagej.tif", "img.ome.tif", "img.preview.png"]
        with tifffile.TiffFile(mnt / "img.ome.tif") as tif:
            assert tif.is_ome
            assert len(tif.pages) == 1  # lower levels are SubIFDs, not pages
            levels = tif.series[0].levels
            assert [lv.shape for lv in levels] == [image.arrays[p].shape for p in image.ome_levels]
            for level, path in zip(levels, image.ome_levels, strict=True):
                np.testing.assert_array_equal(level.asarray(), image.arrays[path])


def test_the_header_of_a_100k_image_decodes_nothing_and_asks_the_store_little(tmp_path):
    """152,881 tiles, two stored: reading the header (every tile's offset) decodes no chunk
    and asks the store a few things, never once per tile. How fast it is: bench/."""
    big = zarr.create_array(tmp_path / "slide", shape=(100_000, 100_000), chunks=(256, 256),
                            dtype="u2", fill_value=0)
    big[:256, :512] = 5  # two stored chunks
    with mounted(tmp_path / "slide", tmp_path / "mnt", "--format", "ome-tiff") as mnt:
        path = mnt / "slide.ome.tif"
        before = stats(mnt)["counters"].get("store_requests", {})
        with tifffile.TiffFile(path) as tif:
            page = tif.pages[0]
            shape = tif.series[0].shape
            offsets = page.dataoffsets
        after = stats(mnt)["counters"].get("store_requests", {})
        assert shape == (100_000, 100_000)
        assert len(offsets) == 391 * 391
        assert _decoded(stats(mnt)).get("chunks", 0) == 0
        asked = {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}
        assert sum(asked.values()) <= 8, asked


def test_a_region_decodes_only_the_chunks_under_it_and_absent_chunks_cost_no_read(tmp_path):
    data = np.zeros((512, 512), dtype="u2")
    data[:256, :] = 9  # chunk rows 0-1 stored; rows 2-3 absent (fill value 0)
    array = _array(tmp_path / "a", data, (128, 128), fill_value=0)
    array[256:, :] = 0  # zarr stores nothing for chunks equal to the fill value
    with mounted(tmp_path / "a", tmp_path / "mnt", "--format", "ome-tiff") as mnt:
        path = mnt / "a.ome.tif"
        # Unbuffered: Python's 1 MiB read buffer would take this small file's tiles too.
        with open(path, "rb", buffering=0) as f, tifffile.TiffFile(f) as tif:
            offsets = tif.pages[0].dataoffsets
            counts = tif.pages[0].databytecounts
        before = stats(mnt)
        assert _decoded(before).get("chunks", 0) == 0  # the header decodes nothing
        with open(path, "rb", buffering=0) as f:  # one stored tile (row 0, col 1): one chunk
            tile = np.frombuffer(os.pread(f.fileno(), counts[1], offsets[1]), dtype="<u2")
        assert (tile == 9).all()
        middle = stats(mnt)
        assert _decoded(middle).get("chunks", 0) - _decoded(before).get("chunks", 0) == 1
        with open(path, "rb", buffering=0) as f:  # an absent tile (row 3, col 2): fill, no read
            tile = np.frombuffer(os.pread(f.fileno(), counts[14], offsets[14]), dtype="<u2")
        assert (tile == 0).all()
        after = stats(mnt)
        assert _decoded(after).get("chunks", 0) == _decoded(middle).get("chunks", 0)
        requests = [s["counters"]["store_requests"] for s in (middle, after)]
        for kind in ("open", "read", "stat"):  # the row's listing only: no request per chunk
            assert requests[1].get(kind, 0) == requests[0].get(kind, 0), kind


def test_the_view_is_read_only(tmp_path):
    _array(tmp_path / "a", np.ones((64, 64), dtype="u1"), (32, 32))
    with mounted(tmp_path / "a", tmp_path / "mnt", "--format", "ome-tiff") as mnt:
        path = mnt / "a.ome.tif"
        for attempt in (
            lambda: open(path, "r+b").close(),
            lambda: os.truncate(path, 0),
            lambda: path.unlink(),
            lambda: path.rename(mnt / "b.ome.tif"),
            lambda: (mnt / "new.ome.tif").write_bytes(b"x"),
        ):
            with pytest.raises(OSError) as raised:
                attempt()
            assert raised.value.errno == errno.EROFS
        assert tifffile.imread(path).sum() == 64 * 64


def test_xarray_and_v2_data_show_their_images_and_leave_out_the_rest(tmp_path):
    """A group written by xarray (zarr v2, consolidated): its 2-D variable is an image, the
    1-D coordinates are not images and are left out."""
    from tests.conformance.writers import xarray_dataset  # noqa: PLC0415  (xarray is slow)

    data = xarray_dataset(tmp_path / "ds.zarr", 2)
    v2 = np.arange(30 * 40, dtype=">i4").reshape(30, 40)  # big-endian, as v2 allows
    zarr.create_array(tmp_path / "ds.zarr" / "legacy", data=v2, chunks=(16, 16), zarr_format=2)
    with mounted(data.root, tmp_path / "mnt", "--format", "ome-tiff") as mnt:
        assert _files(mnt) == ["legacy.imagej.tif", "legacy.ome.tif", "legacy.preview.png",
                               "temp.imagej.tif", "temp.ome.tif", "temp.preview.png"]
        np.testing.assert_array_equal(tifffile.imread(mnt / "temp.ome.tif"), data.arrays["temp"])
        np.testing.assert_array_equal(tifffile.imread(mnt / "legacy.ome.tif"), v2)


def test_options_that_shape_chunk_files_are_refused(tmp_path):
    _array(tmp_path / "a", np.ones((32, 32), dtype="u1"), (16, 16))
    (tmp_path / "mnt").mkdir()
    result = run_with_timeout(
        [*ZARRFUSE, "mount", tmp_path / "a", tmp_path / "mnt", "--format", "ome-tiff",
         "--suffix", ".tif"], 60, check=False)
    assert result.returncode != 0
    assert "--suffix" in result.stderr and "ome-tiff" in result.stderr
    assert not os.path.ismount(tmp_path / "mnt")


def test_ome_zarr_physical_sizes_and_channel_names_reach_the_ome_xml(tmp_path):
    """An OME-Zarr 0.4 image written by hand as the spec shows it: axes with units, a scale,
    omero channel labels; the OME-XML carries them, and tifffile reads the axes."""
    root = tmp_path / "cells.ome.zarr"
    group = zarr.open_group(root, mode="w", zarr_format=2)
    data = np.arange(2 * 3 * 40 * 50, dtype="u2").reshape(2, 3, 40, 50)
    zarr.create_array(root / "0", data=data, chunks=(1, 1, 32, 32), zarr_format=2)
    group.attrs.update({
        "multiscales": [{
            "version": "0.4",
            "axes": [{"name": "c", "type": "channel"},
                     {"name": "z", "type": "space", "unit": "micrometer"},
                     {"name": "y", "type": "space", "unit": "micrometer"},
                     {"name": "x", "type": "space", "unit": "micrometer"}],
            "datasets": [{"path": "0", "coordinateTransformations": [
                {"type": "scale", "scale": [1.0, 2.0, 0.25, 0.5]}]}],
        }],
        "omero": {"channels": [{"label": "DAPI", "color": "0000FF"},
                               {"label": "GFP", "color": "00FF00"}]},
    })
    with (mounted(root, tmp_path / "mnt", "--format", "ome-tiff") as mnt,
          tifffile.TiffFile(mnt / "cells.ome.tif") as tif):
        series = tif.series[0]
        assert series.axes == "CZYX"
        np.testing.assert_array_equal(series.asarray(), data)
        xml = tif.ome_metadata
        assert 'PhysicalSizeX="0.5"' in xml and 'PhysicalSizeY="0.25"' in xml
        assert 'PhysicalSizeZ="2.0"' in xml and "PhysicalSizeXUnit" in xml
        assert 'Name="DAPI"' in xml and 'Name="GFP"' in xml
        # Issue 31 point 2: the colours too (OME's signed RGBA), as Bio-Formats reads them.
        assert 'Color="65535"' in xml and 'Color="16711935"' in xml


def test_a_whole_image_maps_shared_read_only_and_mapping_its_header_decodes_nothing(tmp_path):
    """Image libraries (Imlib2, which feh uses; libtiff's mapped reads) map the file shared and
    read-only: that must work, and faulting in the header must not decode a tile."""
    import mmap  # noqa: PLC0415

    data = np.arange(1024 * 768, dtype="u2").reshape(1024, 768)
    _array(tmp_path / "a", data, (128, 128))
    with mounted(tmp_path / "a", tmp_path / "mnt", "--format", "ome-tiff") as mnt:
        path = mnt / "a.ome.tif"
        with open(path, "rb", buffering=0) as f, tifffile.TiffFile(f) as tif:
            offsets, counts = tif.pages[0].dataoffsets, tif.pages[0].databytecounts
        fd = os.open(path, os.O_RDONLY)
        try:
            mapped = mmap.mmap(fd, 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        finally:
            os.close(fd)
        with mapped:
            assert mapped[:4] == b"II*\x00"
            assert _decoded(stats(mnt)).get("chunks", 0) == 0  # the header's pages only
            tiles_across = 768 // 128
            for index in (0, 7, len(offsets) - 1):
                tile = np.frombuffer(mapped[offsets[index] : offsets[index] + counts[index]],
                                     dtype="<u2").reshape(128, 128)
                row, col = divmod(index, tiles_across)
                np.testing.assert_array_equal(
                    tile, data[row * 128 : (row + 1) * 128, col * 128 : (col + 1) * 128])
